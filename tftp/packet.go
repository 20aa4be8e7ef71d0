package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Opcodes (RFC 1350 section 5, RFC 2347 for OACK).
const (
	opRRQ   uint16 = 1
	opWRQ   uint16 = 2
	opDATA  uint16 = 3
	opACK   uint16 = 4
	opERROR uint16 = 5
	opOACK  uint16 = 6
)

// Error codes (RFC 1350 appendix, RFC 2347 for 8).
const (
	errNotDefined       uint16 = 0
	errFileNotFound     uint16 = 1
	errAccessViolation  uint16 = 2
	errIllegalOperation uint16 = 4
	errUnknownTID       uint16 = 5
	errOptionRefused    uint16 = 8
)

const (
	defaultBlockSize = 512   // RFC 1350
	minBlockSize     = 8     // RFC 2348
	maxBlockSize     = 65464 // RFC 2348
	maxRequestLen    = 1500  // a request larger than one Ethernet frame is not a boot loader's
	maxNameLen       = 512   // twice what DHCP can name (option 67 holds 255 bytes)
	maxOptions       = 16    // PXE ROMs and UEFI send at most five
)

// Request is a parsed RRQ or WRQ (RFC 1350 section 5, options RFC 2347).
// Option values are validated here; whether they are honoured is the
// transfer's decision.
type Request struct {
	Write bool   // WRQ; we are read-only and refuse it
	Name  string // raw, exactly as sent (not yet normalised)
	Mode  string // "octet" or "netascii", lower-cased

	// Options the client asked for, zero when absent.
	BlockSize int           // blksize, RFC 2348 (8..65464)
	TSize     bool          // tsize present, RFC 2349 (its value is 0 in an RRQ)
	Timeout   time.Duration // timeout, RFC 2349 (1..255 s)
}

var errMalformed = errors.New("malformed request")

// parseRequest parses the datagram a client sends to the listening port.
// It accepts exactly an RRQ or WRQ: opcode, NUL-terminated name and mode,
// then NUL-terminated option name/value pairs. Unknown options are ignored
// (RFC 2347: the server omits them from its OACK); malformed values of
// known options are ignored the same way, since a client that sends them
// still deserves the file at the RFC 1350 defaults. A name longer than
// maxNameLen or more than maxOptions options make a request malformed.
func parseRequest(b []byte) (Request, error) {
	var r Request
	if len(b) < 2 {
		return r, fmt.Errorf("%w: %d bytes", errMalformed, len(b))
	}
	if len(b) > maxRequestLen {
		return r, fmt.Errorf("%w: %d bytes is too long", errMalformed, len(b))
	}
	switch op := binary.BigEndian.Uint16(b); op {
	case opRRQ:
	case opWRQ:
		r.Write = true
	default:
		return r, fmt.Errorf("%w: opcode %d is not a request", errMalformed, op)
	}
	rest := b[2:]
	if len(rest) == 0 || rest[len(rest)-1] != 0 {
		return r, fmt.Errorf("%w: not NUL-terminated", errMalformed)
	}
	// Walk the fields instead of splitting them: nothing is allocated for
	// a packet of a thousand empty options before the count is checked.
	next := func() ([]byte, bool) {
		if len(rest) == 0 {
			return nil, false
		}
		i := bytes.IndexByte(rest, 0) // found: rest ends with NUL
		f := rest[:i]
		rest = rest[i+1:]
		return f, true
	}
	name, _ := next()
	mode, ok := next()
	if !ok {
		return r, fmt.Errorf("%w: missing mode", errMalformed)
	}
	if len(name) == 0 {
		return r, fmt.Errorf("%w: empty file name", errMalformed)
	}
	if len(name) > maxNameLen {
		return r, fmt.Errorf("%w: file name of %d bytes is longer than %d", errMalformed, len(name), maxNameLen)
	}
	r.Name = string(name)
	r.Mode = strings.ToLower(string(mode))
	switch r.Mode {
	case "octet", "netascii":
	default:
		return r, fmt.Errorf("%w: mode %q is not one of octet, netascii", errMalformed, printable(mode))
	}
	for count := 0; len(rest) > 0; count++ {
		if count == maxOptions {
			return r, fmt.Errorf("%w: more than %d options", errMalformed, maxOptions)
		}
		opt, _ := next()
		v, ok := next()
		if !ok {
			return r, fmt.Errorf("%w: option %q has no value", errMalformed, printable(opt))
		}
		value := string(v)
		switch strings.ToLower(string(opt)) {
		case "blksize":
			if n, err := strconv.Atoi(value); err == nil && n >= minBlockSize && n <= maxBlockSize {
				r.BlockSize = n
			}
		case "tsize":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil && n >= 0 {
				r.TSize = true
			}
		case "timeout":
			// The RFC's range; the transfer decides how much of it to honour.
			if n, err := strconv.Atoi(value); err == nil && n >= 1 && n <= 255 {
				r.Timeout = time.Duration(n) * time.Second
			}
		}
	}
	return r, nil
}

// printable quotes at most 64 bytes of client input for a log line or an
// error message.
func printable(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return strconv.QuoteToASCII(string(b))
}

// appendError builds an ERROR packet. msg must not carry internal causes:
// it goes to an unauthenticated client.
func appendError(b []byte, code uint16, msg string) []byte {
	b = binary.BigEndian.AppendUint16(b[:0], opERROR)
	b = binary.BigEndian.AppendUint16(b, code)
	b = append(b, msg...)
	return append(b, 0)
}

// appendOACK builds an OACK (RFC 2347) with the options in a fixed order.
func appendOACK(b []byte, blksize int, tsize int64, timeout time.Duration) []byte {
	b = binary.BigEndian.AppendUint16(b[:0], opOACK)
	if blksize > 0 {
		b = append(b, "blksize\x00"...)
		b = strconv.AppendInt(b, int64(blksize), 10)
		b = append(b, 0)
	}
	if tsize >= 0 {
		b = append(b, "tsize\x00"...)
		b = strconv.AppendInt(b, tsize, 10)
		b = append(b, 0)
	}
	if timeout > 0 {
		b = append(b, "timeout\x00"...)
		b = strconv.AppendInt(b, int64(timeout/time.Second), 10)
		b = append(b, 0)
	}
	return b
}

// peerError extracts the code and message of an ERROR packet.
func peerError(b []byte) (uint16, string) {
	if len(b) < 4 {
		return errNotDefined, ""
	}
	msg := b[4:]
	if i := bytes.IndexByte(msg, 0); i >= 0 {
		msg = msg[:i]
	}
	return binary.BigEndian.Uint16(b[2:]), printable(msg)
}
