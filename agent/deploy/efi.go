package deploy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"golang.org/x/sys/unix"
)

// UEFI boot entries (UEFI 2.10 §3.1.3 Load Options, §10.3 device paths).
// An EFI_LOAD_OPTION is: Attributes u32, FilePathListLength u16,
// Description (UTF-16LE, NUL-terminated), FilePathList (device path nodes:
// Type u8, SubType u8, Length u16, data), OptionalData (none here). The
// entry names the loader by a Hard Drive node (type 4 subtype 1, 42 bytes:
// partition number u32, start LBA u64, size in LBAs u64, signature [16]
// (the GPT partition GUID), partition format u8 (2 = GPT), signature type
// u8 (2 = GUID)), a File Path node (type 4 subtype 4: a NUL-terminated
// UTF-16LE path with backslashes) and the End node (0x7F 0xFF, 4 bytes).
// Variables live in efivarfs as files NAME-GUID whose first four bytes are
// the attributes.

const (
	efiGlobalGUID    = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
	loadOptionActive = 0x1
	efiVarNV         = 0x1
	efiVarBS         = 0x2
	efiVarRT         = 0x4
	maxLoadOption    = 64 << 10
)

// LoadOption is a decoded Boot#### variable, as much as the agent needs.
type LoadOption struct {
	Attributes  uint32
	Description string
	Path        []byte // the device path list
}

// EncodeLoadOption builds an active EFI_LOAD_OPTION for a loader file on a
// GPT partition. loader is an ESP path ("\EFI\debian\shimx64.efi").
func EncodeLoadOption(description string, p Partition, loader string) ([]byte, error) {
	guid, err := guidBytes(p.GUID)
	if err != nil {
		return nil, fmt.Errorf("ESP partition GUID: %w", err)
	}
	le := binary.LittleEndian
	var dp bytes.Buffer
	hd := make([]byte, 42)
	hd[0], hd[1] = 4, 1
	le.PutUint16(hd[2:], 42)
	le.PutUint32(hd[4:], uint32(p.Number))
	le.PutUint64(hd[8:], p.FirstLBA)
	le.PutUint64(hd[16:], p.Sectors)
	copy(hd[24:40], guid[:])
	hd[40], hd[41] = 2, 2
	dp.Write(hd)

	path := ucs2z(strings.ReplaceAll(loader, "/", `\`))
	fp := make([]byte, 4, 4+len(path))
	fp[0], fp[1] = 4, 4
	le.PutUint16(fp[2:], uint16(4+len(path)))
	dp.Write(append(fp, path...))
	dp.Write([]byte{0x7F, 0xFF, 4, 0})

	var out bytes.Buffer
	binary.Write(&out, le, uint32(loadOptionActive))
	binary.Write(&out, le, uint16(dp.Len()))
	out.Write(ucs2z(description))
	out.Write(dp.Bytes())
	return out.Bytes(), nil
}

// DecodeLoadOption reads an EFI_LOAD_OPTION.
func DecodeLoadOption(b []byte) (LoadOption, error) {
	if len(b) < 8 || len(b) > maxLoadOption {
		return LoadOption{}, fmt.Errorf("load option of %d bytes", len(b))
	}
	le := binary.LittleEndian
	o := LoadOption{Attributes: le.Uint32(b)}
	n := int(le.Uint16(b[4:]))
	rest := b[6:]
	end := -1
	for i := 0; i+1 < len(rest); i += 2 {
		if rest[i] == 0 && rest[i+1] == 0 {
			end = i
			break
		}
	}
	if end < 0 {
		return o, errors.New("load option: description is not terminated")
	}
	o.Description = utf16z(rest[:end+2])
	rest = rest[end+2:]
	if n > len(rest) {
		return o, fmt.Errorf("load option: device path of %d bytes, %d left", n, len(rest))
	}
	o.Path = rest[:n]
	return o, nil
}

// isNetworkBoot tells a PXE or HTTP boot entry by its device path: a MAC,
// IPv4, IPv6 or URI messaging node (type 3, subtypes 11, 12, 13, 24).
func (o LoadOption) isNetworkBoot() bool {
	p := o.Path
	for len(p) >= 4 {
		typ, sub, n := p[0], p[1], int(binary.LittleEndian.Uint16(p[2:]))
		if typ == 0x7F && sub == 0xFF {
			break
		}
		if typ == 3 && (sub == 11 || sub == 12 || sub == 13 || sub == 24) {
			return true
		}
		if n < 4 || n > len(p) {
			break
		}
		p = p[n:]
	}
	d := strings.ToLower(o.Description)
	return strings.Contains(d, "pxe") || strings.Contains(d, "network") || strings.Contains(d, "http boot")
}

// ParseBootCSV reads shim's BOOTX64.CSV (UTF-16LE, optional BOM; lines
// "loader,label,options,comment") and returns the first line's loader and
// label.
func ParseBootCSV(b []byte) (loader, label string, err error) {
	if len(b) > 64<<10 {
		return "", "", fmt.Errorf("BOOTX64.CSV: %d bytes", len(b))
	}
	b = bytes.TrimPrefix(b, []byte{0xFF, 0xFE})
	if len(b)%2 == 1 {
		b = b[:len(b)-1]
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	for _, line := range strings.Split(string(utf16.Decode(u)), "\n") {
		line = strings.TrimSpace(strings.TrimRight(line, "\r\x00"))
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		loader = strings.TrimSpace(f[0])
		if len(f) > 1 {
			label = strings.TrimSpace(f[1])
		}
		if loader == "" || strings.ContainsAny(loader, `/\`) || strings.Contains(loader, "..") {
			return "", "", fmt.Errorf("BOOTX64.CSV: loader %q is not a file name", clip(loader))
		}
		return loader, label, nil
	}
	return "", "", errors.New("BOOTX64.CSV: empty")
}

// FindLoader picks the boot loader on an ESP: the shim a BOOTX64.CSV names,
// else the removable-media path EFI/BOOT/BOOTX64.EFI, else a distribution's
// grubx64.efi. It returns the path with backslashes.
func FindLoader(esp io.ReaderAt, size int64) (string, error) {
	f, err := openFAT(esp, size)
	if err != nil {
		return "", err
	}
	ents, err := f.list("EFI")
	if err != nil {
		return "", fmt.Errorf("ESP: %w", err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	for _, d := range ents {
		if !d.dir || strings.EqualFold(d.name, "BOOT") || d.name == "." || d.name == ".." {
			continue
		}
		csv, err := f.readFile("EFI/"+d.name+"/BOOTX64.CSV", 64<<10)
		if err != nil {
			continue
		}
		loader, _, err := ParseBootCSV(csv)
		if err != nil {
			return "", err
		}
		if e, err := f.lookup("EFI/" + d.name + "/" + loader); err == nil && !e.dir {
			return `\EFI\` + d.name + `\` + e.name, nil
		}
	}
	if e, err := f.lookup("EFI/BOOT/BOOTX64.EFI"); err == nil && !e.dir {
		return `\EFI\BOOT\BOOTX64.EFI`, nil
	}
	for _, d := range ents {
		if !d.dir || d.name == "." || d.name == ".." {
			continue
		}
		if e, err := f.lookup("EFI/" + d.name + "/grubx64.efi"); err == nil && !e.dir {
			return `\EFI\` + d.name + `\` + e.name, nil
		}
	}
	return "", errors.New("ESP has no boot loader: no BOOTX64.CSV, EFI/BOOT/BOOTX64.EFI or EFI/*/grubx64.efi")
}

// efiVars is the efivarfs directory.
type efiVars struct {
	dir string
	log *slog.Logger
}

func (v efiVars) path(name string) string {
	return filepath.Join(v.dir, name+"-"+efiGlobalGUID)
}

func (v efiVars) read(name string) (uint32, []byte, error) {
	b, err := os.ReadFile(v.path(name))
	if err != nil {
		return 0, nil, err
	}
	if len(b) < 4 {
		return 0, nil, fmt.Errorf("efivar %s: %d bytes", name, len(b))
	}
	return binary.LittleEndian.Uint32(b), b[4:], nil
}

// write sets a variable NV+BS+RT. efivarfs takes a variable in one write;
// its files are immutable until the flag is cleared (the kernel's guard
// against rm -rf /).
func (v efiVars) write(name string, data []byte) error {
	p := v.path(name)
	clearImmutable(p)
	flags := os.O_WRONLY | os.O_CREATE
	if !onEfivarfs(v.dir) {
		flags |= os.O_TRUNC // a plain directory (tests): efivarfs replaces on write
	}
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		return fmt.Errorf("efivar %s: %w", name, err)
	}
	buf := binary.LittleEndian.AppendUint32(nil, efiVarNV|efiVarBS|efiVarRT)
	if _, err := f.Write(append(buf, data...)); err != nil {
		f.Close()
		return fmt.Errorf("efivar %s: %w", name, err)
	}
	return f.Close()
}

func (v efiVars) remove(name string) error {
	p := v.path(name)
	clearImmutable(p)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("efivar %s: %w", name, err)
	}
	return nil
}

func onEfivarfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && uint32(st.Type) == unix.EFIVARFS_MAGIC
}

// clearImmutable drops FS_IMMUTABLE_FL, where the file system has it.
func clearImmutable(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsImmutableFL == 0 {
		return
	}
	_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags&^fsImmutableFL))
}

// SetBootEntry writes a Boot#### entry for loader on the ESP p with the
// given description into the efivarfs directory dir: entries with the same
// description are removed first, and BootOrder becomes the network boot
// entries, then the new one, then the rest; BootNext is the new one, for
// the next boot only. It returns the entry's number.
func SetBootEntry(dir, description string, p Partition, loader string, log *slog.Logger) (uint16, error) {
	v := efiVars{dir: dir, log: log}
	opt, err := EncodeLoadOption(description, p, loader)
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("efivars: %w", err)
	}
	existing := map[uint16]LoadOption{}
	for _, e := range ents {
		name, guid, ok := strings.Cut(e.Name(), "-")
		if !ok || guid != efiGlobalGUID || len(name) != 8 || !strings.HasPrefix(name, "Boot") {
			continue
		}
		n, err := strconv.ParseUint(name[4:], 16, 16)
		if err != nil {
			continue
		}
		_, data, err := v.read(name)
		if err != nil {
			continue
		}
		o, err := DecodeLoadOption(data)
		if err != nil {
			log.Warn("unreadable UEFI boot entry left alone", "entry", name, "err", err)
			continue
		}
		existing[uint16(n)] = o
	}
	var removed []uint16
	for n, o := range existing {
		if o.Description == description {
			if err := v.remove(fmt.Sprintf("Boot%04X", n)); err != nil {
				return 0, err
			}
			removed = append(removed, n)
			delete(existing, n)
		}
	}
	var num uint16
	for ; ; num++ {
		if _, used := existing[num]; !used {
			break
		}
		if num == 0xFFFF {
			return 0, errors.New("efivars: no free Boot#### number")
		}
	}
	if err := v.write(fmt.Sprintf("Boot%04X", num), opt); err != nil {
		return 0, err
	}
	var order []uint16
	if _, data, err := v.read("BootOrder"); err == nil {
		for i := 0; i+1 < len(data); i += 2 {
			order = append(order, binary.LittleEndian.Uint16(data[i:]))
		}
	}
	var net, rest []uint16
	for _, n := range order {
		if n == num || slices.Contains(removed, n) {
			continue
		}
		if o, ok := existing[n]; ok && o.isNetworkBoot() {
			net = append(net, n)
		} else {
			rest = append(rest, n)
		}
	}
	newOrder := append(append(net, num), rest...)
	var ob []byte
	for _, n := range newOrder {
		ob = binary.LittleEndian.AppendUint16(ob, n)
	}
	if err := v.write("BootOrder", ob); err != nil {
		return 0, err
	}
	// BootNext sends the reboot that follows straight to the installed
	// loader: with network boot first in BootOrder, a UEFI firmware would
	// otherwise try every network entry (PXE and HTTP, IPv4 and IPv6) in
	// turn, each answered "boot from your disk", before it reaches ours.
	// Later boots keep the network first, so a redeploy needs no hands.
	if err := v.write("BootNext", binary.LittleEndian.AppendUint16(nil, num)); err != nil {
		return 0, err
	}
	log.Info("UEFI boot entry", "entry", fmt.Sprintf("Boot%04X", num), "loader", loader, "removed", len(removed), "order", fmtOrder(newOrder))
	return num, nil
}

func fmtOrder(o []uint16) string {
	var s []string
	for _, n := range o {
		s = append(s, fmt.Sprintf("%04X", n))
	}
	return strings.Join(s, ",")
}

// ucs2z encodes s as NUL-terminated UTF-16LE.
func ucs2z(s string) []byte {
	var b []byte
	for _, c := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return append(b, 0, 0)
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h (chattr +i).
const fsImmutableFL = 0x10
