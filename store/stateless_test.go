package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNodeName(t *testing.T) {
	cases := map[string]struct {
		format string
		n      int
		want   string
		bad    bool
	}{
		"padded":      {format: "node%03d", n: 7, want: "node007"},
		"wider":       {format: "node%03d", n: 1234, want: "node1234"},
		"plain":       {format: "cn%d-a", n: 42, want: "cn42-a"},
		"no verb":     {format: "node", bad: true},
		"two verbs":   {format: "n%d%d", bad: true},
		"string verb": {format: "n%s", bad: true},
		"upper":       {format: "Node%d", bad: true},
		"zero width":  {format: "n%00d", bad: true},
	}
	for name, c := range cases {
		got, err := NodeName(c.format, c.n)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%s: NodeName(%q, %d) = %q, %v; want %q (error %v)", name, c.format, c.n, got, err, c.want, c.bad)
		}
	}
}

func TestCheckProfile(t *testing.T) {
	good := Profile{Name: "compute", Image: "compute-debian13", Overlays: []string{"compute"}, Args: "console=ttyS0", Subnets: []string{"10.0.0.0/24"}, Vars: map[string]string{"authorized_keys": "ssh-ed25519 AAAA"}}.WithDefaults()
	if err := CheckProfile(good); err != nil {
		t.Fatalf("good profile: %v", err)
	}
	cases := map[string]func(*Profile){
		"bad name":         func(p *Profile) { p.Name = "Compute" },
		"bad image":        func(p *Profile) { p.Image = "../x" },
		"overlay twice":    func(p *Profile) { p.Overlays = []string{"a", "a"} },
		"rollcall arg":     func(p *Profile) { p.Args = "rollcall.node=x" },
		"hostname arg":     func(p *Profile) { p.Args = "quiet hostname=evil" },
		"newline arg":      func(p *Profile) { p.Args = "a\nb" },
		"pool reversed":    func(p *Profile) { p.NameFirst, p.NameLast = 5, 4 },
		"pool too big":     func(p *Profile) { p.NameFirst, p.NameLast = 0, MaxNamePool },
		"name too long":    func(p *Profile) { p.NameFormat = strings.Repeat("n", 60) + "%05d" },
		"subnet host bits": func(p *Profile) { p.Subnets = []string{"10.0.0.1/24"} },
		"subnet garbage":   func(p *Profile) { p.Subnets = []string{"ten"} },
		"var name":         func(p *Profile) { p.Vars = map[string]string{"a-b": "x"} },
		"var NUL":          func(p *Profile) { p.Vars = map[string]string{"a": "x\x00"} },
	}
	for name, mutate := range cases {
		p := good
		p.Overlays = append([]string(nil), good.Overlays...)
		mutate(&p)
		if err := CheckProfile(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: CheckProfile = %v, want ErrInvalid", name, err)
		}
	}
}

func TestCheckOverlayFiles(t *testing.T) {
	ok := []OverlayFile{
		{Path: "system/etc/hosts.tmpl", Mode: 0o644, Content: []byte("x")},
		{Path: "runtime/etc/hosts.tmpl", Mode: 0o644},
		{Path: "system/etc/munge/munge.key.tmpl", Mode: 0o400},
	}
	if err := CheckOverlayFiles(ok); err != nil {
		t.Fatalf("good files: %v", err)
	}
	many := make([]OverlayFile, MaxOverlayFiles+1)
	for i := range many {
		many[i] = OverlayFile{Path: "system/f" + strings.Repeat("x", i%90) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Mode: 0o644}
	}
	cases := map[string][]OverlayFile{
		"absolute":         {{Path: "/system/etc/x"}},
		"dotdot":           {{Path: "system/../etc/x"}},
		"dot":              {{Path: "system/./x"}},
		"trailing slash":   {{Path: "system/etc/"}},
		"double slash":     {{Path: "system//x"}},
		"other tree":       {{Path: "etc/x"}},
		"tree only":        {{Path: "system"}},
		"NUL":              {{Path: "system/a\x00b"}},
		"bad UTF-8":        {{Path: "system/\xff"}},
		"long path":        {{Path: "system/" + strings.Repeat("a/", 130)}},
		"long component":   {{Path: "system/" + strings.Repeat("a", MaxOverlayComponent+1)}},
		"mode type bits":   {{Path: "system/x", Mode: 0o40755}},
		"twice":            {{Path: "system/x"}, {Path: "system/x"}},
		"file and dir":     {{Path: "system/etc"}, {Path: "system/etc/hosts"}},
		"too many":         many,
		"too much content": {{Path: "system/a", Content: make([]byte, MaxOverlayBytes/2+1)}, {Path: "system/b", Content: make([]byte, MaxOverlayBytes/2)}},
	}
	for name, files := range cases {
		if err := CheckOverlayFiles(files); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: CheckOverlayFiles = %v, want ErrInvalid", name, err)
		}
	}
}

func TestOverlayDigest(t *testing.T) {
	a := []OverlayFile{{Path: "system/a", Mode: 0o644, Content: []byte("ab")}, {Path: "system/b", Mode: 0o600, Content: []byte("c")}}
	sum, size := OverlayDigest(a)
	if size != 3 || len(sum) != 64 {
		t.Fatalf("digest %s size %d", sum, size)
	}
	// Moving a byte from one file to the next, or changing a mode, changes it.
	b := []OverlayFile{{Path: "system/a", Mode: 0o644, Content: []byte("a")}, {Path: "system/b", Mode: 0o600, Content: []byte("bc")}}
	c := []OverlayFile{{Path: "system/a", Mode: 0o600, Content: []byte("ab")}, {Path: "system/b", Mode: 0o600, Content: []byte("c")}}
	for name, other := range map[string][]OverlayFile{"moved byte": b, "mode": c} {
		if s, _ := OverlayDigest(other); s == sum {
			t.Errorf("%s: digest unchanged", name)
		}
	}
}

func TestStatelessNodes(t *testing.T) {
	db := open(t)
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	p := Profile{Name: "compute", Image: "img", Created: at}.WithDefaults()
	a := StatelessNode{Machine: "m-00000000000a", Profile: "compute", Name: "node001", Number: 1, Generation: 3, Assigned: at}
	b := StatelessNode{Machine: "m-00000000000b", Profile: "compute", Name: "node002", Number: 2, Generation: 3, Assigned: at}
	if err := write(t, db, 3, func(tx *Tx) error {
		if err := tx.PutMachine(Machine{ID: "m-00000000000c", State: StateReady, Name: "node003"}); err != nil {
			return err
		}
		if err := tx.PutProfile(p); err != nil {
			return err
		}
		if err := tx.PutStatelessNode(a); err != nil {
			return err
		}
		return tx.PutStatelessNode(b)
	}); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		got, err := tx.StatelessNode(a.Machine)
		if err != nil || !cmp.Equal(got, a) {
			t.Errorf("StatelessNode = %+v, %v", got, err)
		}
		if id, ok := tx.StatelessNodeByName("node002"); !ok || id != b.Machine {
			t.Errorf("by name: %s %v", id, ok)
		}
		if ids := tx.StatelessMachinesByProfile("compute"); !cmp.Equal(ids, []string{a.Machine, b.Machine}) {
			t.Errorf("by profile: %v", ids)
		}
		// node003 is another machine's name: the pool skips it.
		n, name, err := tx.NextNodeNumber(p, "m-00000000000d")
		if err != nil || n != 4 || name != "node004" {
			t.Errorf("NextNodeNumber = %d %s %v, want 4 node004", n, name, err)
		}
		if u := tx.ProfileUser("compute"); u != "machine m-00000000000a and 1 others" {
			t.Errorf("ProfileUser = %q", u)
		}
		return nil
	})
	// A name taken by another node is refused.
	err := write(t, db, 4, func(tx *Tx) error {
		return tx.PutStatelessNode(StatelessNode{Machine: "m-00000000000d", Profile: "compute", Name: "node001"})
	})
	if !errors.Is(err, ErrConflict) {
		t.Errorf("duplicate name: %v", err)
	}
	// Renaming moves the index; deleting drops it.
	b.Name = "node009"
	if err := write(t, db, 5, func(tx *Tx) error {
		if err := tx.PutStatelessNode(b); err != nil {
			return err
		}
		return tx.DeleteStatelessNode(a.Machine)
	}); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		if _, ok := tx.StatelessNodeByName("node002"); ok {
			t.Error("old name still indexed")
		}
		if _, ok := tx.StatelessNodeByName("node001"); ok {
			t.Error("deleted node still indexed")
		}
		if ids := tx.StatelessMachinesByProfile("compute"); !cmp.Equal(ids, []string{b.Machine}) {
			t.Errorf("by profile after delete: %v", ids)
		}
		if _, err := tx.StatelessNode(a.Machine); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted node: %v", err)
		}
		return nil
	})
	// A full pool names the profile and its range.
	small := Profile{Name: "tiny", Image: "img", NameFormat: "t%d", NameFirst: 1, NameLast: 1}
	write(t, db, 6, func(tx *Tx) error {
		return tx.PutStatelessNode(StatelessNode{Machine: "m-00000000000e", Profile: "tiny", Name: "t1"})
	})
	db.View(func(tx *Tx) error {
		_, _, err := tx.NextNodeNumber(small, "m-00000000000f")
		if !errors.Is(err, ErrConflict) || !strings.Contains(Public(err), "profile tiny") || !strings.Contains(Public(err), "t%d, 1..1") {
			t.Errorf("full pool: %v", err)
		}
		return nil
	})
}

func TestStale(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	n := StatelessNode{}
	if n.Stale(at.Add(time.Hour)) {
		t.Error("a node that never booted is stale")
	}
	n.Booted, n.LastSeen = at, at
	if n.Stale(at.Add(StaleAfter)) {
		t.Error("stale at exactly the limit")
	}
	if !n.Stale(at.Add(StaleAfter + time.Second)) {
		t.Error("not stale past the limit")
	}
}

func TestMungeKeyRecord(t *testing.T) {
	db := open(t)
	db.View(func(tx *Tx) error {
		if _, ok, err := tx.MungeKey(); ok || err != nil {
			t.Errorf("munge key before any: %v %v", ok, err)
		}
		return nil
	})
	if err := write(t, db, 2, func(tx *Tx) error { return tx.PutMungeKey(MungeKey{Sealed: []byte("sealed")}) }); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		k, ok, err := tx.MungeKey()
		if !ok || err != nil || string(k.Sealed) != "sealed" || k.Index != 2 {
			t.Errorf("munge key = %+v %v %v", k, ok, err)
		}
		return nil
	})
}
