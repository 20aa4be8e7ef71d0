// Command deploy measures the deploy agent's write pipeline (HTTP → SHA-256
// → zstd → SHA-256 → aligned O_DIRECT writes, agent/deploy.WriteStream)
// against the shell pipeline people write for it,
//
//	curl -s URL | zstd -d | dd of=TARGET oflag=direct bs=4M iflag=fullblock
//
// (iflag=fullblock: reads from a pipe come short, and O_DIRECT refuses a
// write that is not a whole number of sectors)
//
// on the same compressed image, served by one HTTP server on loopback, onto
// the same target, and prints both in MB/s of raw image written, the ratio,
// and the raw write speed of the target (dd from /dev/zero with the same
// flags), which bounds both. The shell pipeline checks no hash at all; ours
// checks two. Repetitions alternate between the two; the median counts.
//
// The image is -size MiB (default 512) of a deterministic mix: a quarter
// random (incompressible), a quarter text, half zeros, in 1 MiB blocks,
// compressed with `zstd -3 -T0` as the appliance does.
//
//	go run ./lab/bench/deploy                      # a file in $TMPDIR
//	go run ./lab/bench/deploy -target /dev/loop7   # a loop device (root)
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/rollcall/rollcall/agent"
	"github.com/rollcall/rollcall/agent/deploy"
)

func main() {
	sizeMiB := flag.Int64("size", 512, "raw image size in MiB")
	target := flag.String("target", "", "file or block device to write (default: a file in $TMPDIR); it is overwritten")
	reps := flag.Int("reps", 3, "runs of each pipeline")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of our pipeline's runs to this file")
	flag.Parse()
	if err := run(*sizeMiB, *target, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "deploy bench:", err)
		os.Exit(1)
	}
}

// cpuProfile, when set, names the file for a CPU profile of our
// pipeline's first run (pprof: go tool pprof -top FILE).
var cpuProfile string

func run(sizeMiB int64, target string, reps int) error {
	for _, tool := range []string{"zstd", "curl", "dd", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s (apt-get install %s)", tool, tool)
		}
	}
	dir, err := os.MkdirTemp("", "rollcall-deploy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	raw := filepath.Join(dir, "image.raw")
	size := sizeMiB << 20
	rawSum, err := makeImage(raw, size)
	if err != nil {
		return err
	}
	zst := raw + ".zst"
	if out, err := exec.Command("zstd", "-q", "-3", "-T0", "-f", raw, "-o", zst).CombinedOutput(); err != nil {
		return fmt.Errorf("zstd: %v: %s", err, out)
	}
	os.Remove(raw) // the target's cache should not hold the source
	zb, err := os.ReadFile(zst)
	if err != nil {
		return err
	}
	zSum := sha256.Sum256(zb)
	zb = nil
	if target == "" {
		target = filepath.Join(dir, "target")
	}
	st, statErr := os.Stat(target)
	isDev := statErr == nil && st.Mode()&os.ModeDevice != 0
	if !isDev {
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			return err
		}
		if err := os.Truncate(target, size); err != nil {
			return err
		}
	}
	direct := "oflag=direct"
	if f, err := os.OpenFile(target, os.O_WRONLY|0x4000 /* O_DIRECT */, 0); err != nil {
		direct = "conv=fdatasync" // tmpfs: no O_DIRECT for anyone
	} else {
		f.Close()
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir))}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	url := base + "/" + filepath.Base(zst)
	fi, _ := os.Stat(zst)
	im := deploy.Image{URL: "/" + filepath.Base(zst), SHA256: hex.EncodeToString(zSum[:]), Size: fi.Size(),
		RawSHA256: rawSum, RawSize: size, SectorSize: 512}
	client, err := agent.Connect(context.Background(), agent.Config{Server: base, RetryFor: 5 * time.Second})
	if err != nil {
		return err
	}
	dev := deploy.Device{Name: filepath.Base(target), Path: target, Size: size}
	if isDev {
		dev.Size = 0 // the kernel says
	}

	fmt.Printf("image %d MiB raw, %.0f MiB zstd -3; target %s (%s)\n", sizeMiB, float64(fi.Size())/(1<<20), target, direct)
	var prof *os.File
	if cpuProfile != "" {
		if prof, err = os.Create(cpuProfile); err != nil {
			return err
		}
		defer prof.Close()
	}
	var ours, peer, zero []float64
	mbps := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	for i := 0; i < reps; i++ {
		t := time.Now()
		if err := ddZero(target, sizeMiB, direct); err != nil {
			return err
		}
		zero = append(zero, mbps(time.Since(t)))

		if prof != nil && i == 0 { // the first run's profile only
			pprof.StartCPUProfile(prof)
		}
		t = time.Now()
		body, err := client.Open(context.Background(), im.URL)
		if err != nil {
			return err
		}
		if _, err := deploy.WriteStream(context.Background(), dev, body, im); err != nil {
			return fmt.Errorf("our pipeline: %w", err)
		}
		ours = append(ours, mbps(time.Since(t)))
		if prof != nil && i == 0 {
			pprof.StopCPUProfile()
		}

		t = time.Now()
		sh := fmt.Sprintf("curl -sf %s | zstd -d -q | dd of=%s bs=4M iflag=fullblock %s status=none", url, target, direct)
		if !isDev {
			sh += " conv=notrunc"
		}
		if out, err := exec.Command("bash", "-o", "pipefail", "-c", sh).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", sh, err, out)
		}
		peer = append(peer, mbps(time.Since(t)))
		fmt.Fprintf(os.Stderr, "run %d: ours %.0f MB/s, shell %.0f MB/s, dd zero %.0f MB/s\n", i+1, ours[i], peer[i], zero[i])
	}
	o, p, z := median(ours), median(peer), median(zero)
	fmt.Printf("%-44s %8s\n", "pipeline", "MB/s")
	fmt.Printf("%-44s %8.0f\n", "rollcall agent (sha256 of the file, zstd with frame checksums, raw size, O_DIRECT)", o)
	fmt.Printf("%-44s %8.0f\n", "curl | zstd -d | dd bs=4M iflag=fullblock "+direct, p)
	fmt.Printf("%-44s %8.0f\n", "dd if=/dev/zero (the target's raw speed)", z)
	fmt.Printf("ratio ours / shell: %.2f×\n", o/p)
	return nil
}

func ddZero(target string, mib int64, direct string) error {
	args := []string{"if=/dev/zero", "of=" + target, "bs=4M", fmt.Sprintf("count=%d", mib/4), direct, "status=none"}
	if st, err := os.Stat(target); err == nil && st.Mode().IsRegular() {
		args = append(args, "conv=notrunc")
	}
	if out, err := exec.Command("dd", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("dd: %v: %s", err, out)
	}
	return nil
}

// makeImage writes the deterministic test image and returns its SHA-256.
func makeImage(path string, size int64) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	rng := rand.New(rand.NewPCG(1, 2))
	line := []byte("Rollcall deploys this line of text again and again; zstd likes it. ")
	text := bytes.Repeat(line, 1<<20/len(line)+1)[:1<<20]
	blk := make([]byte, 1<<20)
	for i := int64(0); i < size>>20; i++ {
		switch i % 4 {
		case 0:
			for j := 0; j < len(blk); j += 8 {
				v := rng.Uint64()
				for k := 0; k < 8; k++ {
					blk[j+k] = byte(v >> (8 * k))
				}
			}
		case 1:
			copy(blk, text)
		default:
			clear(blk)
		}
		if _, err := w.Write(blk); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
