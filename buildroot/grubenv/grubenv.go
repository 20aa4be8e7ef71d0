// Package grubenv reads and writes GRUB's environment block (grubenv), the
// 1024-byte file GRUB's load_env and save_env use and grub-editenv edits:
// the signature line "# GRUB Environment Block", then "name=value" lines
// with backslash and newline escaped by a backslash, padded with '#' to
// the block's size (grub-core/lib/envblk.c). The appliance keeps its boot
// selection there (which slot, whether a trial boot is pending), so GRUB
// can change it before any operating system runs.
//
// GRUB's save_env writes the block into the sectors the file already has,
// so the file must never be recreated or resized: EditFile rewrites it in
// place.
package grubenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Signature starts every block.
const Signature = "# GRUB Environment Block\n"

// BlockSize is the size grub-editenv creates a block with.
const BlockSize = 1024

// maxBlock bounds what Parse accepts: a block is a sector-sized file, a
// larger one is not a grubenv.
const maxBlock = 64 << 10

// Env is a parsed block: variables in the order they appear.
type Env struct {
	size int
	keys []string
	vals map[string]string
}

// New is an empty block of BlockSize bytes.
func New() *Env { return &Env{size: BlockSize, vals: map[string]string{}} }

// Parse reads a block. Lines starting with '#' are padding or comments; a
// line without '=' is an error, as is a block without the signature.
func Parse(b []byte) (*Env, error) {
	if len(b) > maxBlock {
		return nil, fmt.Errorf("grubenv: %d bytes, more than a block (%d)", len(b), maxBlock)
	}
	if !bytes.HasPrefix(b, []byte(Signature)) {
		return nil, errors.New("grubenv: no \"# GRUB Environment Block\" signature")
	}
	e := &Env{size: len(b), vals: map[string]string{}}
	rest := b[len(Signature):]
	for len(rest) > 0 {
		if rest[0] == '#' || rest[0] == '\n' {
			// padding or a comment: up to the next newline
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			rest = rest[i+1:]
			continue
		}
		eq := bytes.IndexByte(rest, '=')
		nl := bytes.IndexByte(rest, '\n')
		if eq < 0 || (nl >= 0 && nl < eq) {
			return nil, fmt.Errorf("grubenv: line %q has no '='", firstLine(rest))
		}
		name := string(rest[:eq])
		if err := checkName(name); err != nil {
			return nil, err
		}
		var val strings.Builder
		i := eq + 1
		for ; i < len(rest) && rest[i] != '\n'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			val.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, fmt.Errorf("grubenv: variable %s is not ended by a newline", name)
		}
		if _, dup := e.vals[name]; !dup {
			e.keys = append(e.keys, name)
		}
		e.vals[name] = val.String() // GRUB keeps the last one too
		rest = rest[i+1:]
	}
	return e, nil
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// checkName holds names to what GRUB's scripts can use: letters, digits
// and '_', not starting with a digit.
func checkName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("grubenv: variable name %q: want 1 to 128 characters", name)
	}
	for i, c := range []byte(name) {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return fmt.Errorf("grubenv: variable name %q: only letters, digits and '_', not starting with a digit", name)
		}
	}
	return nil
}

// Get returns a variable's value.
func (e *Env) Get(name string) (string, bool) {
	v, ok := e.vals[name]
	return v, ok
}

// Keys lists the variables in block order.
func (e *Env) Keys() []string { return append([]string(nil), e.keys...) }

// Set sets a variable; a new one goes last. The block's size is checked by
// Encode.
func (e *Env) Set(name, value string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if _, ok := e.vals[name]; !ok {
		e.keys = append(e.keys, name)
	}
	e.vals[name] = value
	return nil
}

// Unset removes a variable (absent is fine).
func (e *Env) Unset(name string) {
	if _, ok := e.vals[name]; !ok {
		return
	}
	delete(e.vals, name)
	for j, k := range e.keys {
		if k == name {
			e.keys = append(e.keys[:j], e.keys[j+1:]...)
			break
		}
	}
}

// Encode writes the block at its size (BlockSize for New, the parsed
// size for Parse), padded with '#'; variables that do not fit are an
// error, never truncated.
func (e *Env) Encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(Signature)
	for _, k := range e.keys {
		b.WriteString(k)
		b.WriteByte('=')
		for _, c := range []byte(e.vals[k]) {
			if c == '\\' || c == '\n' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteByte('\n')
	}
	if b.Len() > e.size {
		return nil, fmt.Errorf("grubenv: variables need %d bytes, the block holds %d", b.Len(), e.size)
	}
	b.Write(bytes.Repeat([]byte{'#'}, e.size-b.Len()))
	return b.Bytes(), nil
}

// EditFile reads the block at path, lets edit change it, and writes it
// back into the same bytes of the same file (no new file, no new size:
// GRUB's save_env writes through the sectors the file has). An edit or an
// encoding that fails leaves the file as it was.
func EditFile(path string, edit func(*Env) error) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > maxBlock {
		return fmt.Errorf("grubenv: %s is %d bytes, more than a block", path, st.Size())
	}
	old := make([]byte, st.Size())
	if _, err := f.ReadAt(old, 0); err != nil {
		return fmt.Errorf("grubenv: read %s: %w", path, err)
	}
	e, err := Parse(old)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := edit(e); err != nil {
		return err
	}
	b, err := e.Encode()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("grubenv: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("grubenv: sync %s: %w", path, err)
	}
	return f.Close()
}
