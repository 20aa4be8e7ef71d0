// Package initramfs writes the kernel's initramfs format (a gzip-compressed
// newc cpio archive) reproducibly: the commissioning image and the deploy
// test image are both made with it.
package initramfs

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// Entry is one file of the initramfs.
type Entry struct {
	Name  string // path without a leading slash: "init", "lib/modules/…"
	Mode  uint32 // permission bits
	Type  uint32 // TypeDir, TypeFile, TypeChar
	Data  []byte
	Major uint32 // device numbers, for TypeChar
	Minor uint32
}

// File types in the newc mode field (the S_IF* bits).
const (
	TypeFile uint32 = 0o100000
	TypeDir  uint32 = 0o040000
	TypeChar uint32 = 0o020000
)

// Write writes entries as a gzip-compressed newc cpio archive
// (the format the kernel unpacks, Documentation/driver-api/early-userspace/
// buffer-format.rst) that depends on nothing but the entries: every parent
// directory is added, entries are sorted by name, inode numbers count up,
// owners are root and every time stamp is mtime; the gzip header carries no
// name and no time.
func Write(w io.Writer, entries []Entry, mtime int64) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := WriteNewc(zw, entries, mtime); err != nil {
		return err
	}
	return zw.Close()
}

// WriteNewc writes entries as Write does, without the compression: for a
// caller that compresses the archive itself (the appliance ISO's initramfs
// is zstd, which the kernel unpacks faster than gzip).
func WriteNewc(w io.Writer, entries []Entry, mtime int64) error {
	all := map[string]Entry{}
	implied := map[string]bool{} // directories added as parents
	for _, e := range entries {
		e.Name = strings.TrimPrefix(path.Clean("/"+e.Name), "/")
		if e.Name == "" {
			continue
		}
		if _, dup := all[e.Name]; dup && !(implied[e.Name] && e.Type == TypeDir) {
			return fmt.Errorf("initramfs: %s twice", e.Name)
		}
		all[e.Name], implied[e.Name] = e, false
		for d := path.Dir(e.Name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d], implied[d] = Entry{Name: d, Mode: 0o755, Type: TypeDir}, true
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)

	bw := bufio.NewWriterSize(w, 1<<20)
	off := int64(0)
	write := func(b []byte) error {
		n, err := bw.Write(b)
		off += int64(n)
		return err
	}
	pad := func() error {
		if r := off % 4; r != 0 {
			return write(make([]byte, 4-r))
		}
		return nil
	}
	header := func(ino int, e Entry, nlink int) error {
		h := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, e.Type|e.Mode, 0, 0, nlink, mtime, len(e.Data), 0, 0, e.Major, e.Minor, len(e.Name)+1, 0)
		if err := write([]byte(h + e.Name + "\x00")); err != nil {
			return err
		}
		if err := pad(); err != nil {
			return err
		}
		if err := write(e.Data); err != nil {
			return err
		}
		return pad()
	}
	for i, n := range names {
		e := all[n]
		nlink := 1
		if e.Type == TypeDir {
			nlink = 2
		}
		if err := header(i+1, e, nlink); err != nil {
			return err
		}
	}
	if err := header(0, Entry{Name: "TRAILER!!!"}, 1); err != nil {
		return err
	}
	return bw.Flush()
}
