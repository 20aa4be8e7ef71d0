package deploy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// Formats the magic bytes tell apart.
const (
	FormatZstd  = "zstd"
	FormatGzip  = "gzip"
	FormatRaw   = "raw"
	FormatQcow2 = "qcow2"
	FormatXZ    = "xz"
)

// ErrFormat: the stream is in a format the agent does not write.
var ErrFormat = errors.New("image format not supported")

// DetectFormat names a stream's format by its first bytes, never by a
// name or what the job says: zstd 28 b5 2f fd, gzip 1f 8b, qcow2 "QFI\xfb",
// xz fd "7zXZ" 00; anything else is a raw disk image.
func DetectFormat(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return FormatZstd
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return FormatGzip
	case bytes.HasPrefix(head, []byte("QFI\xfb")):
		return FormatQcow2
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return FormatXZ
	}
	return FormatRaw
}

// ErrVerify: the image written is not the one the job names (a hash or a
// size differs, or the stream ended early).
var ErrVerify = errors.New("image verification failed")

// writeStats counts what the pipeline has done so far, for progress.
type writeStats struct {
	compressed atomic.Int64
	raw        atomic.Int64
	format     atomic.Value // string
}

// chunk is the write size: large, a multiple of every sector size, and a
// few of them in flight keep the network, the decoder, the hash and the
// disk busy at once.
const (
	chunkSize = 4 << 20
	inFlight  = 8
)

type block struct {
	buf []byte
	n   int
	off int64
}

// stream is the image download, its first bytes looked at: the format is
// known before anything is written.
type stream struct {
	body   io.ReadCloser
	hc     hash.Hash
	cr     *hashCounter
	br     *bufio.Reader
	format string
}

// openStream wraps body (SHA-256 and a count of the bytes as served) and
// reads its magic bytes. A format the agent does not write is refused here,
// before the disk is touched.
func openStream(body io.ReadCloser, im Image, st *writeStats) (*stream, error) {
	s := &stream{body: body, hc: sha256.New()}
	s.cr = &hashCounter{r: body, h: s.hc, n: &st.compressed, max: im.Size}
	s.br = bufio.NewReaderSize(s.cr, 1<<20)
	head, err := s.br.Peek(8)
	if len(head) < 4 {
		body.Close()
		return nil, fmt.Errorf("%w: the stream ended after %d bytes (%v)", ErrVerify, len(head), err)
	}
	s.format = DetectFormat(head)
	st.format.Store(s.format)
	switch s.format {
	case FormatZstd, FormatGzip, FormatRaw:
		return s, nil
	case FormatQcow2:
		body.Close()
		return nil, fmt.Errorf("%w: the image is qcow2 (its magic bytes say so); the server must convert it to raw (qemu-img convert) before deploying", ErrFormat)
	}
	body.Close()
	return nil, fmt.Errorf("%w: the image is %s; want zstd, gzip or raw", ErrFormat, s.format)
}

// writeImage streams the image onto the disk: the decoder the magic bytes
// picked, SHA-256 of the file as served (and of the raw image when it is
// served raw), large aligned writes. Stages run in
// their own goroutines, so the download, decoding, hashing and writing
// overlap. It checks sizes and hashes at the end and returns an
// ErrVerify error on any difference; the caller then zeroes the tables.
// Nothing of the image is held in memory but the blocks in flight.
func writeImage(ctx context.Context, t *target, s *stream, im Image, st *writeStats) error {
	body, hc, cr, br, format := s.body, s.hc, s.cr, s.br, s.format
	defer body.Close()
	var src io.Reader
	switch format {
	case FormatZstd:
		// Frames decode in their own goroutines, the input read (and its
		// SHA-256) in another; each frame's xxhash64 is checked (cheap: it
		// catches a decoder fault the file's SHA-256 cannot).
		d, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(4))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		defer d.Close()
		src = d
	case FormatGzip:
		g, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%w: gzip header: %v", ErrVerify, err)
		}
		src = g
	default:
		src = br
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	free := make(chan []byte, inFlight)
	for i := 0; i < inFlight; i++ {
		free <- alignedBuf(chunkSize)
	}
	toHash, toWrite := make(chan block, inFlight), make(chan block, inFlight)
	// The raw image's SHA-256 is computed only for a raw download. A
	// compressed file whose own SHA-256 matches is, byte for byte, the file
	// the server made when it imported the image and computed raw_sha256
	// from its decoding (oscatalog); decoding is deterministic, and the raw
	// size and zstd's frame checksums are still checked here. A second
	// SHA-256 over gigabytes was half the agent's CPU and the reason it
	// trailed curl | zstd -d | dd (issue 18's benchmark).
	var hr hash.Hash
	if format == FormatRaw {
		hr = sha256.New()
	}
	var wg sync.WaitGroup
	fail := func(err error) {
		cancel(err)
		body.Close() // unblocks a read from the network
	}

	// Decode.
	var rawTotal int64
	var decodeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(toHash)
		var off int64
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			n, err := io.ReadFull(src, buf)
			if n > 0 {
				if off+int64(n) > im.RawSize {
					decodeErr = fmt.Errorf("%w: the image is larger than its raw_size of %d bytes", ErrVerify, im.RawSize)
					fail(decodeErr)
					return
				}
				toHash <- block{buf, n, off}
				off += int64(n)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				rawTotal = off
				return
			}
			if err != nil {
				if c := context.Cause(ctx); c != nil {
					return
				}
				decodeErr = fmt.Errorf("%w: %s stream: %v", ErrVerify, format, err)
				fail(decodeErr)
				return
			}
		}
	}()
	// Hash the raw image.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(toWrite)
		for b := range toHash {
			if hr != nil {
				hr.Write(b.buf[:b.n])
			}
			toWrite <- b
		}
	}()
	// Write.
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for b := range toWrite {
			if writeErr == nil && ctx.Err() == nil {
				w := t.f
				if t.direct != nil && b.n%4096 == 0 {
					w = t.direct
				}
				if _, err := w.WriteAt(b.buf[:b.n], b.off); err != nil {
					writeErr = fmt.Errorf("write %s at byte %d: %w", t.dev.Path, b.off, err)
					fail(writeErr)
				} else {
					st.raw.Add(int64(b.n))
				}
			}
			free <- b.buf
		}
	}()
	wg.Wait()
	if writeErr != nil {
		return writeErr
	}
	if decodeErr != nil {
		return decodeErr
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	// The decoder may stop at its frame's end: read what follows, so the
	// hash covers the whole file as served.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return fmt.Errorf("%w: reading the rest of the stream: %v", ErrVerify, err)
	}
	if cr.err != nil {
		return cr.err
	}
	if err := t.sync(); err != nil {
		return err
	}
	var errs []error
	if n := st.compressed.Load(); n != im.Size {
		errs = append(errs, fmt.Errorf("the server sent %d bytes, the image has %d (truncated)", n, im.Size))
	}
	if got := hex.EncodeToString(hc.Sum(nil)); !eqHex(got, im.SHA256) {
		errs = append(errs, fmt.Errorf("sha256 of the file is %s, want %s", got, im.SHA256))
	}
	if rawTotal != im.RawSize {
		errs = append(errs, fmt.Errorf("the image decoded to %d bytes, want %d", rawTotal, im.RawSize))
	}
	if hr != nil {
		if got := hex.EncodeToString(hr.Sum(nil)); !eqHex(got, im.RawSHA256) {
			errs = append(errs, fmt.Errorf("sha256 of the raw image is %s, want %s", got, im.RawSHA256))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrVerify, errors.Join(errs...))
	}
	return nil
}

// hashCounter hashes and counts what is read, and fails once more than max
// bytes arrive (a server sending more than the image is not sending it).
type hashCounter struct {
	r   io.Reader
	h   hash.Hash
	n   *atomic.Int64
	max int64
	err error
}

func (c *hashCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.h.Write(p[:n])
		if c.n.Add(int64(n)) > c.max {
			c.err = fmt.Errorf("%w: the server sent more than the image's %d bytes", ErrVerify, c.max)
			return n, c.err
		}
	}
	return n, err
}

// WriteStream writes an image stream onto dev and verifies it, as a deploy
// job's write step does (no wipe, no table work): the benchmark's entry to
// the pipeline. It returns the format the magic bytes named.
func WriteStream(ctx context.Context, dev Device, body io.ReadCloser, im Image) (string, error) {
	t, err := openTarget(dev)
	if err != nil {
		body.Close()
		return "", err
	}
	defer t.Close()
	var st writeStats
	s, err := openStream(body, im, &st)
	if err != nil {
		return "", err
	}
	return s.format, writeImage(ctx, t, s, im, &st)
}
