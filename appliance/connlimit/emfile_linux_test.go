package connlimit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

const emfileChild = "CONNLIMIT_EMFILE_CHILD"

// A server out of file descriptors keeps accepting: the test runs the
// server in a child process whose descriptor limit is a few above what it
// has open, far below the caps, and makes more keep-alive connections than
// it can hold. Each accept that fails with EMFILE closes the oldest idle
// connection and retries.
func TestAcceptRidesOutEMFILE(t *testing.T) {
	if os.Getenv(emfileChild) != "" {
		emfileServer()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptRidesOutEMFILE$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), emfileChild+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the child's signal to stop
		cmd.Wait()
	})
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr ")
	if err != nil || !ok {
		t.Fatalf("child server said %q, %v", line, err)
	}
	go io.Copy(io.Discard, out)

	const conns = 30
	for i := range conns {
		c := dial(t, "127.0.0.1", addr)
		if code, err := get(c, "/health"); err != nil || code != http.StatusOK {
			t.Fatalf("keep-alive connection %d: %d, %v", i, code, err)
		}
	}
	if code, err := health(addr, "127.0.0.2"); err != nil || code != http.StatusOK {
		t.Fatalf("health after %d keep-alive connections: %d, %v", conns, code, err)
	}
	resp, err := http.Get("http://" + addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s Stats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	t.Logf("child stats %+v", s)
	if s.FDExhausted == 0 || s.Evicted == 0 || s.Refused != 0 {
		t.Errorf("child's stats %+v: want accepts that hit EMFILE, evictions and no refusals", s)
	}
}

// emfileServer is the child: it serves until its stdin closes.
func emfileServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := &http.Server{Handler: mux, ErrorLog: log.New(io.Discard, "", 0)}
	if err := ApplyTimeouts(srv, Timeouts{}); err != nil {
		log.Fatal(err)
	}
	l, err := NewListener(ln, srv, Limits{})
	if err != nil {
		log.Fatal(err)
	}
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(l.Stats()) })

	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		log.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Fatal(err)
	}
	lim.Cur = uint64(len(fds) + 8)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("addr %s\n", ln.Addr())
	go srv.Serve(l)
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}
