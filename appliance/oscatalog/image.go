package oscatalog

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/rollcall/rollcall/appliance/bootfiles"
)

// Formats an image may be in, told by magic bytes, never by the name.
const (
	FormatQCOW2 = "qcow2"
	FormatRaw   = "raw"
)

// qcow2's header (docs/interop/qcow2.txt in QEMU).
const (
	qcow2Magic           = "QFI\xfb"
	qcow2IncompatOffset  = 72
	qcow2ExternalDataBit = 1 << 2
)

// refusedMagic are formats that are not accepted, named so the operator
// knows what was sent.
var refusedMagic = []struct {
	off   int
	magic string
	name  string
}{
	{0, "KDMV", "VMDK"}, {0, "# Disk DescriptorFile", "VMDK descriptor"}, {0, "vhdxfile", "VHDX"}, {0, "conectix", "VHD"},
	{64, "\x7f\x10\xda\xbe", "VDI"}, {0, "\x1f\x8b", "gzip"}, {0, "\xfd7zXZ\x00", "xz"}, {0, "\x28\xb5\x2f\xfd", "zstd"},
	{0, "BZh", "bzip2"}, {0x8001, "CD001", "ISO 9660"}, {0, "PK\x03\x04", "zip"}, {257, "ustar", "tar"},
}

// Detected is what the first bytes of an image say.
type Detected struct {
	Format     string
	SectorSize int // raw: 512, or 4096 when only a 4 KiB-sector GPT is found
}

// detect reads an image's head: qcow2 by its magic (refusing a backing
// file, an external data file or encryption in the header itself), raw
// only when it holds an MBR or GPT, anything else refused with its name.
func detect(path string) (Detected, error) {
	f, err := os.Open(path)
	if err != nil {
		return Detected{}, internal("image file could not be read", err)
	}
	defer f.Close()
	head := make([]byte, 0x8010)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Detected{}, internal("image file could not be read", err)
	}
	head = head[:n]
	at := func(off int, s string) bool { return len(head) >= off+len(s) && string(head[off:off+len(s)]) == s }
	if at(0, qcow2Magic) {
		if len(head) < 104 {
			return Detected{}, invalid("the qcow2 header is truncated", nil)
		}
		version := binary.BigEndian.Uint32(head[4:8])
		if binary.BigEndian.Uint64(head[8:16]) != 0 {
			return Detected{}, invalid("the qcow2 image has a backing file: only self-contained images are accepted", nil)
		}
		if binary.BigEndian.Uint32(head[32:36]) != 0 {
			return Detected{}, invalid("the qcow2 image is encrypted", nil)
		}
		if version >= 3 && binary.BigEndian.Uint64(head[qcow2IncompatOffset:qcow2IncompatOffset+8])&qcow2ExternalDataBit != 0 {
			return Detected{}, invalid("the qcow2 image keeps its data in an external data file: only self-contained images are accepted", nil)
		}
		return Detected{Format: FormatQCOW2, SectorSize: 512}, nil
	}
	for _, m := range refusedMagic {
		if at(m.off, m.magic) {
			return Detected{}, invalid(m.name+" images are not accepted: give a qcow2 or a raw disk image", nil)
		}
	}
	switch {
	case at(512, "EFI PART"):
		return Detected{Format: FormatRaw, SectorSize: 512}, nil
	case at(4096, "EFI PART"):
		return Detected{Format: FormatRaw, SectorSize: 4096}, nil
	case len(head) >= 512 && head[510] == 0x55 && head[511] == 0xaa:
		return Detected{Format: FormatRaw, SectorSize: 512}, nil
	}
	return Detected{}, invalid("not a disk image: neither qcow2 nor a raw disk with an MBR or GPT partition table", nil)
}

// qemuInfo is what `qemu-img info --output=json` says that matters here.
type qemuInfo struct {
	Format              string `json:"format"`
	VirtualSize         int64  `json:"virtual-size"`
	BackingFilename     string `json:"backing-filename"`
	FullBackingFilename string `json:"full-backing-filename"`
	FormatSpecific      struct {
		Type string `json:"type"`
		Data struct {
			DataFile    string `json:"data-file"`
			Compat      string `json:"compat"`
			DataFileRaw bool   `json:"data-file-raw"`
		} `json:"data"`
	} `json:"format-specific"`
}

// inspect asks qemu-img about the image, with the format detect found
// (qemu-img never probes a format: a raw image that looks like qcow2
// inside would otherwise open other files), and refuses what cannot be
// written to a disk alone.
func (c *Catalog) inspect(ctx context.Context, path, format string) (qemuInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, c.cfg.QemuImg, "info", "--output=json", "-f", format, path)
	cmd.Stdout, cmd.Stderr = &limitedBuffer{b: &out, max: 1 << 20}, &limitedBuffer{b: &errb, max: 4 << 10}
	if err := cmd.Run(); err != nil {
		return qemuInfo{}, invalid("qemu-img cannot read the image as "+format, fmt.Errorf("%w: %s", err, bytes.TrimSpace(errb.Bytes())))
	}
	var info qemuInfo
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return qemuInfo{}, internal("qemu-img info gave no JSON", err)
	}
	switch {
	case info.Format != format:
		return info, invalid(fmt.Sprintf("qemu-img reads the image as %q, not %s", info.Format, format), nil)
	case info.BackingFilename != "" || info.FullBackingFilename != "":
		return info, invalid("the image has a backing file: only self-contained images are accepted", nil)
	case info.FormatSpecific.Data.DataFile != "":
		return info, invalid("the image keeps its data in an external data file: only self-contained images are accepted", nil)
	case info.VirtualSize <= 0:
		return info, invalid("the image has no size", nil)
	case info.VirtualSize > c.cfg.MaxRawBytes:
		return info, invalid(fmt.Sprintf("the image's disk is %s, more than the %s allowed", humanBytes(info.VirtualSize), humanBytes(c.cfg.MaxRawBytes)), nil)
	}
	return info, nil
}

// check runs `qemu-img check` on a qcow2 image: a truncated or corrupt
// one converts without complaint into a disk of zeros, so it is refused
// here. Leaked clusters only (exit 3) are harmless.
func (c *Catalog) check(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.cfg.QemuImg, "check", "--output=json", "-f", FormatQCOW2, path)
	cmd.Stdout, cmd.Stderr = &limitedBuffer{b: &out, max: 1 << 20}, io.Discard
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		var r struct {
			Corruptions int `json:"corruptions"`
		}
		json.Unmarshal(out.Bytes(), &r)
		return invalid(fmt.Sprintf("the qcow2 image is corrupt or truncated (qemu-img check finds %d corruptions)", r.Corruptions), nil)
	}
	return invalid("qemu-img cannot check the qcow2 image", err)
}

var qemuProgress = regexp.MustCompile(`\((\d+(?:\.\d+)?)/100%\)`)

// convert writes a qcow2 image as a raw one, reporting qemu-img's progress.
func (c *Catalog) convert(ctx context.Context, src, dst string, virtual int64, progress func(Progress)) error {
	cmd := exec.CommandContext(ctx, c.cfg.QemuImg, "convert", "-p", "-f", FormatQCOW2, "-O", FormatRaw, src, dst)
	var errb bytes.Buffer
	cmd.Stderr = &limitedBuffer{b: &errb, max: 4 << 10}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return internal("qemu-img convert could not start", err)
	}
	if err := cmd.Start(); err != nil {
		return internal("qemu-img convert could not start", err)
	}
	report(progress, Progress{Step: "convert", State: "running", Total: virtual})
	sc := bufio.NewScanner(stdout)
	sc.Split(splitCR)
	last := time.Now()
	for sc.Scan() {
		if m := qemuProgress.FindStringSubmatch(sc.Text()); m != nil && time.Since(last) >= progressEvery {
			last = time.Now()
			pct, _ := strconv.ParseFloat(m[1], 64)
			report(progress, Progress{Step: "convert", State: "running", Bytes: int64(pct / 100 * float64(virtual)), Total: virtual})
		}
	}
	if err := cmd.Wait(); err != nil {
		os.Remove(dst)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return invalid("qemu-img could not convert the image to raw", fmt.Errorf("%w: %s", err, bytes.TrimSpace(errb.Bytes())))
	}
	report(progress, Progress{Step: "convert", State: "done", Bytes: virtual, Total: virtual})
	return nil
}

// splitCR splits qemu-img -p's output, which rewrites one line with \r.
func splitCR(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// compressed is what compress made.
type compressed struct {
	RawSHA256  string
	RawSize    int64
	FileSHA256 string
	FileSize   int64
}

// compress reads the raw image once: SHA-256 of it, and zstd (default
// level, one encoder per core) into the blob store, which names the blob
// by the compressed file's SHA-256.
func (c *Catalog) compress(ctx context.Context, rawPath string, progress func(Progress)) (compressed, error) {
	f, err := os.Open(rawPath)
	if err != nil {
		return compressed{}, internal("raw image could not be read", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return compressed{}, internal("raw image could not be read", err)
	}
	pr, pw := io.Pipe()
	rawHash := sha256.New()
	var rawSize int64
	go func() {
		enc, err := zstd.NewWriter(pw, zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		rawSize, err = copyProgress(io.MultiWriter(rawHash, enc), ctxReader{ctx, f}, "compress", st.Size(), progress)
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
		pw.CloseWithError(err)
	}()
	sum, size, err := c.cfg.Blobs.Write(pr, "")
	pr.CloseWithError(errors.New("blob store stopped reading"))
	if err != nil {
		if ctx.Err() != nil {
			return compressed{}, ctx.Err()
		}
		if errors.Is(err, bootfiles.ErrTooLarge) {
			return compressed{}, invalid("the compressed image is larger than a blob may be", err)
		}
		return compressed{}, internal("the compressed image could not be stored", err)
	}
	return compressed{RawSHA256: hex.EncodeToString(rawHash.Sum(nil)), RawSize: rawSize, FileSHA256: sum, FileSize: size}, nil
}

// verify hashes a downloaded file with the vendor's algorithm.
func verify(ctx context.Context, path string, want Sum, progress func(Progress)) error {
	var h hash.Hash
	switch want.Alg {
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return internal("unknown checksum algorithm "+want.Alg, nil)
	}
	f, err := os.Open(path)
	if err != nil {
		return internal("download could not be read", err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if _, err := copyProgress(h, ctxReader{ctx, f}, "verify", st.Size(), progress); err != nil {
		return internal("download could not be read", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
		return invalid(fmt.Sprintf("checksum mismatch: the download's %s is %s…, the vendor lists %s…", want.Alg, got[:16], want.Hex[:16]), nil)
	}
	return nil
}

// ctxReader stops a long read when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// limitedBuffer keeps at most max bytes of a tool's output.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func report(progress func(Progress), p Progress) {
	if progress != nil {
		progress(p)
	}
}
