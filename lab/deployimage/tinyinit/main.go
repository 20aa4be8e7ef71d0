//go:build linux

// Command tinyinit is the /init of the deploy test image's initrd: the
// smallest thing that shows a deployed disk booted and read its NoCloud
// seed. As PID 1 it mounts the kernel's file systems, loads the modules the
// initrd carries, finds the root partition (GPT type "Linux root (x86-64)"
// and file system label "root"), reads /var/lib/cloud/seed/nocloud/
// {meta-data,user-data} there, sets the hostname the way cloud-init would,
// brings the NICs up with DHCP, POSTs cloud-init's phone_home form, writes
// a marker file on the root (MarkerPath) and powers off. Every step is
// logged on the console; a failure is logged, written into the marker when
// the root is mounted, and the machine powers off all the same.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rollcall/rollcall/agent/sysinit"
	"github.com/rollcall/rollcall/lab/deployimage/gpt"
	"github.com/rollcall/rollcall/lab/deployimage/nocloud"
)

const (
	sysroot  = "/sysroot"
	seedDir  = "var/lib/cloud/seed/nocloud"
	marker   = "var/lib/rollcall/booted-from-disk" // lab/deployimage.MarkerPath
	rootWait = 30 * time.Second
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo})).With("tinyinit", "rollcall")
	if os.Getpid() != 1 {
		log.Error("not PID 1: tinyinit is the deploy test image's init and powers the machine off")
		os.Exit(2)
	}
	start := time.Now()
	report, err := run(log)
	if err != nil {
		log.Error("tinyinit failed", "err", err)
		report = append(report, "error: "+err.Error())
	}
	if mounted {
		if err := writeMarker(report); err != nil {
			log.Error("write marker", "err", err)
		}
		if err := unix.Unmount(sysroot, 0); err != nil {
			log.Warn("unmount root", "err", err)
		}
	}
	log.Info("powering off", "after", time.Since(start).Round(time.Millisecond))
	err = sysinit.PowerOff()
	log.Error("power off", "err", err)
	select {}
}

var mounted bool

// run does the work and returns the marker's lines.
func run(log *slog.Logger) ([]string, error) {
	if err := sysinit.Mount(); err != nil {
		log.Warn("mount", "err", err)
	}
	firmware := "bios"
	if _, err := os.Stat("/sys/firmware/efi"); err == nil {
		firmware = "uefi"
	}
	release := sysinit.Release()
	loaded, err := sysinit.LoadModules("/lib/modules/"+release, log)
	if err != nil {
		log.Warn("load modules", "err", err)
	}
	log.Info("booted from disk", "kernel", release, "firmware", firmware, "modules", len(loaded))

	root, err := findRoot(log)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(sysroot, 0o755); err != nil {
		return nil, err
	}
	if err := unix.Mount(root.dev, sysroot, root.fstype, 0, ""); err != nil {
		return nil, fmt.Errorf("mount %s (%s) on %s: %w", root.dev, root.fstype, sysroot, err)
	}
	mounted = true
	log.Info("root mounted", "dev", root.dev, "fstype", root.fstype, "label", root.label, "gpt_type", root.typ)
	report := []string{"booted from disk", "firmware: " + firmware, "root: " + root.dev + " " + root.fstype}

	metaRaw, err := readBounded(filepath.Join(sysroot, seedDir, "meta-data"))
	if err != nil {
		return report, fmt.Errorf("no NoCloud seed: %w", err)
	}
	md, err := nocloud.ParseMetaData(metaRaw)
	if err != nil {
		return report, err
	}
	report = append(report, "instance-id: "+md.InstanceID)
	userRaw, err := readBounded(filepath.Join(sysroot, seedDir, "user-data"))
	if err != nil {
		return report, fmt.Errorf("NoCloud seed: %w", err)
	}
	cfg, err := nocloud.ParseUserData(userRaw)
	if err != nil {
		return report, err
	}
	host, fqdn := nocloud.Hostname(cfg, md)
	if err := unix.Sethostname([]byte(host)); err != nil {
		return report, fmt.Errorf("sethostname %q: %w", host, err)
	}
	if err := os.WriteFile(filepath.Join(sysroot, "etc/hostname"), []byte(host+"\n"), 0o644); err != nil {
		return report, err
	}
	report = append(report, "hostname: "+host, "fqdn: "+fqdn)
	log.Info("seed read", "instance_id", md.InstanceID, "hostname", host, "fqdn", fqdn)

	ph, err := nocloud.PhoneHomeOf(cfg)
	if err != nil {
		return report, err
	}
	if ph == nil {
		log.Info("no phone_home in user-data")
		return append(report, "phone-home: none"), nil
	}
	keys, err := hostKeys(host, log)
	if err != nil {
		log.Warn("host keys", "err", err)
	}
	url, form, err := ph.Form(md, keys)
	if err != nil {
		return report, err
	}
	if err := sysinit.WaitForEntropy(); err != nil {
		log.Warn("entropy", "err", err)
	}
	nics := sysinit.WaitForNICs(time.Second, 10*time.Second)
	leases, err := sysinit.Network(context.Background(), 30*time.Second, log)
	if err != nil {
		return report, fmt.Errorf("network (NICs %v): %w", nics, err)
	}
	log.Info("network up", "leases", len(leases))
	roots, n := trustAnchors(log)
	report = append(report, fmt.Sprintf("trust anchors: %d", n))
	status, err := post(url, form, ph.Tries, roots, log)
	if err != nil {
		return append(report, "phone-home: failed"), err
	}
	log.Info("phoned home", "status", status, "fields", len(form))
	return append(report, "phone-home: "+status), nil
}

// readBounded reads a seed file, refusing one larger than a seed may be.
func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, nocloud.MaxSeedBytes+1)
	n, err := f.Read(b)
	for err == nil && n < len(b) {
		var m int
		m, err = f.Read(b[n:])
		n += m
	}
	if n > nocloud.MaxSeedBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, nocloud.MaxSeedBytes)
	}
	return b[:n], nil
}

type rootPart struct {
	dev, fstype, label, typ string
	score                   int
}

// findRoot waits for the disks to appear and picks the partition that
// has both the root type and the label "root", else either.
func findRoot(log *slog.Logger) (rootPart, error) {
	deadline := time.Now().Add(rootWait)
	for {
		var best rootPart
		var seen []string
		ents, _ := os.ReadDir("/sys/block")
		for _, e := range ents {
			disk := e.Name()
			if strings.HasPrefix(disk, "loop") || strings.HasPrefix(disk, "ram") || strings.HasPrefix(disk, "sr") {
				continue
			}
			seen = append(seen, disk)
			for _, c := range candidates(disk, log) {
				if c.score > best.score {
					best = c
				}
			}
		}
		if best.score > 0 {
			return best, nil
		}
		if time.Now().After(deadline) {
			return rootPart{}, fmt.Errorf("no root partition (GPT type %s or label root) on %v after %v", gpt.TypeRootAMD64, seen, rootWait)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func candidates(disk string, log *slog.Logger) []rootPart {
	sector := 512
	if b, err := os.ReadFile("/sys/block/" + disk + "/queue/logical_block_size"); err == nil {
		fmt.Sscan(strings.TrimSpace(string(b)), &sector)
	}
	f, err := os.Open("/dev/" + disk)
	if err != nil {
		return nil
	}
	tab, err := gpt.Read(f, sector)
	f.Close()
	if err != nil {
		if !errors.Is(err, gpt.ErrNoTable) {
			log.Warn("partition table", "disk", disk, "err", err)
		}
		return nil
	}
	var out []rootPart
	for _, p := range tab.Partitions {
		dev := partitionDev(disk, p.Number)
		if dev == "" {
			continue
		}
		fstype, label := probe(dev)
		c := rootPart{dev: dev, fstype: fstype, label: label, typ: p.Type}
		if fstype == "" {
			continue
		}
		if p.Type == gpt.TypeRootAMD64 {
			c.score += 2
		}
		if label == "root" {
			c.score++
		}
		if c.score > 0 {
			out = append(out, c)
		}
	}
	return out
}

// partitionDev finds /dev/NAME of partition n of disk through sysfs (vda3,
// nvme0n1p3).
func partitionDev(disk string, n int) string {
	ents, _ := os.ReadDir("/sys/block/" + disk)
	for _, e := range ents {
		b, err := os.ReadFile("/sys/block/" + disk + "/" + e.Name() + "/partition")
		if err == nil && strings.TrimSpace(string(b)) == fmt.Sprint(n) {
			return "/dev/" + e.Name()
		}
	}
	return ""
}

// probe reads a file system's magic and label: ext4's 0xEF53 at byte 1080
// (label at 1144, 16 bytes), XFS's "XFSB" at 0 (label at 108, 12 bytes).
func probe(dev string) (fstype, label string) {
	f, err := os.Open(dev)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	b := make([]byte, 2048)
	if _, err := f.ReadAt(b, 0); err != nil {
		return "", ""
	}
	switch {
	case binary.LittleEndian.Uint16(b[1080:]) == 0xEF53:
		return "ext4", cstring(b[1144 : 1144+16])
	case string(b[0:4]) == "XFSB":
		return "xfs", cstring(b[108 : 108+12])
	}
	return "", ""
}

func cstring(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// hostKeys reads the host keys' public halves as cc_phone_home does; on a
// first boot with none it makes an ed25519 one (the image has no sshd: only
// the public half is kept, for phone_home to carry).
func hostKeys(host string, log *slog.Logger) (map[string]string, error) {
	dir := filepath.Join(sysroot, "etc/ssh")
	keys := map[string]string{}
	for _, k := range []string{"dsa", "rsa", "ecdsa", "ed25519"} {
		if b, err := os.ReadFile(filepath.Join(dir, "ssh_host_"+k+"_key.pub")); err == nil {
			keys["pub_key_"+k] = string(b)
		}
	}
	if len(keys) > 0 {
		return keys, nil
	}
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return keys, err
	}
	var blob []byte
	for _, s := range [][]byte{[]byte("ssh-ed25519"), pub} {
		blob = binary.BigEndian.AppendUint32(blob, uint32(len(s)))
		blob = append(blob, s...)
	}
	line := "ssh-ed25519 " + base64.StdEncoding.EncodeToString(blob) + " root@" + host + "\n"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return keys, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ssh_host_ed25519_key.pub"), []byte(line), 0o644); err != nil {
		return keys, err
	}
	log.Info("made an ed25519 host key (public half only)")
	keys["pub_key_ed25519"] = line
	return keys, nil
}

// The trust anchors the deploy agent writes (Debian's, RHEL's), which a
// real image activates with update-ca-certificates or update-ca-trust.
var anchorGlobs = []string{"usr/local/share/ca-certificates/*.crt", "etc/pki/ca-trust/source/anchors/*.pem"}

// trustAnchors is the pool phone home trusts, as a real image's would be
// after it activated its anchors: the certificates found in the root's
// trust anchor directories (a phone_home URL on the cluster's HTTPS port
// is signed by the cluster CA the agent put there), and how many there
// were. Unreadable files are logged and skipped.
func trustAnchors(log *slog.Logger) (*x509.CertPool, int) {
	pool := x509.NewCertPool()
	n := 0
	for _, g := range anchorGlobs {
		files, _ := filepath.Glob(filepath.Join(sysroot, g))
		for _, f := range files {
			b, err := readBounded(f)
			if err == nil && pool.AppendCertsFromPEM(b) {
				n++
				continue
			}
			log.Warn("trust anchor skipped", "file", f, "err", err)
		}
	}
	log.Info("trust anchors", "count", n)
	return pool, n
}

// post sends the form as cloud-init's url_helper does: tries times, 3 s
// apart, until a 2xx.
func post(url string, form map[string][]string, tries int, roots *x509.CertPool, log *slog.Logger) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	var last error
	for i := range tries {
		if i > 0 {
			time.Sleep(3 * time.Second)
		}
		resp, err := client.PostForm(url, form)
		if err != nil {
			var uerr *neturl.Error
			if errors.As(err, &uerr) {
				err = uerr.Err // its text quotes the URL, token and all
			}
			last = err
			log.Warn("phone home", "try", i+1, "err", err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return resp.Status, nil
		}
		last = fmt.Errorf("phone home: %s", resp.Status)
		log.Warn("phone home", "try", i+1, "status", resp.Status)
	}
	return "", fmt.Errorf("phone home to %s failed %d times: %w", redact(url), tries, last)
}

// redact keeps a phone-home URL's token (its path) out of the log.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "(url)"
	}
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host + "/…"
}

func writeMarker(lines []string) error {
	p := filepath.Join(sysroot, marker)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
