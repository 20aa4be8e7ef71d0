// Package locationcsv reads a site's location export (a DCIM or asset
// list, the spec's `rollcall location import FILE.csv [-dry]`) into the
// locations it would give machines: every row matched to one machine by
// id, serial, mac or node_name, every bad row reported with its line, and
// no plan at all while any row is bad. It is pure: the machines and racks
// come through Store, which a store.Tx satisfies, and the plan is what a
// LocationSet would carry (raftfsm.MachineLocation{ID: e.Machine,
// Location: raftfsm.LocationBody(e.After)} for each of Plan.Changed).
//
// The file (RFC 4180 CSV, UTF-8, an optional byte order mark) needs a
// header naming its columns, in any order and case:
//
//	id, serial, mac, node_name         which machine (at least one; all given must agree)
//	building, room, rack, unit, height, asset_tag   where it stands (at least one)
//
// A column the header leaves out keeps the machine's value; an empty cell
// of a column it names clears it, since the file is the site's record of
// what it names. A machine in a rack stands where the rack does, racks not
// known yet are made at 42U (listed in Plan.Racks), and no two machines
// share a unit of a rack, as raftfsm's LocationSet has it.
package locationcsv

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rollcall/rollcall/store"
)

// Bounds of an import: a site's whole fleet in one file, with room.
const (
	MaxBytes  = 8 << 20 // the file
	MaxRows   = 100_000 // data rows
	MaxField  = 256     // one cell, in bytes
	MaxErrors = 100     // rows reported one by one; past them, a count
)

// Store is what a plan reads: a store.Tx satisfies it.
type Store interface {
	Machine(id string) (store.Machine, error)
	MachineIDsBySerial(serial string) []string
	MachineIDsByMAC(mac string) []string
	MachineIDsByName(name string) []string
	Rack(name string) (store.Rack, error)
	MachineIDsInRack(name string) []string
}

// Entry is one row's machine and where it would stand.
type Entry struct {
	Line    int    // the row's line in the file, from 1 (the header)
	Machine string // its ID
	Key     string // the column that named it (id, serial, mac, node_name)
	Before  store.Location
	After   store.Location
}

// Changed reports whether the row changes the machine's location.
func (e Entry) Changed() bool { return e.Before != e.After }

// Plan is what an import would do.
type Plan struct {
	Entries []Entry      // every row, in file order
	Racks   []store.Rack // racks it would make, by name
}

// Changed are the entries that change a machine: what a LocationSet
// carries.
func (p *Plan) Changed() []Entry {
	var out []Entry
	for _, e := range p.Entries {
		if e.Changed() {
			out = append(out, e)
		}
	}
	return out
}

// RowError is one bad row.
type RowError struct {
	Line int
	Msg  string
}

func (e RowError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Errors are every bad row of a file (the first MaxErrors; More counts
// the rest). Parse returns them wrapped in a store.ErrInvalid refusal
// whose text lists them.
type Errors struct {
	Rows []RowError
	More int
}

func (e *Errors) Error() string {
	lines := make([]string, len(e.Rows))
	for i, r := range e.Rows {
		lines[i] = r.Error()
	}
	if e.More > 0 {
		lines = append(lines, fmt.Sprintf("and %d more bad rows", e.More))
	}
	return strings.Join(lines, "\n")
}

func (e *Errors) add(line int, format string, a ...any) {
	if len(e.Rows) >= MaxErrors {
		e.More++
		return
	}
	e.Rows = append(e.Rows, RowError{Line: line, Msg: fmt.Sprintf(format, a...)})
}

func (e *Errors) count() int { return len(e.Rows) + e.More }

var (
	keyColumns      = []string{"id", "serial", "mac", "node_name"}
	locationColumns = []string{"building", "room", "rack", "unit", "height", "asset_tag"}
)

// Parse reads a file and plans it against st. It returns the plan, or a
// store.ErrInvalid error that wraps *Errors (errors.As) and says every
// bad row with its line.
func Parse(r io.Reader, st Store) (*Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the location file: %w", err)
	}
	if len(data) > MaxBytes {
		return nil, store.Errorf(store.ErrInvalid, "the location file is larger than the %d MiB allowed", MaxBytes>>20)
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	var errs Errors
	p := &planner{st: st, errs: &errs, byMachine: map[string]int{}, racks: map[string]*rackPlan{}}
	p.read(data)
	if errs.count() == 0 {
		p.checkRacks()
	}
	if errs.count() > 0 {
		n := errs.count()
		return nil, store.Errorf(store.ErrInvalid, "%d bad %s, nothing imported:\n%w", n, plural(n, "row", "rows"), &errs)
	}
	return p.plan(), nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// rackPlan is a rack as the plan leaves it.
type rackPlan struct {
	rack  store.Rack
	isNew bool
}

type planner struct {
	st         Store
	errs       *Errors
	cols       map[string]int // column name → index
	headerLine int
	entries    []Entry
	byMachine  map[string]int // machine → its entry
	racks      map[string]*rackPlan
}

func (p *planner) read(data []byte) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		p.errs.add(1, "the file is empty: it needs a header (id, serial, mac or node_name, and building, room, rack, unit, height or asset_tag)")
		return
	}
	if err != nil {
		p.errs.add(csvLine(err, 1), "the header: %s", csvMsg(err))
		return
	}
	p.headerLine, _ = cr.FieldPos(0)
	if !p.header(header) {
		return
	}
	cr.FieldsPerRecord = len(header)
	rows := 0
	for {
		at := cr.InputOffset()
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && pe.Err == csv.ErrFieldCount {
				p.errs.add(pe.StartLine, "%d fields, the header has %d", len(rec), len(header))
				continue
			}
			p.errs.add(csvLine(err, 0), "%s", csvMsg(err))
			// A quoting error is reported and reading goes on after it,
			// as long as the reader gets past it (an unclosed quote at
			// the end does not).
			if !errors.As(err, &pe) || cr.InputOffset() == at {
				return
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		if rows++; rows > MaxRows {
			p.errs.add(line, "more than the %d rows an import may have: split the file", MaxRows)
			return
		}
		p.row(line, rec)
	}
}

func csvLine(err error, fallback int) int {
	var pe *csv.ParseError
	if errors.As(err, &pe) && pe.Line > 0 {
		return pe.Line
	}
	return fallback
}

func csvMsg(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func (p *planner) header(h []string) bool {
	p.cols = map[string]int{}
	known := append(slices.Clone(keyColumns), locationColumns...)
	ok := true
	for i, name := range h {
		name = strings.ToLower(strings.TrimSpace(name))
		switch {
		case !slices.Contains(known, name):
			p.errs.add(p.headerLine, "column %.64q is not one of %s", name, strings.Join(known, ", "))
			ok = false
		case hasCol(p.cols, name):
			p.errs.add(p.headerLine, "column %s is named twice", name)
			ok = false
		default:
			p.cols[name] = i
		}
	}
	if !ok {
		return false
	}
	if !slices.ContainsFunc(keyColumns, func(c string) bool { return hasCol(p.cols, c) }) {
		p.errs.add(p.headerLine, "the header names no id, serial, mac or node_name column: rows could not be matched to machines")
		return false
	}
	if !slices.ContainsFunc(locationColumns, func(c string) bool { return hasCol(p.cols, c) }) {
		p.errs.add(p.headerLine, "the header names no building, room, rack, unit, height or asset_tag column: nothing to import")
		return false
	}
	return true
}

func hasCol(cols map[string]int, name string) bool { _, ok := cols[name]; return ok }

// cell is a row's value of a column, trimmed; ok is false when the header
// does not name the column.
func (p *planner) cell(rec []string, name string) (string, bool) {
	i, ok := p.cols[name]
	if !ok {
		return "", false
	}
	return strings.TrimSpace(rec[i]), true
}

func (p *planner) row(line int, rec []string) {
	for i, v := range rec {
		if len(v) > MaxField || !utf8.ValidString(v) {
			p.errs.add(line, "field %d is not UTF-8 text of at most %d bytes", i+1, MaxField)
			return
		}
	}
	id, key, ok := p.match(line, rec)
	if !ok {
		return
	}
	if prev, dup := p.byMachine[id]; dup {
		p.errs.add(line, "%s (by %s) is on line %d already", id, key, p.entries[prev].Line)
		return
	}
	m, err := p.st.Machine(id)
	if err != nil {
		p.errs.add(line, "%s", publicOr(err))
		return
	}
	after, ok := p.location(line, rec, m.Location)
	if !ok {
		return
	}
	p.byMachine[id] = len(p.entries)
	p.entries = append(p.entries, Entry{Line: line, Machine: id, Key: key, Before: m.Location, After: after})
}

// match finds the row's machine: every key the row gives must name the
// same one machine.
func (p *planner) match(line int, rec []string) (id, key string, ok bool) {
	for _, col := range keyColumns {
		v, present := p.cell(rec, col)
		if !present || v == "" {
			continue
		}
		var ids []string
		switch col {
		case "id":
			if !store.ValidMachineID(v) {
				p.errs.add(line, "id %.64q is not a machine ID (m- and 12 hex digits)", v)
				return "", "", false
			}
			if _, err := p.st.Machine(v); err != nil {
				p.errs.add(line, "id %s names no machine", v)
				return "", "", false
			}
			ids = []string{v}
		case "serial":
			ids = p.st.MachineIDsBySerial(v)
		case "mac":
			mac, err := store.NormalizeMAC(v)
			if err != nil {
				p.errs.add(line, "%s", publicOr(err))
				return "", "", false
			}
			ids = p.st.MachineIDsByMAC(mac)
		case "node_name":
			ids = p.st.MachineIDsByName(strings.ToLower(v))
		}
		switch {
		case len(ids) == 0:
			p.errs.add(line, "%s %.64q names no machine", col, v)
			return "", "", false
		case len(ids) > 1:
			shown := ids[:min(len(ids), 3)]
			p.errs.add(line, "%s %.64q names %d machines (%s): give the id", col, v, len(ids), strings.Join(shown, ", "))
			return "", "", false
		}
		if id != "" && ids[0] != id {
			p.errs.add(line, "%s says %s, %s says %s", key, id, col, ids[0])
			return "", "", false
		}
		if id == "" {
			id, key = ids[0], col
		}
	}
	if id == "" {
		p.errs.add(line, "no id, serial, mac or node_name to match a machine by")
		return "", "", false
	}
	return id, key, true
}

// location is the machine's location with the row's columns applied.
func (p *planner) location(line int, rec []string, before store.Location) (store.Location, bool) {
	l := before
	for _, f := range []struct {
		col string
		dst *string
	}{{"building", &l.Building}, {"room", &l.Room}, {"rack", &l.Rack}, {"asset_tag", &l.AssetTag}} {
		if v, ok := p.cell(rec, f.col); ok {
			*f.dst = v
		}
	}
	for _, f := range []struct {
		col string
		dst *int
	}{{"unit", &l.Unit}, {"height", &l.Height}} {
		v, ok := p.cell(rec, f.col)
		if !ok {
			continue
		}
		n := 0
		if v != "" {
			var err error
			if n, err = strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(v, "U"), "u")); err != nil {
				p.errs.add(line, "%s %.64q is not a whole number", f.col, v)
				return l, false
			}
		}
		*f.dst = n
	}
	// A machine the file moves to another rack, without saying the unit,
	// does not keep its unit in the rack it left.
	if _, ok := p.cell(rec, "unit"); !ok && l.Rack != before.Rack {
		l.Unit = 0
	}
	if err := store.CheckLocation(l); err != nil {
		p.errs.add(line, "%s", publicOr(err))
		return l, false
	}
	if l.Rack == "" {
		return l, true
	}
	r, ok := p.racks[l.Rack]
	if !ok {
		got, err := p.st.Rack(l.Rack)
		switch {
		case err == nil:
			r = &rackPlan{rack: got}
		case errors.Is(err, store.ErrNotFound):
			r = &rackPlan{rack: store.Rack{Name: l.Rack, Height: store.DefaultRackHeight}, isNew: true}
		default:
			p.errs.add(line, "rack %s: %s", l.Rack, publicOr(err))
			return l, false
		}
		p.racks[l.Rack] = r
	}
	if r.isNew {
		r.rack.AdoptPlace(l)
	}
	l, err := store.PlaceInRack(l, r.rack)
	if err != nil {
		p.errs.add(line, "%s", publicOr(err))
		return l, false
	}
	return l, true
}

// checkRacks checks every rack the plan places machines in: the machines
// already there that the file does not move, and the file's.
func (p *planner) checkRacks() {
	names := make([]string, 0, len(p.racks))
	for n := range p.racks {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		var slots []store.Slot
		for _, id := range p.st.MachineIDsInRack(name) {
			if _, moved := p.byMachine[id]; moved {
				continue
			}
			m, err := p.st.Machine(id)
			if err != nil {
				continue
			}
			slots = append(slots, store.Slot{ID: id, Unit: m.Location.Unit, Height: m.Location.Height})
		}
		for _, e := range p.entries {
			if e.After.Rack == name {
				slots = append(slots, store.Slot{ID: e.Machine, Unit: e.After.Unit, Height: e.After.Height})
			}
		}
		for _, c := range store.RackConflicts(name, p.racks[name].rack.Height, slots) {
			line := 0
			for _, id := range []string{c.Slot.ID, c.Other.ID} {
				if i, ok := p.byMachine[id]; ok {
					line = max(line, p.entries[i].Line)
				}
			}
			p.errs.add(line, "%s", publicOr(c.Err))
		}
	}
}

func (p *planner) plan() *Plan {
	pl := &Plan{Entries: p.entries}
	names := make([]string, 0, len(p.racks))
	for n, r := range p.racks {
		if r.isNew {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		pl.Racks = append(pl.Racks, p.racks[n].rack)
	}
	return pl
}

func publicOr(err error) string {
	if s := store.Public(err); s != "" {
		return s
	}
	return err.Error()
}

// Diff is the plan as `-dry` shows it: one line a row that changes a
// machine (field: before → after), the racks it would make, and a count.
func (p *Plan) Diff() string {
	var b strings.Builder
	changed := 0
	for _, e := range p.Entries {
		if !e.Changed() {
			continue
		}
		changed++
		fmt.Fprintf(&b, "line %d: %s: %s\n", e.Line, e.Machine, strings.Join(fieldChanges(e.Before, e.After), ", "))
	}
	for _, r := range p.Racks {
		where := strings.Join(nonEmpty(r.Building, r.Room), " › ")
		if where != "" {
			where = " in " + where
		}
		fmt.Fprintf(&b, "new rack %s: %dU%s\n", r.Name, r.Height, where)
	}
	fmt.Fprintf(&b, "%d %s, %d to change, %d unchanged, %d new %s\n", len(p.Entries), plural(len(p.Entries), "row", "rows"),
		changed, len(p.Entries)-changed, len(p.Racks), plural(len(p.Racks), "rack", "racks"))
	return b.String()
}

func fieldChanges(a, b store.Location) []string {
	var out []string
	str := func(name, x, y string) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %q → %q", name, x, y))
		}
	}
	num := func(name string, x, y int) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %d → %d", name, x, y))
		}
	}
	str("building", a.Building, b.Building)
	str("room", a.Room, b.Room)
	str("rack", a.Rack, b.Rack)
	num("unit", a.Unit, b.Unit)
	num("height", a.Height, b.Height)
	str("asset tag", a.AssetTag, b.AssetTag)
	return out
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
