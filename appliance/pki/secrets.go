package pki

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

const (
	gcmNonceLen = 12
	gcmTagLen   = 16
	redacted    = "MasterKey(redacted)"
)

// MasterKey is the AES-256 key that seals secrets at rest (BMC passwords,
// tokens) in the cluster store. It is kept outside the store, so a copy of
// the store alone reveals nothing.
//
// It formats as "MasterKey(redacted)" under every fmt verb. That does not
// cover a MasterKey held in an unexported struct field, which fmt prints
// without calling methods: keep it in exported fields or behind a pointer.
type MasterKey [32]byte

// NewMasterKey returns a fresh random key.
func NewMasterKey() (MasterKey, error) {
	var k MasterKey
	if _, err := rand.Read(k[:]); err != nil {
		return MasterKey{}, fmt.Errorf("new master key: %w", err)
	}
	return k, nil
}

// String keeps the key out of logs and error messages.
func (k MasterKey) String() string { return redacted }

// GoString keeps the key out of %#v.
func (k MasterKey) GoString() string { return redacted }

// Format covers the verbs String and GoString do not, such as %d and %x,
// which fmt would otherwise apply to the raw bytes of the array.
func (k MasterKey) Format(f fmt.State, verb rune) {
	_, _ = io.WriteString(f, redacted)
}

func (k MasterKey) isZero() bool { return k == MasterKey{} }

func (k MasterKey) aead() (cipher.AEAD, error) {
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts plaintext with AES-256-GCM under a random 12-byte nonce and
// returns nonce||ciphertext||tag. aad names the record the secret belongs to
// (for example "machine/m-abc/bmc"): it is authenticated, not stored, so a
// sealed value copied into another record will not open there.
func (k MasterKey) Seal(plaintext, aad []byte) ([]byte, error) {
	// A zero key almost certainly means the key was never loaded; sealing
	// under it would write secrets anyone can read.
	if k.isZero() {
		return nil, errors.New("seal secret: master key is not set")
	}
	aead, err := k.aead()
	if err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	out := make([]byte, gcmNonceLen, gcmNonceLen+len(plaintext)+gcmTagLen)
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("seal secret: generate nonce: %w", err)
	}
	return aead.Seal(out, out[:gcmNonceLen], plaintext, aad), nil
}

// Open reverses Seal. It fails the same way for a wrong key, wrong aad or a
// modified value, since GCM cannot tell these apart.
func (k MasterKey) Open(sealed, aad []byte) ([]byte, error) {
	if k.isZero() {
		return nil, errors.New("open sealed secret: master key is not set")
	}
	if len(sealed) < gcmNonceLen+gcmTagLen {
		return nil, errors.New("open sealed secret: too short")
	}
	aead, err := k.aead()
	if err != nil {
		return nil, fmt.Errorf("open sealed secret: %w", err)
	}
	plain, err := aead.Open(nil, sealed[:gcmNonceLen], sealed[gcmNonceLen:], aad)
	if err != nil {
		return nil, errors.New("open sealed secret: authentication failed")
	}
	return plain, nil
}

// LoadMasterKey reads a key written by Save: 64 hex characters and an
// optional newline. A file that group or others may access is refused, as
// ssh does for private keys, because that usually means the key has already
// been exposed or soon will be.
func LoadMasterKey(path string) (MasterKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return MasterKey{}, fmt.Errorf("load master key: %w", err)
	}
	defer f.Close()
	// Stat the open file, not the path, so the mode checked is the mode of
	// the bytes read.
	fi, err := f.Stat()
	if err != nil {
		return MasterKey{}, fmt.Errorf("load master key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return MasterKey{}, fmt.Errorf("load master key: %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return MasterKey{}, fmt.Errorf("load master key: %s has mode %04o, allowing group/other access; want 0600", path, perm)
	}
	// Read one byte more than a valid file can hold to detect junk.
	buf := make([]byte, 2*len(MasterKey{})+3)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return MasterKey{}, fmt.Errorf("load master key: read %s: %w", path, err)
	}
	text := strings.TrimSuffix(strings.TrimSuffix(string(buf[:n]), "\n"), "\r")
	var k MasterKey
	// The hex decoder's own error quotes the offending byte, which would be
	// part of the key; report the shape of the problem instead.
	if len(text) != hex.EncodedLen(len(k)) {
		return MasterKey{}, fmt.Errorf("load master key: %s does not hold %d hex characters", path, hex.EncodedLen(len(k)))
	}
	if _, err := hex.Decode(k[:], []byte(text)); err != nil {
		return MasterKey{}, fmt.Errorf("load master key: %s is not valid hex", path)
	}
	if k.isZero() {
		return MasterKey{}, fmt.Errorf("load master key: %s holds an all-zero key", path)
	}
	return k, nil
}

// Save writes the key as hex with mode 0600. It writes a temporary file in
// the same directory and renames it into place, so a crash leaves either the
// old key or the new one, never half of one.
func (k MasterKey) Save(path string) (err error) {
	if k.isZero() {
		return errors.New("save master key: key is not set")
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save master key: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp already uses 0600; set it explicitly so the guarantee does
	// not rest on that detail.
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("save master key: %w", err)
	}
	if _, err := tmp.WriteString(hex.EncodeToString(k[:]) + "\n"); err != nil {
		return fmt.Errorf("save master key: write: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("save master key: sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save master key: close: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save master key: %w", err)
	}
	// Make the rename itself durable. Not every platform lets a directory
	// be synced, and the key is already in place, so failure is ignored.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// NewToken returns a fresh bearer token: "rc_" and 32 random bytes in
// unpadded base64url. The prefix makes tokens easy to spot for secret
// scanners and for humans reading a config file.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return "rc_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Sum is an HMAC-SHA256 of msg under a key derived from k for one purpose
// (a boot token, say), so that values made for one purpose never verify
// for another and the master key itself is never used as a MAC key.
func (k MasterKey) Sum(purpose string, msg []byte) ([]byte, error) {
	if k.isZero() {
		return nil, errors.New("sum: master key is not set")
	}
	d := hmac.New(sha256.New, k[:])
	d.Write([]byte("rollcall/" + purpose))
	m := hmac.New(sha256.New, d.Sum(nil))
	m.Write(msg)
	return m.Sum(nil), nil
}
