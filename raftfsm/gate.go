package raftfsm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rollcall/rollcall/store"
)

// The cluster version gate. Every node reports what its binary reads
// (NodeVersions: the highest body version of each command type, the record
// formats, its build); the leader opens a body version, a new command
// type or a record format (GateOpen) only once every voter and non-voter
// reported it; until then proposers write the older body (or refuse a
// command that has none), and Apply refuses an entry above what is open,
// with an error to its proposer that names the member the gate waits for.
// Such an entry changes nothing on any gate-aware node, so a node that
// cannot even decode it skips it rather than stopping. A node stops only
// on an entry that is open and that it cannot read (its binary was
// replaced by an older one after it reported): the message names both
// versions. docs/versions.md tells the discipline and the first upgrade.
//
// Bootstrap: binaries before the gate (main up to 2a8e87d) know nothing of
// it. They skip NodeVersions and GateOpen (types 150 and 151 carry the
// ignorable bit) and report nothing, so while one of them is a member the
// gate stays at preGate: what those binaries read, which the first
// gate-aware build must itself write and nothing more. The first rolling
// upgrade to a gate-aware build is therefore the last one that must not
// change any format; every later one is gated.

// Version gate command types (150–159 are this family's).
const (
	TypeNodeVersions Type = 150
	TypeGateOpen     Type = 151
	TypeGateProbe    Type = 152
)

// preGate is what every binary before the gate reads: the command types
// and body versions of main at 2a8e87d. It is what is open in a cluster
// whose gate never opened anything. Frozen: never edit it.
var preGate = map[Type]uint8{
	0: 1, 1: 1, 10: 1, 11: 1, 12: 1, 13: 1, 14: 1, 20: 1,
	21: 1, 22: 1, 23: 2, 24: 3, 25: 1, 40: 1, 41: 1, 42: 1,
	43: 1, 44: 1, 45: 1, 46: 1, 47: 1, 48: 1, 49: 1, 60: 1,
	61: 1, 62: 1, 63: 2, 64: 1, 80: 1, 81: 1, 82: 1, 90: 1,
	91: 1, 92: 1, 93: 1, 94: 1, 100: 1, 101: 1, 102: 1, 103: 1,
	104: 1, 105: 1, 106: 1, 107: 1, 108: 1, 110: 1, 111: 1, 120: 1,
	121: 1, 122: 1, 123: 1, 124: 1, 125: 1, 126: 1, 127: 1, 128: 1,
	130: 1, 131: 1, 132: 1, 133: 1, 134: 1, 135: 1, 138: 1, 140: 1,
	141: 1, 142: 1, 143: 1, 144: 1, 145: 1, 146: 1, 147: 1, 148: 1,
}

// ungated types flow before the gate opened anything: they are how it
// opens.
var ungated = map[Type]bool{TypeNodeVersions: true, TypeGateOpen: true}

// formats are the record formats this binary reads, by name, at their
// highest version. A stored format change adds or raises one here, with a
// migration command that rewrites the records; the leader proposes that
// command only once the format is open (docs/versions.md). None is gated
// yet.
var formats = map[string]int{}

// withheld caps what this binary says it reads (gate_withhold.go: a build
// that stands for an older gate-aware binary in tests).
var withheld = map[Type]uint8{}

// Build names this binary in version reports (set with -ldflags -X
// github.com/rollcall/rollcall/raftfsm.Build=…; else the VCS revision).
var Build = ""

// BuildVersion is Build, or the module's VCS revision, or "dev".
func BuildVersion() string {
	if Build != "" {
		return Build
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			if dirty {
				rev += "+dirty"
			}
			return rev
		}
	}
	return "dev"
}

// Versions is what one binary reads.
type Versions struct {
	Types   map[Type]uint8
	Formats map[string]int
}

// KnownVersions is what this binary reads (less what it withholds).
func KnownVersions() Versions {
	v := Versions{Types: map[Type]uint8{}, Formats: maps.Clone(formats)}
	for t, c := range commands {
		m := c.maxVersion
		if w, ok := withheld[t]; ok && w < m {
			m = w
		}
		if m > 0 {
			v.Types[t] = m
		}
	}
	return v
}

// Withhold makes this FSM read type t only up to version max (0: not at
// all), as an older binary would: tests of the gate with in-process nodes.
// Call it before the FSM applies anything.
func (f *FSM) Withhold(t Type, max uint8) {
	k := f.Known()
	if max < k.Types[t] {
		k.Types[t] = max
		if max == 0 {
			delete(k.Types, t)
		}
	}
	f.known.Store(&k)
}

// Known is what this FSM reads.
func (f *FSM) Known() Versions {
	if k := f.known.Load(); k != nil {
		return Versions{Types: maps.Clone(k.Types), Formats: maps.Clone(k.Formats)}
	}
	return KnownVersions()
}

func (f *FSM) knownTypes() map[Type]uint8 {
	if k := f.known.Load(); k != nil {
		return k.Types
	}
	return knownDefault.Types
}

// knownDefault is KnownVersions, computed once the commands registered.
var knownDefault Versions

// gateState is the open gate as the FSM last applied it.
type gateState struct {
	types   map[Type]uint8
	formats map[string]int
	opened  map[string]uint64
}

func typeKey(t Type) string { return strconv.Itoa(int(t)) }

func gateFrom(g store.Gate, found bool) *gateState {
	s := &gateState{types: maps.Clone(preGate), formats: map[string]int{}, opened: map[string]uint64{}}
	if !found {
		return s
	}
	for k, v := range g.Types {
		if n, err := strconv.Atoi(k); err == nil && n >= 0 && n < 256 {
			s.types[Type(n)] = v
		}
	}
	maps.Copy(s.formats, g.Formats)
	maps.Copy(s.opened, g.Opened)
	return s
}

func (s *gateState) open(t Type, known map[Type]uint8) uint8 {
	if ungated[t] {
		return known[t]
	}
	return s.types[t]
}

// loadGate reads the gate record into the FSM's cache.
func (f *FSM) loadGate(tx *store.Tx) (*gateState, error) {
	g, found, err := tx.Gate()
	if err != nil {
		return nil, err
	}
	s := gateFrom(g, found)
	f.gate.Store(s)
	return s, nil
}

func (f *FSM) gateOf(tx *store.Tx) *gateState {
	if s := f.gate.Load(); s != nil {
		return s
	}
	s, err := f.loadGate(tx)
	if err != nil {
		panic(fmt.Sprintf("raftfsm: read the version gate: %v", err))
	}
	return s
}

// OpenVersion is the highest body version of t a proposer may write now
// (0: the type is not open).
func (f *FSM) OpenVersion(t Type) uint8 {
	s := f.gate.Load()
	if s == nil {
		f.db.View(func(tx *store.Tx) error { s = f.gateOf(tx); return nil })
	}
	return s.open(t, f.knownTypes())
}

// ErrGateClosed marks a command whose body version the gate has not
// opened yet.
var ErrGateClosed = errors.New("not open in the cluster's version gate")

// downgrader is implemented by commands that can write an older body.
type downgrader interface {
	downgrade(open uint8) (Command, bool)
}

// ForGate returns the command as the gate lets this proposer write it:
// itself, an older body of it, or ErrGateClosed with what it waits for.
func (f *FSM) ForGate(c Command) (Command, error) {
	t := c.Type()
	open := f.OpenVersion(t)
	if c.Version() <= open {
		return c, nil
	}
	if d, ok := c.(downgrader); ok && open > 0 {
		if older, ok := d.downgrade(open); ok && older.Version() <= open {
			return older, nil
		}
	}
	return nil, f.closedError(t, c.Version(), open)
}

func (f *FSM) closedError(t Type, v, open uint8) (err error) {
	f.db.View(func(tx *store.Tx) error {
		err = f.closedErrorTx(tx, t, v, open)
		return nil
	})
	return err
}

func commandName(t Type) string {
	if c, ok := commands[t]; ok {
		return c.name
	}
	return fmt.Sprintf("type %d", t)
}

// waitingFor names the nodes (appliance node records and version
// reports) that do not read t at v.
func waitingFor(tx *store.Tx, t Type, v uint8) []string {
	nodes, _ := tx.Nodes()
	reports, _ := tx.NodeVersionsAll()
	names := map[string]bool{}
	for _, n := range nodes {
		names[n.Name] = true
	}
	for n := range reports {
		names[n] = true
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		r, ok := reports[n]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("node %s (no version report: a binary without the gate, or not started since)", n))
		case r.Types[typeKey(t)] < v:
			out = append(out, fmt.Sprintf("node %s (build %s reads %s up to %d)", n, r.Build, commandName(t), r.Types[typeKey(t)]))
		}
	}
	return out
}

// ReportsPending says whether some node's report reads a body version or
// format the gate has not opened: then every node renews its report, so
// that the leader's view of each stays fresh.
func (f *FSM) ReportsPending() bool {
	pending := false
	f.db.View(func(tx *store.Tx) error {
		s := f.gateOf(tx)
		reports, _ := tx.NodeVersionsAll()
		for _, r := range reports {
			for k, v := range r.Types {
				if n, err := strconv.Atoi(k); err == nil && n >= 0 && n < 256 && !ungated[Type(n)] && v > s.types[Type(n)] {
					pending = true
				}
			}
			for name, v := range r.Formats {
				if v > s.formats[name] {
					pending = true
				}
			}
		}
		return nil
	})
	return pending
}

// checkGate is applyEntry's first step: an entry above what is open is
// refused (the same on every gate-aware node, so whether this node can
// decode it does not matter); one that is open but that this node cannot
// read stops it. It returns a result when the entry is settled here.
func (f *FSM) checkGate(tx *store.Tx, data []byte) *Result {
	if len(data) < headerLen {
		return nil // Decode says what is wrong
	}
	t, v := Type(data[0]), data[1]
	known := f.knownTypes()
	open := f.gateOf(tx).open(t, known)
	if v > open {
		if known[t] == 0 && t&FlagIgnorable != 0 && open == 0 {
			// An ignorable type nobody opened: skipped as before the gate.
			return &Result{}
		}
		return &Result{Err: f.closedErrorTx(tx, t, v, open)}
	}
	if v > known[t] {
		panic(fmt.Sprintf("raftfsm: command %s body version %d is open in the cluster (since index %d) but this node's binary (%s) reads it only up to %d: "+
			"it was replaced by an older build after the gate opened; run a build that reads version %d",
			commandName(t), v, f.gateOf(tx).opened[typeKey(t)+"/"+strconv.Itoa(int(v))], BuildVersion(), known[t], v))
	}
	return nil
}

func (f *FSM) closedErrorTx(tx *store.Tx, t Type, v, open uint8) error {
	msg := fmt.Sprintf("command %s body version %d: %v (open: %d)", commandName(t), v, ErrGateClosed, open)
	if w := waitingFor(tx, t, v); len(w) > 0 {
		msg += "; waiting for " + strings.Join(w, ", ")
	}
	return fmt.Errorf("%s: %w", msg, ErrGateClosed)
}

// CheckDowngrade refuses a store whose gate opened a body version or a
// format this binary does not read: the node would stop at the first
// such entry, or misread the records. Before the gate opened anything
// beyond what this binary reads, a downgrade is safe.
func (f *FSM) CheckDowngrade() error {
	var s *gateState
	if err := f.db.View(func(tx *store.Tx) (err error) { s, err = f.loadGate(tx); return err }); err != nil {
		return err
	}
	k := f.Known()
	for _, t := range slices.Sorted(maps.Keys(s.types)) {
		if v := s.types[t]; v > k.Types[t] {
			return fmt.Errorf("version gate: the cluster opened command %s body version %d at index %d, and this binary (%s) reads it only up to %d: "+
				"a downgrade after the gate opened is refused; run a build that reads it", commandName(t), v, s.opened[typeKey(t)+"/"+strconv.Itoa(int(v))], BuildVersion(), k.Types[t])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.formats)) {
		if v := s.formats[name]; v > k.Formats[name] {
			return fmt.Errorf("version gate: the store holds record format %s version %d (since index %d), and this binary (%s) reads it only up to %d: "+
				"a downgrade after the gate opened is refused", name, v, s.opened["format:"+name+"/"+strconv.Itoa(v)], BuildVersion(), k.Formats[name])
		}
	}
	return nil
}

// NodeVersions is a node's report of what its binary reads.
type NodeVersions struct {
	Node    string           `json:"node"`
	Build   string           `json:"build"`
	Boot    string           `json:"boot"`
	Types   map[string]uint8 `json:"types"`
	Formats map[string]int   `json:"formats,omitempty"`
}

// Boot is this process's random identity in version reports.
var Boot = func() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// Report is this FSM's version report for node.
func (f *FSM) Report(node string) *NodeVersions {
	k := f.Known()
	r := &NodeVersions{Node: node, Build: BuildVersion(), Boot: Boot, Types: map[string]uint8{}, Formats: k.Formats}
	for t, v := range k.Types {
		r.Types[typeKey(t)] = v
	}
	return r
}

func (*NodeVersions) Type() Type     { return TypeNodeVersions }
func (*NodeVersions) Version() uint8 { return 1 }
func (c *NodeVersions) apply(tx *store.Tx) error {
	if c.Node == "" {
		return store.Errorf(store.ErrInvalid, "version report without a node name")
	}
	return tx.PutNodeVersions(store.NodeVersions{Node: c.Node, Build: c.Build, Boot: c.Boot, Types: c.Types, Formats: c.Formats})
}

// GateOpen opens body versions and formats: the leader proposes it once
// every member reported them (cluster's gate loop). It only raises.
type GateOpen struct {
	Types   map[string]uint8 `json:"types,omitempty"`
	Formats map[string]int   `json:"formats,omitempty"`
}

func (*GateOpen) Type() Type                 { return TypeGateOpen }
func (*GateOpen) Version() uint8             { return 1 }
func (c *GateOpen) apply(tx *store.Tx) error { return c.applyFor(nil, tx) }

// applyFor applies the opening on f (nil: a node that reads what its
// binary reads).
func (c *GateOpen) applyFor(f *FSM, tx *store.Tx) error {
	if len(c.Types) == 0 && len(c.Formats) == 0 {
		return store.Errorf(store.ErrInvalid, "gate open with nothing to open")
	}
	for k, v := range c.Types {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n > 255 || v == 0 {
			return store.Errorf(store.ErrInvalid, "gate open: bad command type %q version %d", k, v)
		}
	}
	g, found, err := tx.Gate()
	if err != nil {
		return err
	}
	s := gateFrom(g, found)
	k := knownDefault
	if f != nil {
		k = f.Known()
	}
	known := k.Types
	for k, v := range c.Types {
		n, _ := strconv.Atoi(k)
		t := Type(n)
		if v <= s.types[t] {
			continue
		}
		if v > known[t] {
			panic(fmt.Sprintf("raftfsm: the cluster opens command %s body version %d, and this node's binary (%s) reads it only up to %d: "+
				"it was replaced by an older build after it reported; run a build that reads version %d", commandName(t), v, BuildVersion(), known[t], v))
		}
		s.types[t] = v
		s.opened[k+"/"+strconv.Itoa(int(v))] = tx.Index
	}
	knownF := k.Formats
	for name, v := range c.Formats {
		if v <= s.formats[name] {
			continue
		}
		if v > knownF[name] {
			panic(fmt.Sprintf("raftfsm: the cluster opens record format %s version %d, and this node's binary (%s) reads it only up to %d", name, v, BuildVersion(), knownF[name]))
		}
		s.formats[name] = v
		s.opened["format:"+name+"/"+strconv.Itoa(v)] = tx.Index
	}
	out := store.Gate{Types: map[string]uint8{}, Formats: s.formats, Opened: s.opened}
	for t, v := range s.types {
		out.Types[typeKey(t)] = v
	}
	if err := tx.PutGate(out); err != nil {
		return err
	}
	if f != nil {
		f.gate.Store(s)
	}
	return nil
}

// GateProbe is a command that exists to exercise the gate: version 2 is a
// body version newer than every binary before it, which a gate_withhold
// build does not read. Applying one counts it by the body version it was
// written at in the gate bucket (store.Tx.GateProbes), so a test sees
// which version the cluster wrote. Seq is in version 2 only and counts
// from 1: a probe without it was written at version 1.
type GateProbe struct {
	Note string `json:"note"`
	Seq  uint64 `json:"seq,omitempty"`
}

func (*GateProbe) Type() Type     { return TypeGateProbe }
func (*GateProbe) Version() uint8 { return 2 }
func (p *GateProbe) downgrade(uint8) (Command, bool) {
	return &gateProbeV1{Note: p.Note}, true
}
func (p *GateProbe) apply(tx *store.Tx) error {
	if p.Seq == 0 {
		return tx.CountGateProbe(1)
	}
	return tx.CountGateProbe(2)
}

// gateProbeV1 is a GateProbe written at body version 1 (ForGate's
// downgrade); it decodes as a GateProbe without Seq.
type gateProbeV1 struct {
	Note string `json:"note"`
}

func (*gateProbeV1) Type() Type               { return TypeGateProbe }
func (*gateProbeV1) Version() uint8           { return 1 }
func (*gateProbeV1) apply(tx *store.Tx) error { return tx.CountGateProbe(1) }

// Pending lists what this FSM reads that the gate has not opened, as
// "name vN" (sorted): what its node waits for the others to read.
func (f *FSM) Pending() []string {
	k := f.Known()
	var s *gateState
	f.db.View(func(tx *store.Tx) error { s = f.gateOf(tx); return nil })
	var out []string
	for t, v := range k.Types {
		if !ungated[t] && v > s.types[t] {
			out = append(out, fmt.Sprintf("%s v%d", commandName(t), v))
		}
	}
	for name, v := range k.Formats {
		if v > s.formats[name] {
			out = append(out, fmt.Sprintf("format %s v%d", name, v))
		}
	}
	sort.Strings(out)
	return out
}

// Openable computes, from reports of every member (by name), what the
// gate may open now beyond what is open: the lowest version each type and
// format is read at by all of them. It returns nil when nothing opens.
func (f *FSM) Openable(reports []store.NodeVersions) *GateOpen {
	if len(reports) == 0 {
		return nil
	}
	var s *gateState
	f.db.View(func(tx *store.Tx) error { s = f.gateOf(tx); return nil })
	g := &GateOpen{Types: map[string]uint8{}, Formats: map[string]int{}}
	for k, v := range reports[0].Types {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n > 255 || ungated[Type(n)] {
			continue
		}
		for _, r := range reports[1:] {
			v = min(v, r.Types[k])
		}
		if v > s.types[Type(n)] {
			g.Types[k] = v
		}
	}
	for name, v := range reports[0].Formats {
		for _, r := range reports[1:] {
			v = min(v, r.Formats[name])
		}
		if v > s.formats[name] {
			g.Formats[name] = v
		}
	}
	if len(g.Types) == 0 && len(g.Formats) == 0 {
		return nil
	}
	return g
}

func versionCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeNodeVersions: {"node-versions", 1, func() Command { return &NodeVersions{} }},
		TypeGateOpen:     {"gate-open", 1, func() Command { return &GateOpen{} }},
		TypeGateProbe:    {"gate-probe", 2, func() Command { return &GateProbe{} }},
	}
}
