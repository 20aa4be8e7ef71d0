package initramfs

import (
	"bytes"
	"compress/gzip"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/lab/testenv"
)

// readNewc parses a newc archive back: name → (mode, data).
func readNewc(t *testing.T, b []byte) (names []string, modes map[string]uint32, data map[string]string) {
	t.Helper()
	modes, data = map[string]uint32{}, map[string]string{}
	off := 0
	field := func(i int) int {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		return int(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("bad magic at %d", off)
		}
		mode, size, namesize := field(1), field(6), field(11)
		name := string(b[off+110 : off+110+namesize-1])
		dataOff := align(off + 110 + namesize)
		if name == "TRAILER!!!" {
			return
		}
		names = append(names, name)
		modes[name] = uint32(mode)
		data[name] = string(b[dataOff : dataOff+size])
		off = align(dataOff + size)
	}
}

func TestWrite(t *testing.T) {
	entries := []Entry{
		{Name: "lib/modules/6.1.0-41-amd64/kernel/drivers/net/virtio_net.ko", Mode: 0o644, Type: TypeFile, Data: []byte("elf")},
		{Name: "init", Mode: 0o755, Type: TypeFile, Data: []byte("#agent")},
		{Name: "dev/console", Mode: 0o600, Type: TypeChar, Major: 5, Minor: 1},
		{Name: "dev", Mode: 0o755, Type: TypeDir},
		{Name: "tmp", Mode: 0o1777, Type: TypeDir},
	}
	var a, b bytes.Buffer
	if err := Write(&a, entries, 0); err != nil {
		t.Fatal(err)
	}
	// Input order does not matter.
	rev := append([]Entry(nil), entries...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if err := Write(&b, rev, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("same entries gave different archives")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header: time %v name %q", zr.ModTime, zr.Name)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	names, modes, data := readNewc(t, raw)
	want := []string{"dev", "dev/console", "init", "lib", "lib/modules", "lib/modules/6.1.0-41-amd64", "lib/modules/6.1.0-41-amd64/kernel",
		"lib/modules/6.1.0-41-amd64/kernel/drivers", "lib/modules/6.1.0-41-amd64/kernel/drivers/net",
		"lib/modules/6.1.0-41-amd64/kernel/drivers/net/virtio_net.ko", "tmp"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	if modes["init"] != 0o100755 || modes["dev/console"] != 0o020600 || modes["tmp"] != 0o041777 || data["init"] != "#agent" {
		t.Errorf("init %o %q, console %o, tmp %o", modes["init"], data["init"], modes["dev/console"], modes["tmp"])
	}
	// A real peer reads it too.
	if _, ok := testenv.LookTool(t, "cpio"); ok {
		cmd := exec.Command("cpio", "-t", "--quiet")
		cmd.Stdin = bytes.NewReader(raw)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(out)); len(got) != len(want) {
			t.Errorf("cpio -t lists %v", got)
		}
	}
	if err := Write(io.Discard, []Entry{{Name: "a", Type: TypeFile}, {Name: "/a", Type: TypeFile}}, 0); err == nil {
		t.Error("duplicate entry accepted")
	}
}
