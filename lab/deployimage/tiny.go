package deployimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/rollcall/rollcall/images/debkernel"
	"github.com/rollcall/rollcall/images/initramfs"
	"github.com/rollcall/rollcall/lab/deployimage/gpt"
)

// tinyModules are what tinyinit needs on the test VMs: the disks (virtio,
// NVMe, SATA), the NICs (virtio, e1000 as the lab's PXE NIC), the root's
// file systems and the crc32c ext4 asks for by name.
var tinyModules = []string{
	"virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "nvme", "ahci",
	"virtio_net", "e1000", "e1000e",
	"ext4", "xfs", "crc32c_generic",
}

func (b *builder) buildTiny() (*Image, error) {
	// tinyinit first: its bytes are part of the key.
	initBin := filepath.Join(b.work, "init")
	cmd := exec.CommandContext(b.ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid=",
		"-o", initBin, "./lab/deployimage/tinyinit")
	cmd.Dir = b.module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build tinyinit: %w\n%s", err, out)
	}
	initData, err := os.ReadFile(initBin)
	if err != nil {
		return nil, err
	}
	initSum := sha256.Sum256(initData)
	deb, kpkg, err := debkernel.Resolve(b.opts.KernelPackage, b.opts.DebCache)
	if err != nil {
		return nil, err
	}
	key := b.key(map[string]string{"kind": "tiny", "kernel": filepath.Base(deb), "tinyinit": hex.EncodeToString(initSum[:])})
	dir := filepath.Join(b.opts.Dir, "tiny-"+b.opts.RootFS+"-"+key)
	if img, ok := cached(dir); ok {
		b.logf("%s (cached)", img.Path)
		return img, nil
	}
	b.logf("building %s: kernel %s, tinyinit %s", dir, kpkg, hex.EncodeToString(initSum[:6]))

	k, err := debkernel.Extract(deb, kpkg, filepath.Join(b.work, "kernel"))
	if err != nil {
		return nil, err
	}
	files, dep, err := k.Modules(tinyModules)
	if err != nil {
		return nil, err
	}
	entries := []initramfs.Entry{
		{Name: "init", Mode: 0o755, Type: initramfs.TypeFile, Data: initData},
		{Name: "dev/console", Mode: 0o600, Type: initramfs.TypeChar, Major: 5, Minor: 1},
		{Name: "dev", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "proc", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "sys", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "run", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "tmp", Mode: 0o1777, Type: initramfs.TypeDir},
		{Name: "sysroot", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "lib/modules/" + k.Version + "/modules.dep", Mode: 0o644, Type: initramfs.TypeFile, Data: []byte(dep)},
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(k.ModDir, f))
		if err != nil {
			return nil, err
		}
		entries = append(entries, initramfs.Entry{Name: "lib/modules/" + k.Version + "/" + f, Mode: 0o644, Type: initramfs.TypeFile, Data: data})
	}
	var initrd bytes.Buffer
	if err := initramfs.Write(&initrd, entries, 0); err != nil {
		return nil, err
	}

	rootUUID := uuid(key, "rootfs")
	tree := filepath.Join(b.work, "root")
	vmlinuz, err := os.ReadFile(k.Vmlinuz)
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		"boot/vmlinuz":        vmlinuz,
		"boot/initrd.img":     initrd.Bytes(),
		"boot/grub/grub.cfg":  []byte(grubConfig(rootUUID, "Rollcall deploy test image", "/boot/vmlinuz", "/boot/initrd.img", "console=ttyS0,115200 panic=10")),
		"etc/os-release":      []byte("NAME=\"Rollcall deploy test image\"\nID=rollcall-deploy-test\nID_LIKE=debian\nVERSION_ID=" + builderEpoch + "\n"),
		"etc/hostname":        []byte("localhost\n"),
		"etc/rollcall-kernel": []byte(k.Package + " " + k.Version + "\n"),
	} {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"var/lib/cloud", "var/lib/rollcall", "etc/ssh", "etc/cloud/cloud.cfg.d"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			return nil, err
		}
	}

	core, efi, err := b.grubImages(rootUUID)
	if err != nil {
		return nil, err
	}
	tmp := dir + ".tmp-" + filepath.Base(b.work)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	esp, root := filepath.Join(b.work, "esp.img"), filepath.Join(b.work, "root.img")
	if err := b.makeESP(esp, efi, key); err != nil {
		return nil, err
	}
	rootSize := (b.opts.Size/Sector - gptTailRoom - rootStart + 1) * Sector
	if b.opts.RootFS == "xfs" {
		err = b.makeXFS(root, tree, rootSize, rootUUID)
	} else {
		err = b.makeExt4(root, tree, rootSize, rootUUID)
	}
	if err != nil {
		return nil, err
	}
	img := &Image{Path: filepath.Join(tmp, "disk.raw"), RootUUID: rootUUID, DiskGUID: uuid(key, "disk"), Key: key}
	if err := b.assemble(img.Path, key, gpt.TypeRootAMD64, core, esp, root); err != nil {
		return nil, err
	}
	final, err := publish(tmp, dir, img)
	if err != nil {
		return nil, err
	}
	prune(b.opts.Dir, "tiny-"+b.opts.RootFS+"-", dir)
	b.logf("%s: %d MiB, kernel %s, initrd %.1f MB (%d modules)", final.Path, b.opts.Size>>20, k.Version, float64(initrd.Len())/1e6, len(files))
	return final, nil
}
