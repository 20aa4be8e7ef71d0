package statelessimage_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/lab/statelessimage"
	"github.com/rollcall/rollcall/lab/testenv"
)

// The root holds init, the overlay client and the directories they write
// into; a second build with the same inputs keeps the file.
func TestBuild(t *testing.T) {
	testenv.NeedTool(t, "mksquashfs", "unsquashfs")
	out := t.TempDir()
	p, err := statelessimage.Build(statelessimage.Options{Out: out, Epoch: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unsquashfs", "-lls", p)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	list, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unsquashfs: %v\n%s", err, list)
	}
	for _, want := range []string{"squashfs-root/sbin/init", "squashfs-root/usr/local/sbin/rollcall-overlay", "squashfs-root/etc/ssh", "squashfs-root/run"} {
		if !strings.Contains(string(list), want+"\n") {
			t.Errorf("the root lacks %s:\n%s", want, list)
		}
	}
	if !strings.Contains(string(list), "root/root") || !strings.Contains(string(list), "2023-11-14 22:13") {
		t.Errorf("entries are not root's with the epoch's time:\n%s", list)
	}
	before, _ := os.Stat(p)
	if _, err := statelessimage.Build(statelessimage.Options{Out: out, Epoch: 1700000000}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(p)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("a build with the same inputs wrote the file again")
	}
	if _, err := os.Stat(filepath.Join(out, statelessimage.File+".inputs")); err != nil {
		t.Error(err)
	}
}
