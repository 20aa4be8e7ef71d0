package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The image verbs against a node: import uploads each file and records
// the image, list shows it, rm forgets it; what they print, as a golden.
func TestImageCLI(t *testing.T) {
	startNode(t, nodeOptions{}).use(t)
	dir := t.TempDir()
	for name, content := range map[string]string{"vmlinuz": "a kernel", "initrd.img": "an initrd, larger than the kernel"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var printed strings.Builder
	for _, args := range [][]string{
		{"image", "import", "lab", "-kernel", filepath.Join(dir, "vmlinuz"), "-initrd", filepath.Join(dir, "initrd.img")},
		{"image", "list"},
		{"image", "rm", "lab"},
		{"image", "list"},
	} {
		printed.WriteString("$ rollcall " + strings.Join(args, " ") + "\n" + mustRun(t, args...))
		if args[1] == "import" {
			var l wire.ImageList
			if err := json.Unmarshal([]byte(mustRun(t, "image", "list", "-json")), &l); err != nil || len(l.Images) != 1 || len(l.Images[0].Files) != 2 {
				t.Errorf("image list -json: %+v, %v", l, err)
			}
		}
	}
	golden(t, "image", normalize(strings.ReplaceAll(printed.String(), dir, "DIR")))

	for _, args := range [][]string{
		{"image"}, {"image", "import", "lab", "-kernel", filepath.Join(dir, "vmlinuz")}, {"image", "import", "-kernel", "k", "-initrd", "i"},
		{"image", "import", "Bad/Name", "-kernel", "k", "-initrd", "i"}, {"image", "import", "lab", "-kernel", dir, "-initrd", dir},
		{"image", "rm", "nosuch"}, {"image", "rm"},
	} {
		if code, _, errs := run(args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}
