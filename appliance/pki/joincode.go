package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"strings"
	"time"
)

const (
	joinCodePrefix  = "rcj1-"
	joinCodeVersion = 1

	// maxJoinAddrLen bounds the address: a DNS name is at most 253 bytes,
	// so 255 leaves room for short names plus a port, and it keeps a
	// hostile code from making us allocate much.
	maxJoinAddrLen = 255

	// joinHeaderLen is version + fingerprint + secret + expires.
	joinHeaderLen = 1 + 32 + 32 + 8
	// joinMinLen is the header, a one-byte address length and the CRC.
	joinMinLen = joinHeaderLen + 1 + 4
	// maxJoinCodeLen bounds the text before any decoding work.
	maxJoinCodeLen = len(joinCodePrefix) + (joinHeaderLen+binary.MaxVarintLen64+maxJoinAddrLen+4)*8/5 + 8
)

// joinEncoding is base32 with the RFC 4648 standard alphabet in lower case:
// it survives being read aloud, typed, and double-clicked as one word.
var joinEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Errors from ParseJoinCode that callers may want to tell apart.
var (
	ErrNotJoinCode       = errors.New("join code: not a rollcall join code")
	ErrJoinCodeDamaged   = errors.New("join code: damaged (checksum mismatch)")
	ErrJoinCodeTruncated = errors.New("join code: truncated")
)

// JoinCode is what `rollcall cluster join-code` prints: everything a new node
// needs to join, as one word. The address says where to go, the CA
// fingerprint lets the new node trust that endpoint without a hostname, and
// the secret proves to the cluster that an operator handed out this code.
type JoinCode struct {
	Addr          string // host:port of the node to contact (its raft/cluster port)
	CAFingerprint [32]byte
	Secret        [32]byte
	Expires       time.Time // second resolution
}

// NewJoinCode makes a join code for addr with a fresh random secret.
func NewJoinCode(addr string, fp [32]byte, expires time.Time) (JoinCode, error) {
	if err := checkJoinAddr(addr); err != nil {
		return JoinCode{}, fmt.Errorf("new join code: %w", err)
	}
	if fp == ([32]byte{}) {
		return JoinCode{}, errors.New("new join code: ca fingerprint is empty")
	}
	if expires.IsZero() {
		return JoinCode{}, errors.New("new join code: expiry is not set")
	}
	j := JoinCode{
		Addr:          addr,
		CAFingerprint: fp,
		Expires:       time.Unix(expires.Unix(), 0).UTC(),
	}
	if _, err := rand.Read(j.Secret[:]); err != nil {
		return JoinCode{}, fmt.Errorf("new join code: generate secret: %w", err)
	}
	return j, nil
}

// String returns the code as one word: "rcj1-" and then lowercase unpadded
// base32 of
//
//	version (1 byte) | CA fingerprint (32) | secret (32) |
//	expires, unix seconds (8, big endian) | address length (uvarint) | address |
//	CRC-32 IEEE of everything before it (4, big endian)
//
// The CRC is there for humans: CRC-32 catches every error burst of up to 32
// bits, so any single mistyped character is reported as damage rather than
// turning into a different, wrong code.
//
// The result contains the secret; print it only where a join code is meant
// to be shown.
func (j JoinCode) String() string {
	buf := make([]byte, 0, joinMinLen+binary.MaxVarintLen64+len(j.Addr))
	buf = append(buf, joinCodeVersion)
	buf = append(buf, j.CAFingerprint[:]...)
	buf = append(buf, j.Secret[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(j.Expires.Unix()))
	buf = binary.AppendUvarint(buf, uint64(len(j.Addr)))
	buf = append(buf, j.Addr...)
	buf = binary.BigEndian.AppendUint32(buf, crc32.ChecksumIEEE(buf))
	return joinCodePrefix + joinEncoding.EncodeToString(buf)
}

// GoString keeps %#v from printing the secret.
func (j JoinCode) GoString() string {
	return fmt.Sprintf("pki.JoinCode{Addr:%q, CAFingerprint:%s, Secret:redacted, Expires:%s}",
		j.Addr, hex.EncodeToString(j.CAFingerprint[:]), j.Expires.UTC().Format(time.RFC3339))
}

// SecretHash is the SHA-256 of the secret. The cluster stores this, never
// the secret, so a leaked store does not leak usable join codes.
func (j JoinCode) SecretHash() [32]byte {
	return sha256.Sum256(j.Secret[:])
}

// MatchesHash reports, in constant time, whether the code's secret hashes to
// h (a SecretHash stored earlier).
func (j JoinCode) MatchesHash(h [32]byte) bool {
	got := j.SecretHash()
	return subtle.ConstantTimeCompare(got[:], h[:]) == 1
}

// ParseJoinCode parses the output of JoinCode.String. Surrounding spaces and
// upper case are tolerated, since codes get pasted and retyped. Errors say
// what is wrong with the code but never contain any part of it beyond a
// character position or the (public) address.
func ParseJoinCode(s string) (JoinCode, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if !strings.HasPrefix(s, joinCodePrefix) {
		return JoinCode{}, ErrNotJoinCode
	}
	if len(s) > maxJoinCodeLen {
		return JoinCode{}, errors.New("join code: too long")
	}
	body := s[len(joinCodePrefix):]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return JoinCode{}, fmt.Errorf("join code: damaged (invalid character at position %d)", len(joinCodePrefix)+i+1)
		}
	}

	// Unpadded base32 cannot end after 1, 3 or 6 characters of a group. Such
	// a length means characters went missing (or extra ones appeared), but
	// decode what is there first so the error can say which.
	usable := len(body)
	for usable%8 == 1 || usable%8 == 3 || usable%8 == 6 {
		usable--
	}
	data, err := joinEncoding.DecodeString(body[:usable])
	if err != nil {
		return JoinCode{}, ErrJoinCodeDamaged
	}
	if len(data) < joinMinLen {
		return JoinCode{}, ErrJoinCodeTruncated
	}
	// Only the canonical spelling is accepted: the last character may carry
	// unused low bits, and a typo there would otherwise go unnoticed.
	canonical := usable == len(body) && joinEncoding.EncodeToString(data) == body
	payload, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if !canonical || crc32.ChecksumIEEE(payload) != sum {
		if declared, ok := declaredJoinLen(data); ok && declared > len(data) {
			return JoinCode{}, ErrJoinCodeTruncated
		}
		return JoinCode{}, ErrJoinCodeDamaged
	}
	if payload[0] != joinCodeVersion {
		return JoinCode{}, fmt.Errorf("join code: unsupported version %d", payload[0])
	}

	var j JoinCode
	copy(j.CAFingerprint[:], payload[1:33])
	copy(j.Secret[:], payload[33:65])
	j.Expires = time.Unix(int64(binary.BigEndian.Uint64(payload[65:73])), 0).UTC()
	n, k := binary.Uvarint(payload[joinHeaderLen:])
	if k <= 0 || k != len(binary.AppendUvarint(nil, n)) {
		return JoinCode{}, errors.New("join code: malformed address length")
	}
	if n > maxJoinAddrLen {
		return JoinCode{}, errors.New("join code: address too long")
	}
	rest := payload[joinHeaderLen+k:]
	if uint64(len(rest)) != n {
		return JoinCode{}, errors.New("join code: malformed address length")
	}
	j.Addr = string(rest)
	if err := checkJoinAddr(j.Addr); err != nil {
		return JoinCode{}, fmt.Errorf("join code: %w", err)
	}
	if j.CAFingerprint == ([32]byte{}) {
		return JoinCode{}, errors.New("join code: ca fingerprint is empty")
	}
	return j, nil
}

// declaredJoinLen is the total length a version 1 code says it has, used only
// to tell a cut-off code from a mistyped one.
func declaredJoinLen(data []byte) (int, bool) {
	if len(data) <= joinHeaderLen || data[0] != joinCodeVersion {
		return 0, false
	}
	n, k := binary.Uvarint(data[joinHeaderLen:])
	if k <= 0 || n > maxJoinAddrLen {
		return 0, false
	}
	return joinHeaderLen + k + int(n) + 4, true
}

func checkJoinAddr(addr string) error {
	if addr == "" {
		return errors.New("address empty")
	}
	if len(addr) > maxJoinAddrLen {
		return fmt.Errorf("address longer than %d bytes", maxJoinAddrLen)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("address %q is not host:port", addr)
	}
	return nil
}
