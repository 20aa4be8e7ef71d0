package raftfsm_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/lab/fleet"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
	"github.com/rollcall/rollcall/store/tagrule"
)

// commissionFleet commissions machines 0 to n-1 of the fleet simulator
// (seed 1) as the API would (pgtest.Commission: IDs m-…01 onwards), 200 to
// an entry.
func commissionFleet(t testing.TB, l *fsmtest.Log, n int) []inventory.Report {
	t.Helper()
	reps := make([]inventory.Report, n)
	var batch []raftfsm.Command
	for i := range n {
		reps[i] = fleet.Generate(1, i)
		c, err := pgtest.Commission(reps[i], i, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, c)
		if len(batch) == 200 || i == n-1 {
			if err := l.ApplyBatch(batch...); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return reps
}

// fleetLog is a store with 60 fleet machines: servers, GPU nodes, storage.
func fleetLog(t testing.TB) (*fsmtest.Log, []inventory.Report) {
	l := fsmtest.Open(t)
	return l, commissionFleet(t, l, 60)
}

// idsWhere are the IDs of the fleet machines a predicate holds for.
func idsWhere(reps []inventory.Report, pred func(inventory.Report) bool) []string {
	var out []string
	for i, r := range reps {
		if pred(r) {
			out = append(out, pgtest.ID(i))
		}
	}
	return out
}

func hasGPU(r inventory.Report) bool { return len(r.GPUs) > 0 }

func view[T any](t testing.TB, l *fsmtest.Log, fn func(tx *store.Tx) (T, error)) T {
	t.Helper()
	var v T
	if err := l.DB.View(func(tx *store.Tx) (err error) { v, err = fn(tx); return err }); err != nil {
		t.Fatal(err)
	}
	return v
}

func tagged(t testing.TB, l *fsmtest.Log, tag string) []string {
	return view(t, l, func(tx *store.Tx) ([]string, error) { return tx.MachineIDsByTag(tag), nil })
}

func machineOf(t testing.TB, l *fsmtest.Log, id string) store.Machine {
	return view(t, l, func(tx *store.Tx) (store.Machine, error) { return tx.Machine(id) })
}

// putTag saves a tag as the API would: evaluated over the local store,
// then applied.
func putTag(t testing.TB, l *fsmtest.Log, tag raftfsm.Tag) []raftfsm.MachineFailure {
	t.Helper()
	var c *raftfsm.TagPut
	var failed []raftfsm.MachineFailure
	view(t, l, func(tx *store.Tx) (any, error) {
		var err error
		c, failed, err = raftfsm.NewTagPut(tx, tag, t0.Add(time.Hour), nil)
		return nil, err
	})
	l.Must(t, c)
	return failed
}

// Saving a rule tags exactly the machines it matches; saving another rule
// under the name moves the auto tags; manual tags never move.
func TestTagPutOverTheFleet(t *testing.T) {
	l, reps := fleetLog(t)
	gpus := idsWhere(reps, hasGPU)
	if len(gpus) == 0 || len(gpus) == len(reps) {
		t.Fatalf("the sample has %d GPU machines of %d", len(gpus), len(reps))
	}
	l.Must(t, &raftfsm.TagPut{Tag: raftfsm.Tag{Name: "burn-in"}, Now: t0})
	manual := []string{pgtest.ID(0), pgtest.ID(1), gpus[0]}
	l.Must(t, &raftfsm.MachineTags{Machines: manual, Add: []string{"burn-in"}, Now: t0})

	if f := putTag(t, l, raftfsm.Tag{Name: "gpu", Match: `{{ gt .Node.GPUs 0 }}`, Comment: "NVIDIA nodes"}); len(f) > 0 {
		t.Fatal(f)
	}
	if d := cmp.Diff(gpus, tagged(t, l, "gpu")); d != "" {
		t.Errorf("gpu (-want +got):\n%s", d)
	}
	tag := view(t, l, func(tx *store.Tx) (store.Tag, error) { return tx.Tag("gpu") })
	if tag.RuleIndex != l.Index || tag.Created != t0.Add(time.Hour) || tag.Comment != "NVIDIA nodes" {
		t.Errorf("tag = %+v", tag)
	}

	// Another rule under the name: Mellanox parts (ConnectX NICs and HCAs).
	putTag(t, l, raftfsm.Tag{Name: "gpu", Match: `{{ pciVendor "15b3" }}`})
	mellanox := idsWhere(reps, func(r inventory.Report) bool {
		return slices.ContainsFunc(r.PCI, func(d inventory.PCIDevice) bool { return d.VendorID == "15b3" })
	})
	if d := cmp.Diff(mellanox, tagged(t, l, "gpu")); d != "" {
		t.Errorf("gpu after the new rule (-want +got):\n%s", d)
	}
	// The same rule saved again keeps its rule index (outcomes in flight
	// still apply); the manual tag is where it was throughout.
	before := view(t, l, func(tx *store.Tx) (store.Tag, error) { return tx.Tag("gpu") })
	putTag(t, l, raftfsm.Tag{Name: "gpu", Match: `{{ pciVendor "15b3" }}`, Comment: "changed"})
	after := view(t, l, func(tx *store.Tx) (store.Tag, error) { return tx.Tag("gpu") })
	if after.RuleIndex != before.RuleIndex || after.Created != before.Created {
		t.Errorf("resaved: rule index %d → %d", before.RuleIndex, after.RuleIndex)
	}
	if d := cmp.Diff(manual, tagged(t, l, "burn-in")); d != "" {
		t.Errorf("manual tags moved (-want +got):\n%s", d)
	}

	// A tag given by hand and by the rule: the rule's removal leaves the
	// hand's.
	l.Must(t, &raftfsm.MachineTags{Machines: []string{mellanox[0]}, Add: []string{"gpu"}, Now: t0})
	putTag(t, l, raftfsm.Tag{Name: "gpu"})
	if d := cmp.Diff([]string{mellanox[0]}, tagged(t, l, "gpu")); d != "" {
		t.Errorf("rule removed (-want +got):\n%s", d)
	}
	m := machineOf(t, l, mellanox[0])
	if !slices.Contains(m.Tags, "gpu") || slices.Contains(m.AutoTags, "gpu") {
		t.Errorf("machine %s: tags %v, auto %v", m.ID, m.Tags, m.AutoTags)
	}
	if view(t, l, func(tx *store.Tx) (store.Tag, error) { return tx.Tag("gpu") }).RuleIndex != 0 {
		t.Error("a manual tag kept a rule index")
	}
}

// A rule that fails on a machine leaves that machine's tags as they were
// and names it.
func TestRuleFailureLeavesTheMachine(t *testing.T) {
	l, reps := fleetLog(t)
	putTag(t, l, raftfsm.Tag{Name: "h100", Match: `{{ true }}`})
	// index fails on machines without GPUs.
	failed := putTag(t, l, raftfsm.Tag{Name: "h100", Match: `{{ eq (index .Node.GPUModels 0) "NVIDIA H100 80GB HBM3" }}`})
	noGPU := idsWhere(reps, func(r inventory.Report) bool { return !hasGPU(r) })
	var failedIDs []string
	for _, f := range failed {
		failedIDs = append(failedIDs, f.Machine)
		if f.Tag != "h100" || !strings.Contains(f.Error(), "tag h100 on machine "+f.Machine+": rule line 1, column 8: <index .Node.GPUModels 0>: error calling index") {
			t.Errorf("failure: %v", f)
		}
		var re *tagrule.Error
		if !errors.As(f, &re) {
			t.Errorf("failure %v is not a tagrule.Error", f)
		}
	}
	if d := cmp.Diff(noGPU, failedIDs); d != "" {
		t.Errorf("failed (-want +got):\n%s", d)
	}
	h100 := idsWhere(reps, func(r inventory.Report) bool { return hasGPU(r) && r.GPUs[0].Model == "NVIDIA H100 80GB HBM3" })
	want := append(slices.Clone(h100), noGPU...) // failed: kept from the first rule
	slices.Sort(want)
	if d := cmp.Diff(want, tagged(t, l, "h100")); d != "" {
		t.Errorf("h100 (-want +got):\n%s", d)
	}
}

// A machine written after the evaluation is left as it was; AutoTagsOf
// then evaluates it again.
func TestTagPutLeavesOutWhatChangedSince(t *testing.T) {
	l := fsmtest.Open(t)
	reps := commissionFleet(t, l, 3) // 0, 1: servers; 2: a GPU node
	if !hasGPU(reps[2]) || hasGPU(reps[0]) {
		t.Fatal("fleet shapes changed")
	}
	var put *raftfsm.TagPut
	view(t, l, func(tx *store.Tx) (any, error) {
		var err error
		put, _, err = raftfsm.NewTagPut(tx, raftfsm.Tag{Name: "big", Match: `{{ ge .Node.DiskGiB 5000 }}`}, t0, nil)
		return nil, err
	})
	if !slices.Contains(put.Matches, pgtest.ID(2)) {
		t.Fatalf("machine 2 (%d GiB of disks) does not match", inventory.Summarize(&reps[2]).DiskBytes>>30)
	}
	// Meanwhile machine 2 is commissioned again with one disk left.
	rep := reps[2]
	rep.Disks = rep.Disks[:1]
	l.Must(t, &raftfsm.Recommission{ID: pgtest.ID(2), Now: t0})
	c, _ := pgtest.Commission(rep, 2, t0.Add(time.Minute))
	l.Must(t, c, put)
	if slices.Contains(machineOf(t, l, pgtest.ID(2)).AutoTags, "big") {
		t.Errorf("machine 2 got the outcome of an evaluation of its old disks")
	}
	set := view(t, l, func(tx *store.Tx) (*raftfsm.AutoTagsSet, error) {
		rules, _, err := raftfsm.RuleTags(tx)
		if err != nil {
			return nil, err
		}
		var changed []string
		ms, _ := tx.Machines(store.MachineFilter{})
		for _, m := range ms {
			if m.Index > put.Basis {
				changed = append(changed, m.ID)
			}
		}
		set, _, err := raftfsm.AutoTagsOf(tx, changed, rules, t0, nil)
		return set, err
	})
	l.Must(t, set)
	wantBig := idsWhere([]inventory.Report{reps[0], reps[1], rep}, func(r inventory.Report) bool {
		return inventory.Summarize(&r).DiskBytes>>30 >= 5000
	})
	if d := cmp.Diff(wantBig, tagged(t, l, "big")); d != "" {
		t.Errorf("big after the follow-up (-want +got):\n%s", d)
	}
}

// Commissioning batches the rules' outcome with the inventory: the machine
// leaves commissioning tagged. Without rule tags nothing is batched.
func TestCommissionAutoTags(t *testing.T) {
	l := fsmtest.Open(t)
	rep := fleet.Generate(1, 2) // an XE9680: 8 H100, 4 HCAs
	c, _ := pgtest.Commission(rep, 2, t0)
	set := view(t, l, func(tx *store.Tx) (*raftfsm.AutoTagsSet, error) {
		set, _, err := raftfsm.CommissionAutoTags(tx, c, &rep)
		return set, err
	})
	if set != nil {
		t.Fatalf("no rule tags, yet a set: %+v", set)
	}
	l.Must(t, &raftfsm.TagPut{Tag: raftfsm.Tag{Name: "rack-3"}, Now: t0})
	putTag(t, l, raftfsm.Tag{Name: "gpu", Match: `{{ pciVendor "10de" }}`})
	putTag(t, l, raftfsm.Tag{Name: "ib", Match: `{{ gt (len .Node.IBGUIDs) 0 }}`})
	putTag(t, l, raftfsm.Tag{Name: "amd", Match: `{{ eq .Node.CPUVendor "AuthenticAMD" }}`})
	putTag(t, l, raftfsm.Tag{Name: "broken", Match: `{{ index .Node.Tags 5 }}`})

	var failed []error
	set = view(t, l, func(tx *store.Tx) (*raftfsm.AutoTagsSet, error) {
		set, f, err := raftfsm.CommissionAutoTags(tx, c, &rep)
		failed = f
		return set, err
	})
	if len(failed) != 1 || !strings.Contains(failed[0].Error(), "tag broken on machine "+pgtest.ID(2)) {
		t.Errorf("failures: %v", failed)
	}
	b, err := raftfsm.NewBatch(c, set)
	if err != nil {
		t.Fatal(err)
	}
	l.Must(t, b)
	m := machineOf(t, l, pgtest.ID(2))
	if d := cmp.Diff([]string{"gpu", "ib"}, m.AutoTags); d != "" || m.State != store.StateReady {
		t.Errorf("commissioned %s: auto tags (-want +got):\n%s", m.State, d)
	}

	// The same set again, in an entry of its own: the machine is not the
	// one the rules saw (Index 0 means "written by this entry").
	l.Must(t, &raftfsm.TagPut{Tag: raftfsm.Tag{Name: "gpu"}, Now: t0}) // gpu made manual: its auto tag goes
	l.Must(t, set)
	if m := machineOf(t, l, pgtest.ID(2)); !slices.Equal(m.AutoTags, []string{"ib"}) {
		t.Errorf("a stale set applied: %v", m.AutoTags)
	}
	// An outcome of a rule changed since is left out.
	put := &raftfsm.TagPut{Tag: raftfsm.Tag{Name: "ib", Match: `{{ false }}`}, Now: t0, Basis: l.Index}
	l.Must(t, put)
	m = machineOf(t, l, pgtest.ID(2))
	stale := &raftfsm.AutoTagsSet{Machines: []raftfsm.MachineRules{{ID: m.ID, Index: m.Index,
		Rules: []raftfsm.RuleResult{{Tag: "ib", RuleIndex: set.Machines[0].Rules[1].RuleIndex, Match: true}}}}, Now: t0}
	l.Must(t, stale)
	if m := machineOf(t, l, pgtest.ID(2)); len(m.AutoTags) != 0 {
		t.Errorf("the outcome of an old rule applied: %v", m.AutoTags)
	}
}

func TestTagCommandRefusals(t *testing.T) {
	id := pgtest.ID(0)
	setup := func(t *testing.T) *fsmtest.Log {
		l := fsmtest.Open(t)
		commissionFleet(t, l, 1)
		l.Must(t, &raftfsm.TagPut{Tag: raftfsm.Tag{Name: "gpu", Match: "{{ true }}"}, Now: t0, Basis: 1})
		return l
	}
	for name, c := range map[string]struct {
		cmd  raftfsm.Command
		kind error
		want string
	}{
		"bad name":            {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "GPU"}}, store.ErrInvalid, `tag name "GPU" must be a DNS label`},
		"rule, no basis":      {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a", Match: "{{ true }}"}}, store.ErrInvalid, "evaluated at index 0, which is not before this entry"},
		"basis ahead":         {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a", Match: "{{ true }}"}, Basis: 99}, store.ErrInvalid, "evaluated at index 99"},
		"manual with matches": {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a"}, Matches: []string{id}}, store.ErrInvalid, "tag a has no rule, so no machines it matched"},
		"unsorted matches":    {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a", Match: "x"}, Basis: 1, Matches: []string{pgtest.ID(2), id}}, store.ErrInvalid, "machines are not sorted"},
		"twice":               {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a", Match: "x"}, Basis: 1, Matches: []string{id, id}}, store.ErrInvalid, "is named twice"},
		"matched and failed":  {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a", Match: "x"}, Basis: 1, Matches: []string{id}, Failed: []string{id}}, store.ErrInvalid, "both matched and failed"},
		"bad id":              {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a", Match: "x"}, Basis: 1, Matches: []string{"node1"}}, store.ErrInvalid, `machine id "node1"`},
		"plain yaml":          {&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a", CloudConfig: "packages: [x]"}}, store.ErrInvalid, "starts with #cloud-config"},
		"delete unknown":      {&raftfsm.TagDelete{Name: "nope"}, store.ErrNotFound, `tag "nope": not found`},
		"unknown tag":         {&raftfsm.MachineTags{Machines: []string{id}, Add: []string{"rack-3"}}, store.ErrNotFound, `tag "rack-3" does not exist: create it first (rollcall tags add rack-3)`},
		"remove unknown":      {&raftfsm.MachineTags{Machines: []string{id}, Remove: []string{"stagin"}}, store.ErrNotFound, `tag "stagin" does not exist`},
		"add and remove":      {&raftfsm.MachineTags{Machines: []string{id}, Add: []string{"gpu"}, Remove: []string{"gpu"}}, store.ErrInvalid, "tag gpu is both added and removed"},
		"no machines":         {&raftfsm.MachineTags{Add: []string{"gpu"}}, store.ErrInvalid, "name the machines to tag"},
		"no tags":             {&raftfsm.MachineTags{Machines: []string{id}}, store.ErrInvalid, "name a tag to add (+tag) or to remove (-tag)"},
		"unknown machine":     {&raftfsm.MachineTags{Machines: []string{id, "m-0000000000ff"}, Add: []string{"gpu"}}, store.ErrNotFound, `machine "m-0000000000ff": not found`},
		"two outcomes":        {&raftfsm.AutoTagsSet{Machines: []raftfsm.MachineRules{{ID: id, Rules: []raftfsm.RuleResult{{Tag: "gpu"}, {Tag: "gpu"}}}}}, store.ErrInvalid, "tag gpu has two outcomes"},
		"set twice":           {&raftfsm.AutoTagsSet{Machines: []raftfsm.MachineRules{{ID: id}, {ID: id}}}, store.ErrInvalid, "is named twice"},
	} {
		t.Run(name, func(t *testing.T) {
			l := setup(t)
			before := machineOf(t, l, id)
			err := l.Apply(c.cmd)
			if !errors.Is(err, c.kind) || !strings.Contains(store.Public(err), c.want) {
				t.Errorf("%v, want %v saying %q", err, c.kind, c.want)
			}
			if after := machineOf(t, l, id); after.Index != before.Index {
				t.Errorf("a refused command wrote the machine")
			}
		})
	}

	l := fsmtest.Open(t)
	for i := range store.MaxTagDefinitions {
		l.Must(t, &raftfsm.TagPut{Tag: raftfsm.Tag{Name: "t" + strconv.Itoa(i)}, Now: t0})
	}
	if err := l.Apply(&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "one-more"}, Now: t0}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("tag %d: %v", store.MaxTagDefinitions+1, err)
	}
}

func TestMachineTagsAndTagDelete(t *testing.T) {
	l := fsmtest.Open(t)
	commissionFleet(t, l, 3)
	a, b, c := pgtest.ID(0), pgtest.ID(1), pgtest.ID(2)
	for _, n := range []string{"rack-3", "burn-in", "staging"} {
		l.Must(t, &raftfsm.TagPut{Tag: raftfsm.Tag{Name: n}, Now: t0})
	}
	putTag(t, l, raftfsm.Tag{Name: "all", Match: "{{ true }}"})
	l.Must(t,
		&raftfsm.MachineTags{Machines: []string{a, b}, Add: []string{"staging", "rack-3"}, Now: t0},
		// rollcall tag ID +rack-3 +burn-in -staging
		&raftfsm.MachineTags{Machines: []string{a}, Add: []string{"rack-3", "burn-in"}, Remove: []string{"staging"}, Now: t0.Add(time.Minute)},
	)
	if m := machineOf(t, l, a); !slices.Equal(m.Tags, []string{"burn-in", "rack-3"}) || !m.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("a: %v at %v", m.Tags, m.UpdatedAt)
	}
	// Nothing to change: the record is not written.
	idx := machineOf(t, l, b).Index
	l.Must(t, &raftfsm.MachineTags{Machines: []string{b}, Add: []string{"staging"}, Now: t0})
	if machineOf(t, l, b).Index != idx {
		t.Error("an unchanged machine was written")
	}
	l.Must(t, &raftfsm.TagDelete{Name: "rack-3", Now: t0}, &raftfsm.TagDelete{Name: "all", Now: t0})
	for _, id := range []string{a, b, c} {
		m := machineOf(t, l, id)
		if slices.Contains(m.Tags, "rack-3") || len(m.AutoTags) > 0 {
			t.Errorf("%s keeps %v %v", id, m.Tags, m.AutoTags)
		}
	}
	if got := tagged(t, l, "rack-3"); got != nil {
		t.Errorf("rack-3 still indexes %v", got)
	}
	if d := cmp.Diff([]string{a}, tagged(t, l, "burn-in")); d != "" {
		t.Errorf("burn-in: %s", d)
	}
}

// Nodes that apply the same log hold the same state, whichever node
// evaluated the rules.
func TestTagCommandsAreDeterministic(t *testing.T) {
	var entries [][]byte
	l1, _ := fleetLog(t)
	l2, _ := fleetLog(t)
	cmds := []func(tx *store.Tx) (raftfsm.Command, error){
		func(tx *store.Tx) (raftfsm.Command, error) {
			c, _, err := raftfsm.NewTagPut(tx, raftfsm.Tag{Name: "gpu", Match: `{{ pciVendor "10de" }}`}, t0, &tagrule.FactsCache{})
			return c, err
		},
		func(*store.Tx) (raftfsm.Command, error) {
			return &raftfsm.LocationSet{Machines: []raftfsm.MachineLocation{
				{ID: pgtest.ID(0), Location: raftfsm.Location{Building: "DC1", Room: "Hall A", Rack: "R0", Unit: 1, Height: 2}},
				{ID: pgtest.ID(1), Location: raftfsm.Location{Rack: "R0", Unit: 3}},
			}, Now: t0}, nil
		},
		func(*store.Tx) (raftfsm.Command, error) {
			return &raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R0", Building: "DC2", Room: "Hall C", Height: 48}, Now: t0}, nil
		},
	}
	for _, mk := range cmds {
		c := view(t, l1, mk) // evaluated on node 1 only
		b, err := raftfsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, b)
	}
	for _, l := range []*fsmtest.Log{l1, l2} {
		for _, e := range entries {
			if err := l.ApplyRaw(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	h1, _ := l1.DB.Hash()
	h2, _ := l2.DB.Hash()
	if h1 != h2 {
		t.Errorf("state hashes differ: %s, %s", h1, h2)
	}
}

// benchFleet is the size of the fleet the benchmarks run over (the
// issue's 10,000 commissioned machines).
const benchFleet = 10_000

// BenchmarkMatchTags evaluates one rule over 10,000 commissioned machines
// of the fleet simulator in a store, as NewTagPut does: a rule over the
// record's fields; one over the inventory facts read from every stored
// report; and that one again with the node's facts cache warm.
func BenchmarkMatchTags(b *testing.B) {
	l := fsmtest.Open(b)
	commissionFleet(b, l, benchFleet)
	cache := &tagrule.FactsCache{}
	for _, c := range []struct {
		name, rule string
		cache      *tagrule.FactsCache
	}{
		{"summary", `{{ and (gt .Node.GPUs 0) (ge .Node.MemoryGiB 1024) }}`, nil},
		{"facts-cold", `{{ pciVendor "10de" }}`, nil},
		{"facts-cached", `{{ pciVendor "10de" }}`, cache},
	} {
		b.Run(c.name, func(b *testing.B) {
			r, err := tagrule.Parse(c.rule)
			if err != nil {
				b.Fatal(err)
			}
			rules := []raftfsm.RuleTag{{Name: "t", Rule: r}}
			if c.cache != nil {
				l.DB.View(func(tx *store.Tx) error { _, err := raftfsm.MatchTags(tx, rules, c.cache); return err })
				b.ResetTimer()
			}
			var matched int
			for b.Loop() {
				l.DB.View(func(tx *store.Tx) error {
					res, err := raftfsm.MatchTags(tx, rules, c.cache)
					if err != nil || len(res[0].Failed) > 0 {
						b.Fatal(err, res[0].Failed)
					}
					matched = len(res[0].Matches)
					return nil
				})
			}
			b.ReportMetric(float64(benchFleet*b.N)/b.Elapsed().Seconds(), "machines/s")
			b.ReportMetric(float64(matched), "matched")
		})
	}
}

// BenchmarkTagPutApply applies a TagPut over 10,000 commissioned machines
// through the state machine, each one moving the auto tag on every
// machine (GPU nodes, then all the others): what each node does before it
// shows the new tags.
func BenchmarkTagPutApply(b *testing.B) {
	l := fsmtest.Open(b)
	commissionFleet(b, l, benchFleet)
	rules := []string{`{{ gt .Node.GPUs 0 }}`, `{{ eq .Node.GPUs 0 }}`}
	puts := make([]*raftfsm.TagPut, len(rules))
	for i, rule := range rules {
		l.DB.View(func(tx *store.Tx) error {
			var err error
			puts[i], _, err = raftfsm.NewTagPut(tx, raftfsm.Tag{Name: "gpu", Match: rule}, t0, nil)
			return err
		})
	}
	n := 0
	for b.Loop() {
		put := *puts[n%2]
		put.Basis = l.Index // no machine was written since the evaluation but by the last TagPut
		if err := l.Apply(&put); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/tag-put")
	b.ReportMetric(float64(len(puts[0].Matches)+len(puts[1].Matches)), "machines")
}

// The leader's precheck of a tag's save or removal refuses what Apply
// refuses, without the writes.
func TestTagPrecheck(t *testing.T) {
	l, _ := fleetLog(t)
	var good *raftfsm.TagPut
	view(t, l, func(tx *store.Tx) (any, error) {
		var err error
		good, _, err = raftfsm.NewTagPut(tx, raftfsm.Tag{Name: "gpu", Match: `{{ gt .Node.GPUs 0 }}`}, t0, nil)
		return nil, err
	})
	if err := l.FSM.Precheck(good); err != nil {
		t.Errorf("a good TagPut: %v", err)
	}
	bad := *good
	bad.Failed = good.Matches[:1]
	if err := l.FSM.Precheck(&bad); !errors.Is(err, store.ErrInvalid) || !strings.Contains(store.Public(err), "both matched and failed") {
		t.Errorf("matched and failed: %v", err)
	}
	if err := l.FSM.Precheck(&raftfsm.TagDelete{Name: "gpu"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete before the save: %v", err)
	}
	if tagged(t, l, "gpu") != nil {
		t.Error("a precheck wrote")
	}
}

// A stored rule that no longer parses (Apply does not parse: a Go release
// may parse otherwise) is reported and left out; its machines keep it.
func TestRuleTagsReportsAStaleRule(t *testing.T) {
	l, _ := fleetLog(t)
	putTag(t, l, raftfsm.Tag{Name: "gpu", Match: `{{ gt .Node.GPUs 0 }}`})
	before := tagged(t, l, "gpu")
	l.Must(t, &raftfsm.TagPut{Tag: raftfsm.Tag{Name: "old", Match: `{{ oldfunc .Node }}`}, Basis: l.Index, Now: t0})
	rules := view(t, l, func(tx *store.Tx) ([]raftfsm.RuleTag, error) {
		r, f, err := raftfsm.RuleTags(tx)
		if len(f) != 1 || !strings.Contains(f[0].Error(), `tag old: rule line 1, column 4: function "oldfunc" is not allowed`) {
			t.Errorf("failed: %v", f)
		}
		return r, err
	})
	if len(rules) != 1 || rules[0].Name != "gpu" {
		t.Errorf("rules: %+v", rules)
	}
	var ferr error
	view(t, l, func(tx *store.Tx) (any, error) {
		_, _, ferr = raftfsm.NewTagPut(tx, raftfsm.Tag{Name: "new", Match: `{{ oldfunc .Node }}`}, t0, nil)
		return nil, nil
	})
	var re *tagrule.Error
	if !errors.Is(ferr, store.ErrInvalid) || !errors.As(ferr, &re) || re.Line != 1 || re.Col != 4 {
		t.Errorf("saving a rule that does not parse: %v", ferr)
	}
	if d := cmp.Diff(before, tagged(t, l, "gpu")); d != "" {
		t.Errorf("gpu moved: %s", d)
	}
}
