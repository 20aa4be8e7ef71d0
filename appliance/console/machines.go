package console

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/mattn/go-runewidth"
	"github.com/rivo/tview"

	"github.com/rollcall/rollcall/appliance/wire"
)

// machineTable is the machine list; it picks the columns that fit its width
// each time the width changes, so a narrow terminal keeps the ones that
// matter (name, state, address) instead of cutting rows off.
type machineTable struct {
	*tview.Table
	c     *console
	width int
}

func (t *machineTable) Draw(screen tcell.Screen) {
	if _, _, w, _ := t.GetInnerRect(); w != t.width {
		t.width = w
		t.c.fillMachines()
	}
	t.Table.Draw(screen)
}

func (c *console) buildMachines() {
	c.filterIn = tview.NewInputField().SetLabel("/ ").
		SetPlaceholder("filter: name, serial, MAC or IP").
		SetFieldBackgroundColor(tcell.ColorBlack).
		SetPlaceholderTextColor(tcell.ColorGray)
	c.filterIn.SetChangedFunc(func(text string) {
		c.filter = text
		c.fillMachines()
	})
	c.filterIn.SetDoneFunc(func(key tcell.Key) {
		if key == tcell.KeyEscape {
			c.filterIn.SetText("")
		}
		c.app.SetFocus(c.table)
	})
	c.table = &machineTable{Table: tview.NewTable().SetSelectable(true, false).SetFixed(1, 0), c: c}
	c.table.SetInputCapture(c.machinesKeys)
	page := tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(c.filterIn, 1, 0, false).
		AddItem(c.table, 0, 1, true)
	page.SetBorder(true).SetTitle(" Machines ")
	c.body.AddPage("machines", page, true, false)
}

func (c *console) machinesKeys(ev *tcell.EventKey) *tcell.EventKey {
	switch ev.Key() {
	case tcell.KeyEnter:
		if m, ok := c.current(); ok {
			c.openMachine(m.ID, "machines")
		}
		return nil
	case tcell.KeyRune:
		switch ev.Rune() {
		case '/':
			c.app.SetFocus(c.filterIn)
			return nil
		case 's':
			c.cycleState()
			return nil
		case ' ':
			if m, ok := c.current(); ok {
				if c.selected[m.ID] {
					delete(c.selected, m.ID)
				} else {
					c.selected[m.ID] = true
				}
				row, _ := c.table.GetSelection()
				if row+1 < c.table.GetRowCount() {
					c.table.Select(row+1, 0)
				}
				c.fillMachines()
			}
			return nil
		case '*':
			all := true
			for _, m := range c.shown {
				all = all && c.selected[m.ID]
			}
			for _, m := range c.shown {
				if all {
					delete(c.selected, m.ID)
				} else {
					c.selected[m.ID] = true
				}
			}
			c.fillMachines()
			return nil
		case 'a':
			c.actionsFor(c.targets())
			return nil
		}
	}
	return ev
}

// cycleState moves the state filter along wire.States and back to all.
func (c *console) cycleState() {
	i := slices.Index(wire.States, c.state)
	if i+1 >= len(wire.States) {
		c.state = ""
	} else {
		c.state = wire.States[i+1]
	}
	c.fillMachines()
}

// current is the machine under the cursor.
func (c *console) current() (wire.MachineView, bool) {
	row, _ := c.table.GetSelection()
	if row < 1 || row > len(c.shown) {
		return wire.MachineView{}, false
	}
	return c.shown[row-1], true
}

// targets are the selected machines, else the one under the cursor.
func (c *console) targets() []wire.MachineView {
	var out []wire.MachineView
	for _, m := range c.machines.Machines {
		if c.selected[m.ID] {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		if m, ok := c.current(); ok {
			out = append(out, m)
		}
	}
	return out
}

// matches is the / filter: a substring of the ID, name, serial or an IP,
// or a MAC in any common notation (as the API's q= does).
func matches(m wire.MachineView, q string) bool {
	q = strings.ToLower(strings.TrimSpace(q))
	if q == "" {
		return true
	}
	if strings.Contains(m.ID, q) || strings.Contains(strings.ToLower(m.Name), q) || strings.Contains(strings.ToLower(m.Serial), q) {
		return true
	}
	for _, ip := range m.IPs {
		if strings.Contains(ip, q) {
			return true
		}
	}
	bare := strings.NewReplacer(":", "", "-", "", ".", "").Replace(q)
	for _, mac := range m.MACs {
		if strings.Contains(mac, q) || (bare != "" && strings.Contains(strings.ReplaceAll(mac, ":", ""), bare)) {
			return true
		}
	}
	return false
}

// column is one column of the machine list.
type column struct {
	title string
	max   int
	value func(c *console, m wire.MachineView) string
}

// machineColumns in the order they give way on a narrow screen: the
// leftmost ones stay.
var machineColumns = []column{
	{"NAME", 20, func(_ *console, m wire.MachineView) string { return nameOf(m) }},
	{"STATE", 13, func(_ *console, m wire.MachineView) string { return m.State }},
	{"IP", 15, func(_ *console, m wire.MachineView) string { return first(m.IPs) }},
	{"BOOT MAC", 17, func(_ *console, m wire.MachineView) string { return dash(m.BootMAC) }},
	{"SERIAL", 14, func(_ *console, m wire.MachineView) string { return dash(m.Serial) }},
	{"PRODUCT", 24, func(_ *console, m wire.MachineView) string {
		return dash(strings.TrimSpace(m.Summary.Manufacturer + " " + m.Summary.Product))
	}},
	{"CPU", 7, func(_ *console, m wire.MachineView) string { return cpuOf(m.Summary.Sockets, m.Summary.Cores) }},
	{"MEMORY", 8, func(_ *console, m wire.MachineView) string { return memOf(m.Summary.MemoryBytes) }},
	{"BMC", 18, func(_ *console, m wire.MachineView) string { return bmcOf(m.BMC) }},
	{"UPDATED", 11, func(c *console, m wire.MachineView) string { return c.stamp(m.UpdatedAt) }},
	{"ID", 14, func(_ *console, m wire.MachineView) string { return m.ID }},
}

// columns are the machine list's columns: the NODE column after STATE
// while there are stateless nodes.
func (c *console) columns() []column {
	if len(c.nodes) == 0 {
		return machineColumns
	}
	return slices.Insert(slices.Clone(machineColumns), 2, nodeColumn)
}

// fillMachines redraws the machine list from the data, the filters and the
// selection, keeping the cursor on the same machine.
func (c *console) fillMachines() {
	t := c.table
	keep := ""
	if m, ok := c.current(); ok {
		keep = m.ID
	}
	c.shown = c.shown[:0]
	for _, m := range c.machines.Machines {
		if (c.state == "" || m.State == c.state) && matches(m, c.filter) {
			c.shown = append(c.shown, m)
		}
	}
	// the columns that fit: a mark, then by priority
	width := t.width
	if width <= 0 {
		width = 200
	}
	var cols []column
	var widths []int
	used := 1
	for _, col := range c.columns() {
		w := runewidth.StringWidth(col.title)
		for _, m := range c.shown {
			w = max(w, runewidth.StringWidth(col.value(c, m)))
		}
		w = min(w, col.max)
		if used+1+w > width && len(cols) >= 2 {
			break
		}
		cols, widths, used = append(cols, col), append(widths, w), used+1+w
	}
	t.Clear()
	header := func(col int, s string) {
		t.SetCell(0, col, tview.NewTableCell(s).SetSelectable(false).SetTextColor(tcell.ColorYellow))
	}
	header(0, " ")
	for i, col := range cols {
		header(i+1, col.title)
	}
	sel := 1
	for r, m := range c.shown {
		mark := " "
		if c.selected[m.ID] {
			mark = "*"
		}
		t.SetCell(r+1, 0, tview.NewTableCell(mark).SetTextColor(tcell.ColorAqua).SetReference(m.ID))
		for i, col := range cols {
			cell := tview.NewTableCell(esc(col.value(c, m))).SetMaxWidth(widths[i])
			if col.title == "STATE" {
				cell.SetTextColor(stateColor(m.State))
			}
			if col.title == "BMC" && m.BMC != nil && len(m.BMC.Errors) > 0 {
				cell.SetTextColor(tcell.ColorRed)
			}
			if col.title == "NODE" && c.nodes[m.ID].Stale {
				cell.SetTextColor(tcell.ColorRed)
			}
			if i == len(cols)-1 {
				cell.SetExpansion(1)
			}
			t.SetCell(r+1, i+1, cell)
		}
		if m.ID == keep {
			sel = r + 1
		}
	}
	if len(c.shown) == 0 {
		msg := "no machines"
		switch {
		case c.errs["machines"] != nil:
			msg = "cannot load machines: " + c.errs["machines"].Error()
		case !c.haveMach:
			msg = "loading…"
		case len(c.machines.Machines) > 0:
			msg = "no machine matches the filter"
		}
		t.SetCell(1, 1, tview.NewTableCell(esc(msg)).SetSelectable(false).SetTextColor(tcell.ColorGray))
	} else {
		t.Select(min(sel, len(c.shown)), 0)
	}
	state := "all states"
	if c.state != "" {
		state = c.state
	}
	title := fmt.Sprintf(" Machines · %d of %d · %s ", len(c.shown), len(c.machines.Machines), state)
	if n := len(c.selected); n > 0 {
		title += fmt.Sprintf("· %d selected ", n)
	}
	if box, ok := c.body.GetPage("machines").(*tview.Flex); ok {
		box.SetTitle(title)
	}
}

func (c *console) openMachine(id, back string) {
	c.detailID, c.detail, c.jobs, c.detailErr, c.deployJobs = id, nil, nil, nil, nil
	c.plan, c.planErr = nil, nil
	c.back = back
	c.show("machine")
	c.app.SetFocus(c.machineTV)
	c.machineTV.ScrollToBeginning()
	c.load("machine:" + id)
}

func (c *console) closeMachine() {
	c.detailID, c.detail = "", nil
	c.show(c.back)
	c.focusBody()
}

func (c *console) machineKeys(ev *tcell.EventKey) *tcell.EventKey {
	if ev.Rune() == 'a' && c.detail != nil {
		c.actionsFor([]wire.MachineView{c.detail.MachineView})
		return nil
	}
	if ev.Key() == tcell.KeyBackspace || ev.Key() == tcell.KeyBackspace2 {
		c.closeMachine()
		return nil
	}
	return ev
}

func (c *console) renderMachine() {
	tv := c.machineTV
	switch {
	case c.detailErr != nil:
		tv.SetTitle(" " + c.detailID + " ")
		tv.SetText("[red]" + esc(c.detailErr.Error()) + "[-]")
		return
	case c.detail == nil:
		tv.SetTitle(" " + c.detailID + " ")
		tv.SetText("loading…")
		return
	}
	d := c.detail
	m, s := d.MachineView, d.Summary
	tv.SetTitle(fmt.Sprintf(" %s · %s ", nameOf(m), m.ID))
	var b strings.Builder
	row := func(k, v string) { fmt.Fprintf(&b, "[yellow]%-13s[-] %s\n", k, esc(v)) }
	fmt.Fprintf(&b, "[yellow]%-13s[-] [%s]%s[-]\n", "State", colorName(m.State), m.State)
	row("Name", dash(m.Name))
	row("Serial", dash(m.Serial))
	row("System UUID", dash(m.SystemUUID))
	row("Boot MAC", dash(m.BootMAC))
	row("MACs", dash(strings.Join(m.MACs, ", ")))
	row("IPs", dash(strings.Join(m.IPs, ", ")))
	row("Location", dash(placeOf(m.Location)))
	row("Tags", dash(tagsOf(m)))
	c.renderNode(&b, m.ID)
	row("Product", dash(strings.TrimSpace(s.Manufacturer+" "+s.Product)))
	if s.Sockets > 0 {
		row("CPU", fmt.Sprintf("%d × %s (%d cores, %d threads)", s.Sockets, s.CPUModel, s.Cores, s.Threads))
	}
	if s.MemoryBytes > 0 {
		row("Memory", fmt.Sprintf("%s in %d DIMMs", memOf(s.MemoryBytes), s.DIMMs))
	}
	if s.Disks > 0 || s.NVMe > 0 {
		row("Disks", fmt.Sprintf("%d, %s (%d NVMe)", s.Disks, humanBytes(s.DiskBytes), s.NVMe))
	}
	if s.NICs > 0 || s.IBHCAs > 0 {
		row("Network", fmt.Sprintf("%d NICs, %d InfiniBand HCAs", s.NICs, s.IBHCAs))
	}
	if s.GPUs > 0 {
		row("GPUs", fmt.Sprintf("%d (%s)", s.GPUs, strings.Join(s.GPUModels, ", ")))
	}
	if bm := m.BMC; bm != nil {
		pw := "no password"
		if bm.HasPassword {
			pw = "password sealed"
		}
		row("BMC", fmt.Sprintf("%s %s user %s (%s)", dash(bm.Driver), dash(bm.Address), dash(bm.User), pw))
		for _, e := range bm.Errors {
			fmt.Fprintf(&b, "[red]%-13s %s[-]\n", "BMC error", esc(e))
		}
	} else {
		row("BMC", "none known")
	}
	row("Created", fullStamp(m.CreatedAt))
	row("Updated", fullStamp(m.UpdatedAt))
	if !m.Commissioned.IsZero() {
		row("Commissioned", fullStamp(m.Commissioned))
	}
	if len(c.jobs) > 0 {
		b.WriteString("\n[yellow]BMC jobs[-]\n")
		for _, j := range c.jobs[:min(len(c.jobs), 8)] {
			out := jobOutcome(j)
			if j.Error != "" {
				out = "[red]" + esc(j.Error) + "[-]"
			} else {
				out = esc(out)
			}
			fmt.Fprintf(&b, "  %s  %-7s %-6s %s\n", fullStamp(j.Created), j.Kind, esc(j.Arg), out)
		}
	}
	c.renderDeployment(&b)
	c.renderPlan(&b)
	b.WriteString("\n[yellow]Events[-]\n")
	if len(d.Events) == 0 {
		b.WriteString("  none\n")
	}
	es := slices.Clone(d.Events)
	sortEvents(es)
	for _, e := range es {
		fmt.Fprintf(&b, "  %s  %-13s %s\n", fullStamp(e.Time), esc(e.Kind), esc(e.Message))
	}
	tv.SetText(b.String())
}

// ---- formatting

func nameOf(m wire.MachineView) string {
	if m.Name != "" {
		return m.Name
	}
	return m.ID
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

func cpuOf(sockets, cores int) string {
	if sockets == 0 {
		return "-"
	}
	return fmt.Sprintf("%dx%dc", sockets, cores/max(sockets, 1))
}

func memOf(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d GiB", b>>30)
}

func bmcOf(b *wire.BMCView) string {
	if b == nil || b.Address == "" {
		return "-"
	}
	if len(b.Errors) > 0 {
		return b.Address + " (!)"
	}
	return b.Address
}

func humanBytes(b int64) string {
	const unit = 1000
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(b)/float64(div), "kMGTPE"[exp])
}

// stamp shows a time in the operator's zone, short for lists: the year
// only when it is not this year's.
func (c *console) stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t.Local().Year() != c.now().Local().Year() {
		return t.Local().Format("2006-01-02")
	}
	return t.Local().Format("01-02 15:04")
}

// fullStamp is a time in full, for one machine's page.
func fullStamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func colorName(state string) string {
	switch state {
	case wire.StateNew:
		return "aqua"
	case wire.StateCommissioning:
		return "yellow"
	case wire.StateReady, wire.StateBooted:
		return "green"
	case wire.StateStateless:
		return "yellow"
	}
	return "white"
}

func stateColor(state string) tcell.Color { return tcell.GetColor(colorName(state)) }
