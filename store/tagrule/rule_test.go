package tagrule

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/lab/fleet"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// The fleet simulator's machines of seed 1 that the tables use, one of
// each shape and model (numbers of fleet.Generate).
const (
	r650    = 0  // server: Dell PowerEdge R650, Intel, no GPU
	smc1029 = 1  // server: Supermicro SYS-1029U, a ConnectX NIC (15b3) but no HCA
	xe9680  = 2  // gpu: Dell XE9680, 8×H100, 4 HCAs, 6U
	ssg640  = 12 // storage: Supermicro SSG-640P, 39 disks
	dgx     = 16 // gpu: NVIDIA DGX A100, AMD EPYC, 8×A100
	smc821  = 23 // gpu: Supermicro SYS-821GE, 8×H100
)

var sample = []int{r650, smc1029, xe9680, ssg640, dgx, smc821}

// machine is fleet machine i as the store holds it after commissioning,
// placed in the rack the simulator's host name says (r000u03: rack R0,
// unit 3), with manual tags on some.
func machine(i int) (store.Machine, inventory.Report) {
	rep := fleet.Generate(1, i)
	m := store.Machine{
		ID: fmt.Sprintf("m-%012x", i+1), Serial: rep.System.Serial, State: store.StateReady,
		Summary:  inventory.Summarize(&rep),
		Location: store.Location{Building: "DC1", Room: "Hall A", Rack: fmt.Sprintf("R%d", i/40), Unit: i%40 + 1},
	}
	switch i {
	case r650:
		m.Tags = []string{"burn-in"}
		m.Name = "web-01"
	case ssg640:
		m.Tags = []string{"ceph", "staging"}
		m.Location.Room = "Hall B"
	}
	return m, rep
}

func node(i int) *Node {
	m, rep := machine(i)
	return NodeOf(m, func() (Facts, error) { return FactsOf(&rep), nil })
}

// Rules over the simulator's GPU, InfiniBand and storage shapes: which of
// the sample machines each one matches.
func TestRulesOverTheFleet(t *testing.T) {
	for rule, want := range map[string][]int{
		`{{ gt .Node.GPUs 0 }}`:                                 {xe9680, dgx, smc821},
		`{{ pciVendor "10de" }}`:                                {xe9680, dgx, smc821},
		`{{ pciVendor "15B3" }}`:                                {smc1029, xe9680, ssg640, dgx, smc821}, // a ConnectX NIC is Mellanox too
		`{{ gt .Node.IBHCAs 0 }}`:                               {xe9680, dgx, smc821},
		`{{ gt (len .Node.IBGUIDs) 3 }}`:                        {xe9680, dgx, smc821},
		`{{ has .Node.GPUModels "NVIDIA H100 80GB HBM3" }}`:     {xe9680, smc821},
		`{{ pciDevice "10de:20b2" }}`:                           {dgx}, // A100 SXM4 80GB
		`{{ ge .Node.Disks 36 }}`:                               {ssg640},
		`{{ gt .Node.DiskGiB 100000 }}`:                         {ssg640},
		`{{ and (ge .Node.MemoryGiB 2000) (eq .Node.GPUs 0) }}`: {r650},
		`{{ ge .Node.MemoryMiB 1048576 }}`:                      {r650, xe9680, dgx, smc821},
		`{{ eq .Node.CPUVendor "AuthenticAMD" }}`:               {dgx},
		`{{ hasPrefix .Node.CPUModel "AMD EPYC" }}`:             {dgx},
		`{{ contains (lower .Node.Product) "poweredge" }}`:      {r650, xe9680},
		`{{ eq .Node.Manufacturer "Supermicro" }}`:              {smc1029, ssg640, smc821},
		`{{ eq .Node.Arch "x86_64" }}`:                          sample,
		`{{ ge .Node.CPUs 200 }}`:                               {xe9680, dgx},
		`{{ and (eq .Node.Sockets 2) (gt .Node.Cores 100) }}`:   {xe9680, dgx},
		`{{ gt .Node.NVMe 4 }}`:                                 {xe9680, dgx, smc821},
		`{{ eq .Node.TPM "2.0" }}`:                              sample,
		`{{ eq .Node.Rack "R0" }}`:                              sample,
		`{{ and (eq .Node.Room "Hall A") (le .Node.Unit 3) }}`:  {r650, smc1029, xe9680},
		`{{ has .Node.Tags "burn-in" }}`:                        {r650},
		`{{ not (has .Node.Tags "staging") }}`:                  {r650, smc1029, xe9680, dgx, smc821},
		`{{ hasSuffix .Node.Name "-01" }}`:                      {r650},
		`{{ ne .Node.Serial "" }}`:                              sample,
		`{{ eq .Node.OS "" }}`:                                  sample, // nothing deployed yet
		// Written the long way: a range, an if, variables, break.
		`{{ $n := 0 }}{{ range .Node.PCIVendors }}{{ if eq . "10de" }}{{ $n = 1 }}{{ break }}{{ end }}{{ end }}{{ eq $n 1 }}`: {xe9680, dgx, smc821},
		"{{/* GPU nodes in hall A */}}\n{{ if gt .Node.GPUs 0 }}\n  true\n{{ else }}\n  false\n{{ end }}\n":                   {xe9680, dgx, smc821},
		`{{ with .Node.GPUModels }}{{ eq (index . 0) "NVIDIA A100-SXM4-80GB" }}{{ else }}false{{ end }}`:                      {dgx},
		`{{ $.Node.AssetTag | eq "" }}`: sample,
	} {
		r, err := Parse(rule)
		if err != nil {
			t.Errorf("%s: %v", rule, err)
			continue
		}
		e := NewEvaluator(r)
		var got []int
		for _, i := range sample {
			ok, err := e.Eval(0, node(i))
			if err != nil {
				t.Errorf("%s on machine %d: %v", rule, i, err)
			}
			if ok {
				got = append(got, i)
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", rule, d)
		}
	}
}

// A rule that fails to parse, or uses what a rule may not, is refused with
// the line and column of what is wrong.
func TestParseRefuses(t *testing.T) {
	for rule, want := range map[string]Error{
		`{{ gt .Node.GPUs 0 }`:                     {1, 20, `unexpected "}" in operand`},
		"{{ gt .Node.GPUs 0 }}\n{{ and (eq 1 1) }": {2, 17, `unexpected "}" in operand`},
		"{{ if ) }}":                          {1, 7, "unexpected right paren"},
		`{{ printf "%d" .Node.GPUs }}`:        {1, 4, `function "printf" is not allowed in a rule (allowed: and, contains, eq, ge, gt, has, hasPrefix, hasSuffix, index, le, len, lower, lt, ne, not, or, pciDevice, pciVendor)`},
		"true\n  {{ call .Node.Arch }}":       {2, 6, `function "call" is not allowed`},
		`{{ _step }}`:                         {1, 4, `function "_step" is not allowed`},
		`{{ nosuch 1 }}`:                      {1, 4, `function "nosuch" is not allowed`},
		`{{ gt .Node.GPU 0 }}`:                {1, 12, ".Node has no GPU (it has Arch, AssetTag, Building, CPUModel"},
		`{{ gt $.Node.Memory 0 }}`:            {1, 13, ".Node has no Memory"},
		`{{ .GPUs }}`:                         {1, 4, "a rule sees only .Node, not .GPUs"},
		`{{ pciVendor "nvidia" }}`:            {1, 14, `pciVendor "nvidia": a PCI vendor id is 4 hex digits (10de is NVIDIA, 15b3 Mellanox)`},
		`{{ pciDevice "10de" }}`:              {1, 14, `pciDevice "10de": a PCI device is vendor:device`},
		`{{ define "x" }}true{{ end }}`:       {1, 17, `a rule defines no templates (define "x")`},
		`{{ template "x" }}`:                  {1, 4, `a rule calls no templates ({{template "x"}})`},
		`{{ $y }}`:                            {1, 5, `undefined variable "$y"`},
		"   ":                                 {1, 1, "the rule is empty"},
		"{{/* only a comment */}}":            {1, 1, "the rule is empty"},
		"{{ gt .Node.GPUs 0 \n":               {2, 1, "unclosed action"},
		"{{ \"é\" | eq .Node.Name }}{{ if }}": {1, 33, "missing value for if"},
	} {
		_, err := Parse(rule)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: %v, want an *Error", rule, err)
			continue
		}
		if e.Line != want.Line || e.Col != want.Col || !strings.Contains(e.Msg, want.Msg) {
			t.Errorf("%q: line %d, column %d: %s\nwant line %d, column %d: %s", rule, e.Line, e.Col, e.Msg, want.Line, want.Col, want.Msg)
		}
	}
	if _, err := Parse(strings.Repeat(" ", MaxRule) + "true"); err == nil || !strings.Contains(err.Error(), "more than the 4096") {
		t.Errorf("a long rule: %v", err)
	}
	if _, err := Parse("\xff"); err == nil {
		t.Error("a rule that is not UTF-8 parsed")
	}
}

// A rule that fails on a machine says where and why; nothing it does
// runs away, whatever the machine holds.
func TestEvalFailures(t *testing.T) {
	broken := errors.New("inventory of m-000000000003: unexpected EOF")
	for rule, c := range map[string]struct {
		facts func() (Facts, error)
		want  Error
	}{
		`{{ has .Node.Tags 3 }}`:              {nil, Error{1, 19, "<3>: expected string; found 3"}},
		`{{ .Node.GPUs }}`:                    {nil, Error{0, 0, `the rule printed "8", not true or false`}},
		`true false`:                          {nil, Error{0, 0, `the rule printed "true false", not true or false`}},
		`{{ .Node.PCIDevices }}`:              {nil, Error{0, 0, "the rule prints more than 64 bytes"}},
		`{{ range 1000000000 }}{{ end }}true`: {nil, Error{1, 10, "the rule takes more than 10000 steps"}},
		// 61 PCI ids: 61³ turns.
		`{{ range $.Node.PCIDevices }}{{ range $.Node.PCIDevices }}{{ range $.Node.PCIDevices }}{{ end }}{{ end }}{{ end }}true`: {nil, Error{1, 68, "the rule takes more than 10000 steps"}},
		`{{ range .Node.PCIDevices }}{{ pciVendor "10de" }}{{ pciVendor "8086" }}{{ end }}`:                                      {nil, Error{0, 0, "the rule prints more than 64 bytes"}},
		`{{ pciVendor "10de" }}`:        {func() (Facts, error) { return Facts{}, broken }, Error{1, 4, "<pciVendor \"10de\">: error calling pciVendor: inventory of m-000000000003: unexpected EOF"}},
		`{{ eq .Node.Arch "x86_64" }}`:  {func() (Facts, error) { return Facts{}, broken }, Error{1, 12, "error calling Arch: inventory of m-000000000003"}},
		`{{ pciVendor (lower "XYZ") }}`: {nil, Error{1, 4, `pciVendor "xyz": a PCI vendor id is 4 hex digits`}},
	} {
		r, err := Parse(rule)
		if err != nil {
			t.Errorf("%s: %v", rule, err)
			continue
		}
		m, rep := machine(xe9680)
		facts := c.facts
		if facts == nil {
			facts = func() (Facts, error) { return FactsOf(&rep), nil }
		}
		ok, err := r.Match(NodeOf(m, facts))
		var e *Error
		if !errors.As(err, &e) || ok {
			t.Errorf("%s: %v, %v; want an *Error", rule, ok, err)
			continue
		}
		if e.Line != c.want.Line || e.Col != c.want.Col || !strings.Contains(e.Msg, c.want.Msg) {
			t.Errorf("%s: line %d, column %d: %s\nwant line %d, column %d: %s", rule, e.Line, e.Col, e.Msg, c.want.Line, c.want.Col, c.want.Msg)
		}
	}
}

// The facts are read only for a rule that asks for them, and once per
// Node however often it asks; a machine never commissioned has none.
func TestFactsReadOnDemand(t *testing.T) {
	gpus, _ := Parse(`{{ gt .Node.GPUs 0 }}`)
	pci, _ := Parse(`{{ or (pciVendor "10de") (pciVendor "1002") (has .Node.PCIVendors "8086") (eq .Node.Arch "") }}`)
	m, rep := machine(dgx)
	reads := 0
	n := NodeOf(m, func() (Facts, error) { reads++; return FactsOf(&rep), nil })
	e := NewEvaluator(gpus, pci)
	if ok, err := e.Eval(0, n); !ok || err != nil || reads != 0 {
		t.Errorf("GPU rule: %v %v, %d reads", ok, err, reads)
	}
	for range 3 {
		if ok, err := e.Eval(1, n); !ok || err != nil || reads != 1 {
			t.Errorf("PCI rule: %v %v, %d reads", ok, err, reads)
		}
	}
	bare := NodeOf(store.Machine{ID: "m-000000000abc", State: store.StateNew}, nil)
	for i, want := range []bool{false, true} { // no GPUs; an Arch not known
		if ok, err := e.Eval(i, bare); ok != want || err != nil {
			t.Errorf("rule %d on a new machine: %v %v", i, ok, err)
		}
	}
}

// The stored report gives the facts the report in hand gives: the JSON
// names DecodeFacts reads are the report's.
func TestDecodeFactsIsFactsOf(t *testing.T) {
	for _, i := range sample {
		rep := fleet.Generate(1, i)
		doc, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeFacts(doc)
		if err != nil {
			t.Fatal(err)
		}
		want := FactsOf(&rep)
		if d := cmp.Diff(want, got); d != "" || want.CPUVendor == "" || len(want.PCIVendors) == 0 {
			t.Errorf("machine %d (-report +stored):\n%s", i, d)
		}
	}
	if _, err := DecodeFacts([]byte(`{"pci": 7}`)); err == nil {
		t.Error("a damaged report decoded")
	}
}

// One parsed rule serves evaluators on several goroutines, each with its
// own budget (go test -race).
func TestRuleSharedByEvaluators(t *testing.T) {
	r, err := Parse(`{{ $n := 0 }}{{ range .Node.PCIDevices }}{{ $n = 1 }}{{ end }}{{ and (eq $n 1) (pciVendor "10de") }}`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([][]bool, 4)
	for g := range results {
		wg.Go(func() {
			e := NewEvaluator(r)
			for range 50 {
				for _, i := range sample {
					ok, err := e.Eval(0, node(i))
					if err != nil {
						t.Error(err)
					}
					results[g] = append(results[g], ok)
				}
			}
		})
	}
	wg.Wait()
	for g := range results {
		if !slices.Equal(results[g], results[0]) {
			t.Errorf("goroutine %d saw other results", g)
		}
	}
}

// BenchmarkRuleOverFleet evaluates one rule over 10,000 machines of the
// simulator (their nodes made beforehand, as a walk of the store makes
// them from the records): a rule over the record's fields, and one that
// reads each machine's facts from its stored report.
func BenchmarkRuleOverFleet(b *testing.B) {
	const n = 10_000
	type stored struct {
		m   store.Machine
		doc []byte
	}
	fleetOf := make([]stored, n)
	for i := range fleetOf {
		m, rep := machine(i)
		doc, _ := json.Marshal(rep)
		fleetOf[i] = stored{m, doc}
	}
	for name, rule := range map[string]string{
		"summary": `{{ and (gt .Node.GPUs 0) (ge .Node.MemoryGiB 1024) }}`,
		"facts":   `{{ pciVendor "10de" }}`,
	} {
		b.Run(name, func(b *testing.B) {
			r, err := Parse(rule)
			if err != nil {
				b.Fatal(err)
			}
			e := NewEvaluator(r)
			matched := 0
			for b.Loop() {
				matched = 0
				for _, s := range fleetOf {
					doc := s.doc
					ok, err := e.Eval(0, NodeOf(s.m, func() (Facts, error) { return DecodeFacts(doc) }))
					if err != nil {
						b.Fatal(err)
					}
					if ok {
						matched++
					}
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "machines/s")
			b.ReportMetric(float64(matched), "matched")
		})
	}
}

// The cache gives a machine's facts until it is commissioned again.
func TestFactsCache(t *testing.T) {
	var c FactsCache
	m, rep := machine(dgx)
	m.Commissioned = fleet.Generate(1, dgx).Collected
	reads := 0
	load := func() (Facts, error) { reads++; return FactsOf(&rep), nil }
	for range 3 {
		if f, err := c.Facts(m, load); err != nil || f.CPUVendor != "AuthenticAMD" {
			t.Fatalf("facts = %+v, %v", f, err)
		}
	}
	if reads != 1 || c.Len() != 1 {
		t.Errorf("%d reads, %d cached; want 1, 1", reads, c.Len())
	}
	m.Commissioned = m.Commissioned.Add(time.Hour) // commissioned again
	c.Facts(m, load)
	if _, err := c.Facts(m, func() (Facts, error) { return Facts{}, errors.New("x") }); err != nil || reads != 2 {
		t.Errorf("after recommissioning: %d reads, %v", reads, err)
	}
	other := m
	other.ID = "m-0000000000ff"
	if _, err := c.Facts(other, func() (Facts, error) { return Facts{}, errors.New("damaged") }); err == nil || c.Len() != 1 {
		t.Errorf("a failed load: %v, %d cached (a failure is not kept)", err, c.Len())
	}
	c.Retain(func(id string) bool { return id != m.ID })
	if c.Len() != 0 {
		t.Errorf("Retain kept %d", c.Len())
	}
}
