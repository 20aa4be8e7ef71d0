// Package stateless is the agent's stateless mode (rollcall.mode=stateless):
// as PID 1 of the same initrd that commissions and deploys, it fetches the
// image's squashfs (rollcall.root=) into a tmpfs, checking its SHA-256
// (rollcall.root_sha256=) while it streams, mounts it read-only through a
// loop device under an overlayfs whose upper layer is another directory of
// that tmpfs, leaves the node's settings in /run/rollcall/node.env, moves
// /dev, /proc, /sys and /run into the new root and switches to it
// (chroot + exec of /sbin/init, or rollcall.init=). The machine then runs
// from RAM; its own files come from the appliance through the image's
// rollcall-overlay client.
//
// The fetch is bounded by the RAM (the image may take what is available
// less a reserve for the system that runs from it), retried with backoff
// while the appliance is unreachable or answers 5xx, resumed with a Range
// request after a broken connection, and logged on the console every few
// seconds.
package stateless

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Layout of the RAM file system (a tmpfs in the initrd's /run, which moves
// into the new root with it: the running system sees it as
// /run/rollcall/ram).
const (
	RAMDir    = "/run/rollcall/ram"
	ImageFile = RAMDir + "/root.squashfs"
	LowerDir  = RAMDir + "/lower"
	UpperDir  = RAMDir + "/upper"
	WorkDir   = RAMDir + "/work"
	NewRoot   = "/sysroot"
)

// Defaults of Fetch.
const (
	DefaultRetryFor = 10 * time.Minute
	DefaultBackoff  = time.Second
	MaxBackoff      = 30 * time.Second
	DefaultProgress = 3 * time.Second
	DefaultStall    = 60 * time.Second
)

// ErrTooBig: the image does not fit in the RAM budget.
var ErrTooBig = errors.New("root image does not fit in RAM")

// ErrChecksum: the image's SHA-256 is not rollcall.root_sha256 (twice).
var ErrChecksum = errors.New("root image checksum mismatch")

// Budget is how much of the machine's RAM the image and the running
// system's writes may take.
type Budget struct {
	Image int64 // bytes the squashfs may have
	Tmpfs int64 // size= of the RAM file system (image plus the overlay's upper layer)
}

// RAMBudget divides the RAM: the image may take what is available less a
// reserve of a quarter of the RAM (at least 256 MiB) for the system that
// runs from it; the tmpfs, which also holds what that system writes to its
// root, may grow to nine tenths of what is available.
func RAMBudget(memTotal, memAvailable int64) Budget {
	reserve := max(memTotal/4, 256<<20)
	b := Budget{Image: memAvailable - reserve, Tmpfs: memAvailable / 10 * 9}
	if b.Image < 0 {
		b.Image = 0
	}
	return b
}

// ParseMeminfo reads MemTotal and MemAvailable (bytes) from /proc/meminfo.
func ParseMeminfo(data []byte) (total, available int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		var dst *int64
		switch f[0] {
		case "MemTotal:":
			dst = &total
		case "MemAvailable:":
			dst = &available
		default:
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n < 0 || n > 1<<44 {
			return 0, 0, fmt.Errorf("meminfo: %s %q is not a size in kB", f[0], f[1])
		}
		*dst = n << 10
	}
	if total == 0 || available == 0 {
		return 0, 0, errors.New("meminfo: no MemTotal or MemAvailable")
	}
	return total, available, nil
}

// Fetch downloads the root image into a file.
type Fetch struct {
	URL      string
	SHA256   string        // hex
	Max      int64         // bytes the image may have (the RAM budget)
	Client   *http.Client  // default: one without a proxy
	RetryFor time.Duration // give up once retries would pass this (DefaultRetryFor)
	Backoff  time.Duration // first wait between tries, doubling to MaxBackoff (DefaultBackoff)
	Progress time.Duration // a console line this often (DefaultProgress)
	Stall    time.Duration // a connection silent this long is broken (DefaultStall)
	Log      *slog.Logger
}

// final marks an error retrying cannot fix.
type final struct{ error }

func (f final) Unwrap() error { return f.error }

// To writes the image to dst (created or truncated) and returns its size.
// A transient failure (no connection, a 5xx, a 408 or 429, a connection
// broken mid-stream) is retried with backoff; a broken stream resumes with
// a Range request where the server allows it, the hash carrying on over
// the bytes already written. A 4xx, an image over Max, or a second
// checksum mismatch is final. dst is removed on failure.
func (f Fetch) To(ctx context.Context, dst string) (n int64, err error) {
	f.defaults()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	s := &stream{f: f, out: out, h: sha256.New()}
	deadline := time.Now().Add(f.RetryFor)
	wait := f.Backoff
	mismatches := 0
	for attempt := 1; ; attempt++ {
		err := s.try(ctx)
		if err == nil {
			got := hex.EncodeToString(s.h.Sum(nil))
			if got == strings.ToLower(f.SHA256) {
				return s.n, nil
			}
			mismatches++
			err = fmt.Errorf("%w: got sha256 %s, want %s", ErrChecksum, got, f.SHA256)
			if mismatches >= 2 {
				return 0, err
			}
			s.restart()
		}
		var fe final
		if errors.As(err, &fe) || ctx.Err() != nil {
			return 0, err
		}
		if time.Now().Add(wait).After(deadline) {
			return 0, fmt.Errorf("root image: gave up after %d tries: %w", attempt, err)
		}
		f.Log.Warn("root image: retrying", "try", attempt, "err", err, "in", wait, "have", s.n)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, MaxBackoff)
	}
}

func (f *Fetch) defaults() {
	if f.Client == nil {
		f.Client = &http.Client{Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: 30 * time.Second}}
	}
	if f.RetryFor <= 0 {
		f.RetryFor = DefaultRetryFor
	}
	if f.Backoff <= 0 {
		f.Backoff = DefaultBackoff
	}
	if f.Progress <= 0 {
		f.Progress = DefaultProgress
	}
	if f.Stall <= 0 {
		f.Stall = DefaultStall
	}
	if f.Log == nil {
		f.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// stream is one download across its tries.
type stream struct {
	f   Fetch
	out *os.File
	h   hash.Hash
	n   int64 // bytes written (and hashed)
}

func (s *stream) restart() {
	s.n = 0
	s.h.Reset()
	s.out.Truncate(0)
	s.out.Seek(0, io.SeekStart)
}

// try makes one request and copies its body, resuming at s.n when it can.
func (s *stream) try(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.f.URL, nil)
	if err != nil {
		return final{err}
	}
	if s.n > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", s.n))
	}
	res, err := s.f.Client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	total := int64(-1)
	switch {
	case res.StatusCode == http.StatusOK:
		if s.n > 0 {
			s.f.Log.Info("root image: the server sent it whole; starting over", "had", s.n)
			s.restart()
		}
		total = res.ContentLength
	case res.StatusCode == http.StatusPartialContent && s.n > 0:
		start, size, ok := contentRange(res.Header.Get("Content-Range"))
		if !ok || start != s.n {
			s.restart()
			return fmt.Errorf("root image: answer to a resume starts elsewhere (Content-Range %q)", res.Header.Get("Content-Range"))
		}
		total = size
	case res.StatusCode == http.StatusRequestedRangeNotSatisfiable && s.n > 0:
		s.restart()
		return errors.New("root image: the resume was refused (416); starting over")
	case res.StatusCode == http.StatusRequestTimeout || res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500:
		return fmt.Errorf("root image: GET %s: %s", s.f.URL, res.Status)
	default:
		return final{fmt.Errorf("root image: GET %s: %s", s.f.URL, res.Status)}
	}
	if total > s.f.Max {
		return final{fmt.Errorf("%w: %s, %d bytes, and the RAM allows %d", ErrTooBig, s.f.URL, total, s.f.Max)}
	}
	if s.n == 0 {
		s.f.Log.Info("root image: fetching", "url", s.f.URL, "bytes", total, "ram_allows", s.f.Max)
	}
	stall := time.AfterFunc(s.f.Stall, func() { cancel(fmt.Errorf("no data for %s", s.f.Stall)) })
	defer stall.Stop()
	buf := make([]byte, 256<<10)
	last, lastN, start := time.Now(), s.n, time.Now()
	for {
		m, rerr := res.Body.Read(buf)
		if m > 0 {
			stall.Reset(s.f.Stall)
			if s.n+int64(m) > s.f.Max {
				return final{fmt.Errorf("%w: %s is longer than the %d bytes the RAM allows", ErrTooBig, s.f.URL, s.f.Max)}
			}
			if _, err := s.out.Write(buf[:m]); err != nil {
				return final{fmt.Errorf("root image: write: %w", err)}
			}
			s.h.Write(buf[:m])
			s.n += int64(m)
		}
		if now := time.Now(); now.Sub(last) >= s.f.Progress {
			s.f.Log.Info("root image: progress", "have_mb", s.n>>20, "of_mb", total>>20, "percent", percent(s.n, total),
				"mb_per_s", fmt.Sprintf("%.1f", float64(s.n-lastN)/now.Sub(last).Seconds()/1e6))
			last, lastN = now, s.n
		}
		switch {
		case rerr == io.EOF:
			if total >= 0 && s.n != total {
				return fmt.Errorf("root image: stream ended at %d of %d bytes", s.n, total)
			}
			s.f.Log.Info("root image: fetched", "bytes", s.n, "took", time.Since(start).Round(time.Millisecond))
			return nil
		case rerr != nil:
			if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
				rerr = c
			}
			return fmt.Errorf("root image: read at %d: %w", s.n, rerr)
		}
	}
}

func percent(n, total int64) int {
	if total <= 0 {
		return -1
	}
	return int(n * 100 / total)
}

// contentRange reads "bytes START-END/SIZE".
func contentRange(v string) (start, size int64, ok bool) {
	v, ok = strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, 0, false
	}
	rng, sz, ok := strings.Cut(v, "/")
	if !ok {
		return 0, 0, false
	}
	a, _, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	size, err2 := strconv.ParseInt(sz, 10, 64)
	if sz == "*" {
		size, err2 = -1, nil
	}
	return start, size, err1 == nil && err2 == nil && start >= 0
}
