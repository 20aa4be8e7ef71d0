package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// checkFile walks a bbolt file with ReadAt before bbolt maps it. bbolt
// trusts every page header and offset it reads: on a damaged file it reads
// past the end of the mapping (a fault, which kills the process) or panics
// in goroutines of its own (the freelist rebuild at open, tx.Check), where
// no recover can reach. So this walk checks what those paths dereference:
// the meta pages, every page header reachable from the root, element
// offsets, key order, sub-bucket headers and the freelist page. A file that
// passes can be walked by bbolt without crashing; record contents are the
// state hash's business (hash.go).
//
// The layout is bbolt's file format version 2 (go.etcd.io/bbolt
// internal/common), native byte order.
func checkFile(r io.ReaderAt, size int64) error {
	if size == 0 {
		return nil // a new file: bbolt writes its first pages
	}
	m, err := readMetas(r, size)
	if err != nil {
		return err
	}
	ps := int64(m.pageSize)
	if m.pgid > uint64(size/ps) {
		return fmt.Errorf("file is %d bytes, shorter than its %d pages of %d bytes (truncated?)", size, m.pgid, ps)
	}
	w := &fileWalker{r: r, ps: ps, hwm: m.pgid, seen: make([]uint64, (m.pgid+63)/64)}
	w.mark(0)
	w.mark(1)
	if m.freelist != noFreelist {
		if err := w.checkFreelist(m.freelist); err != nil {
			return err
		}
	}
	if m.root < 2 || m.root >= m.pgid {
		return fmt.Errorf("root bucket at page %d, outside pages 2 to %d", m.root, m.pgid-1)
	}
	_, err = w.tree(m.root, nil, nil, 0, true)
	return err
}

const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	elementSize      = 16 // branch and leaf elements alike
	bucketHeaderSize = 16 // root page id, sequence
	metaSize         = 64
	metaSumOffset    = 56 // the FNV-64a checksum covers the bytes before it

	flagBranch     = 0x01
	flagLeaf       = 0x02
	flagFreelist   = 0x10
	flagBucketLeaf = 0x01

	noFreelist = ^uint64(0)

	// A B+tree of a few GB is four or five levels deep; buckets nest
	// one level here. Deeper means a loop the page marks did not catch.
	maxTreeDepth = 64
)

var ne = binary.NativeEndian

type boltMeta struct {
	valid    error // nil when magic, version and checksum check out
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

func parseMeta(p []byte) boltMeta {
	b := p[pageHeaderSize : pageHeaderSize+metaSize]
	m := boltMeta{
		pageSize: ne.Uint32(b[8:]),
		root:     ne.Uint64(b[16:]),
		freelist: ne.Uint64(b[32:]),
		pgid:     ne.Uint64(b[40:]),
		txid:     ne.Uint64(b[48:]),
	}
	h := fnv.New64a()
	h.Write(b[:metaSumOffset])
	switch {
	case ne.Uint32(b[0:]) != boltMagic:
		m.valid = errors.New("not a bbolt meta page (bad magic)")
	case ne.Uint32(b[4:]) != boltVersion:
		m.valid = fmt.Errorf("bbolt format version %d, not %d", ne.Uint32(b[4:]), boltVersion)
	case ne.Uint64(b[metaSumOffset:]) != h.Sum64():
		m.valid = errors.New("meta page checksum mismatch")
	case m.pageSize < 1024 || m.pageSize > 1<<24 || m.pageSize&(m.pageSize-1) != 0:
		m.valid = fmt.Errorf("implausible page size %d", m.pageSize)
	case m.pgid < 4:
		m.valid = fmt.Errorf("implausible page count %d", m.pgid)
	}
	return m
}

// readMetas picks the meta page bbolt will use: the valid one with the
// higher transaction ID.
func readMetas(r io.ReaderAt, size int64) (boltMeta, error) {
	buf := make([]byte, pageHeaderSize+metaSize)
	read := func(off int64) (boltMeta, bool) {
		if off+int64(len(buf)) > size {
			return boltMeta{}, false
		}
		if _, err := r.ReadAt(buf, off); err != nil {
			return boltMeta{}, false
		}
		return parseMeta(buf), true
	}
	m0, ok0 := read(0)
	ps := int64(0)
	if ok0 && m0.valid == nil {
		ps = int64(m0.pageSize)
	} else {
		// Page 0 is damaged: find page 1 the way bbolt does, by trying
		// each page size.
		for off := int64(1024); off <= 1<<24 && off < size-1024; off <<= 1 {
			if m, ok := read(off); ok && m.valid == nil && int64(m.pageSize) == off {
				ps = off
				break
			}
		}
	}
	if ps == 0 {
		if !ok0 {
			return boltMeta{}, fmt.Errorf("file of %d bytes holds no meta page", size)
		}
		return boltMeta{}, fmt.Errorf("no valid meta page: page 0: %v", m0.valid)
	}
	m1, ok1 := read(ps)
	if !ok1 {
		return boltMeta{}, fmt.Errorf("file of %d bytes ends before its second meta page", size)
	}
	a, b := m0, m1
	if m1.txid > m0.txid {
		a, b = m1, m0
	}
	switch {
	case a.valid == nil && a.pageSize == uint32(ps):
		return a, nil
	case b.valid == nil && b.pageSize == uint32(ps):
		return b, nil
	}
	return boltMeta{}, fmt.Errorf("no valid meta page: page 0: %v; page 1: %v", m0.valid, m1.valid)
}

type fileWalker struct {
	r    io.ReaderAt
	ps   int64
	hwm  uint64   // pages in use (the meta's page count)
	seen []uint64 // a bit per page already reached
	bufs [][]byte // a page buffer per tree depth, reused
}

func (w *fileWalker) mark(id uint64) bool {
	word, bit := id/64, uint64(1)<<(id%64)
	if w.seen[word]&bit != 0 {
		return false
	}
	w.seen[word] |= bit
	return true
}

// page reads page id with its overflow pages, checking the header, into
// the buffer of depth: a page's parents stay in theirs while it is read.
func (w *fileWalker) page(id uint64, want uint16, depth int) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d: outside pages 2 to %d", id, w.hwm-1)
	}
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, nil)
	}
	p := w.bufs[depth]
	if int64(cap(p)) < w.ps {
		p = make([]byte, w.ps)
	}
	p = p[:w.ps]
	if _, err := w.r.ReadAt(p, int64(id)*w.ps); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := ne.Uint64(p); got != id {
		return nil, fmt.Errorf("page %d: header names page %d", id, got)
	}
	flags, overflow := ne.Uint16(p[8:]), uint64(ne.Uint32(p[12:]))
	if flags&want == 0 || flags&(flags-1) != 0 {
		return nil, fmt.Errorf("page %d: type flags %#x, want %#x", id, flags, want)
	}
	if overflow >= w.hwm-id {
		return nil, fmt.Errorf("page %d: %d overflow pages run past page %d", id, overflow, w.hwm-1)
	}
	for i := uint64(0); i <= overflow; i++ {
		if !w.mark(id + i) {
			return nil, fmt.Errorf("page %d: reached twice (a loop or a shared page)", id+i)
		}
	}
	if overflow > 0 {
		p = append(p, make([]byte, int64(overflow)*w.ps)...)
		if _, err := w.r.ReadAt(p[w.ps:], int64(id+1)*w.ps); err != nil {
			return nil, fmt.Errorf("page %d: %w", id, err)
		}
	}
	w.bufs[depth] = p
	return p, nil
}

func (w *fileWalker) checkFreelist(id uint64) error {
	p, err := w.page(id, flagFreelist, 0)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	start, n := uint64(pageHeaderSize), uint64(ne.Uint16(p[10:]))
	if n == 0xFFFF { // the real count is the first element
		if len(p) < pageHeaderSize+8 {
			return fmt.Errorf("freelist page %d: too short for its count", id)
		}
		n, start = ne.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > (uint64(len(p))-start)/8 {
		return fmt.Errorf("freelist page %d: %d entries do not fit", id, n)
	}
	for i := uint64(0); i < n; i++ {
		if f := ne.Uint64(p[start+8*i:]); f < 2 || f >= w.hwm {
			return fmt.Errorf("freelist page %d: free page %d outside pages 2 to %d", id, f, w.hwm-1)
		}
	}
	return nil
}

// tree checks the subtree at page id, whose keys must lie in [lo, hi) (nil
// for no bound), and returns its largest key, as bbolt's own key order
// check does. The root bucket (top) holds buckets only.
func (w *fileWalker) tree(id uint64, lo, hi []byte, depth int, top bool) ([]byte, error) {
	if depth > maxTreeDepth {
		return nil, fmt.Errorf("page %d: tree deeper than %d levels", id, maxTreeDepth)
	}
	p, err := w.page(id, flagBranch|flagLeaf, depth)
	if err != nil {
		return nil, err
	}
	if ne.Uint16(p[8:]) == flagLeaf {
		return w.leaf(p, id, lo, hi, depth, top)
	}
	n := int(ne.Uint16(p[10:]))
	if n == 0 {
		return nil, fmt.Errorf("branch page %d: no elements", id)
	}
	keys, children := make([][]byte, n), make([]uint64, n)
	for i := range n {
		off, err := element(p, i)
		if err != nil {
			return nil, fmt.Errorf("branch page %d: %w", id, err)
		}
		// pos, ksize, child page id
		if keys[i], err = span(p, off, ne.Uint32(p[off:]), uint64(ne.Uint32(p[off+4:]))); err != nil {
			return nil, fmt.Errorf("branch page %d: element %d: %w", id, i, err)
		}
		children[i] = ne.Uint64(p[off+8:])
	}
	var largest []byte
	prev := lo
	for i := range n {
		if err := keyInOrder(keys[i], i, prev, hi); err != nil {
			return nil, fmt.Errorf("branch page %d: %w", id, err)
		}
		next := hi
		if i < n-1 {
			next = keys[i+1]
		}
		if largest, err = w.tree(children[i], keys[i], next, depth+1, top); err != nil {
			return nil, err
		}
		// A copy: the child's buffer is reused for its next sibling.
		largest = bytes.Clone(largest)
		prev = largest
	}
	return largest, nil
}

// leaf checks a leaf page (or an inline bucket's page) and the buckets it
// holds.
func (w *fileWalker) leaf(p []byte, id uint64, lo, hi []byte, depth int, top bool) ([]byte, error) {
	n := int(ne.Uint16(p[10:]))
	var last []byte
	prev := lo
	for i := range n {
		off, err := element(p, i)
		if err != nil {
			return nil, fmt.Errorf("leaf page %d: %w", id, err)
		}
		// flags, pos, ksize, vsize
		flags, ksize, vsize := ne.Uint32(p[off:]), uint64(ne.Uint32(p[off+8:])), uint64(ne.Uint32(p[off+12:]))
		kv, err := span(p, off, ne.Uint32(p[off+4:]), ksize+vsize)
		if err != nil {
			return nil, fmt.Errorf("leaf page %d: element %d: %w", id, i, err)
		}
		key, val := kv[:ksize], kv[ksize:]
		if err := keyInOrder(key, i, prev, hi); err != nil {
			return nil, fmt.Errorf("leaf page %d: %w", id, err)
		}
		prev, last = key, key
		if top && flags&flagBucketLeaf == 0 {
			return nil, fmt.Errorf("leaf page %d: element %d: %q is a value where only buckets can be", id, i, key)
		}
		if flags&flagBucketLeaf != 0 {
			if err := w.bucket(val, depth+1); err != nil {
				return nil, fmt.Errorf("bucket %q: %w", key, err)
			}
		}
	}
	return last, nil
}

// bucket checks a bucket's header and its tree, which is either a page of
// its own or inline after the header.
func (w *fileWalker) bucket(v []byte, depth int) error {
	if len(v) < bucketHeaderSize {
		return fmt.Errorf("bucket header of %d bytes", len(v))
	}
	if depth > maxTreeDepth {
		return fmt.Errorf("buckets nested deeper than %d", maxTreeDepth)
	}
	if root := ne.Uint64(v); root != 0 {
		_, err := w.tree(root, nil, nil, depth, false)
		return err
	}
	p := v[bucketHeaderSize:]
	if len(p) < pageHeaderSize {
		return fmt.Errorf("inline bucket of %d bytes", len(v))
	}
	if flags := ne.Uint16(p[8:]); flags != flagLeaf {
		return fmt.Errorf("inline bucket: page type flags %#x, want %#x", flags, flagLeaf)
	}
	_, err := w.leaf(p, 0, nil, nil, depth, false)
	return err
}

// element returns the offset of element i, which must lie in the page.
func element(p []byte, i int) (int, error) {
	off := pageHeaderSize + i*elementSize
	if off+elementSize > len(p) {
		return 0, fmt.Errorf("%d elements do not fit in %d bytes", ne.Uint16(p[10:]), len(p))
	}
	return off, nil
}

// span returns the n bytes at pos past the element at off (bbolt stores
// offsets relative to the element), which must lie in the page.
func span(p []byte, off int, pos uint32, n uint64) ([]byte, error) {
	start := uint64(off) + uint64(pos)
	if start > uint64(len(p)) || n > uint64(len(p))-start {
		return nil, fmt.Errorf("%d bytes at offset %d, past the page's %d bytes", n, start, len(p))
	}
	return p[start : start+n], nil
}

// keyInOrder checks key i of a page against the previous key (or the
// subtree's lower bound for i == 0, which it may equal) and the upper bound.
func keyInOrder(key []byte, i int, prev, hi []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("element %d: empty key", i)
	}
	if prev != nil {
		if c := bytes.Compare(prev, key); c > 0 || (c == 0 && i > 0) {
			return fmt.Errorf("element %d: key %x out of order after %x", i, key, prev)
		}
	}
	if hi != nil && bytes.Compare(key, hi) >= 0 {
		return fmt.Errorf("element %d: key %x not below the parent's next key %x", i, key, hi)
	}
	return nil
}
