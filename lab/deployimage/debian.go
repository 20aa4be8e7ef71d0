package deployimage

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rollcall/rollcall/images/debkernel"
	"github.com/rollcall/rollcall/images/debroot"
	"github.com/rollcall/rollcall/lab/deployimage/gpt"
)

// debianPackages make a root a cloud image would have: the kernel,
// systemd, cloud-init, sshd and DHCP through ifupdown (the renderer
// cloud-init picks on Debian when ifupdown is there).
var debianPackages = []string{"linux-image-amd64", "systemd-sysv", "udev", "cloud-init", "openssh-server",
	"ifupdown", "isc-dhcp-client", "netbase", "e2fsprogs", "ca-certificates"}

// buildDebian makes the e2e-full image: mmdebstrap (images/debroot, mode
// root: the builder runs as root) writes a Debian root from Debian's
// packages through apt's mirror; it is made a cloud image (debroot.Scrub:
// no host keys, an empty machine-id; an fstab by UUID) and laid on the same
// GPT as the tiny image, then copied to qcow2.
func (b *builder) buildDebian() (*Image, error) {
	inputs := map[string]string{"kind": "debian", "suite": b.opts.Suite, "packages": strings.Join(debianPackages, ","),
		"dpkgopts": strings.Join(debroot.Slim, ",")}
	// The candidates of the packages that matter most name what apt would
	// install today: a new kernel or cloud-init is a new image.
	for _, p := range []string{"linux-image-amd64", "cloud-init", "systemd", "openssh-server"} {
		for _, line := range strings.Split(debkernel.Output("apt-cache", "policy", p), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
				inputs["candidate "+p] = strings.TrimSpace(v)
			}
		}
	}
	key := b.key(inputs)
	dir := filepath.Join(b.opts.Dir, "debian-"+b.opts.Suite+"-"+key)
	if img, ok := cached(dir); ok {
		b.logf("%s (cached)", img.Path)
		return img, nil
	}
	tree := filepath.Join(b.work, "root")
	b.logf("mmdebstrap %s into %s (a few minutes)", b.opts.Suite, tree)
	if err := debroot.Build(b.ctx, tree, debroot.Options{Suite: b.opts.Suite, Packages: debianPackages, DpkgOpts: debroot.Slim}); err != nil {
		return nil, err
	}
	kernels, _ := filepath.Glob(filepath.Join(tree, "boot", "vmlinuz-*"))
	sort.Strings(kernels)
	if len(kernels) == 0 {
		return nil, fmt.Errorf("mmdebstrap left no kernel in %s/boot", tree)
	}
	version := strings.TrimPrefix(filepath.Base(kernels[len(kernels)-1]), "vmlinuz-")
	if _, err := os.Stat(filepath.Join(tree, "boot", "initrd.img-"+version)); err != nil {
		return nil, fmt.Errorf("no initrd for kernel %s: %w", version, err)
	}

	rootUUID := uuid(key, "rootfs")
	// A cloud image: every machine makes its own host keys and machine-id
	// at first boot.
	if err := debroot.Scrub(tree); err != nil {
		return nil, err
	}
	for name, data := range map[string]string{
		"etc/fstab":          fmt.Sprintf("UUID=%s / ext4 errors=remount-ro 0 1\n", rootUUID),
		"boot/grub/grub.cfg": grubConfig(rootUUID, "Debian GNU/Linux ("+b.opts.Suite+", Rollcall e2e-full)", "/boot/vmlinuz-"+version, "/boot/initrd.img-"+version, "root=UUID="+rootUUID+" ro console=ttyS0,115200 panic=10"),
	} {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
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
	b.logf("mkfs.ext4 -d: %d MiB root", rootSize>>20)
	if err := b.makeExt4(root, tree, rootSize, rootUUID); err != nil {
		return nil, err
	}
	os.RemoveAll(tree) // hundreds of MB, and the partition has it now
	img := &Image{Path: filepath.Join(tmp, "disk.raw"), QCOW2: filepath.Join(tmp, "disk.qcow2"), RootUUID: rootUUID, DiskGUID: uuid(key, "disk"), Key: key}
	if err := b.assemble(img.Path, key, gpt.TypeRootAMD64, core, esp, root); err != nil {
		return nil, err
	}
	if err := b.run("", "qemu-img", "convert", "-f", "raw", "-O", "qcow2", img.Path, img.QCOW2); err != nil {
		return nil, err
	}
	final, err := publish(tmp, dir, img)
	if err != nil {
		return nil, err
	}
	prune(b.opts.Dir, "debian-"+b.opts.Suite+"-", dir)
	b.logf("%s: %d MiB, kernel %s, suite %s (qcow2 beside it)", final.Path, b.opts.Size>>20, version, b.opts.Suite)
	return final, nil
}
