package grubenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/lab/testenv"
)

func TestEncodeParse(t *testing.T) {
	e := New()
	for _, kv := range [][2]string{{"rollcall_slot", "a"}, {"rollcall_trial", "b"}, {"odd", "back\\slash\nnew line=x"}} {
		if err := e.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != BlockSize || !bytes.HasPrefix(b, []byte(Signature+"rollcall_slot=a\nrollcall_trial=b\nodd=back\\\\slash\\\nnew line=x\n#")) || b[BlockSize-1] != '#' {
		t.Fatalf("block:\n%q", b)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"rollcall_slot", "rollcall_trial", "odd"}, got.Keys()); d != "" {
		t.Error(d)
	}
	if v, _ := got.Get("odd"); v != "back\\slash\nnew line=x" {
		t.Errorf("odd = %q", v)
	}
	got.Set("rollcall_slot", "b")
	got.Unset("rollcall_trial")
	got.Unset("absent")
	b2, _ := got.Encode()
	if !bytes.HasPrefix(b2, []byte(Signature+"rollcall_slot=b\nodd=")) {
		t.Errorf("after edit:\n%q", b2)
	}
}

func TestRefused(t *testing.T) {
	e := New()
	for _, name := range []string{"", "a=b", "a\nb", "1st", "sp ace", strings.Repeat("x", 129)} {
		if err := e.Set(name, "v"); err == nil {
			t.Errorf("Set(%q): no error", name)
		}
	}
	if err := e.Set("big", strings.Repeat("v", BlockSize)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Encode(); err == nil || !strings.Contains(err.Error(), "the block holds 1024") {
		t.Errorf("oversized block: %v", err)
	}
	for name, b := range map[string]string{
		"no signature":  "name=value\n",
		"no equals":     Signature + "novalue\n####",
		"unterminated":  Signature + "a=b",
		"bad name":      Signature + "a b=c\n",
		"larger than a": Signature + strings.Repeat("#", maxBlock),
	} {
		if _, err := Parse([]byte(b)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// grub-editenv (Debian's grub-common) is the real peer: what it writes we
// read, and what we write it lists.
func TestGrubEditenv(t *testing.T) {
	testenv.NeedTool(t, "grub-editenv")
	dir := t.TempDir()
	path := filepath.Join(dir, "grubenv")
	run := func(args ...string) string {
		out, err := exec.Command("grub-editenv", append([]string{path}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grub-editenv %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("create")
	run("set", "rollcall_slot=a", "rollcall_trial=", "weird=x\\y")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := e.Get("weird"); v != `x\y` {
		t.Errorf("weird = %q", v)
	}
	if v, ok := e.Get("rollcall_trial"); !ok || v != "" {
		t.Errorf("rollcall_trial = %q, %v", v, ok)
	}

	var st0 syscall.Stat_t
	syscall.Stat(path, &st0)
	err = EditFile(path, func(e *Env) error {
		e.Unset("rollcall_trial")
		return e.Set("rollcall_slot", "b")
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := run("list"); got != "rollcall_slot=b\nweird=x\\y\n" {
		t.Errorf("grub-editenv list after EditFile:\n%s", got)
	}
	var st1 syscall.Stat_t
	syscall.Stat(path, &st1)
	if st0.Ino != st1.Ino || st1.Size != BlockSize {
		t.Errorf("EditFile made a new file or size: inode %d → %d, size %d", st0.Ino, st1.Ino, st1.Size)
	}

	// A failing edit changes nothing.
	before, _ := os.ReadFile(path)
	if err := EditFile(path, func(e *Env) error { return e.Set("x", strings.Repeat("y", 2000)) }); err == nil {
		t.Fatal("an edit that does not fit: no error")
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("a failed edit changed the file")
	}
}

// FuzzParse: whatever Parse accepts encodes to a block of the same size
// that parses to the same variables.
func FuzzParse(f *testing.F) {
	e := New()
	e.Set("rollcall_slot", "a")
	e.Set("v", "a\\b\nc")
	seed, _ := e.Encode()
	f.Add(seed)
	f.Add([]byte(Signature + "a=b\n#comment\nc=d\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Parse(b)
		if err != nil {
			return
		}
		out, err := e.Encode()
		if err != nil {
			return // a block whose escapes were implicit can grow
		}
		if len(out) != len(b) {
			t.Fatalf("size %d → %d", len(b), len(out))
		}
		e2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse: %v\n%q", err, out)
		}
		if !cmp.Equal(e.keys, e2.keys) || !cmp.Equal(e.vals, e2.vals) {
			t.Fatalf("round trip changed the variables: %v %v → %v %v", e.keys, e.vals, e2.keys, e2.vals)
		}
	})
}
