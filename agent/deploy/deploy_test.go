package deploy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/testenv"
)

var (
	specExt4Root = imgSpec{name: "ext4-root", sizeMiB: 64, rootType: "8304", fs: "ext4",
		osRelease: "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\nVERSION_ID=\"13\"\n"}
	specExt4Label = imgSpec{name: "ext4-label", sizeMiB: 64, rootType: "8300", fs: "ext4", fsLabel: "cloudimg-rootfs",
		osRelease: "ID=ubuntu\nID_LIKE=debian\n"}
	specExt4Probe = imgSpec{name: "ext4-probe", sizeMiB: 48, rootType: "8300", rootName: "data", fs: "ext4",
		osRelease: "ID=arch\n"}
	specXFS = imgSpec{name: "xfs-probe", sizeMiB: 400, rootType: "8300", fs: "xfs", noESP: true,
		osRelease: "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n"}
	specLVM = imgSpec{name: "lvm", sizeMiB: 96, rootType: "8e00", fs: "lvm",
		osRelease: "ID=ubuntu\nID_LIKE=debian\n"}
)

// fileTarget is a regular file standing in for the disk, filled with a
// pattern so that what the agent touched shows.
func fileTarget(t *testing.T, size int64) Device {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk")
	fillPattern(t, p, size)
	return Device{Name: "disk", Path: p, Size: size, SectorSize: 512, Serial: "QM00001"}
}

// loopTarget is a loop device over a pattern-filled file (root).
func loopTarget(t *testing.T, size int64, sector int) Device {
	t.Helper()
	testenv.NeedRoot(t, "loop devices")
	testenv.NeedTool(t, "losetup")
	p := filepath.Join(t.TempDir(), "backing")
	fillPattern(t, p, size)
	return attachLoop(t, p, size, sector)
}

func attachLoop(t *testing.T, backing string, size int64, sector int) Device {
	t.Helper()
	loop := strings.TrimSpace(run(t, "losetup", "-f", "--show", "--sector-size", fmt.Sprint(sector), backing))
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })
	return Device{Name: filepath.Base(loop), Path: loop, Size: size, Serial: "QM00001"}
}

func runJob(t *testing.T, s *jobServer, dev Device, efivars string) (*Result, error) {
	t.Helper()
	c := s.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return Run(ctx, c, Config{Root: t.TempDir(), Device: &dev, WorkDir: t.TempDir(), EFIVars: efivars,
		ProgressEvery: 20 * time.Millisecond, Log: testLog(t)})
}

// region reads n bytes at off of a file or device.
func region(t *testing.T, path string, off, n int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

func isAll(b []byte, v byte) bool { return len(bytes.Trim(b, string([]byte{v}))) == 0 }

func assertTablesZeroed(t *testing.T, d Device) {
	t.Helper()
	if !isAll(region(t, d.Path, 0, wipeEnd), 0) || !isAll(region(t, d.Path, d.Size-wipeEnd, wipeEnd), 0) {
		t.Errorf("the partition tables (first and last MiB) of %s are not zeroed", d.Path)
	}
}

func assertUntouched(t *testing.T, d Device) {
	t.Helper()
	for _, off := range []int64{0, d.Size / 2, d.Size - wipeEnd} {
		if !isAll(region(t, d.Path, off, wipeEnd), 0xA5) {
			t.Errorf("%s was written at %d: the job should have changed nothing", d.Path, off)
		}
	}
}

func TestDeployGood(t *testing.T) {
	testenv.NeedRoot(t, "the agent mounts the root file system through a loop device")
	testenv.NeedTool(t, "sgdisk", "mount", "umount")
	cases := map[string]struct {
		spec     imgSpec
		format   string // zst, gz, raw
		loop     bool
		uefi     bool
		relabel  bool
		noNet    bool
		root     string // Result.Root
		fstype   string
		caPaths  []string
		noCAPath []string
	}{
		"ext4 by its root type, UEFI, a file bigger than the image": {spec: specExt4Root, format: "zst", uefi: true,
			root: "partition 3", caPaths: []string{caDebian}, noCAPath: []string{caRHEL}},
		"ext4 by its label, gzip, on a loop device": {spec: specExt4Label, format: "gz", loop: true,
			root: "partition 3", caPaths: []string{caDebian}, noCAPath: []string{caRHEL}},
		"ext4 by the os-release probe, raw, unknown family": {spec: specExt4Probe, format: "raw",
			root: "partition 3", caPaths: []string{caDebian, caRHEL}},
		"XFS by the probe, RHEL family, SELinux, no network-config, on a loop device": {spec: specXFS, format: "zst", loop: true,
			relabel: true, noNet: true, root: "partition 3", caPaths: []string{caRHEL}, noCAPath: []string{caDebian}},
		"ext4 on an LVM logical volume named root": {spec: specLVM, format: "zst",
			caPaths: []string{caDebian}, noCAPath: []string{caRHEL}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := buildImage(t, tc.spec)
			served := compressed(t, b, tc.format)
			size := b.rawSize + 32*imgMiB
			var dev Device
			if tc.loop {
				dev = loopTarget(t, size, 512)
			} else {
				dev = fileTarget(t, size)
			}
			job := deployJob(t, b, served)
			job.SELinuxRelabel = tc.relabel
			if tc.noNet {
				job.Seed.NetworkConfig = ""
			}
			s := &jobServer{t: t, job: job, blob: served}
			var efivars string
			if tc.uefi {
				efivars = fakeEFIVars(t)
			}
			res, err := runJob(t, s, dev, efivars)
			if err != nil {
				t.Fatalf("deploy: %v\nprogress: %+v", err, s.reports())
			}
			if last := s.last(); last.Step != StepDone || last.State != StateDone {
				t.Errorf("last report = %+v, want done/done", last)
			}
			if tc.root != "" && res.Root != tc.root {
				t.Errorf("root = %q, want %q", res.Root, tc.root)
			}
			if tc.spec.fs == "lvm" && !strings.Contains(res.Root, "/root on partition 3") {
				t.Errorf("root = %q, want the LV named root", res.Root)
			}
			// The backup GPT is at the end of the bigger target.
			if out, _ := exec.Command("sgdisk", "-v", dev.Path).CombinedOutput(); !strings.Contains(string(out), "No problems found") {
				t.Errorf("sgdisk -v %s:\n%s", dev.Path, out)
			}
			// The image is on the disk where the agent did not write.
			if !bytes.Equal(region(t, dev.Path, 1*imgMiB, imgMiB), region(t, b.path, 1*imgMiB, imgMiB)) {
				t.Error("the BIOS boot partition differs from the image's")
			}
			// What the agent wrote, read back by mount(8).
			root := mountRO(t, dev.Path, b.fsStart, b.fsSize)
			want := map[string]string{
				"var/lib/cloud/seed/nocloud/meta-data": job.Seed.MetaData,
				"var/lib/cloud/seed/nocloud/user-data": job.Seed.UserData,
				datasourceFile:                         datasourceCfg,
				"etc/os-release":                       tc.spec.osRelease,
			}
			if !tc.noNet {
				want["var/lib/cloud/seed/nocloud/network-config"] = job.Seed.NetworkConfig
			}
			for _, p := range tc.caPaths {
				want[p] = testCA
			}
			for p, w := range want {
				got, err := os.ReadFile(filepath.Join(root, p))
				if err != nil || string(got) != w {
					t.Errorf("/%s = %q, %v; want %q", p, got, err, w)
				}
			}
			if fi, err := os.Stat(filepath.Join(root, "var/lib/cloud/seed/nocloud/user-data")); err == nil && fi.Mode().Perm() != 0o600 {
				t.Errorf("user-data mode %v, want 0600", fi.Mode().Perm())
			}
			for _, p := range tc.noCAPath {
				if _, err := os.Stat(filepath.Join(root, p)); err == nil {
					t.Errorf("/%s written for the wrong family", p)
				}
			}
			if tc.noNet {
				if _, err := os.Stat(filepath.Join(root, "var/lib/cloud/seed/nocloud/network-config")); err == nil {
					t.Error("the image's own network-config was left in the seed")
				}
			}
			if _, err := os.Stat(filepath.Join(root, ".autorelabel")); (err == nil) != tc.relabel {
				t.Errorf("/.autorelabel present = %v, want %v", err == nil, tc.relabel)
			}
			if tc.uefi {
				checkBootEntry(t, efivars, res, b)
			}
			if s.badTokens != 0 {
				t.Errorf("%d requests without the job token", s.badTokens)
			}
		})
	}
}

// fakeEFIVars is an efivarfs stand-in (a plain directory: efivarfs cannot
// be mounted without UEFI firmware) holding a PXE entry, a stale entry of
// the same label, and the disk's firmware entry.
func fakeEFIVars(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	v := efiVars{dir: dir}
	pci := []byte{1, 1, 6, 0, 0, 3}
	mac := make([]byte, 37)
	mac[0], mac[1], mac[2] = 3, 11, 37
	copy(mac[4:], []byte{0x52, 0x54, 0, 0x12, 0x34, 0x56})
	end := []byte{0x7F, 0xFF, 4, 0}
	opt := func(desc string, path []byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, 1)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(path)))
		return append(append(b, ucs2z(desc)...), path...)
	}
	for name, data := range map[string][]byte{
		"Boot0000":  opt("UEFI PXEv4 (MAC:525400123456)", append(append(append([]byte{}, pci...), mac...), end...)),
		"Boot0001":  opt("rollcall debian-13", append(append([]byte{}, pci...), end...)),
		"Boot0002":  opt("UEFI QEMU HARDDISK QM00001", append(append([]byte{}, pci...), end...)),
		"BootOrder": {2, 0, 1, 0, 0, 0},
	} {
		if err := v.write(name, data); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func checkBootEntry(t *testing.T, dir string, res *Result, b *builtImage) {
	t.Helper()
	v := efiVars{dir: dir}
	if res.BootEntry != "Boot0001" || res.Loader != `\EFI\debian\shimx64.efi` {
		t.Errorf("boot entry %s loader %s, want Boot0001 (the stale one's number, freed) and shim", res.BootEntry, res.Loader)
	}
	attrs, data, err := v.read("Boot0001")
	if err != nil {
		t.Fatal(err)
	}
	if attrs != 7 {
		t.Errorf("attributes %#x, want NV+BS+RT", attrs)
	}
	o, err := DecodeLoadOption(data)
	if err != nil {
		t.Fatal(err)
	}
	if o.Description != "rollcall debian-13" || o.Attributes != 1 {
		t.Errorf("entry %+v", o)
	}
	// The HD node against what sgdisk says of the ESP.
	hd := o.Path
	if len(hd) < 42 || hd[0] != 4 || hd[1] != 1 {
		t.Fatalf("first node is not a hard drive node: % x", hd)
	}
	le := binary.LittleEndian
	guid, _ := guidBytes(b.espGUID)
	if le.Uint32(hd[4:]) != 2 || le.Uint64(hd[8:]) != b.espFirst || le.Uint64(hd[16:]) != b.espCount || !bytes.Equal(hd[24:40], guid[:]) {
		t.Errorf("HD node % x: want partition 2, LBA %d, %d sectors, GUID %s", hd[:42], b.espFirst, b.espCount, b.espGUID)
	}
	if !bytes.Contains(o.Path, ucs2z(`\EFI\debian\shimx64.efi`)) {
		t.Error("the device path does not name shimx64.efi")
	}
	_, order, _ := v.read("BootOrder")
	if !bytes.Equal(order, []byte{0, 0, 1, 0, 2, 0}) {
		t.Errorf("BootOrder % x, want 0000 (PXE) 0001 (ours) 0002", order)
	}
	if _, next, err := v.read("BootNext"); err != nil || string(next) != "\x01\x00" {
		t.Errorf("BootNext % x, %v: want 0001 (ours, next boot only)", next, err)
	}
}

func TestDeployFailures(t *testing.T) {
	testenv.NeedTool(t, "sgdisk", "mkfs.ext4", "zstd")
	b := buildImage(t, specExt4Probe)
	zst := compressed(t, b, "zst")
	corrupt := filepath.Join(t.TempDir(), "corrupt.zst")
	cb, _ := os.ReadFile(zst)
	for i := len(cb) / 2; i < len(cb)/2+64; i++ {
		cb[i] ^= 0xFF
	}
	os.WriteFile(corrupt, cb, 0o644)
	noTable := randomImage(t, 8*imgMiB)
	noTableZst := compressed(t, noTable, "zst")

	cases := map[string]struct {
		img       *builtImage
		served    string
		job       func(*Job)
		srv       func(*jobServer)
		want      string // in the error
		is        error
		step      string // of the failure report
		untouched bool   // the disk must be as it was; else its tables zeroed
	}{
		"sha256 of the file differs": {img: b, served: zst, job: func(j *Job) { j.Image.SHA256 = strings.Repeat("0", 64) },
			want: "sha256 of the file", is: ErrVerify, step: StepVerify},
		// Only an image served raw has its raw SHA-256 checked here; a
		// compressed one is checked by the SHA-256 of the file (writeImage).
		"sha256 of the raw image differs": {img: b, served: b.path, job: func(j *Job) { j.Image.RawSHA256 = strings.Repeat("1", 64) },
			want: "sha256 of the raw image", is: ErrVerify, step: StepVerify},
		"truncated stream": {img: b, served: zst, srv: func(s *jobServer) { s.truncate = fileSize(t, zst) / 2 },
			is: ErrVerify, step: StepVerify},
		"corrupt zstd": {img: b, served: corrupt, is: ErrVerify, step: StepVerify},
		"qcow2 is refused before anything is written": {img: b, served: compressed(t, b, "qcow2"),
			want: "qcow2", is: ErrFormat, step: StepWipe, untouched: true},
		"an image larger than its raw_size": {img: b, served: zst, job: func(j *Job) { j.Image.RawSize -= 1 << 20 },
			want: "larger than its raw_size", is: ErrVerify, step: StepVerify},
		"no partition table": {img: noTable, served: noTableZst, want: "no valid partition table", is: ErrNoTable, step: StepPartitions},
		"a bad job changes nothing": {img: b, served: zst, job: func(j *Job) { j.Kind = "format" },
			want: `job kind "format"`, step: StepWipe, untouched: true},
		"a seed without user-data": {img: b, served: zst, job: func(j *Job) { j.Seed.UserData = "" },
			want: "user-data", step: StepWipe, untouched: true},
		"the server asks for more disk than there is": {img: b, served: zst, job: func(j *Job) { j.Image.RawSize = 1 << 40 },
			want: "smaller than the image", step: StepWipe, untouched: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dev := fileTarget(t, b.rawSize+16*imgMiB)
			job := deployJob(t, tc.img, tc.served)
			if tc.job != nil {
				tc.job(&job)
			}
			s := &jobServer{t: t, job: job, blob: tc.served}
			if tc.srv != nil {
				tc.srv(s)
			}
			_, err := runJob(t, s, dev, "")
			if err == nil {
				t.Fatal("the job succeeded")
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v; want one mentioning %q (%v)", err, tc.want, tc.is)
			}
			last := s.last()
			if last.State != StateFailed || last.Step != tc.step || last.Message == "" {
				t.Errorf("last report %+v, want failed at %s with a message", last, tc.step)
			}
			if tc.untouched {
				assertUntouched(t, dev)
			} else {
				assertTablesZeroed(t, dev)
			}
		})
	}
}

func TestWrongToken(t *testing.T) {
	dev := fileTarget(t, 8*imgMiB)
	s := &jobServer{t: t, token: "right"}
	c := s.start(t)
	s.token = "changed" // the agent still sends "right"
	_, err := Run(context.Background(), c, Config{Device: &dev, WorkDir: t.TempDir(), Log: testLog(t)})
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("err = %v, want the 403", err)
	}
	if len(s.reports()) != 0 {
		t.Errorf("progress accepted without the token: %+v", s.reports())
	}
	assertUntouched(t, dev)
}

func TestCancelMidWrite(t *testing.T) {
	img := randomImage(t, 24*imgMiB)
	dev := fileTarget(t, 32*imgMiB)
	job := deployJob(t, img, img.path)
	s := &jobServer{t: t, job: job, blob: img.path, trickle: true, cancelWhenWriting: true}
	_, err := runJob(t, s, dev, "")
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("err = %v, want ErrCancelled", err)
	}
	if !s.cancelled {
		t.Fatal("the server never saw bytes written before cancelling")
	}
	last := s.last()
	if last.State != StateFailed || last.Step != StepWrite || !strings.Contains(last.Message, "cancelled") {
		t.Errorf("last report %+v, want failed write, cancelled", last)
	}
	assertTablesZeroed(t, dev)
}

func TestRefuse4Kn(t *testing.T) {
	b := buildImage(t, specExt4Probe)
	zst := compressed(t, b, "zst")
	dev := loopTarget(t, b.rawSize+8*imgMiB, 4096)
	s := &jobServer{t: t, job: deployJob(t, b, zst), blob: zst}
	_, err := runJob(t, s, dev, "")
	if err == nil || !strings.Contains(err.Error(), "4096-byte sectors") {
		t.Fatalf("err = %v, want the 4Kn refusal", err)
	}
	if last := s.last(); last.State != StateFailed || !strings.Contains(last.Message, "4096") {
		t.Errorf("last report %+v", last)
	}
	assertUntouched(t, dev)
}

// TestDiskFailsMidWrite: the disk starts failing writes half-way. This
// kernel has no device-mapper (whose error target is how one makes a disk
// vanish) and detaching a loop device that is open only marks it to go at
// the last close, so the failure here is a loop device whose backing file
// is on a tmpfs too small for the image: its writes fail with EIO from
// 8 MiB on, as a pulled disk's do.
func TestDiskFailsMidWrite(t *testing.T) {
	testenv.NeedRoot(t, "a tmpfs mount and a loop device")
	testenv.NeedTool(t, "losetup", "mount", "umount")
	dir := t.TempDir()
	run(t, "mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir)
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	backing := filepath.Join(dir, "disk")
	mkSparse(t, backing, 32*imgMiB)
	dev := attachLoop(t, backing, 32*imgMiB, 512)
	img := randomImage(t, 24*imgMiB)
	s := &jobServer{t: t, job: deployJob(t, img, img.path), blob: img.path}
	_, err := runJob(t, s, dev, "")
	if err == nil || !strings.Contains(err.Error(), "write "+dev.Path) {
		t.Fatalf("err = %v, want the write error", err)
	}
	if last := s.last(); last.State != StateFailed || last.Step != StepWrite {
		t.Errorf("last report %+v, want failed write", last)
	}
}

func TestRelease(t *testing.T) {
	b := buildImage(t, specExt4Probe)
	for _, mode := range []string{WipeQuick, WipeFull} {
		t.Run(mode, func(t *testing.T) {
			dev := fileTarget(t, b.rawSize+16*imgMiB)
			copyInto(t, dev.Path, 0, b.path)
			if fs, _ := probeFS(mustOpen(t, dev.Path), b.rootStart); fs != "ext4" {
				t.Fatalf("the image's root is not ext4 before the release: %q", fs)
			}
			s := &jobServer{t: t, job: Job{ID: "j-rel", Kind: KindRelease, Wipe: mode, Disk: DiskRef{Serial: "QM00001"}}}
			if _, err := runJob(t, s, dev, ""); err != nil {
				t.Fatal(err)
			}
			assertTablesZeroed(t, dev)
			if fs, _ := probeFS(mustOpen(t, dev.Path), b.rootStart); fs != "" {
				t.Errorf("the root's %s signature survived the release", fs)
			}
			beyond := isAll(region(t, dev.Path, b.rawSize+4*imgMiB, imgMiB), 0xA5)
			switch mode {
			case WipeQuick:
				if !beyond {
					t.Error("a quick wipe wrote past the signatures")
				}
			case WipeFull:
				if !isAll(region(t, dev.Path, 0, dev.Size), 0) {
					t.Error("a full wipe left data")
				}
				var full bool
				for _, p := range s.reports() {
					full = full || p.Step == StepWipeFull && p.State == StateDone && p.Bytes == dev.Size
				}
				if !full {
					t.Errorf("no wipe-full done report with every byte: %+v", s.reports())
				}
			}
		})
	}
}

func fileSize(t *testing.T, p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
