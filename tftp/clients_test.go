package tftp

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pintftp "github.com/pin/tftp/v3"

	"github.com/rollcall/rollcall/lab/testenv"
)

// TestRealClientsFetchIPXE fetches every iPXE binary with tftp-hpa's client
// and atftp, with and without blksize and tsize, from the default
// allow-list, and compares SHA-256. tftp-hpa's client (5.2) sends no
// options at all, so it covers the plain RFC 1350 path; atftp covers the
// option combinations.
func TestRealClientsFetchIPXE(t *testing.T) {
	bins := testenv.NeedTool(t, "tftp", "atftp") // tftp-hpa's client and atftp
	tftpBin, atftpBin := bins[0], bins[1]
	dir := ipxeDir(t)
	s, addr := startServer(t, Config{IPXEDir: dir})
	host, port, _ := net.SplitHostPort(addr)

	type client struct {
		args    func(name, out string) []string
		bin     string
		blksize int  // 0: no blksize option
		tsize   bool // asked for tsize
	}
	atftpArgs := func(opts ...string) func(name, out string) []string {
		return func(name, out string) []string {
			args := []string{"--trace", "--get", "-r", name, "-l", out}
			for _, o := range opts {
				args = append(args, "--option", o)
			}
			return append(args, host, port)
		}
	}
	clients := map[string]client{
		"tftp-hpa": {bin: tftpBin, args: func(name, out string) []string {
			return []string{host, port, "-m", "binary", "-c", "get", name, out}
		}},
		"atftp":                {bin: atftpBin, args: atftpArgs()},
		"atftp blksize":        {bin: atftpBin, args: atftpArgs("blksize 1468"), blksize: 1468},
		"atftp tsize":          {bin: atftpBin, args: atftpArgs("tsize 0"), tsize: true},
		"atftp blksize+tsize":  {bin: atftpBin, args: atftpArgs("blksize 1468", "tsize 0"), blksize: 1468, tsize: true},
		"atftp blksize 8192":   {bin: atftpBin, args: atftpArgs("blksize 8192", "tsize 0"), blksize: 8192, tsize: true},
		"atftp blksize 512+ts": {bin: atftpBin, args: atftpArgs("blksize 512", "tsize 0"), blksize: 512, tsize: true},
	}
	completed := 0
	for cname, c := range clients {
		for _, f := range IPXEFiles {
			t.Run(cname+"/"+f, func(t *testing.T) {
				src := filepath.Join(dir, f)
				fi, err := os.Stat(src)
				if err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), f)
				cmd := exec.Command(c.bin, c.args(f, out)...)
				output, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", cname, err, output)
				}
				if got, want := fileSum(t, out), fileSum(t, src); got != want {
					t.Fatalf("%s: %s differs from %s", cname, out, src)
				}
				// atftp --trace prints the OACK it received.
				oack := ""
				if i := bytes.Index(output, []byte("received OACK <")); i >= 0 {
					oack, _, _ = strings.Cut(string(output[i:]), "\n")
				}
				if c.blksize > 0 && !strings.Contains(oack, fmt.Sprintf("blksize: %d,", c.blksize)) {
					t.Errorf("OACK lacks blksize %d: %q", c.blksize, oack)
				}
				if c.tsize && !strings.Contains(oack, fmt.Sprintf("tsize: %d,", fi.Size())) {
					t.Errorf("OACK lacks tsize %d: %q", fi.Size(), oack)
				}
				if c.blksize == 0 && !c.tsize && oack != "" {
					t.Errorf("OACK without options asked: %q", oack)
				}
			})
			completed++
		}
	}
	eventually(t, "every transfer counted", func() bool { return counter(t, s, "finished", "complete") == completed })
	if n := counter(t, s, "refused", refusedNotFound) + counter(t, s, "failed", failedTimeout); n != 0 {
		t.Errorf("%d refusals or timeouts, want none", n)
	}
}

// TestConcurrentClients runs 500 in-process clients (pin/tftp's, an
// independent implementation) fetching ipxe.efi at once against a bound of
// 100: each either gets the exact file or the bound's error, and the
// metrics add up. They stand for 500 machines but share 127.0.0.1, so the
// per-client bound is lifted to the global one.
func TestConcurrentClients(t *testing.T) {
	const clients, limit = 500, 100
	dir := ipxeDir(t)
	want := fileSum(t, filepath.Join(dir, "ipxe.efi"))
	s, addr := startServerLog(t, Config{IPXEDir: dir, MaxTransfers: limit, MaxPerClient: limit, Timeout: 2 * time.Second},
		testLogger(t, slog.LevelError))

	var mu sync.Mutex
	var ok, busy int
	var other []error
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pintftp.NewClient(addr)
			if err != nil {
				panic(err)
			}
			if i%2 == 0 {
				c.SetBlockSize(1468)
			}
			c.RequestTSize(i%3 == 0)
			c.SetTimeout(2 * time.Second)
			c.SetRetries(5)
			c.SetBackoff(func(int) time.Duration { return 10 * time.Millisecond })
			err = func() error {
				wt, err := c.Receive("ipxe.efi", "octet")
				if err != nil {
					return err
				}
				h := sha256.New()
				if _, err := wt.WriteTo(h); err != nil {
					return err
				}
				if [32]byte(h.Sum(nil)) != want {
					return errors.New("corrupt: content differs")
				}
				return nil
			}()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case strings.Contains(err.Error(), "server busy: "+strconv.Itoa(limit)+" transfers in progress"):
				busy++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d complete, %d refused as busy", ok, busy)
	for i, err := range other {
		if i < 5 {
			t.Errorf("client error: %v", err)
		}
	}
	if ok+busy != clients {
		t.Fatalf("%d ok + %d busy != %d clients", ok, busy, clients)
	}
	if ok < limit {
		t.Errorf("only %d transfers completed, want at least the bound %d", ok, limit)
	}
	eventually(t, "metrics settle", func() bool {
		return counter(t, s, "finished", "complete") == ok && counter(t, s, "inflight", "") == 0
	})
	if got := counter(t, s, "refused", refusedBusy); got != busy {
		t.Errorf("busy refusals counted %d, clients saw %d", got, busy)
	}
	if got := counter(t, s, "started", ""); got != ok {
		t.Errorf("started %d, completed %d", got, ok)
	}
}

// TestBlockNumberRollover sends a file past 65535 blocks of 512 bytes, so
// the block number wraps to 0, to tftp-hpa's client (which uses no options)
// and to pin/tftp's.
func TestBlockNumberRollover(t *testing.T) {
	if testing.Short() {
		t.Skip("33 MiB transfer")
	}
	dir := t.TempDir()
	want := writeRandom(t, filepath.Join(dir, "big.img"), 65536*512+1000)
	s, addr := startServer(t, Config{Roots: map[string]string{"big.img": filepath.Join(dir, "big.img")}})

	c, err := pintftp.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := c.Receive("big.img", "octet")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := wt.WriteTo(h)
	if err != nil {
		t.Fatal(err)
	}
	if [32]byte(h.Sum(nil)) != want {
		t.Fatalf("pin/tftp client: %d bytes, content differs", n)
	}

	if tftpBin, ok := testenv.LookTool(t, "tftp"); ok {
		host, port, _ := net.SplitHostPort(addr)
		out := filepath.Join(t.TempDir(), "big.img")
		if o, err := exec.Command(tftpBin, host, port, "-m", "binary", "-c", "get", "big.img", out).CombinedOutput(); err != nil {
			t.Fatalf("tftp-hpa: %v\n%s", err, o)
		}
		if fileSum(t, out) != want {
			t.Fatal("tftp-hpa client: content differs")
		}
	}
	eventually(t, "transfers counted", func() bool { return counter(t, s, "finished", "complete") >= 1 })
}
