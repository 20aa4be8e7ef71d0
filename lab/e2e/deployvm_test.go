//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rollcall/rollcall/lab/testenv"
)

// The deploy VM harness: a QEMU machine (software emulation, q35) that
// boots a disk image under SeaBIOS or OVMF, with the disks a deploy test
// needs (a target, a bigger second disk, a removable USB stick as a
// decoy) and one NIC, either a tap on the lab's bridge (PXE from a
// rollcall node) or QEMU's user-mode network inside the lab's namespace,
// where the guest reaches the namespace's loopback at 10.0.2.2 and
// nothing else exists. The deploy e2e test boots it from the network
// first (deploy) and then, with the same disks and OVMF variables, from
// its disk.

type vmFirmware string

const (
	fwBIOS vmFirmware = "bios" // SeaBIOS, QEMU's default
	fwUEFI vmFirmware = "uefi" // OVMF with a persistent copy of its variables
)

// OVMF's 4 MiB build and its variable store template (Debian package ovmf).
const (
	ovmfCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// vmDisk is one disk of the VM.
type vmDisk struct {
	Path   string
	Format string // "raw" (default) or "qcow2"
	Bus    string // "virtio" (default), "nvme", "sata" or "usb" (usb-storage, removable)
	Serial string // what the guest reads in /sys/block/*/device/serial (virtio, NVMe) or the USB/ATA serial
	Boot   bool   // in the boot order (after the NIC when NetBoot)
}

// deployVMOptions describe the machine.
type deployVMOptions struct {
	Name     string // for logs ("bios", "uefi-deploy")
	Firmware vmFirmware
	Disks    []vmDisk
	// The NIC: on the tap Tap (in the namespace) or, when Tap is "",
	// user-mode networking. NICModel is e1000 (default: QEMU's iPXE ROM
	// for it PXE-boots under both firmwares) or virtio-net-pci.
	Tap, MAC, NICModel string
	// NetBoot puts the NIC first in the boot order, then the disks marked
	// Boot; otherwise the NIC has no boot ROM.
	NetBoot bool
	// Vars is the OVMF variable file to use (a later boot passes the
	// previous VM's Vars so that boot entries persist); "" makes a fresh
	// copy of OVMF's template.
	Vars string
	// Reboot lets the guest reboot inside the same QEMU process (a deploy
	// that reboots into its disk); by default a reboot ends QEMU.
	Reboot bool
	MemMiB int           // default 768
	Limit  time.Duration // the watchdog: QEMU is killed after it (default 4 minutes)
	// SMBIOS system serial and UUID ("" for QEMU's defaults).
	Serial, UUID string
}

// deployVM is a running (or finished) VM.
type deployVM struct {
	t       *testing.T
	opts    deployVMOptions
	Vars    string // the OVMF variable file (UEFI)
	Began   time.Time
	cmd     *exec.Cmd
	console *lockedBuffer
	exited  chan error
	done    bool
	err     error
	ended   time.Time
	cancel  context.CancelFunc
}

// needDeployVM skips (or, under CI, fails) a test that cannot run the
// harness with these firmwares.
func needDeployVM(t *testing.T, fws ...vmFirmware) {
	t.Helper()
	testenv.NeedNetns(t, "the VM's network lives in a namespace", "qemu-system-x86_64")
	for _, fw := range fws {
		if fw == fwUEFI {
			testenv.NeedFile(t, "UEFI firmware (Debian package ovmf)", ovmfCode)
			testenv.NeedFile(t, "UEFI variable template (Debian package ovmf)", ovmfVars)
		}
	}
}

// startDeployVM starts QEMU inside ns; its console (the serial line) is
// kept and logged when the test fails or VM_DEBUG is set, and QEMU is
// killed when the test ends.
func startDeployVM(t *testing.T, ns *labNS, opts deployVMOptions) *deployVM {
	t.Helper()
	if opts.Firmware == "" {
		opts.Firmware = fwBIOS
	}
	if opts.Name == "" {
		opts.Name = string(opts.Firmware)
	}
	if opts.MemMiB == 0 {
		opts.MemMiB = 768
	}
	if opts.Limit == 0 {
		opts.Limit = 4 * time.Minute
	}
	if opts.NICModel == "" {
		opts.NICModel = "e1000"
	}
	vm := &deployVM{t: t, opts: opts, console: &lockedBuffer{}, exited: make(chan error, 1)}
	args := []string{"-display", "none", "-serial", "stdio", "-monitor", "none", "-accel", "tcg",
		"-machine", "q35", "-m", fmt.Sprint(opts.MemMiB), "-smp", "1"}
	if !opts.Reboot {
		args = append(args, "-no-reboot")
	}
	if opts.Firmware == fwUEFI {
		vm.Vars = opts.Vars
		if vm.Vars == "" {
			vm.Vars = filepath.Join(t.TempDir(), "OVMF_VARS.fd")
			if err := copyFile(ovmfVars, vm.Vars); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+vm.Vars)
	}
	if opts.Serial != "" || opts.UUID != "" {
		s := "type=1,manufacturer=Rollcall,product=Deploy VM"
		if opts.Serial != "" {
			s += ",serial=" + opts.Serial
		}
		if opts.UUID != "" {
			s += ",uuid=" + opts.UUID
		}
		args = append(args, "-smbios", s)
	}
	boot := 1
	nic := opts.NICModel + ",netdev=n0"
	if opts.MAC != "" {
		nic += ",mac=" + opts.MAC
	}
	if opts.NetBoot {
		nic += ",bootindex=1"
		boot++
	} else {
		nic += ",romfile="
	}
	if opts.Tap != "" {
		args = append(args, "-netdev", "tap,id=n0,ifname="+opts.Tap+",script=no,downscript=no")
	} else {
		// The namespace has only lo: 10.0.2.2 is its loopback, and there is
		// no way out.
		args = append(args, "-netdev", "user,id=n0,net=10.0.2.0/24")
	}
	args = append(args, "-device", nic)
	usb, sata := false, false
	for i, d := range opts.Disks {
		format := d.Format
		if format == "" {
			format = "raw"
		}
		id := fmt.Sprintf("d%d", i)
		args = append(args, "-drive", "file="+d.Path+",if=none,id="+id+",format="+format+",cache=unsafe")
		dev := ""
		switch d.Bus {
		case "", "virtio":
			dev = "virtio-blk-pci,drive=" + id
		case "nvme":
			dev = "nvme,drive=" + id
		case "sata":
			if !sata {
				args = append(args, "-device", "ahci,id=ahci0")
				sata = true
			}
			dev = fmt.Sprintf("ide-hd,bus=ahci0.%d,drive=%s", i%6, id)
		case "usb":
			if !usb {
				args = append(args, "-device", "qemu-xhci,id=xhci")
				usb = true
			}
			dev = "usb-storage,bus=xhci.0,removable=on,drive=" + id
		default:
			t.Fatalf("disk %s: bus %q (want virtio, nvme, sata or usb)", d.Path, d.Bus)
		}
		if d.Serial != "" {
			dev += ",serial=" + d.Serial
		}
		if d.Boot {
			dev += fmt.Sprintf(",bootindex=%d", boot)
			boot++
		}
		args = append(args, "-device", dev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Limit)
	vm.cancel = cancel
	vm.cmd = ns.command(ctx, "qemu-system-x86_64", args...)
	logFile, err := os.Create(filepath.Join(t.TempDir(), "console-"+opts.Name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	vm.cmd.Stdout = io.MultiWriter(vm.console, logFile)
	vm.cmd.Stderr = vm.cmd.Stdout
	vm.cmd.WaitDelay = 5 * time.Second
	vm.Began = time.Now()
	if err := vm.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("qemu: %v", err)
	}
	go func() {
		err := vm.cmd.Wait()
		logFile.Close()
		vm.exited <- err
	}()
	t.Cleanup(func() {
		vm.cancel()
		vm.wait(10 * time.Second)
		if t.Failed() || os.Getenv("VM_DEBUG") != "" {
			t.Logf("VM %s console (last 12 KiB):\n%s", opts.Name, tailString(vm.console.String(), 12<<10))
		}
	})
	t.Logf("VM %s: qemu-system-x86_64 %s", opts.Name, strings.Join(args, " "))
	return vm
}

// wait waits up to limit for QEMU to end and returns how it ended: nil
// for a guest that powered off; context.DeadlineExceeded when it still
// runs.
func (vm *deployVM) wait(limit time.Duration) error {
	if vm.done {
		return vm.err
	}
	select {
	case err := <-vm.exited:
		vm.done, vm.err, vm.ended = true, err, time.Now()
		return err
	case <-time.After(limit):
		return context.DeadlineExceeded
	}
}

// ran is how long QEMU ran (until now if it still runs).
func (vm *deployVM) ran() time.Duration {
	if vm.done {
		return vm.ended.Sub(vm.Began)
	}
	return time.Since(vm.Began)
}

// Console is what the serial line has said so far.
func (vm *deployVM) Console() string { return vm.console.String() }

// waitConsole waits until the console says want; false when QEMU ends or
// limit passes first.
func (vm *deployVM) waitConsole(want string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !strings.Contains(vm.console.String(), want) {
		if vm.done || time.Now().After(deadline) {
			return false
		}
		if vm.wait(200*time.Millisecond) != context.DeadlineExceeded {
			return strings.Contains(vm.console.String(), want)
		}
	}
	return true
}

// listen makes a listening socket inside the namespace (see dial): a
// server the VM reaches, and only the VM.
func (ns *labNS) listen(network, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns.name)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns %s: %w", ns.name, err)}
			return
		}
		l, err := net.Listen(network, addr)
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// copyFile copies src to dst, keeping a disk image's holes
// (cp --sparse=always).
func copyFile(src, dst string) error {
	out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp %s %s: %v: %s", src, dst, err, out)
	}
	return nil
}

// blankDisk makes a sparse file of size bytes.
func blankDisk(t *testing.T, path string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCmd runs a tool and returns its combined output.
func runCmd(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}
