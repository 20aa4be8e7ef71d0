// Package binenc is a small append-only binary encoding for the records and
// command bodies written at DHCP rates (leases, sightings, change-log
// entries, lease batches), where JSON's reflection and text times cost more
// than the bbolt write itself. Integers are varints, strings and byte slices
// are length-prefixed, times are Unix seconds and nanoseconds (decoded in
// UTC; the zero time round-trips), addresses carry their length (0, 4 or 16).
//
// A Reader never panics on bad input: the first problem sticks in Err and
// every later read returns a zero value, so a decoder reads every field and
// checks once at the end.
package binenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// ErrShort and ErrBad are the reasons a Reader gives up.
var (
	ErrShort = errors.New("binenc: input ends inside a field")
	ErrBad   = errors.New("binenc: malformed field")
)

// Writer appends fields to a byte slice.
type Writer struct{ b []byte }

// NewWriter starts with room for n bytes.
func NewWriter(n int) *Writer { return &Writer{b: make([]byte, 0, n)} }

// Bytes returns what was written.
func (w *Writer) Bytes() []byte { return w.b }

// Byte appends one raw byte (format tags).
func (w *Writer) Byte(v byte) { w.b = append(w.b, v) }

// Uvarint appends an unsigned varint.
func (w *Writer) Uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// Varint appends a signed varint.
func (w *Writer) Varint(v int64) { w.b = binary.AppendVarint(w.b, v) }

// Bool appends 0 or 1.
func (w *Writer) Bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// String appends a length-prefixed string.
func (w *Writer) String(s string) {
	w.Uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// Blob appends a length-prefixed byte slice.
func (w *Writer) Blob(p []byte) {
	w.Uvarint(uint64(len(p)))
	w.b = append(w.b, p...)
}

// Time appends a time: a zero flag, or seconds and nanoseconds since 1970.
func (w *Writer) Time(t time.Time) {
	if t.IsZero() {
		w.b = append(w.b, 0)
		return
	}
	w.b = append(w.b, 1)
	w.Varint(t.Unix())
	w.Uvarint(uint64(t.Nanosecond()))
}

// Addr appends an address as its length and bytes (IPv4 stays 4 bytes).
func (w *Writer) Addr(a netip.Addr) {
	switch {
	case !a.IsValid():
		w.b = append(w.b, 0)
	case a.Is4():
		b := a.As4()
		w.b = append(append(w.b, 4), b[:]...)
	default:
		b := a.As16()
		w.b = append(append(w.b, 16), b[:]...)
	}
}

// Prefix appends an address and its bit length.
func (w *Writer) Prefix(p netip.Prefix) {
	w.Addr(p.Addr())
	if p.IsValid() {
		w.b = append(w.b, byte(p.Bits()))
	}
}

// Reader reads fields written by Writer.
type Reader struct {
	b   []byte
	err error
}

// NewReader reads from b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first problem met, if any.
func (r *Reader) Err() error { return r.err }

// Done is Err, or an error when bytes are left over.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes after the last field", ErrBad, len(r.b))
	}
	return r.err
}

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

// Byte reads one raw byte.
func (r *Reader) Byte() byte {
	if len(r.b) < 1 {
		r.fail(ErrShort)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if !r.advance(n) {
		return 0
	}
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if !r.advance(n) {
		return 0
	}
	return v
}

// advance consumes a varint of n bytes as encoding/binary reports it (0:
// input too short, negative: more than 64 bits).
func (r *Reader) advance(n int) bool {
	switch {
	case n == 0:
		r.fail(ErrShort)
	case n < 0:
		r.fail(fmt.Errorf("%w: varint overflows 64 bits", ErrBad))
	default:
		r.b = r.b[n:]
		return true
	}
	return false
}

// Bool reads 0 or 1.
func (r *Reader) Bool() bool {
	switch r.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail(fmt.Errorf("%w: boolean is neither 0 nor 1", ErrBad))
	return false
}

// Len reads a length and checks that that many bytes, times min, remain:
// a lying count cannot make a decoder allocate more than the input.
func (r *Reader) Len(min int) int {
	n := r.Uvarint()
	if min < 1 {
		min = 1
	}
	if n > uint64(len(r.b)/min) {
		r.fail(fmt.Errorf("%w: count %d exceeds the %d bytes left", ErrBad, n, len(r.b)))
		return 0
	}
	return int(n)
}

// Raw reads a length-prefixed byte slice; the result aliases the input.
func (r *Reader) Raw() []byte {
	n := r.Len(1)
	if r.err != nil {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// String reads a length-prefixed string.
func (r *Reader) String() string { return string(r.Raw()) }

// Blob reads a length-prefixed byte slice into a copy.
func (r *Reader) Blob() []byte {
	p := r.Raw()
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

// Time reads a time (in UTC).
func (r *Reader) Time() time.Time {
	switch r.Byte() {
	case 0:
		return time.Time{}
	case 1:
		s, ns := r.Varint(), r.Uvarint()
		if ns >= 1e9 {
			r.fail(fmt.Errorf("%w: %d nanoseconds", ErrBad, ns))
			return time.Time{}
		}
		return time.Unix(s, int64(ns)).UTC()
	}
	r.fail(fmt.Errorf("%w: time flag", ErrBad))
	return time.Time{}
}

// Addr reads an address.
func (r *Reader) Addr() netip.Addr {
	n := r.Byte()
	switch {
	case r.err != nil, n == 0:
		return netip.Addr{}
	case n != 4 && n != 16:
		r.fail(fmt.Errorf("%w: address of %d bytes", ErrBad, n))
		return netip.Addr{}
	case len(r.b) < int(n):
		r.fail(ErrShort)
		return netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(r.b[:n])
	r.b = r.b[n:]
	return a
}

// Prefix reads an address and its bit length.
func (r *Reader) Prefix() netip.Prefix {
	a := r.Addr()
	if !a.IsValid() {
		return netip.Prefix{}
	}
	bits := int(r.Byte())
	if bits > a.BitLen() {
		r.fail(fmt.Errorf("%w: /%d on %s", ErrBad, bits, a))
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, bits)
}
