package console

import (
	"fmt"
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The Racks and Tags pages: each a list; Enter shows one rack's elevation
// (units from the top down, a machine over the units it takes, coloured by
// its state; Enter on a unit opens that machine) or one tag.

// rackView is the rack on show and what loading it said.
type rackView struct {
	name   string
	detail *wire.RackDetail
	err    error
	// placed: the cursor was put on the top machine once; later updates
	// leave it where the operator moved it.
	placed bool
}

type tagView struct {
	name   string
	detail *wire.TagDetail
	err    error
}

func (c *console) buildRacksAndTags() {
	c.racksT = c.listTable("racks", " Racks ", func(ref string) { c.openRack(ref) })
	c.rackT = c.listTable("rack", " Rack ", func(ref string) { c.openMachine(ref, "rack") })
	c.tagsT = c.listTable("tags", " Tags ", func(ref string) { c.openTag(ref) })
	c.tagTV = c.textPage("tag", " Tag ")
	c.tagTV.SetWrap(true)
}

// listTable is a page of rows whose first cell references what Enter
// opens.
func (c *console) listTable(name, title string, open func(ref string)) *tview.Table {
	t := tview.NewTable().SetSelectable(true, false).SetFixed(1, 0)
	t.SetBorder(true).SetTitle(title)
	t.SetSelectedFunc(func(r, _ int) {
		if ref, ok := t.GetCell(r, 0).GetReference().(string); ok && ref != "" {
			open(ref)
		}
	})
	c.body.AddPage(name, t, true, false)
	return t
}

func (c *console) openRack(name string) {
	c.rack = rackView{name: name}
	c.show("rack")
	c.app.SetFocus(c.rackT)
}

func (c *console) openTag(name string) {
	c.tag = tagView{name: name}
	c.show("tag")
	c.app.SetFocus(c.tagTV)
}

// header clears a list and writes its column heads. It returns what puts
// the cursor on the first row when the list had none before (for a defer):
// tview leaves it past the end of a list drawn while it was empty.
func header(t *tview.Table, cols ...string) (first func()) {
	empty := t.GetRowCount() <= 2
	first = func() {
		if empty && t.GetRowCount() > 1 {
			t.Select(1, 0)
		}
	}
	t.Clear()
	for i, h := range cols {
		t.SetCell(0, i, tview.NewTableCell(h).SetSelectable(false).SetTextColor(tcell.ColorYellow))
	}
	return first
}

func note(t *tview.Table, row int, text string, color tcell.Color) {
	t.SetCell(row, 0, tview.NewTableCell(esc(text)).SetSelectable(false).SetTextColor(color))
}

func (c *console) renderRacks() {
	t := c.racksT
	defer header(t, "RACK", "BUILDING", "ROOM", "HEIGHT", "USED", "MACHINES")()
	if err := c.errs["racks"]; err != nil {
		note(t, 1, "cannot load racks: "+err.Error(), tcell.ColorRed)
		return
	}
	for r, k := range c.racks {
		t.SetCell(r+1, 0, tview.NewTableCell(esc(k.Name)).SetReference(k.Name))
		t.SetCell(r+1, 1, tview.NewTableCell(esc(dash(k.Building))))
		t.SetCell(r+1, 2, tview.NewTableCell(esc(dash(k.Room))))
		t.SetCell(r+1, 3, tview.NewTableCell(fmt.Sprintf("%dU", k.Height)).SetAlign(tview.AlignRight))
		t.SetCell(r+1, 4, tview.NewTableCell(fmt.Sprintf("%dU", k.UsedUnits)).SetAlign(tview.AlignRight))
		t.SetCell(r+1, 5, tview.NewTableCell(fmt.Sprint(k.Machines)).SetAlign(tview.AlignRight).SetExpansion(1))
	}
	if len(c.racks) == 0 {
		note(t, 1, "no racks: rollcall location ID -rack R -unit U places a machine (and makes its rack)", tcell.ColorGray)
	}
	t.SetTitle(fmt.Sprintf(" Racks · %d ", len(c.racks)))
}

// renderRack draws the elevation: one row a unit, the top unit first. A
// machine's name stands on its top unit and a bar on the units below it;
// every unit it takes references it, so Enter on any of them opens it.
func (c *console) renderRack() {
	t := c.rackT
	header(t, "  U", "MACHINE", "STATE")
	rv := c.rack
	switch {
	case rv.err != nil:
		t.SetTitle(" Rack " + esc(rv.name) + " ")
		note(t, 1, rv.err.Error(), tcell.ColorRed)
		return
	case rv.detail == nil:
		t.SetTitle(" Rack " + esc(rv.name) + " ")
		note(t, 1, "loading…", tcell.ColorGray)
		return
	}
	d := rv.detail
	place := strings.Join(nonEmpty(d.Building, d.Room), " › ")
	if place != "" {
		place = " · " + place
	}
	t.SetTitle(fmt.Sprintf(" Rack %s%s · %dU, %dU used · %d machines ", esc(d.Name), esc(place), d.Height, d.UsedUnits, d.Machines))
	at := map[int]wire.RackUnit{} // unit → the machine that takes it
	for _, u := range d.Elevation {
		for k := range max(u.Height, 1) {
			at[u.Unit+k] = u
		}
	}
	row := 1
	for unit := d.Height; unit >= 1; unit-- {
		t.SetCell(row, 0, tview.NewTableCell(fmt.Sprintf("%3d", unit)).SetTextColor(tcell.ColorGray))
		u, ok := at[unit]
		switch {
		case !ok:
			t.SetCell(row, 0, t.GetCell(row, 0).SetReference(""))
			t.SetCell(row, 1, tview.NewTableCell("·").SetTextColor(tcell.ColorGray))
			t.SetCell(row, 2, tview.NewTableCell(""))
		default:
			top := u.Unit + max(u.Height, 1) - 1
			name, state := "┃", ""
			if unit == top {
				name, state = unitName(u), u.State
				if u.Height > 1 {
					name = "┏ " + name
				}
			} else if unit == u.Unit {
				name = "┗"
			}
			col := stateColor(u.State)
			t.SetCell(row, 0, t.GetCell(row, 0).SetReference(u.Machine))
			t.SetCell(row, 1, tview.NewTableCell(esc(name)).SetTextColor(col).SetExpansion(1))
			t.SetCell(row, 2, tview.NewTableCell(esc(state)).SetTextColor(col))
		}
		row++
	}
	if !c.rack.placed {
		// Open on the highest machine, so a short screen shows one.
		c.rack.placed = true
		for r := 1; r < t.GetRowCount(); r++ {
			if ref, _ := t.GetCell(r, 0).GetReference().(string); ref != "" {
				t.Select(r, 0)
				t.SetOffset(max(0, r-3), 0) // two free units above it in view
				break
			}
		}
	}
	if len(d.Unplaced) > 0 {
		note(t, row, "", tcell.ColorGray)
		note(t, row+1, "in the rack, unit not known:", tcell.ColorYellow)
		row += 2
		for _, u := range d.Unplaced {
			t.SetCell(row, 0, tview.NewTableCell("  -").SetReference(u.Machine).SetTextColor(tcell.ColorGray))
			t.SetCell(row, 1, tview.NewTableCell(esc(unitName(u))).SetTextColor(stateColor(u.State)))
			t.SetCell(row, 2, tview.NewTableCell(esc(u.State)).SetTextColor(stateColor(u.State)))
			row++
		}
	}
}

func unitName(u wire.RackUnit) string {
	if u.Name != "" {
		return u.Name
	}
	return u.Machine
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

func (c *console) renderTags() {
	t := c.tagsT
	defer header(t, "TAG", "KIND", "MACHINES", "LAYOUT", "COMMENT")()
	if err := c.errs["tags"]; err != nil {
		note(t, 1, "cannot load tags: "+err.Error(), tcell.ColorRed)
		return
	}
	for r, g := range c.tags {
		kind, col := "manual", tcell.ColorWhite
		if g.Match != "" {
			kind, col = "rule", tcell.ColorGreen
		}
		t.SetCell(r+1, 0, tview.NewTableCell(esc(g.Name)).SetReference(g.Name))
		t.SetCell(r+1, 1, tview.NewTableCell(kind).SetTextColor(col))
		t.SetCell(r+1, 2, tview.NewTableCell(fmt.Sprint(g.Machines)).SetAlign(tview.AlignRight))
		t.SetCell(r+1, 3, tview.NewTableCell(esc(dash(g.Layout))))
		t.SetCell(r+1, 4, tview.NewTableCell(esc(g.Comment)).SetExpansion(1))
	}
	if len(c.tags) == 0 {
		note(t, 1, "no tags: rollcall tags add NAME [-match RULE]", tcell.ColorGray)
	}
	t.SetTitle(fmt.Sprintf(" Tags · %d ", len(c.tags)))
}

func (c *console) renderTag() {
	tv := c.tagTV
	tg := c.tag
	tv.SetTitle(" Tag " + esc(tg.name) + " ")
	switch {
	case tg.err != nil:
		tv.SetText("[red]" + esc(tg.err.Error()) + "[-]")
		return
	case tg.detail == nil:
		tv.SetText("loading…")
		return
	}
	d := tg.detail
	var b strings.Builder
	row := func(k, v string) { fmt.Fprintf(&b, "[yellow]%-13s[-] %s\n", k, esc(v)) }
	kind := "manual (given by hand)"
	if d.Match != "" {
		kind = "rule (recomputed at commissioning and on save)"
	}
	row("Name", d.Name)
	row("Kind", kind)
	row("Match rule", dash(d.Match))
	row("Layout", dash(d.Layout))
	row("Overlays", dash(strings.Join(d.Overlays, ", ")))
	row("Comment", dash(d.Comment))
	row("Updated", fullStamp(d.Updated))
	b.WriteString("\n[yellow]Cloud-config[-]\n")
	if d.CloudConfig == "" {
		b.WriteString("  none\n")
	}
	for _, l := range strings.Split(strings.TrimRight(d.CloudConfig, "\n"), "\n") {
		if d.CloudConfig != "" {
			fmt.Fprintf(&b, "  %s\n", esc(l))
		}
	}
	manual := map[string]bool{}
	for _, id := range d.Manual {
		manual[id] = true
	}
	names := c.names()
	fmt.Fprintf(&b, "\n[yellow]Machines[-] %d\n", len(d.MachineIDs))
	for _, id := range d.MachineIDs {
		how := "rule"
		if manual[id] {
			how = "by hand"
		}
		name := names[id]
		if name == "" {
			name = id
		}
		fmt.Fprintf(&b, "  %-20s %s\n", esc(name), how)
	}
	tv.SetText(b.String())
}

// placeOf is a location on one line: "B1 › hall-2 › R12 U7–8, asset A-991".
func placeOf(l wire.Location) string {
	s := strings.Join(nonEmpty(l.Building, l.Room, l.Rack), " › ")
	if l.Unit > 0 {
		if top := l.Unit + max(l.Height, 1) - 1; top > l.Unit {
			s += fmt.Sprintf(" U%d–%d", l.Unit, top)
		} else {
			s += fmt.Sprintf(" U%d", l.Unit)
		}
	}
	if l.Asset != "" {
		s = strings.Join(nonEmpty(s, "asset "+l.Asset), ", ")
	}
	return strings.TrimSpace(s)
}

// tagsOf lists a machine's tags, the rule-made ones marked.
func tagsOf(m wire.MachineView) string {
	out := append([]string{}, m.Tags...)
	for _, t := range m.AutoTags {
		out = append(out, t+" (rule)")
	}
	return strings.Join(out, ", ")
}
