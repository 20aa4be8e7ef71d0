package stateless

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func image(n int) ([]byte, string) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	s := sha256.Sum256(b)
	return b, hex.EncodeToString(s[:])
}

// server serves data like the appliance's /images/…/squashfs (Range and
// all, through http.ServeContent), after handing each request to pre, which
// may answer by itself (returning true).
func server(t *testing.T, data []byte, pre func(n int, w http.ResponseWriter, r *http.Request) bool) (*httptest.Server, *atomic.Int32) {
	var count atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(count.Add(1))
		if pre != nil && pre(n, w, r) {
			return
		}
		http.ServeContent(w, r, "squashfs", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, &count
}

func fetch(t *testing.T, url, sum string, max int64) (int64, []byte, error) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "root.squashfs")
	n, err := Fetch{URL: url, SHA256: sum, Max: max, Backoff: time.Millisecond, RetryFor: time.Minute}.To(context.Background(), dst)
	got, rerr := os.ReadFile(dst)
	if err == nil && rerr != nil {
		t.Fatalf("fetch succeeded but left no file: %v", rerr)
	}
	if err != nil && rerr == nil {
		t.Errorf("a failed fetch left %s behind", dst)
	}
	return n, got, err
}

func TestFetch(t *testing.T) {
	data, sum := image(3<<20 + 17)
	t.Run("whole", func(t *testing.T) {
		srv, count := server(t, data, nil)
		n, got, err := fetch(t, srv.URL, sum, 8<<20)
		if err != nil || n != int64(len(data)) || !bytes.Equal(got, data) {
			t.Fatalf("n=%d err=%v equal=%v", n, err, bytes.Equal(got, data))
		}
		if count.Load() != 1 {
			t.Errorf("%d requests, want 1", count.Load())
		}
	})
	t.Run("5xx then good", func(t *testing.T) {
		srv, count := server(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return true
			}
			return false
		})
		if _, got, err := fetch(t, srv.URL, sum, 8<<20); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("err=%v", err)
		}
		if count.Load() != 3 {
			t.Errorf("%d requests, want 3", count.Load())
		}
	})
	t.Run("broken stream resumes with Range", func(t *testing.T) {
		var ranges []string
		srv, _ := server(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
			ranges = append(ranges, r.Header.Get("Range"))
			if n == 1 { // half the image, then the connection drops
				w.Header().Set("Content-Length", fmt.Sprint(len(data)))
				w.WriteHeader(http.StatusOK)
				w.Write(data[:len(data)/2])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}
			return false
		})
		if _, got, err := fetch(t, srv.URL, sum, 8<<20); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("err=%v", err)
		}
		if len(ranges) != 2 || ranges[0] != "" || !strings.HasPrefix(ranges[1], "bytes=") || ranges[1] == "bytes=0-" {
			t.Errorf("Range headers %q: want none, then a resume past 0", ranges)
		}
	})
	t.Run("resume answered whole starts over", func(t *testing.T) {
		srv, _ := server(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				w.Header().Set("Content-Length", fmt.Sprint(len(data)))
				w.Write(data[:1000])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}
			r.Header.Del("Range") // a server without Range support
			return false
		})
		if _, got, err := fetch(t, srv.URL, sum, 8<<20); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("err=%v", err)
		}
	})
}

func TestFetchFails(t *testing.T) {
	data, sum := image(1 << 20)
	cases := map[string]struct {
		pre      func(n int, w http.ResponseWriter, r *http.Request) bool
		sum      string
		max      int64
		is       error
		msg      string
		requests int32
	}{
		"not found is final": {
			pre: func(int, http.ResponseWriter, *http.Request) bool { return false },
			sum: sum, max: 8 << 20, msg: "404", requests: 1,
		},
		"too big by its length": {
			sum: sum, max: 1<<20 - 1, is: ErrTooBig, requests: 1,
		},
		"too big without a length": {
			pre: func(n int, w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.WriteHeader(http.StatusOK) // chunked: no Content-Length
				for i := 0; i < 4; i++ {
					w.Write(data[:512<<10])
					w.(http.Flusher).Flush()
				}
				return true
			},
			sum: sum, max: 1 << 20, is: ErrTooBig, requests: 1,
		},
		"wrong checksum, twice": {
			sum: strings.Repeat("0", 64), max: 8 << 20, is: ErrChecksum, requests: 2,
		},
		"unauthorized is final": {
			pre: func(n int, w http.ResponseWriter, r *http.Request) bool {
				http.Error(w, "no", http.StatusForbidden)
				return true
			},
			sum: sum, max: 8 << 20, msg: "403", requests: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pre := tc.pre
			if name == "not found is final" {
				pre = func(n int, w http.ResponseWriter, r *http.Request) bool { http.NotFound(w, r); return true }
			}
			srv, count := server(t, data, pre)
			_, _, err := fetch(t, srv.URL, tc.sum, tc.max)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want %v", err, tc.is)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want it to say %s", err, tc.msg)
			}
			if count.Load() != tc.requests {
				t.Errorf("%d requests, want %d", count.Load(), tc.requests)
			}
		})
	}
}

func TestFetchGivesUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	_, sum := image(10)
	// Retries stop once the next wait would pass RetryFor: with 1 ms
	// doubling against 20 ms, after a handful of tries.
	_, err := Fetch{URL: srv.URL, SHA256: sum, Max: 1 << 20, Backoff: time.Millisecond, RetryFor: 20 * time.Millisecond}.
		To(context.Background(), filepath.Join(t.TempDir(), "x"))
	if err == nil || !strings.Contains(err.Error(), "gave up after") || !strings.Contains(err.Error(), "502") {
		t.Errorf("err = %v", err)
	}
}

func TestRAMBudget(t *testing.T) {
	cases := []struct {
		total, avail int64
		want         Budget
	}{
		{1 << 30, 900 << 20, Budget{Image: 900<<20 - 256<<20, Tmpfs: 900 << 20 / 10 * 9}},
		{64 << 30, 60 << 30, Budget{Image: 60<<30 - 16<<30, Tmpfs: 60 << 30 / 10 * 9}},
		{256 << 20, 200 << 20, Budget{Image: 0, Tmpfs: 200 << 20 / 10 * 9}},
	}
	for _, c := range cases {
		if got := RAMBudget(c.total, c.avail); got != c.want {
			t.Errorf("RAMBudget(%d, %d) = %+v, want %+v", c.total, c.avail, got, c.want)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	total, avail, err := ParseMeminfo([]byte("MemTotal:        2030000 kB\nMemFree:  1 kB\nMemAvailable:    1900000 kB\n"))
	if err != nil || total != 2030000<<10 || avail != 1900000<<10 {
		t.Errorf("got %d %d %v", total, avail, err)
	}
	for _, bad := range []string{"", "MemTotal: 1 kB\n", "MemTotal: x kB\nMemAvailable: 1 kB\n", "MemTotal: 99999999999999999 kB\nMemAvailable: 1 kB\n"} {
		if _, _, err := ParseMeminfo([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestContentRange(t *testing.T) {
	for v, want := range map[string][3]int64{"bytes 100-199/200": {100, 200, 1}, "bytes 5-9/*": {5, -1, 1}, "bytes x-1/2": {0, 0, 0}, "items 1-2/3": {0, 0, 0}, "bytes 1-2": {0, 0, 0}} {
		s, n, ok := contentRange(v)
		if ok != (want[2] == 1) || ok && (s != want[0] || n != want[1]) {
			t.Errorf("contentRange(%q) = %d %d %v", v, s, n, ok)
		}
	}
}
