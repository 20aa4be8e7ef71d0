package deploy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// LVM2 on-disk format, as lib/format_text/layout.h and lib/label/label.h in
// the LVM2 sources describe it. Within the first four 512-byte sectors of a
// physical volume, a label: "LABELONE" 0, its sector 8, CRC 16 (of bytes
// 20..512), offset of the PV header 20, type "LVM2 001" 24. The PV header:
// the PV's UUID (32 characters), its size, then two lists of {offset, size}
// (u64 each, ended by a zero pair): data areas, then metadata areas. A
// metadata area begins with a 512-byte header: CRC 0 (of bytes 4..512), magic
// " LVM2 x[5A%r0N*>" 4, version 20, its start 24 and size 32, then raw
// locations {offset, size, CRC, flags} (ended by zeros) of the text metadata
// in a circular buffer after the header. All integers are little-endian.
// The CRC is CRC-32 (IEEE) with the initial value 0xf597a6cf and no final
// inversion.

// LV is a logical volume the agent can mount: a linear one, all of it on
// this physical volume in one run of extents.
type LV struct {
	VG, Name string
	Offset   int64 // bytes from the start of the physical volume
	Size     int64
}

const (
	lvmSector     = 512
	lvmInitialCRC = 0xf597a6cf
	lvmMDAMagic   = " LVM2 x[5A%r0N*>"
	maxLVMText    = 4 << 20 // metadata text read from a PV
	maxLVMDepth   = 32
)

// ErrNotLVM: no LVM2 label in the first sectors.
var ErrNotLVM = errors.New("not an LVM2 physical volume")

func lvmCRC(b []byte) uint32 {
	return ^crc32.Update(^uint32(lvmInitialCRC), crc32.IEEETable, b)
}

// IsLVM reports whether the first sectors hold an LVM2 label.
func IsLVM(head []byte) bool {
	for s := 0; s < 4 && (s+1)*lvmSector <= len(head); s++ {
		if bytes.HasPrefix(head[s*lvmSector:], []byte("LABELONE")) {
			return true
		}
	}
	return false
}

// ReadLVM reads the LVM2 label and text metadata of the physical volume r
// (a partition) of size bytes, and returns its linear logical volumes, and
// the names of those it cannot mount with why.
func ReadLVM(r io.ReaderAt, size int64) ([]LV, []string, error) {
	head := make([]byte, 4*lvmSector)
	if _, err := r.ReadAt(head, 0); err != nil {
		return nil, nil, fmt.Errorf("read LVM label: %w", err)
	}
	le := binary.LittleEndian
	var label []byte
	for s := 0; s < 4; s++ {
		b := head[s*lvmSector : (s+1)*lvmSector]
		if bytes.HasPrefix(b, []byte("LABELONE")) {
			label = b
			break
		}
	}
	if label == nil {
		return nil, nil, ErrNotLVM
	}
	if lvmCRC(label[20:]) != le.Uint32(label[16:]) {
		return nil, nil, errors.New("LVM label: CRC mismatch")
	}
	if string(label[24:32]) != "LVM2 001" {
		return nil, nil, fmt.Errorf("LVM label: type %q, want LVM2 001", label[24:32])
	}
	off := int(le.Uint32(label[20:]))
	if off < 32 || off+32+8 > lvmSector {
		return nil, nil, fmt.Errorf("LVM label: PV header at %d", off)
	}
	pvh := label[off:]
	pvUUID := string(pvh[:32])
	// Data areas, then metadata areas, each list ended by a zero pair.
	p, list := 40, 0
	var mdas [][2]uint64
	for p+16 <= len(pvh) && list < 2 {
		o, s := le.Uint64(pvh[p:]), le.Uint64(pvh[p+8:])
		p += 16
		if o == 0 && s == 0 {
			list++
			continue
		}
		if list == 1 {
			mdas = append(mdas, [2]uint64{o, s})
		}
	}
	if len(mdas) == 0 {
		return nil, nil, errors.New("LVM PV has no metadata area")
	}
	var lastErr error
	for _, m := range mdas {
		text, err := readMDA(r, size, m[0], m[1])
		if err != nil {
			lastErr = err
			continue
		}
		lvs, skipped, err := lvmVolumes(text, pvUUID)
		if err != nil {
			lastErr = err
			continue
		}
		var in []LV
		for _, lv := range lvs {
			if lv.Offset < 0 || lv.Size <= 0 || lv.Offset > size || lv.Size > size-lv.Offset {
				skipped = append(skipped, fmt.Sprintf("%s/%s: extends past the physical volume", lv.VG, lv.Name))
				continue
			}
			in = append(in, lv)
		}
		return in, skipped, nil
	}
	return nil, nil, lastErr
}

// readMDA reads the current text metadata of one metadata area.
func readMDA(r io.ReaderAt, size int64, start, mdaSize uint64) ([]byte, error) {
	le := binary.LittleEndian
	if mdaSize < 2*lvmSector || start > uint64(size) || mdaSize > uint64(size)-start {
		return nil, fmt.Errorf("LVM metadata area at %d (%d bytes) is outside the PV", start, mdaSize)
	}
	h := make([]byte, lvmSector)
	if _, err := r.ReadAt(h, int64(start)); err != nil {
		return nil, fmt.Errorf("read LVM metadata header: %w", err)
	}
	if lvmCRC(h[4:]) != le.Uint32(h[0:]) {
		return nil, errors.New("LVM metadata header: CRC mismatch")
	}
	if string(h[4:20]) != lvmMDAMagic {
		return nil, errors.New("LVM metadata header: bad magic")
	}
	o, n, sum := le.Uint64(h[40:]), le.Uint64(h[48:]), le.Uint32(h[56:])
	if n == 0 {
		return nil, errors.New("LVM metadata area is empty")
	}
	if n > maxLVMText || o < lvmSector || o >= mdaSize || n > mdaSize-lvmSector {
		return nil, fmt.Errorf("LVM metadata at %d, %d bytes: outside its area of %d", o, n, mdaSize)
	}
	text := make([]byte, n)
	first := min(n, mdaSize-o)
	if _, err := r.ReadAt(text[:first], int64(start+o)); err != nil {
		return nil, fmt.Errorf("read LVM metadata: %w", err)
	}
	if first < n { // the circular buffer wrapped
		if _, err := r.ReadAt(text[first:], int64(start+lvmSector)); err != nil {
			return nil, fmt.Errorf("read LVM metadata: %w", err)
		}
	}
	if lvmCRC(text) != sum {
		return nil, errors.New("LVM metadata text: CRC mismatch")
	}
	return bytes.TrimRight(text, "\x00"), nil
}

// lvmVolumes finds, in the VG metadata text, the linear LVs lying on the
// PV with UUID pvUUID (32 characters, no dashes).
func lvmVolumes(text []byte, pvUUID string) ([]LV, []string, error) {
	root, err := parseLVMText(text)
	if err != nil {
		return nil, nil, err
	}
	var vg *lvmSection
	var vgName string
	for _, name := range root.order {
		if s := root.sections[name]; s != nil && s.sections["physical_volumes"] != nil {
			vg, vgName = s, name
			break
		}
	}
	if vg == nil {
		return nil, nil, errors.New("LVM metadata names no volume group")
	}
	extent, ok := vg.int("extent_size")
	if !ok || extent <= 0 || extent > 1<<32 {
		return nil, nil, fmt.Errorf("LVM VG %s: no extent_size", vgName)
	}
	extentBytes := extent * 512
	pvs := vg.sections["physical_volumes"]
	var pvKey string
	var peStart int64
	for _, k := range pvs.order {
		pv := pvs.sections[k]
		if pv == nil {
			continue
		}
		if id, _ := pv.str("id"); strings.ReplaceAll(id, "-", "") == pvUUID {
			pvKey = k
			peStart, _ = pv.int("pe_start")
			if peStart < 0 || peStart > 1<<40 {
				return nil, nil, fmt.Errorf("LVM VG %s: pe_start %d", vgName, peStart)
			}
			break
		}
	}
	if pvKey == "" {
		return nil, nil, fmt.Errorf("LVM VG %s does not list this PV (%s)", vgName, pvUUID)
	}
	var out []LV
	var skipped []string
	lvs := vg.sections["logical_volumes"]
	if lvs == nil {
		return nil, nil, nil
	}
	for _, name := range lvs.order {
		lv := lvs.sections[name]
		if lv == nil {
			continue
		}
		var segs []*lvmSection
		for _, k := range lv.order {
			if strings.HasPrefix(k, "segment") && lv.sections[k] != nil {
				segs = append(segs, lv.sections[k])
			}
		}
		start, size, why := linearRun(segs, pvKey)
		if why != "" {
			skipped = append(skipped, fmt.Sprintf("%s/%s: %s", vgName, name, why))
			continue
		}
		out = append(out, LV{VG: vgName, Name: name, Offset: (peStart + start*extent) * 512, Size: size * extentBytes})
	}
	return out, skipped, nil
}

// linearRun checks that an LV's segments are linear (striped, one stripe)
// on pv and follow each other on it, and returns its first physical extent
// and its length in extents.
func linearRun(segs []*lvmSection, pv string) (first, count int64, why string) {
	if len(segs) == 0 {
		return 0, 0, "no segments"
	}
	next := int64(-1)
	var le int64 // logical extents so far
	for _, s := range segs {
		typ, _ := s.str("type")
		sc, _ := s.int("stripe_count")
		if typ != "striped" || sc != 1 {
			return 0, 0, fmt.Sprintf("a %s segment with %d stripes: only linear volumes can be mounted without device-mapper", typ, sc)
		}
		startExt, _ := s.int("start_extent")
		n, _ := s.int("extent_count")
		stripes := s.lists["stripes"]
		if len(stripes) != 2 || stripes[0].s != pv || !stripes[1].isNum {
			return 0, 0, "a segment on another physical volume"
		}
		if startExt != le || n <= 0 || n > 1<<40 || stripes[1].n < 0 || stripes[1].n > 1<<40 {
			return 0, 0, "segments out of order"
		}
		pe := stripes[1].n
		if next >= 0 && pe != next {
			return 0, 0, "segments not contiguous on the physical volume"
		}
		if next < 0 {
			first = pe
		}
		next, le = pe+n, le+n
	}
	return first, le, ""
}

// The LVM text format (lib/config/config.c): sections `name { … }`, values
// `key = "string" | number | [list, …]`, '#' comments.
type lvmSection struct {
	order    []string
	sections map[string]*lvmSection
	values   map[string]lvmValue
	lists    map[string][]lvmValue
}

type lvmValue struct {
	s     string
	n     int64
	isNum bool
}

func (s *lvmSection) str(k string) (string, bool) {
	v, ok := s.values[k]
	return v.s, ok && !v.isNum
}

func (s *lvmSection) int(k string) (int64, bool) {
	v, ok := s.values[k]
	return v.n, ok && v.isNum
}

func newSection() *lvmSection {
	return &lvmSection{sections: map[string]*lvmSection{}, values: map[string]lvmValue{}, lists: map[string][]lvmValue{}}
}

type lvmLexer struct {
	b []byte
	i int
}

// next returns the next token: a punctuation byte, a "quoted string" (with
// its quotes), or a word. "" at the end.
func (l *lvmLexer) next() (string, error) {
	for l.i < len(l.b) {
		c := l.b[l.i]
		switch {
		case c == '#':
			for l.i < len(l.b) && l.b[l.i] != '\n' {
				l.i++
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			l.i++
		case strings.IndexByte("{}[]=,", c) >= 0:
			l.i++
			return string(c), nil
		case c == '"':
			var sb strings.Builder
			sb.WriteByte('"')
			l.i++
			for {
				if l.i >= len(l.b) {
					return "", errors.New("LVM metadata: unterminated string")
				}
				c := l.b[l.i]
				l.i++
				if c == '\\' && l.i < len(l.b) {
					sb.WriteByte(l.b[l.i])
					l.i++
					continue
				}
				if c == '"' {
					return sb.String(), nil
				}
				sb.WriteByte(c)
			}
		default:
			j := l.i
			for l.i < len(l.b) && strings.IndexByte("{}[]=,#\" \t\r\n", l.b[l.i]) < 0 {
				l.i++
			}
			return string(l.b[j:l.i]), nil
		}
	}
	return "", nil
}

func parseLVMText(text []byte) (*lvmSection, error) {
	l := &lvmLexer{b: text}
	root := newSection()
	if err := parseLVMBody(l, root, 0, true); err != nil {
		return nil, err
	}
	return root, nil
}

func parseLVMBody(l *lvmLexer, s *lvmSection, depth int, top bool) error {
	if depth > maxLVMDepth {
		return errors.New("LVM metadata: sections nested too deep")
	}
	for {
		name, err := l.next()
		if err != nil {
			return err
		}
		switch {
		case name == "" && top:
			return nil
		case name == "":
			return errors.New("LVM metadata: a section is not closed")
		case name == "}" && !top:
			return nil
		case !isLVMWord(name):
			return fmt.Errorf("LVM metadata: unexpected %q", clip(name))
		}
		op, err := l.next()
		if err != nil {
			return err
		}
		switch op {
		case "{":
			sub := newSection()
			if err := parseLVMBody(l, sub, depth+1, false); err != nil {
				return err
			}
			if _, dup := s.sections[name]; !dup {
				s.order = append(s.order, name)
			}
			s.sections[name] = sub
		case "=":
			tok, err := l.next()
			if err != nil {
				return err
			}
			if tok == "[" {
				var list []lvmValue
				for {
					t, err := l.next()
					if err != nil {
						return err
					}
					if t == "]" {
						break
					}
					if t == "," {
						continue
					}
					v, err := lvmScalar(t)
					if err != nil {
						return err
					}
					list = append(list, v)
				}
				s.lists[name] = list
				continue
			}
			v, err := lvmScalar(tok)
			if err != nil {
				return err
			}
			s.values[name] = v
		default:
			return fmt.Errorf("LVM metadata: %q after %q, want = or {", clip(op), clip(name))
		}
	}
}

func isLVMWord(t string) bool {
	return t != "" && strings.IndexByte("{}[]=,\"", t[0]) < 0
}

func lvmScalar(t string) (lvmValue, error) {
	if strings.HasPrefix(t, `"`) {
		return lvmValue{s: t[1:]}, nil
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return lvmValue{n: n, isNum: true}, nil
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return lvmValue{s: t}, nil
	}
	return lvmValue{}, fmt.Errorf("LVM metadata: value %q is neither a string nor a number", clip(t))
}
