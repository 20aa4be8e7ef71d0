package raftfsm_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// statelessLog is a store with three commissioned (ready) machines, the
// image compute, the overlay compute and a subnet with a static range of
// two addresses.
func statelessLog(t *testing.T) *fsmtest.Log {
	t.Helper()
	l := fsmtest.Open(t)
	commissionFleet(t, l, 3)
	pfx := netip.MustParsePrefix
	addr := netip.MustParseAddr
	l.Must(t,
		&raftfsm.ImagePut{Image: raftfsm.Image{Name: "compute", Files: []raftfsm.ImageFile{
			{Name: "kernel", Size: 1, SHA256: strings.Repeat("a", 64)},
			{Name: "initrd", Size: 1, SHA256: strings.Repeat("b", 64)},
			{Name: "squashfs", Size: 1, SHA256: strings.Repeat("c", 64)},
		}, Nodes: []string{"n1"}, Created: t0}},
		&raftfsm.OverlayPut{Name: "compute", Files: []raftfsm.OverlayFile{
			{Path: "system/etc/hostname.tmpl", Mode: 0o644, Content: []byte("{{ .Node.Name }}\n")},
			{Path: "runtime/run/rollcall/heartbeat", Mode: 0o644},
		}, Now: t0},
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "fab1", Kind: store.FabricEthernet, Created: t0}},
		&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: pfx("10.20.0.0/24"), Fabric: "fab1", Purpose: "provisioning", Gateway: addr("10.20.0.1"), Created: t0}},
		&raftfsm.RangePut{Range: raftfsm.Range{Subnet: pfx("10.20.0.0/24"), Kind: store.RangeDynamic, First: addr("10.20.0.2"), Last: addr("10.20.0.99"), Created: t0}},
		&raftfsm.RangePut{Range: raftfsm.Range{Subnet: pfx("10.20.0.0/24"), Kind: store.RangeReserved, First: addr("10.20.0.102"), Last: addr("10.20.0.254"), Created: t0}},
	)
	return l
}

func computeProfile() raftfsm.Profile {
	return raftfsm.Profile{Name: "compute", Image: "compute", Overlays: []string{"compute"}, Args: "console=ttyS0",
		NameFormat: "cn%02d", NameFirst: 1, NameLast: 2, Subnets: []string{"10.20.0.0/24"}, Vars: map[string]string{"cluster": "hpc"}}
}

func assign(machine string, minute int) *raftfsm.Assign {
	return &raftfsm.Assign{Machine: machine, Profile: "compute", SSHHostKeySealed: []byte("sealed:" + machine),
		SSHHostKeyPub: "ssh-ed25519 AAAAC3Nza" + machine, Now: t0.Add(time.Duration(minute) * time.Minute)}
}

func nodeOf(t *testing.T, l *fsmtest.Log, id string) store.StatelessNode {
	return view(t, l, func(tx *store.Tx) (store.StatelessNode, error) { return tx.StatelessNode(id) })
}

// A node's whole life: assigned (name and address from the pool, state
// stateless, the sealed key kept), seen (booted, then heartbeats),
// unassigned (ready, name and address free again for the next one).
func TestStatelessLifecycle(t *testing.T) {
	l := statelessLog(t)
	a, b, c := pgtest.ID(0), pgtest.ID(1), pgtest.ID(2)
	l.Must(t, &raftfsm.ProfilePut{Profile: computeProfile(), Now: t0})
	p := view(t, l, func(tx *store.Tx) (store.Profile, error) { return tx.Profile("compute") })
	if !p.Created.Equal(t0) || p.NameFormat != "cn%02d" || p.Vars["cluster"] != "hpc" {
		t.Fatalf("profile: %+v", p)
	}
	l.Must(t, assign(a, 1))
	genA := l.Index
	n := nodeOf(t, l, a)
	want := store.StatelessNode{Machine: a, Profile: "compute", Name: "cn01", Number: 1, Addresses: []string{"10.20.0.100/24"},
		Generation: genA, Assigned: t0.Add(time.Minute), SSHHostKeySealed: []byte("sealed:" + a), SSHHostKeyPub: "ssh-ed25519 AAAAC3Nza" + a}
	if d := cmp.Diff(want, n); d != "" {
		t.Fatalf("node (-want +got):\n%s", d)
	}
	if m := machineOf(t, l, a); m.State != store.StateStateless {
		t.Fatalf("machine: %s", m.State)
	}
	if owner := addressOwner(t, l, "10.20.0.100"); owner != a {
		t.Fatalf("10.20.0.100 held by %q", owner)
	}
	// Assigning again to the same profile is done already; to another, refused.
	l.Must(t, assign(a, 2))
	if n := nodeOf(t, l, a); n.Generation != genA {
		t.Fatalf("a repeated assign changed the node: %+v", n)
	}
	l.Must(t, assign(b, 3))
	if n := nodeOf(t, l, b); n.Name != "cn02" || n.Addresses[0] != "10.20.0.101/24" {
		t.Fatalf("second node: %+v", n)
	}
	// The pool has two names: the third is refused with the profile and range.
	err := l.Apply(assign(c, 4))
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(store.Public(err), "profile compute") || !strings.Contains(store.Public(err), "cn%02d, 1..2") {
		t.Fatalf("full pool: %v", err)
	}
	if m := machineOf(t, l, c); m.State != store.StateReady {
		t.Fatalf("refused machine moved: %s", m.State)
	}
	// Seen: booted on the first, a heartbeat later; a stale generation ignored.
	l.Must(t, &raftfsm.StatelessSeen{Nodes: []raftfsm.NodeSeen{
		{Machine: a, Generation: genA, Time: t0.Add(5 * time.Minute), Booted: true},
		{Machine: b, Generation: genA, Time: t0.Add(5 * time.Minute), Booted: true}, // b's generation is not genA
	}})
	if n := nodeOf(t, l, a); !n.Booted.Equal(t0.Add(5*time.Minute)) || !n.LastSeen.Equal(n.Booted) {
		t.Fatalf("booted node: %+v", n)
	}
	if m := machineOf(t, l, a); m.State != store.StateBooted {
		t.Fatalf("machine after first fetch: %s", m.State)
	}
	if n, m := nodeOf(t, l, b), machineOf(t, l, b); !n.Booted.IsZero() || m.State != store.StateStateless {
		t.Fatalf("a stale generation's item was applied: %+v %s", n, m.State)
	}
	l.Must(t, &raftfsm.StatelessSeen{Nodes: []raftfsm.NodeSeen{{Machine: a, Generation: genA, Time: t0.Add(10 * time.Minute), Booted: true}}})
	if n := nodeOf(t, l, a); !n.Booted.Equal(t0.Add(5*time.Minute)) || !n.LastSeen.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("heartbeat: %+v", n)
	}
	// The profile and overlay are in use: not deleted; nor is the machine.
	if err := l.Apply(&raftfsm.ProfileDelete{Name: "compute"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("profile delete in use: %v", err)
	}
	if err := l.Apply(&raftfsm.OverlayDelete{Name: "compute"}); !errors.Is(err, store.ErrConflict) || !strings.Contains(store.Public(err), "profile compute") {
		t.Fatalf("overlay delete in use: %v", err)
	}
	if err := l.Apply(&raftfsm.MachineDelete{ID: a}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("machine delete of a node: %v", err)
	}
	if err := l.Apply(&raftfsm.Recommission{ID: a, Now: t0}); !errors.Is(err, store.ErrTransition) {
		t.Fatalf("recommission of a node: %v", err)
	}
	// Unassign frees name and address: c takes them.
	l.Must(t, &raftfsm.Unassign{Machine: a, Now: t0.Add(11 * time.Minute)})
	if m := machineOf(t, l, a); m.State != store.StateReady {
		t.Fatalf("unassigned machine: %s", m.State)
	}
	if owner := addressOwner(t, l, "10.20.0.100"); owner != "" {
		t.Fatalf("address still held by %q", owner)
	}
	if err := l.DB.View(func(tx *store.Tx) error { _, err := tx.StatelessNode(a); return err }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("node record after unassign: %v", err)
	}
	if err := l.Apply(&raftfsm.Unassign{Machine: a, Now: t0}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("unassign twice: %v", err)
	}
	// A seen item for the old assignment does nothing.
	l.Must(t, &raftfsm.StatelessSeen{Nodes: []raftfsm.NodeSeen{{Machine: a, Generation: genA, Time: t0.Add(12 * time.Minute), Booted: true}}})
	if m := machineOf(t, l, a); m.State != store.StateReady {
		t.Fatalf("old generation moved the machine: %s", m.State)
	}
	l.Must(t, assign(c, 13))
	if n := nodeOf(t, l, c); n.Name != "cn01" || n.Addresses[0] != "10.20.0.100/24" {
		t.Fatalf("freed name and address not reused: %+v", n)
	}
}

func TestStatelessRefusals(t *testing.T) {
	l := statelessLog(t)
	a := pgtest.ID(0)
	good := computeProfile()
	cases := map[string]struct {
		cmd  raftfsm.Command
		want error
		text string
	}{
		"missing image":     {cmd: &raftfsm.ProfilePut{Profile: with(good, func(p *raftfsm.Profile) { p.Image = "nope" }), Now: t0}, want: store.ErrNotFound, text: `image "nope"`},
		"missing overlay":   {cmd: &raftfsm.ProfilePut{Profile: with(good, func(p *raftfsm.Profile) { p.Overlays = []string{"nope"} }), Now: t0}, want: store.ErrNotFound, text: `overlay "nope"`},
		"missing subnet":    {cmd: &raftfsm.ProfilePut{Profile: with(good, func(p *raftfsm.Profile) { p.Subnets = []string{"10.99.0.0/24"} }), Now: t0}, want: store.ErrNotFound, text: "subnet 10.99.0.0/24"},
		"bad name format":   {cmd: &raftfsm.ProfilePut{Profile: with(good, func(p *raftfsm.Profile) { p.NameFormat = "cn%s" }), Now: t0}, want: store.ErrInvalid},
		"set missing":       {cmd: &raftfsm.ProfilePut{Profile: good, Replace: true, Now: t0}, want: store.ErrNotFound},
		"delete missing":    {cmd: &raftfsm.ProfileDelete{Name: "nope"}, want: store.ErrNotFound},
		"assign no profile": {cmd: assign(a, 1), want: store.ErrNotFound},
		"overlay escapes":   {cmd: &raftfsm.OverlayPut{Name: "x", Files: []raftfsm.OverlayFile{{Path: "system/../../etc/shadow"}}, Now: t0}, want: store.ErrInvalid, text: "overlay x"},
		"overlay bad name":  {cmd: &raftfsm.OverlayPut{Name: "X/y", Now: t0}, want: store.ErrInvalid},
		"overlay missing":   {cmd: &raftfsm.OverlayDelete{Name: "nope"}, want: store.ErrNotFound},
		"seen bad id":       {cmd: &raftfsm.StatelessSeen{Nodes: []raftfsm.NodeSeen{{Machine: "x"}}}, want: store.ErrInvalid},
		"munge empty":       {cmd: &raftfsm.MungeKeySet{Now: t0}, want: store.ErrInvalid},
	}
	for name, c := range cases {
		if err := l.FSM.Precheck(c.cmd); !errors.Is(err, c.want) || !strings.Contains(store.Public(err), c.text) {
			t.Errorf("%s: precheck %v, want %v containing %q", name, err, c.want, c.text)
		}
		if err := l.Apply(c.cmd); !errors.Is(err, c.want) {
			t.Errorf("%s: apply %v, want %v", name, err, c.want)
		}
	}
	l.Must(t, &raftfsm.ProfilePut{Profile: good, Now: t0})
	if err := l.Apply(&raftfsm.ProfilePut{Profile: good, Now: t0}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("add twice: %v", err)
	}
	bad := assign(a, 1)
	bad.SSHHostKeyPub = "ssh-rsa AAAA"
	if err := l.Apply(bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("rsa host key: %v", err)
	}
	bad = assign(a, 1)
	bad.SSHHostKeySealed = nil
	if err := l.Apply(bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no host key: %v", err)
	}
	// A machine that is not ready is refused.
	l.Must(t, &raftfsm.Recommission{ID: a, Now: t0})
	if err := l.Apply(assign(a, 2)); !errors.Is(err, store.ErrTransition) {
		t.Errorf("assign a new machine: %v", err)
	}
	// Every refusal above left no node behind.
	if ns := view(t, l, func(tx *store.Tx) ([]store.StatelessNode, error) { return tx.StatelessNodes() }); len(ns) != 0 {
		t.Errorf("nodes after refusals: %+v", ns)
	}
}

func with(p raftfsm.Profile, f func(*raftfsm.Profile)) raftfsm.Profile {
	f(&p)
	return p
}

// The overlay is stored sorted with its digest and size; the munge key
// once, the first writer's.
func TestOverlayAndMungeKey(t *testing.T) {
	l := fsmtest.Open(t)
	l.Must(t, &raftfsm.OverlayPut{Name: "o", Files: []raftfsm.OverlayFile{
		{Path: "system/b", Mode: 0o600, Content: []byte("bb")},
		{Path: "runtime/a", Mode: 0o644, Content: []byte("a")},
	}, Now: t0})
	o := view(t, l, func(tx *store.Tx) (store.Overlay, error) { return tx.Overlay("o") })
	sum, size := store.OverlayDigest(o.Files)
	if o.Files[0].Path != "runtime/a" || o.SHA256 != sum || o.Size != 3 || size != 3 || !o.Updated.Equal(t0) {
		t.Fatalf("overlay: %+v", o)
	}
	l.Must(t, &raftfsm.MungeKeySet{Sealed: []byte("first"), Now: t0}, &raftfsm.MungeKeySet{Sealed: []byte("second"), Now: t0})
	k := view(t, l, func(tx *store.Tx) (store.MungeKey, error) { k, _, err := tx.MungeKey(); return k, err })
	if string(k.Sealed) != "first" {
		t.Fatalf("munge key %q, want the first", k.Sealed)
	}
}
