package store

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rollcall/rollcall/store/inventory"
)

// fullMachine has every field set, every list and map non-empty.
func fullMachine(id string) Machine {
	return Machine{
		ID: id, Name: "n-" + id[2:], State: StateReady, SystemUUID: "4c4c4544-0042-3510-8052-b4c04f4e3232",
		Serial: "SN1", MACs: []string{"52:54:00:00:00:01", "52:54:00:00:00:02"}, BootMAC: "52:54:00:00:00:01",
		IdentityKey: "uuid:x", IPs: []string{"10.0.0.5"},
		Summary: inventory.Summary{Manufacturer: "QEMU <&>", Product: "Standard PC\u2028", CPUModel: "EPYC", Sockets: 2, Cores: 64,
			MemoryBytes: 1 << 40, GPUs: 2, GPUModels: []string{"A100", "A100"}, TPM: "2.0"},
		BMC: &BMC{Driver: "ipmi", Address: "10.1.0.5", MAC: "52:54:00:00:01:01", User: "rollcall",
			PasswordSealed: []byte{1, 2, 3}, PasswordAAD: "aad", CertSHA256: "ab", Operator: true, Source: "agent",
			Settings: map[string]string{"port": "623"}, Errors: []string{"e"}, UpdatedAt: t0},
		CreatedAt: t0, UpdatedAt: t0.Add(time.Second), LastSeen: t0.Add(2 * time.Second), Commissioned: t0.Add(3 * time.Second),
		Tags: []string{"a", "b"}, AutoTags: []string{"gpu"},
		Location: Location{Building: "b1", Room: "r1", Rack: "rack1", Unit: 3, Height: 2, AssetTag: "A-1"},
		Layout:   "l1", Index: 7,
	}
}

func roundTrip(t *testing.T, m Machine) Machine {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Machine
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	return back
}

// TestDecodesAs: whenever decodesAs vouches for a machine, it is exactly
// what encoding/json gives back; and it vouches for ordinary machines.
func TestDecodesAs(t *testing.T) {
	full := fullMachine("m-000000000001")
	empty := Machine{ID: "m-000000000002", MACs: []string{}, Tags: []string{}, BMC: &BMC{Settings: map[string]string{}, PasswordSealed: []byte{}, Errors: []string{}}}
	zoned := full.clone()
	zoned.UpdatedAt = t0.In(time.FixedZone("CET", 3600))
	mono := full.clone()
	mono.LastSeen = time.Now()
	badUTF8 := full.clone()
	badUTF8.Summary.Product = "bad \xff byte"
	badTag := full.clone()
	badTag.Tags = []string{"\xc3"}
	badBMC := full.clone()
	badBMC.BMC.Settings = map[string]string{"\xff": "x"}
	for _, c := range []struct {
		name string
		m    Machine
		ok   bool
	}{
		{"every field set", full, true},
		{"empty lists and maps", empty, true},
		{"zero machine", Machine{}, true},
		{"a zoned time", zoned, false},
		{"a monotonic reading", mono, false},
		{"invalid UTF-8 in a field", badUTF8, false},
		{"invalid UTF-8 in a list", badTag, false},
		{"invalid UTF-8 in a BMC setting", badBMC, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, ok := c.m.clone().decodesAs()
			if ok != c.ok {
				t.Fatalf("decodesAs ok = %v, want %v", ok, c.ok)
			}
			if back := roundTrip(t, c.m); ok && !reflect.DeepEqual(d, back) {
				t.Fatalf("decodesAs gave\n%#v\nencoding/json gives back\n%#v", d, back)
			}
		})
	}
}

// FuzzDecodesAs: the same over arbitrary strings and times.
func FuzzDecodesAs(f *testing.F) {
	f.Add("SN1", "gpu", int64(0), int64(1_764_000_000), 0, false)
	f.Add("\xff", "", int64(5), int64(-1), 3600, true)
	f.Fuzz(func(t *testing.T, s, tag string, nsec, sec int64, offset int, emptyLists bool) {
		m := fullMachine("m-00000000000a")
		m.Serial, m.Summary.CPUModel = s, s
		m.Tags = []string{tag}
		if emptyLists {
			m.Tags, m.MACs = []string{}, nil
		}
		m.BMC.Settings = map[string]string{s: tag}
		when := time.Unix(sec%(1<<34), nsec%1e9)
		if offset%86400 != 0 {
			when = when.In(time.FixedZone("", offset%86400))
		} else {
			when = when.UTC()
		}
		m.UpdatedAt = when
		raw, err := json.Marshal(m)
		if err != nil {
			return // not storable: putMachine fails before caching
		}
		var back Machine
		if err := json.Unmarshal(raw, &back); err != nil {
			return
		}
		if d, ok := m.clone().decodesAs(); ok && !reflect.DeepEqual(d, back) {
			t.Fatalf("decodesAs gave\n%#v\nencoding/json gives back\n%#v", d, back)
		}
	})
}

// TestCloneSharesNothing: every list, map and pointer of a clone is its
// own, and clone knows every field that could share memory.
func TestCloneSharesNothing(t *testing.T) {
	m := fullMachine("m-000000000003")
	c := m.clone()
	if !reflect.DeepEqual(m, c) {
		t.Fatal("clone differs from the machine")
	}
	var walk func(path string, a, b reflect.Value)
	walk = func(path string, a, b reflect.Value) {
		switch a.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer:
			if a.IsNil() {
				t.Errorf("%s is empty in fullMachine: set it so this test checks it", path)
				return
			}
			if a.UnsafePointer() == b.UnsafePointer() {
				t.Errorf("%s is shared between a machine and its clone", path)
			}
			if a.Kind() == reflect.Pointer {
				walk(path, a.Elem(), b.Elem())
			}
		case reflect.Struct:
			if a.Type() == reflect.TypeOf(time.Time{}) {
				return // a value; its Location is immutable
			}
			for i := range a.NumField() {
				walk(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
			}
		}
	}
	walk("Machine", reflect.ValueOf(m), reflect.ValueOf(c))
}

// TestMachineCache: reads through the cache are what the stored bytes
// say, whatever wrote them, and a caller's changes to what it was handed
// reach nobody else.
func TestMachineCache(t *testing.T) {
	db := open(t)
	m := fullMachine("m-000000000004")
	if err := write(t, db, 1, func(tx *Tx) error { return tx.PutMachine(m) }); err != nil {
		t.Fatal(err)
	}
	// get reads the machine through the cache, or decoding its record.
	get := func(cached bool) Machine {
		t.Helper()
		var got Machine
		if err := db.View(func(tx *Tx) error {
			if !cached {
				tx.machines = nil
			}
			var err error
			got, err = tx.Machine(m.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	read := func() Machine { t.Helper(); return get(true) }
	decoded := func() Machine { t.Helper(); return get(false) }
	if _, ok := db.machines.recs[m.ID]; !ok {
		t.Fatal("a write of a plain machine is not cached")
	}
	first := read()
	if want := decoded(); !reflect.DeepEqual(first, want) {
		t.Fatalf("cached read\n%#v\ndecoded\n%#v", first, want)
	}
	first.Tags[0] = "changed"
	first.BMC.Settings["port"] = "x"
	first.MACs = append(first.MACs[:1], "52:54:00:00:00:09")
	if again := read(); !reflect.DeepEqual(again, decoded()) || again.Tags[0] != "a" || again.BMC.Settings["port"] != "623" {
		t.Fatalf("a change to a read machine reached the next read: %v %v", again.Tags, again.BMC.Settings)
	}

	// A write that fails rolls back: the cache must not answer with it.
	boom := errors.New("boom")
	if err := write(t, db, 2, func(tx *Tx) error {
		changed := m.clone()
		changed.Name = "rolled-back"
		if err := tx.PutMachine(changed); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("write = %v, want the command's error", err)
	}
	if got := read(); got.Name != m.Name {
		t.Fatalf("after a rolled-back write the machine reads %q, want %q", got.Name, m.Name)
	}

	// A record that does not decode as it was written (a zoned time) is
	// not cached from the write; its read decodes, then caches.
	zoned := m.clone()
	zoned.UpdatedAt = t0.In(time.FixedZone("CET", 3600))
	if err := write(t, db, 3, func(tx *Tx) error { return tx.PutMachine(zoned) }); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.machines.recs[m.ID]; ok {
		t.Fatal("a write that does not round-trip exactly was cached")
	}
	if got, want := read(), decoded(); !reflect.DeepEqual(got, want) {
		t.Fatalf("cached read\n%#v\ndecoded\n%#v", got, want)
	}

	// Machines (the full scan) goes through the cache too, and agrees.
	var all, plain []Machine
	if err := db.View(func(tx *Tx) error {
		var err error
		if all, err = tx.Machines(MachineFilter{}); err != nil {
			return err
		}
		tx.machines = nil
		plain, err = tx.Machines(MachineFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all, plain) || len(all) != 1 {
		t.Fatalf("Machines through the cache %v, decoded %v", all, plain)
	}
	if err := write(t, db, 4, func(tx *Tx) error { return tx.DeleteMachine(m.ID) }); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.machines.recs[m.ID]; ok {
		t.Fatal("a deleted machine stays cached")
	}
}

// TestRetagAgreesWithReindex: a run of random rewrites (tags only, which
// take retag's short way, and with a state or name change, which take the
// long one) leaves exactly the tag index entries the records call for.
func TestRetagAgreesWithReindex(t *testing.T) {
	db := open(t)
	rng := rand.New(rand.NewPCG(1, 2))
	pool := []string{"a", "b", "c", "d"}
	pick := func() []string {
		var out []string
		for _, tag := range pool {
			if rng.IntN(2) == 0 {
				out = append(out, tag)
			}
		}
		return out
	}
	ids := []string{"m-0000000000a1", "m-0000000000a2", "m-0000000000a3"}
	for i := range 200 {
		id := ids[rng.IntN(len(ids))]
		if err := write(t, db, uint64(i+1), func(tx *Tx) error {
			m, err := tx.Machine(id)
			if errors.Is(err, ErrNotFound) {
				m = Machine{ID: id, State: StateNew}
			} else if err != nil {
				return err
			}
			m.Tags, m.AutoTags = pick(), pick()
			if rng.IntN(4) == 0 {
				m.State = []string{StateNew, StateReady}[rng.IntN(2)]
			}
			return tx.PutMachine(m)
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.View(func(tx *Tx) error {
			want := map[string]bool{}
			ms, err := tx.Machines(MachineFilter{})
			if err != nil {
				return err
			}
			for _, m := range ms {
				for _, tag := range append(slices.Clone(m.Tags), m.AutoTags...) {
					want[tag+"\x00"+m.ID] = true
				}
			}
			got := map[string]bool{}
			if b := tx.tx.Bucket(bucketMachineByTag); b != nil {
				b.ForEach(func(k, _ []byte) error { got[string(k)] = true; return nil })
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("after write %d the tag index holds %v, the records call for %v", i+1, got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSameIndexedButTagsKnowsTheIndexedFields: retag's short way may be
// taken only when no indexed field but the tags changed. Each field of a
// machine is changed in turn; whenever that changes its index entries
// (machineIndexes, tags aside), sameIndexedButTags must see it. A field
// added to machineIndexes and forgotten there fails here.
func TestSameIndexedButTagsKnowsTheIndexedFields(t *testing.T) {
	base := fullMachine("m-0000000000b1")
	untagged := func(m Machine) []indexEntry {
		m.Tags, m.AutoTags = nil, nil
		return machineIndexes(m)
	}
	sameEntries := func(a, b []indexEntry) bool {
		return slices.EqualFunc(a, b, func(x, y indexEntry) bool { return x.same(y) })
	}
	// The leaf fields, each as the field indexes that lead to it (through
	// the BMC pointer too).
	type leaf struct {
		name  string
		index []int
	}
	var leaves []leaf
	var walk func(name string, index []int, t reflect.Type)
	walk = func(name string, index []int, t reflect.Type) {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeOf(time.Time{}) {
			leaves = append(leaves, leaf{name, index})
			return
		}
		for i := range t.NumField() {
			walk(name+"."+t.Field(i).Name, append(slices.Clone(index), i), t.Field(i).Type)
		}
	}
	walk("Machine", nil, reflect.TypeOf(base))
	checked := 0
	for _, l := range leaves {
		m := base.clone()
		x := reflect.ValueOf(&m).Elem()
		for _, i := range l.index {
			if x.Kind() == reflect.Pointer {
				x = x.Elem()
			}
			x = x.Field(i)
		}
		switch x.Kind() {
		case reflect.String:
			x.SetString(x.String() + "-changed")
		case reflect.Int, reflect.Int64:
			x.SetInt(x.Int() + 7)
		case reflect.Uint64:
			x.SetUint(x.Uint() + 7)
		case reflect.Bool:
			x.SetBool(!x.Bool())
		case reflect.Slice:
			if x.Type().Elem().Kind() != reflect.String {
				continue // the sealed password's bytes: not indexed, not a name
			}
			x.Set(reflect.Append(x, reflect.ValueOf("changed")))
		default:
			continue // times and maps: never indexed
		}
		checked++
		if l.name == "Machine.Tags" || l.name == "Machine.AutoTags" {
			continue
		}
		if !sameEntries(untagged(base), untagged(m)) && sameIndexedButTags(base, m) {
			t.Errorf("changing %s changes the index entries, but sameIndexedButTags calls the machines the same", l.name)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d fields changed: the walk missed the machine", checked)
	}
}
