//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"golang.org/x/sys/unix"

	"github.com/rollcall/rollcall/lab/deployimage"
	"github.com/rollcall/rollcall/lab/deployimage/gpt"
	"github.com/rollcall/rollcall/lab/testenv"
)

// A machine is deployed and released for real, under SeaBIOS and under
// OVMF (with a persistent variable file): the real `rollcall serve` runs
// in a network namespace on a bridge (DHCP, TFTP, HTTP, HTTPS) with the
// commissioning image (bin/image) and the tiny deploy image
// (lab/deployimage) imported with `rollcall os import tiny FILE`. A QEMU VM
// with a virtio target disk, a bigger NVMe disk and a USB stick as a decoy
// boots the network first, then its target disk:
//
//  1. it PXE-boots unknown, is commissioned and powers off (ready);
//  2. `rollcall deploy ID tiny -watch`; the test powers the VM on (there is
//     no BMC here: the commissioning test covers the BMC), it PXE-boots the
//     agent in deploy mode, which writes the disk, reports done and
//     reboots; iPXE gets the local-disk script, GRUB boots the tiny init,
//     which reads the NoCloud seed, phones home to the node and powers off;
//  3. the target disk holds the image (the partitions the agent must not
//     touch are byte for byte the image's, the seed is in the root), the
//     other disks are untouched, the machine is deployed and phoned home,
//     the job lists its steps; under UEFI the variable file holds a boot
//     entry with the job's label;
//  4. `rollcall release ID -watch`; the VM boots the agent again, which
//     wipes the disk (no GPT at either end) and reboots; the machine is
//     ready.
//
// It prints the time from `deploy` to `deployed` and the share of it spent
// writing (the third benchmark).
//
// Under UEFI the reboot after the deploy goes through iPXE (its exit),
// then OVMF's own PXE and HTTP boot entries, which fail here because the
// host has no ipxe.efi (Debian package ipxe) for the node to serve, before
// OVMF starts the agent's entry: that costs about three minutes between
// deployed and the phone-home under TCG.
func TestVMDeploy(t *testing.T) {
	if testing.Short() {
		t.Skip("boots an emulated machine four times per firmware (several minutes)")
	}
	needDeployVM(t, fwBIOS, fwUEFI)
	testenv.NeedTool(t, "debugfs", "sgdisk", "mkfs.ext4", "mkfs.vfat", "mmd", "mcopy", "grub-mkimage", "grub-mkstandalone", "cp", "zstd", "qemu-img")
	testenv.NeedFile(t, "GRUB for BIOS (Debian package grub-pc-bin)", "/usr/lib/grub/i386-pc/boot.img")
	testenv.NeedFile(t, "GRUB for UEFI (Debian package grub-efi-amd64-bin)", "/usr/lib/grub/x86_64-efi/linux.mod")
	kernel, initrd := commissioningImage(t)
	img := buildDeployImage(t, deployimage.Options{})
	for _, fw := range []vmFirmware{fwBIOS, fwUEFI} {
		t.Run(string(fw), func(t *testing.T) { vmDeploy(t, fw, kernel, initrd, img) })
	}
}

// vmDeployJob is what the test reads of a deploy or release job.
type vmDeployJob struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	State string `json:"state"`
	Image *struct {
		SHA256    string `json:"sha256"`
		RawSHA256 string `json:"raw_sha256"`
		RawSize   int64  `json:"raw_size"`
	} `json:"image"`
	Disk struct {
		Serial string `json:"serial"`
		Name   string `json:"name"`
	} `json:"disk"`
	Hostname   string    `json:"hostname"`
	Error      string    `json:"error"`
	Created    time.Time `json:"created"`
	Finished   time.Time `json:"finished"`
	PhonedHome time.Time `json:"phoned_home"`
	PhoneHost  string    `json:"phone_host"`
	Steps      []struct {
		Step, State, Message string
		At                   time.Time
	} `json:"steps"`
}

type vmDeployMachine struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	SystemUUID string `json:"system_uuid"`
	Deployment *struct {
		Job        string    `json:"job"`
		OS         string    `json:"os"`
		State      string    `json:"state"`
		Disk       string    `json:"disk"`
		PhonedHome time.Time `json:"phoned_home"`
	} `json:"deployment"`
	Inventory struct {
		Disks []struct {
			Name      string `json:"name"`
			Serial    string `json:"serial"`
			Transport string `json:"transport"`
			Removable bool   `json:"removable"`
		} `json:"disks"`
	} `json:"inventory"`
}

func vmDeploy(t *testing.T, fw vmFirmware, kernel, initrd string, img *deployimage.Image) {
	dir := t.TempDir()
	// The disks: the target (the smallest non-removable disk that fits),
	// a bigger second one, and a USB stick between the two in size that
	// would fit the image (the agent must never choose it).
	target := blankDisk(t, filepath.Join(dir, "target.raw"), 512<<20)
	second := blankDisk(t, filepath.Join(dir, "second.raw"), 2<<30)
	decoy := filepath.Join(dir, "usb.raw")
	decoyData := bytes.Repeat([]byte("rollcall usb decoy\n"), (300<<20)/19)
	if err := os.WriteFile(decoy, decoyData, 0o644); err != nil {
		t.Fatal(err)
	}
	decoySum := fileSum(t, decoy)
	lab := newDeployLab(t, fw, dir, kernel, initrd, 1024, []vmDisk{
		{Path: target, Bus: "virtio", Serial: "RC-TARGET-1", Boot: true},
		{Path: second, Bus: "nvme", Serial: "RC-NVME-BIG"},
		{Path: decoy, Bus: "usb", Serial: "RC-USB-DECOY"},
	})
	n1, id, mac := lab.n1, "", lab.opts.MAC
	t.Logf("os import: %s", n1.cli(t, "os", "import", "tiny", img.Path))

	// 1. Commissioning: unknown → ready, then the agent powers it off.
	lab.commission(t)
	id = lab.id

	// 2. Deploy. The CLI follows the job; the test powers the VM on.
	run := lab.deploy(t, 8*time.Minute, "tiny")
	vm, deployAt, deployedAt := run.vm, run.at, run.deployedAt
	phonedAt := lab.waitPhonedHome(t, vm, 5*time.Minute)
	if err := vm.wait(2 * time.Minute); err != nil {
		t.Fatalf("the deployed VM did not power off after phoning home: %v", err)
	}
	// iPXE's messages go to the screen, not the serial line: ask for the
	// script it was given (the VM booted the network first, and its disk
	// second, so that script sent it on to the disk).
	var script string
	waitUntil(t, 10*time.Second, "the boot script", func() bool {
		resp, err := n1.client.Get(n1.base + "/boot/ipxe?mac=" + mac)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		script = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(script, "boots from its local disk") || strings.Contains(script, "rollcall.mode=deploy") {
		t.Errorf("the deployed machine's boot script does not send it to its disk:\n%s", script)
	}
	if n := strings.Count(vm.Console(), "Linux version "); n != 2 {
		t.Errorf("the deploy VM booted Linux %d times, want 2 (the agent, then the disk)", n)
	}
	if !strings.Contains(vm.Console(), `msg="phoned home"`) {
		t.Error("the console does not say the tiny init phoned home")
	}

	// 3. The records.
	job, _ := latestJob(n1, id, "deploy")
	m, err := lab.machine()
	if err != nil {
		t.Fatal(err)
	}
	if m.State != "deployed" || m.Deployment == nil || m.Deployment.OS != "tiny" || m.Deployment.Job != job.ID || m.Deployment.PhonedHome.IsZero() {
		t.Errorf("machine %s: state %s, deployment %+v; want deployed with tiny, job %s, phoned home", id, m.State, m.Deployment, job.ID)
	}
	if job.State != "done" || job.Disk.Serial != "RC-TARGET-1" || job.Image == nil {
		t.Fatalf("deploy job %+v: want done on the disk with serial RC-TARGET-1", job)
	}
	writing := checkJobSteps(t, fw, job)
	total := deployedAt.Sub(deployAt)
	share := 0.0
	if total > 0 {
		share = 100 * writing.Seconds() / total.Seconds()
	}
	t.Logf("BENCHMARK %s (TCG): deploy → deployed %v (VM powered on %v after the command), writing %v (%.1f%%), phoned home %v after deploy",
		fw, total.Round(100*time.Millisecond), vm.Began.Sub(deployAt).Round(100*time.Millisecond), writing.Round(100*time.Millisecond), share,
		phonedAt.Sub(deployAt).Round(100*time.Millisecond))

	// The target disk: the image except where the agent legitimately
	// wrote (the primary GPT header, which now names the moved backup;
	// the seed in the root). The boot code, the partition entries, the
	// BIOS boot partition and the ESP are the image's, byte for byte.
	rawSum := fileSum(t, img.Path)
	if job.Image.RawSHA256 != rawSum {
		t.Errorf("the job's raw_sha256 %s is not the image file's %s", job.Image.RawSHA256, rawSum)
	}
	checkTargetLayout(t, img.Path, target)
	ctx := t.Context()
	checkSeed(t, target, id, job.ID)
	marker, err := deployimage.ReadFile(ctx, target, deployimage.MarkerPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"booted from disk\n", "firmware: " + string(fw) + "\n", "phone-home: 200 OK\n"} {
		if !strings.Contains(string(marker), want) {
			t.Errorf("marker %s lacks %q:\n%s", deployimage.MarkerPath, want, marker)
		}
	}
	checkUntouched(t, decoy, decoySum, second)
	if fw == fwUEFI {
		checkEFIEntry(t, lab.vars, vm, "rollcall tiny")
	}

	// 4. Release: the VM boots the agent again, which wipes the disk and
	// reboots (which ends QEMU).
	lab.release(t, target)
	checkUntouched(t, decoy, decoySum, second)
}

// checkJobSteps: the deploy job lists the steps every deploy has (and
// efi under UEFI); it returns how long writing took (a step keeps its last
// report's time, when it ended: writing began when the step before it
// ended).
func checkJobSteps(t *testing.T, fw vmFirmware, job vmDeployJob) (writing time.Duration) {
	t.Helper()
	seen := map[string]bool{}
	for i, s := range job.Steps {
		seen[s.Step+"/"+s.State] = true
		if s.Step == "write" && s.State == "done" && i > 0 {
			writing = s.At.Sub(job.Steps[i-1].At)
		}
	}
	for _, want := range []string{"write/done", "verify/done", "seed/done", "done/done"} {
		if !seen[want] {
			t.Errorf("the job's steps lack %s: %+v", want, job.Steps)
		}
	}
	if fw == fwUEFI && !seen["efi/done"] {
		t.Errorf("UEFI: the job's steps lack efi/done: %+v", job.Steps)
	}
	return writing
}

// checkTargetLayout: the target holds the image's boot code, partition
// entries, BIOS boot partition and ESP byte for byte, and its backup GPT
// moved to its own last sector.
func checkTargetLayout(t *testing.T, image, target string) {
	t.Helper()
	imgT, tgtT := readTable(t, image), readTable(t, target)
	regions := [][2]int64{{0, 440}, {2 * 512, 32 * 512}} // MBR boot code, the entry array
	for _, p := range imgT.Partitions {
		if p.Type == gpt.TypeBIOSBoot || p.Type == gpt.TypeESP {
			regions = append(regions, [2]int64{p.Offset(512), p.Size(512)})
		}
	}
	if len(regions) != 4 {
		t.Fatalf("the image has no BIOS boot and ESP partitions: %+v", imgT.Partitions)
	}
	for _, r := range regions {
		if a, b := rangeSum(t, image, r[0], r[1]), rangeSum(t, target, r[0], r[1]); a != b {
			t.Errorf("target bytes [%d, +%d) differ from the image's", r[0], r[1])
		}
	}
	if len(tgtT.Partitions) != len(imgT.Partitions) {
		t.Errorf("target partitions %+v, image's %+v", tgtT.Partitions, imgT.Partitions)
	}
	if !hasBackupGPTAtEnd(t, target) {
		t.Error("the target's backup GPT header is not in its last sector")
	}
}

// checkSeed: the agent wrote the NoCloud seed into the target's root;
// user-data phones home to the node, meta-data names the job or machine.
func checkSeed(t *testing.T, target, machine, job string) {
	t.Helper()
	ctx := t.Context()
	for _, name := range []string{"meta-data", "user-data", "network-config"} {
		b, err := deployimage.ReadFile(ctx, target, deployimage.SeedDir+"/"+name)
		if err != nil || len(b) == 0 {
			t.Errorf("seed %s: %q, %v", name, b, err)
		}
	}
	if ud, err := deployimage.ReadFile(ctx, target, deployimage.SeedDir+"/user-data"); err == nil &&
		!strings.Contains(string(ud), "/api/v1/phone-home/") {
		t.Errorf("user-data has no phone_home to the node:\n%s", ud)
	}
	if md, err := deployimage.ReadFile(ctx, target, deployimage.SeedDir+"/meta-data"); err == nil && !strings.Contains(string(md), job) && !strings.Contains(string(md), machine) {
		t.Errorf("meta-data names neither the job %s nor the machine %s:\n%s", job, machine, md)
	}
}

// checkEFIEntry: the OVMF variable file holds a boot entry labelled
// label, and OVMF booted the disk through it, after the network boot
// entries (iPXE's exit, then OVMF's own PXE and HTTP boot, which find no
// ipxe.efi here) failed.
func checkEFIEntry(t *testing.T, vars string, vm *deployVM, label string) {
	t.Helper()
	vb, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(vb, utf16le(label)) {
		t.Errorf("the OVMF variable file has no boot entry labelled %q", label)
	}
	if !regexp.MustCompile(`BdsDxe: starting Boot[0-9A-F]{4} "` + regexp.QuoteMeta(label) + `"`).MatchString(vm.Console()) {
		t.Errorf("OVMF did not boot the entry %q after the deploy", label)
	}
}

// asyncCLI is a CLI command running in the background.
type asyncCLI struct {
	done chan struct{}
	out  []byte
	err  error
}

func runCLIAsync(n *labNode, args ...string) *asyncCLI {
	a := &asyncCLI{done: make(chan struct{})}
	cmd := n.ns.command(context.Background(), binary, args...)
	cmd.Env = append(os.Environ(), "ROLLCALL_DATA="+n.data, "ROLLCALL_URL=", "ROLLCALL_TOKEN=")
	go func() {
		a.out, a.err = cmd.CombinedOutput()
		close(a.done)
	}()
	return a
}

func (a *asyncCLI) wait(limit time.Duration) (string, error) {
	select {
	case <-a.done:
		return string(a.out), a.err
	case <-time.After(limit):
		return "", fmt.Errorf("still running after %v", limit)
	}
}

// latestJob is the machine's newest deploy or release job of kind.
func latestJob(n *labNode, id, kind string) (vmDeployJob, bool) {
	var list struct {
		Deploy []vmDeployJob `json:"deploy"`
	}
	if _, err := n.call(n.token, http.MethodGet, "/api/v1/machines/"+id+"/jobs", nil, &list); err != nil {
		return vmDeployJob{}, false
	}
	for _, j := range list.Deploy {
		if j.Kind == kind {
			return j, true
		}
	}
	return vmDeployJob{}, false
}

func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readTable(t *testing.T, path string) *gpt.Table {
	t.Helper()
	tb, err := gpt.Read(openFile(t, path), 512)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tb
}

func rangeSum(t *testing.T, path string, off, n int64) string {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(openFile(t, path), off, n)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hasBackupGPTAtEnd says whether the disk's last sector is a GPT header.
func hasBackupGPTAtEnd(t *testing.T, path string) bool {
	t.Helper()
	f := openFile(t, path)
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	if _, err := f.ReadAt(b, st.Size()-512); err != nil {
		t.Fatal(err)
	}
	return string(b) == "EFI PART"
}

// checkUntouched: the decoy has its bytes, the second disk is still a
// file with no data at all (sparse, never written).
func checkUntouched(t *testing.T, decoy, decoySum, second string) {
	t.Helper()
	if fileSum(t, decoy) != decoySum {
		t.Error("the USB decoy was written to")
	}
	f := openFile(t, second)
	if off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA); !errors.Is(err, unix.ENXIO) {
		t.Errorf("the second disk was written to (data at %d, %v)", off, err)
	}
}

func utf16le(s string) []byte {
	var b []byte
	for _, r := range utf16.Encode([]rune(s)) {
		b = append(b, byte(r), byte(r>>8))
	}
	return b
}
