package agent

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// A body that stops sending fails its read instead of hanging; one that
// keeps sending is read whole, whatever the number of reads.
func TestStallReader(t *testing.T) {
	pr, pw := io.Pipe()
	s := newStallReader(pr, 20*time.Millisecond)
	defer s.Close()
	go pw.Write([]byte("first"))
	buf := make([]byte, 16)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "first" {
		t.Fatalf("first read: %q, %v", buf[:n], err)
	}
	_, err = s.Read(buf) // nothing more is written
	if err == nil || !strings.Contains(err.Error(), "no data for") || !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("a stalled read: %v, want a 'no data for' error", err)
	}

	want := strings.Repeat("rollcall ", 10000)
	ok := newStallReader(io.NopCloser(iotest{strings.NewReader(want)}), time.Minute)
	got, err := io.ReadAll(ok)
	ok.Close()
	if err != nil || string(got) != want {
		t.Fatalf("a live body: %d bytes, %v; want %d", len(got), err, len(want))
	}
}

// iotest returns at most 7 bytes a read: many reads.
type iotest struct{ r io.Reader }

func (o iotest) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 7)]) }
