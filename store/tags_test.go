package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/store/inventory"
)

func TestCheckTag(t *testing.T) {
	ok := Tag{Name: "gpu", Match: "{{ gt .Node.GPUs 0 }}", CloudConfig: "#cloud-config\npackages: [nvidia-driver]\n",
		Overlays: []string{"gres", "nvidia-modules"}, Layout: "gpu-bond", Comment: "NVIDIA nodes"}
	if err := CheckTag(ok); err != nil {
		t.Fatalf("a good tag: %v", err)
	}
	if err := CheckTag(Tag{Name: "rack-3", CloudConfig: "#!/bin/sh\necho hi\n"}); err != nil {
		t.Fatalf("a script fragment: %v", err)
	}
	for name, c := range map[string]struct {
		tag  Tag
		want string
	}{
		"upper case":      {Tag{Name: "GPU"}, `tag name "GPU" must be a DNS label`},
		"machine id form": {Tag{Name: "m-0123456789ab"}, "not of the form of a machine ID"},
		"empty name":      {Tag{}, `tag name ""`},
		"long rule":       {Tag{Name: "a", Match: strings.Repeat("x", MaxMatch+1)}, "at most 4096 bytes"},
		"bad utf-8 rule":  {Tag{Name: "a", Match: "\xff"}, "UTF-8"},
		"big fragment":    {Tag{Name: "a", CloudConfig: "#cloud-config\n" + strings.Repeat("x", MaxCloudConfig)}, "at most 64 KiB"},
		"plain yaml":      {Tag{Name: "a", CloudConfig: "packages: [x]\n"}, "starts with #cloud-config"},
		"long comment":    {Tag{Name: "a", Comment: strings.Repeat("c", MaxTagComment+1)}, "comment"},
		"many overlays":   {Tag{Name: "a", Overlays: make([]string, MaxOverlays+1)}, "17 overlays"},
		"bad overlay":     {Tag{Name: "a", Overlays: []string{"Drivers"}}, `overlay "Drivers"`},
		"overlay twice":   {Tag{Name: "a", Overlays: []string{"x", "x"}}, "listed once"},
		"bad layout":      {Tag{Name: "a", Layout: "../x"}, `layout "../x"`},
	} {
		err := CheckTag(c.tag)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(Public(err), c.want) {
			t.Errorf("%s: %v, want invalid saying %q", name, err, c.want)
		}
	}
}

// The tag index holds manual and automatic tags alike, follows every
// change, and goes with the machine.
func TestTagIndex(t *testing.T) {
	db := open(t)
	a := Machine{ID: "m-00000000000a", State: StateReady, Tags: []string{"burn-in", "gpu"}, AutoTags: []string{"gpu", "ib"}}
	b := Machine{ID: "m-00000000000b", State: StateReady, AutoTags: []string{"ib"}}
	c := Machine{ID: "m-00000000000c", State: StateNew}
	if err := write(t, db, 1, func(tx *Tx) error {
		for _, err := range []error{tx.PutTag(Tag{Name: "gpu", Match: "{{ true }}"}), tx.PutMachine(a), tx.PutMachine(b), tx.PutMachine(c)} {
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want map[string][]string) {
		t.Helper()
		db.View(func(tx *Tx) error {
			for tag, ids := range want {
				if d := cmp.Diff(ids, tx.MachineIDsByTag(tag)); d != "" {
					t.Errorf("%s: tag %s (-want +got):\n%s", when, tag, d)
				}
				ms, err := tx.MachinesByTag(tag)
				if err != nil || len(ms) != len(ids) {
					t.Errorf("%s: MachinesByTag(%s) = %d machines, %v", when, tag, len(ms), err)
				}
			}
			return nil
		})
	}
	check("written", map[string][]string{"gpu": {a.ID}, "ib": {a.ID, b.ID}, "burn-in": {a.ID}, "none": nil})

	a.Tags, a.AutoTags = []string{"burn-in"}, []string{"ib"} // gpu both ways gone
	if err := write(t, db, 2, func(tx *Tx) error { return tx.PutMachine(a) }); err != nil {
		t.Fatal(err)
	}
	check("untagged", map[string][]string{"gpu": nil, "ib": {a.ID, b.ID}})

	if err := write(t, db, 3, func(tx *Tx) error { return tx.DeleteMachine(b.ID) }); err != nil {
		t.Fatal(err)
	}
	check("deleted", map[string][]string{"ib": {a.ID}})

	db.View(func(tx *Tx) error {
		for name, c := range map[string]struct {
			f    MachineFilter
			want []string
		}{
			"tag":            {MachineFilter{Tag: "ib"}, []string{a.ID}},
			"tag and state":  {MachineFilter{Tag: "ib", State: StateNew}, nil},
			"state":          {MachineFilter{State: StateNew}, []string{c.ID}},
			"manual tag":     {MachineFilter{Tag: "burn-in", State: StateReady}, []string{a.ID}},
			"unknown tag":    {MachineFilter{Tag: "nope"}, nil},
			"everything":     {MachineFilter{}, []string{a.ID, c.ID}},
			"rack, no racks": {MachineFilter{Rack: "R1"}, nil},
		} {
			ms, err := tx.Machines(c.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range ms {
				ids = append(ids, m.ID)
			}
			if d := cmp.Diff(c.want, ids); d != "" {
				t.Errorf("%s (-want +got):\n%s", name, d)
			}
		}
		tags, err := tx.Tags()
		if err != nil || len(tags) != 1 || tags[0].Index != 1 || tx.CountTags() != 1 {
			t.Errorf("tags = %+v, %v", tags, err)
		}
		return nil
	})

	if err := write(t, db, 4, func(tx *Tx) error { return tx.DeleteTag("gpu") }); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		if _, err := tx.Tag("gpu"); !errors.Is(err, ErrNotFound) || Public(err) != `tag "gpu": not found` {
			t.Errorf("deleted tag: %v", err)
		}
		ch, _ := tx.Changes(3, 0)
		if len(ch) != 1 || ch[0] != (Change{Index: 4, Table: TableTags, Key: "gpu", Op: OpDelete}) {
			t.Errorf("changes = %+v", ch)
		}
		return nil
	})
}

// A store in which nobody tagged or placed a machine holds no tag or rack
// bucket: it hashes as a store of a node that predates them.
func TestTagAndRackBucketsOnFirstUse(t *testing.T) {
	db := open(t)
	lazy := [][]byte{bucketTags, bucketRacks, bucketMachineByTag, bucketMachineByRack}
	m := Machine{ID: "m-00000000000a", State: StateNew, Name: "a"}
	if err := write(t, db, 1, func(tx *Tx) error { return tx.PutMachine(m) }); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		for _, b := range lazy {
			if tx.tx.Bucket(b) != nil {
				t.Errorf("bucket %s exists before any tag or rack", b)
			}
		}
		if _, err := tx.Tag("x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Tag on a store without tags: %v", err)
		}
		if _, err := tx.Rack("x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Rack on a store without racks: %v", err)
		}
		if tags, err := tx.Tags(); tags != nil || err != nil {
			t.Errorf("Tags = %v, %v", tags, err)
		}
		if racks, err := tx.Racks(); racks != nil || err != nil {
			t.Errorf("Racks = %v, %v", racks, err)
		}
		if ids := tx.MachineIDsByTag("x"); ids != nil {
			t.Errorf("MachineIDsByTag = %v", ids)
		}
		return nil
	})
	m.Tags, m.Location = []string{"x"}, Location{Rack: "R1", Unit: 3}
	if err := write(t, db, 2, func(tx *Tx) error { return tx.PutMachine(m) }); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		for _, b := range [][]byte{bucketMachineByTag, bucketMachineByRack} {
			if tx.tx.Bucket(b) == nil {
				t.Errorf("bucket %s not made by the first tagged, placed machine", b)
			}
		}
		if d := cmp.Diff([]string{m.ID}, tx.MachineIDsInRack("R1")); d != "" {
			t.Errorf("rack index: %s", d)
		}
		return nil
	})
	// A rolled back write makes nothing (the proposer's dry run).
	db2 := open(t)
	db2.Update(func(tx *Tx) error {
		tx.Index = 1
		tx.PutTag(Tag{Name: "x"})
		return errors.New("roll back")
	})
	db2.View(func(tx *Tx) error {
		if tx.tx.Bucket(bucketTags) != nil {
			t.Error("a rolled back PutTag left its bucket")
		}
		return nil
	})
}

// ReplaceMachine writes what PutMachine writes, without reading the record
// again; it refuses a record in place of another.
func TestReplaceMachine(t *testing.T) {
	m := Machine{ID: "m-00000000000a", Name: "a", State: StateReady, MACs: []string{"52:54:00:00:00:01"}, Tags: []string{"x"}}
	moved := m
	moved.Tags, moved.AutoTags, moved.Location = []string{"y"}, []string{"x"}, Location{Rack: "R1"}
	var sums []StateHash
	for _, replace := range []bool{false, true} {
		db := open(t)
		write(t, db, 1, func(tx *Tx) error { return tx.PutMachine(m) })
		if err := write(t, db, 2, func(tx *Tx) error {
			if replace {
				old, err := tx.Machine(m.ID)
				if err != nil {
					return err
				}
				return tx.ReplaceMachine(old, moved)
			}
			return tx.PutMachine(moved)
		}); err != nil {
			t.Fatal(err)
		}
		h, err := db.Hash()
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, h)
		db.View(func(tx *Tx) error {
			if d := cmp.Diff([]string{m.ID}, tx.MachineIDsByTag("x")); d != "" {
				t.Errorf("replace %v: tag x: %s", replace, d)
			}
			if d := cmp.Diff([]string{m.ID}, tx.MachineIDsByTag("y")); d != "" {
				t.Errorf("replace %v: tag y: %s", replace, d)
			}
			return nil
		})
		if replace {
			other := moved
			other.ID = "m-00000000000b"
			err := write(t, db, 3, func(tx *Tx) error { return tx.ReplaceMachine(m, other) })
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("a record in place of another: %v", err)
			}
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("PutMachine and ReplaceMachine leave different states: %s, %s", sums[0], sums[1])
	}
}

// BenchmarkListByTagAndRack lists, through the indexes, the 2,000 machines
// of a tag and the 40 of a rack among 10,000 (list -tag, list -rack).
func BenchmarkListByTagAndRack(b *testing.B) {
	db, err := Open(b.TempDir() + "/state.db")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *Tx) error {
		tx.Index = 1
		for i := range 10_000 {
			m := Machine{ID: fmt.Sprintf("m-%012x", i+1), State: StateReady, Serial: fmt.Sprintf("S%07d", i),
				MACs: []string{fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16, (i>>8)&0xff, i&0xff)},
				Summary: inventory.Summary{Manufacturer: "Dell Inc.", Product: "PowerEdge R650", Sockets: 2, Cores: 64, Threads: 128,
					MemoryBytes: 512 << 30, Disks: 4, DiskBytes: 8 << 40, NICs: 4},
				Location: Location{Building: "DC1", Room: "Hall A", Rack: fmt.Sprintf("R%d", i/40), Unit: i%40 + 1}}
			if i%5 == 0 {
				m.AutoTags = []string{"gpu"}
				m.Summary.GPUs, m.Summary.GPUModels = 8, []string{"NVIDIA H100 80GB HBM3"}
			}
			if err := tx.PutMachine(m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for name, f := range map[string]MachineFilter{"tag": {Tag: "gpu"}, "rack": {Rack: "R100"}} {
		b.Run(name, func(b *testing.B) {
			var n int
			for b.Loop() {
				db.View(func(tx *Tx) error {
					ms, err := tx.Machines(f)
					n = len(ms)
					return err
				})
			}
			b.ReportMetric(float64(n), "machines")
		})
	}
}
