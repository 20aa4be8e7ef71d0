// Package statelessimage builds the stateless test image's root: a
// squashfs holding /sbin/init (testinit), the static rollcall-overlay
// client and the directories they write into. Booted with the
// commissioning image's kernel and initrd (whose agent fetches the
// squashfs into RAM and switches to it, rollcall.mode=stateless), it is
// what TestStatelessBoot runs: small (a few MiB) and built offline from
// this repository alone. The real compute image is images/compute-debian13.
//
// The squashfs depends only on its inputs: the binaries are built with
// -trimpath and no build ID, every entry is owned by root with one time
// (SOURCE_DATE_EPOCH), and a build whose inputs match the last one's keeps
// its file.
package statelessimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/rollcall/rollcall/images/agentinitrd"
)

// File is the squashfs's name in the output directory.
const File = "root.squashfs"

// Dirs are the directories of the root besides the binaries'.
var Dirs = []string{"dev", "proc", "sys", "run", "tmp", "root", "var", "etc", "etc/ssh", "usr/local/sbin", "sbin"}

// Options say where and how.
type Options struct {
	Out   string // output directory
	Epoch int64  // every entry's time
	Log   io.Writer
}

// Build makes Out/root.squashfs and returns its path.
func Build(o Options) (string, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if _, err := exec.LookPath("mksquashfs"); err != nil {
		return "", fmt.Errorf("mksquashfs: %w (apt-get install squashfs-tools)", err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(o.Out, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	tree := filepath.Join(work, "root")
	for _, d := range Dirs {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			return "", err
		}
	}
	version := agentinitrd.Version()
	for pkg, dst := range map[string]string{
		"github.com/rollcall/rollcall/lab/statelessimage/testinit": "sbin/init",
		"github.com/rollcall/rollcall/agent/cmd/rollcall-overlay":  "usr/local/sbin/rollcall-overlay",
	} {
		if err := agentinitrd.GoBuild(pkg, filepath.Join(tree, dst), version); err != nil {
			return "", err
		}
	}
	sum, err := treeSum(tree)
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s epoch=%d\n", sum, o.Epoch)
	out := filepath.Join(o.Out, File)
	stamp := out + ".inputs"
	if old, err := os.ReadFile(stamp); err == nil && string(old) == key {
		if _, err := os.Stat(out); err == nil {
			fmt.Fprintf(o.Log, "stateless image: %s is up to date\n", out)
			return out, nil
		}
	}
	tmp := filepath.Join(work, File)
	e := strconv.FormatInt(o.Epoch, 10)
	cmd := exec.Command("mksquashfs", tree, tmp, "-noappend", "-quiet", "-no-progress", "-all-root", "-no-xattrs",
		"-comp", "gzip", "-mkfs-time", e, "-all-time", e)
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mksquashfs: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	if err := os.WriteFile(stamp, []byte(key), 0o644); err != nil {
		return "", err
	}
	st, err := os.Stat(out)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(o.Log, "stateless image: %s, %.1f MiB\n", out, float64(st.Size())/(1<<20))
	return out, nil
}

// treeSum hashes the binaries of the tree (the directories are fixed).
func treeSum(tree string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"sbin/init", "usr/local/sbin/rollcall-overlay"} {
		b, err := os.ReadFile(filepath.Join(tree, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
