package deployimage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rollcall/rollcall/lab/deployimage/gpt"
)

// GRUB modules built into both loaders: enough to find the root by UUID on
// a GPT disk, read ext4 or XFS and boot Linux, with no module loaded from
// disk afterwards.
var grubModules = []string{"part_gpt", "part_msdos", "ext2", "xfs", "fat", "search", "search_fs_uuid", "search_label",
	"normal", "configfile", "linux", "echo", "test", "serial", "terminal", "gzio", "sleep"}

// earlyConfig is the configuration built into the loaders: find the root
// and read its grub.cfg, as a distribution's grub does.
func earlyConfig(rootUUID string) string {
	return fmt.Sprintf("search --no-floppy --fs-uuid --set=root %s\nset prefix=($root)/boot/grub\nconfigfile ($root)/boot/grub/grub.cfg\n", rootUUID)
}

// grubConfig is the root's /boot/grub/grub.cfg: one entry, no menu, GRUB on
// the serial line under BIOS (OVMF mirrors its own console there).
func grubConfig(rootUUID, title, kernel, initrd, cmdline string) string {
	return fmt.Sprintf(`set default=0
set timeout=0
if [ "$grub_platform" = "pc" ]; then
	serial --unit=0 --speed=115200
	terminal_input serial console
	terminal_output serial console
fi
menuentry %q {
	search --no-floppy --fs-uuid --set=root %s
	echo "rollcall deploy image: loading %s"
	linux %s %s
	initrd %s
}
`, title, rootUUID, kernel, kernel, cmdline, initrd)
}

// grubImages makes the BIOS core image and the EFI loader.
func (b *builder) grubImages(rootUUID string) (core, efi string, err error) {
	early := filepath.Join(b.work, "early.cfg")
	if err := os.WriteFile(early, []byte(earlyConfig(rootUUID)), 0o644); err != nil {
		return "", "", err
	}
	core = filepath.Join(b.work, "core.img")
	args := append([]string{"-O", "i386-pc", "-o", core, "-c", early, "-p", "/boot/grub", "biosdisk"}, grubModules...)
	if err := b.run("", "grub-mkimage", args...); err != nil {
		return "", "", err
	}
	efi = filepath.Join(b.work, "BOOTX64.EFI")
	mods := strings.Join(append(grubModules, "efi_gop"), " ") // a video mode for Linux's EFI stub
	if err := b.run(b.work, "grub-mkstandalone", "-O", "x86_64-efi", "-o", efi,
		"--modules="+mods, "--install-modules="+mods, "--locales=", "--fonts=", "--themes=",
		"boot/grub/grub.cfg="+early); err != nil {
		return "", "", err
	}
	return core, efi, nil
}

// makeESP formats a FAT ESP image holding the EFI loader at the removable
// media path and where Debian installs it.
func (b *builder) makeESP(path, efi, key string) error {
	if err := truncate(path, espSectors*Sector); err != nil {
		return err
	}
	volID := uuid(key, "esp")[:8]
	if err := b.run("", "mkfs.vfat", "-n", "ESP", "-i", volID, path); err != nil {
		return err
	}
	if err := b.run("", "mmd", "-i", path, "::/EFI", "::/EFI/BOOT", "::/EFI/debian"); err != nil {
		return err
	}
	for _, dst := range []string{"::/EFI/BOOT/BOOTX64.EFI", "::/EFI/debian/grubx64.efi"} {
		if err := b.run("", "mcopy", "-i", path, efi, dst); err != nil {
			return err
		}
	}
	return nil
}

// makeExt4 formats path (size bytes) as ext4 labelled root, filled from
// dir, without mounting it.
func (b *builder) makeExt4(path, dir string, size int64, rootUUID string) error {
	if err := truncate(path, size); err != nil {
		return err
	}
	// orphan_file and metadata_csum_seed are beyond GRUB 2.06: keep them off
	// whatever mke2fs.conf says.
	return b.run("", "mkfs.ext4", "-F", "-q", "-L", "root", "-U", rootUUID, "-E", "root_owner=0:0,hash_seed="+rootUUID,
		"-O", "^orphan_file,^metadata_csum_seed", "-d", dir, path)
}

// makeXFS formats path as XFS labelled root, filled from dir through a
// mkfs.xfs prototype file (mkfs.xfs has no -d DIR).
func (b *builder) makeXFS(path, dir string, size int64, rootUUID string) error {
	if err := truncate(path, size); err != nil {
		return err
	}
	proto := filepath.Join(b.work, "xfs.proto")
	p, err := xfsProto(dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(proto, []byte(p), 0o644); err != nil {
		return err
	}
	// bigtime and inobtcount are beyond GRUB 2.06.
	return b.run("", "mkfs.xfs", "-q", "-f", "-L", "root", "-m", "uuid="+rootUUID+",bigtime=0,inobtcount=0", "-p", proto, path)
}

// xfsProto writes the prototype (xfsprogs' mkfs.xfs(8), "-p") that
// recreates dir: directories, regular files and symbolic links, owned by
// root.
func xfsProto(dir string) (string, error) {
	var out strings.Builder
	out.WriteString("/dev/null\n0 0\nd--755 0 0\n")
	var walk func(d string, depth int) error
	walk = func(d string, depth int) error {
		ents, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		ind := strings.Repeat(" ", depth)
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			if strings.ContainsAny(e.Name(), " \t\n") {
				return fmt.Errorf("%s: a name with a blank cannot be in an XFS prototype", p)
			}
			info, err := os.Lstat(p)
			if err != nil {
				return err
			}
			perm := fmt.Sprintf("%03o", info.Mode().Perm())
			switch {
			case info.IsDir():
				fmt.Fprintf(&out, "%s%s d--%s 0 0\n", ind, e.Name(), perm)
				if err := walk(p, depth+1); err != nil {
					return err
				}
				fmt.Fprintf(&out, "%s$\n", ind)
			case info.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				fmt.Fprintf(&out, "%s%s l--%s 0 0 %s\n", ind, e.Name(), perm, target)
			case info.Mode().IsRegular():
				fmt.Fprintf(&out, "%s%s ---%s 0 0 %s\n", ind, e.Name(), perm, p)
			default:
				return fmt.Errorf("%s: only directories, files and links go into the XFS prototype", p)
			}
		}
		return nil
	}
	if err := walk(dir, 1); err != nil {
		return "", err
	}
	out.WriteString("$\n")
	return out.String(), nil
}

// assemble writes the disk: the GPT (sgdisk), the ESP and root images at
// their partitions, GRUB's core image in the BIOS boot partition and its
// boot.img in the protective MBR, as grub-bios-setup would.
func (b *builder) assemble(out string, key, rootType, core, esp, root string) error {
	size := b.opts.Size
	if err := truncate(out, size); err != nil {
		return err
	}
	lastRoot := size/Sector - gptTailRoom
	if err := b.run("", "sgdisk", "-U", uuid(key, "disk"),
		"-n", fmt.Sprintf("1:%d:%d", biosStart, biosStart+biosSectors-1), "-t", "1:ef02", "-c", "1:BIOS boot", "-u", "1:"+uuid(key, "part1"),
		"-n", fmt.Sprintf("2:%d:%d", espStart, espStart+espSectors-1), "-t", "2:ef00", "-c", "2:EFI system", "-u", "2:"+uuid(key, "part2"),
		"-n", fmt.Sprintf("3:%d:%d", rootStart, lastRoot), "-t", "3:"+rootType, "-c", "3:root", "-u", "3:"+uuid(key, "part3"),
		out); err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := os.Stat(root); err != nil {
		return err
	} else if st.Size() != (lastRoot-rootStart+1)*Sector {
		return fmt.Errorf("root image is %d bytes, the partition %d", st.Size(), (lastRoot-rootStart+1)*Sector)
	}
	for _, part := range []struct {
		file  string
		start int64
	}{{esp, espStart}, {root, rootStart}} {
		if err := copySparse(f, part.start*Sector, part.file); err != nil {
			return err
		}
	}
	if err := writeBIOSBoot(f, core); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	// Read back what was written, as a machine's init will.
	tab, err := gpt.Read(f, Sector)
	if err != nil {
		return err
	}
	if r := tab.ByType(rootType); len(r) != 1 || r[0].Name != "root" || r[0].FirstLBA != rootStart {
		return fmt.Errorf("the written table has no root partition at %d: %+v", rootStart, tab.Partitions)
	}
	return f.Close()
}

// Offsets in GRUB 2.06's boot.img (grub-core/boot/i386/pc/boot.S) and
// diskboot.img, as grub-bios-setup (util/setup.c) fills them.
const (
	bootBPBStart    = 0x03  // the BPB area, kept from the disk
	bootBPBEnd      = 0x5a  //
	bootKernelLBA   = 0x5c  // uint64: the first sector of core.img
	bootDrive       = 0x64  // 0xff: use the drive the BIOS booted
	bootDriveCheck  = 0x66  // a jmp, nop'ed for hard disks
	bootNTMagic     = 0x1b8 // from here to 0x1fe: the disk's partition table, kept
	bootPartEnd     = 0x1fe //
	blocklistEntry  = 12    // struct grub_boot_blocklist: start u64, len u16, segment u16
	coreLoadSegment = 0x820 // GRUB_BOOT_I386_PC_KERNEL_SEG + 0x20
)

// writeBIOSBoot puts core.img into the BIOS boot partition with the
// blocklist of its first sector (diskboot.img) naming the rest, and
// boot.img into sector 0 pointing at it.
func writeBIOSBoot(f *os.File, coreFile string) error {
	core, err := os.ReadFile(coreFile)
	if err != nil {
		return err
	}
	if len(core) < 2*Sector {
		return fmt.Errorf("core.img is %d bytes: too small", len(core))
	}
	nsec := (len(core) + Sector - 1) / Sector
	if nsec > biosSectors {
		return fmt.Errorf("core.img is %d sectors, the BIOS boot partition %d", nsec, biosSectors)
	}
	core = append(core, make([]byte, nsec*Sector-len(core))...)
	le := binary.LittleEndian
	first := core[Sector-blocklistEntry : Sector]
	le.PutUint64(first[0:8], biosStart+1)
	le.PutUint16(first[8:10], uint16(nsec-1))
	le.PutUint16(first[10:12], coreLoadSegment)
	clear(core[Sector-2*blocklistEntry : Sector-blocklistEntry]) // the list's terminator
	if _, err := f.WriteAt(core, biosStart*Sector); err != nil {
		return err
	}

	bootImg, err := os.ReadFile("/usr/lib/grub/i386-pc/boot.img")
	if err != nil {
		return fmt.Errorf("GRUB's boot.img (Debian package grub-pc-bin): %w", err)
	}
	if len(bootImg) != Sector {
		return fmt.Errorf("boot.img is %d bytes, want %d", len(bootImg), Sector)
	}
	mbr := make([]byte, Sector)
	if _, err := f.ReadAt(mbr, 0); err != nil {
		return err
	}
	if mbr[510] != 0x55 || mbr[511] != 0xaa || mbr[0x1be+4] != 0xee {
		return fmt.Errorf("sector 0 is not a protective MBR")
	}
	copy(bootImg[bootBPBStart:bootBPBEnd], mbr[bootBPBStart:bootBPBEnd])
	copy(bootImg[bootNTMagic:bootPartEnd], mbr[bootNTMagic:bootPartEnd])
	le.PutUint64(bootImg[bootKernelLBA:], biosStart)
	bootImg[bootDrive] = 0xff
	bootImg[bootDriveCheck], bootImg[bootDriveCheck+1] = 0x90, 0x90
	_, err = f.WriteAt(bootImg, 0)
	return err
}

// copySparse copies file into f at off, leaving runs of zeros as holes
// (f was made by truncate, so they read as zeros).
func copySparse(f *os.File, off int64, file string) error {
	src, err := os.Open(file)
	if err != nil {
		return err
	}
	defer src.Close()
	buf := make([]byte, 1<<20)
	zero := make([]byte, 64<<10)
	for {
		n, err := io.ReadFull(src, buf)
		for i := 0; i < n; i += len(zero) {
			chunk := buf[i:min(i+len(zero), n)]
			if !bytes.Equal(chunk, zero[:len(chunk)]) {
				if _, werr := f.WriteAt(chunk, off+int64(i)); werr != nil {
					return werr
				}
			}
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func truncate(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
