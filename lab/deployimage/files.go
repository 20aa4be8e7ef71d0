package deployimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rollcall/rollcall/lab/deployimage/gpt"
)

// RootPartition finds the root partition of a disk image by its GPT type.
func RootPartition(image string) (gpt.Partition, error) {
	f, err := os.Open(image)
	if err != nil {
		return gpt.Partition{}, err
	}
	defer f.Close()
	tab, err := gpt.Read(f, Sector)
	if err != nil {
		return gpt.Partition{}, fmt.Errorf("%s: %w", image, err)
	}
	r := tab.ByType(gpt.TypeRootAMD64)
	if len(r) != 1 {
		return gpt.Partition{}, fmt.Errorf("%s: %d partitions of type root (x86-64), want 1", image, len(r))
	}
	return r[0], nil
}

// debugfsTarget names the root file system inside the image for
// debugfs(8) ("image?offset=N", e2fsprogs' unix I/O manager option).
func debugfsTarget(image string) (string, error) {
	p, err := RootPartition(image)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s?offset=%d", image, p.Offset(Sector)), nil
}

// WriteFiles writes files (absolute paths on the root → contents) into the
// image's ext4 root with debugfs, mount-free, making parent directories as
// needed and replacing files already there. It is how the tests write a
// NoCloud seed as the deploy agent will (the agent does it on the real
// disk).
func WriteFiles(ctx context.Context, image string, files map[string][]byte) error {
	target, err := debugfsTarget(image)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "rollcall-writefiles-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for i, n := range names {
		clean := path.Clean("/" + n)
		if strings.ContainsAny(clean, " \"\n") {
			return fmt.Errorf("write %q: debugfs takes no blanks or quotes in names", n)
		}
		for d := path.Dir(clean); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
		if err := os.WriteFile(filepath.Join(tmp, fmt.Sprint(i)), files[n], 0o644); err != nil {
			return err
		}
	}
	ds := make([]string, 0, len(dirs))
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds) // parents before children; mkdir of one there is a no-op
	return writeWithDebugfs(ctx, target, ds, names, tmp)
}

func writeWithDebugfs(ctx context.Context, target string, dirs, names []string, tmp string) error {
	var script strings.Builder
	for _, d := range dirs {
		fmt.Fprintf(&script, "mkdir %s\n", d)
	}
	for i, n := range names {
		clean := path.Clean("/" + n)
		fmt.Fprintf(&script, "rm %s\nwrite %s %s\n", clean, filepath.Join(tmp, fmt.Sprint(i)), clean)
	}
	cmdFile := filepath.Join(tmp, "cmds")
	if err := os.WriteFile(cmdFile, []byte(script.String()), 0o644); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "debugfs", "-w", "-f", cmdFile, target).CombinedOutput()
	if err != nil {
		return fmt.Errorf("debugfs -w %s: %w\n%s", target, err, out)
	}
	// debugfs exits 0 whatever a command says: check each file landed.
	for _, n := range names {
		if _, err := ReadFile(ctx, strings.SplitN(target, "?", 2)[0], n); err != nil {
			return fmt.Errorf("write %s: %w\n%s", n, err, out)
		}
	}
	return nil
}

// ReadFile reads one file from the image's ext4 root with debugfs.
func ReadFile(ctx context.Context, image, name string) ([]byte, error) {
	target, err := debugfsTarget(image)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "rollcall-readfile-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dst := filepath.Join(tmp, "out")
	clean := path.Clean("/" + name)
	out, err := exec.CommandContext(ctx, "debugfs", "-R", "dump "+clean+" "+dst, target).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("debugfs dump %s: %w\n%s", clean, err, out)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		return nil, fmt.Errorf("%s is not on the image's root (debugfs: %s)", clean, strings.TrimSpace(string(out)))
	}
	return b, nil
}
