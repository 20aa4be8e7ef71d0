package console

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/rollcall/rollcall/appliance/wire"
)

// menuItem is one entry of the actions menu. A confirm text makes it
// destructive: it asks first, with Cancel focused.
type menuItem struct {
	label    string
	key      rune
	kind     string
	arg      string
	confirm  string // verb on the confirming button; "" runs at once
	describe string // what happens, for the question
}

var actionMenu = []menuItem{
	{"Power on", 'o', "power", "on", "", ""},
	{"Power off (hard)", 'f', "power", "off", "Power off", "cuts power at once; running work is lost"},
	{"Soft off (ACPI)", 's', "power", "soft", "Soft off", "asks the OS to shut down"},
	{"Power cycle", 'c', "power", "cycle", "Power cycle", "cuts power and turns it back on"},
	{"Reset", 'x', "power", "reset", "Reset", "a hard reset without a power cut"},
	{"Power status", 't', "power", "status", "", ""},
	{"Boot device…", 'b', "bootdev", "", "", ""},
	{"Re-commission (next PXE boot)", 'm', "recommission", "", "Re-commission", "moves it back to new; it commissions on its next network boot"},
	{"Re-commission now (via BMC)", 'n', "recommission", "now", "Re-commission now", "sets PXE and power-cycles it through the BMC"},
	{"Deploy…", 'e', "deploy", "", "", ""},
	{"Release…", 'r', "release", "", "", ""},
	{"Cancel deploy/release job", 'j', "cancel", "", "Cancel job", "stops its deploy or release job: at once before it writes; after, the agent wipes the disk and the job fails"},
	{"Assign profile…", 'p', "assign", "", "", ""},
	{"Unassign", 'u', "unassign", "", "Unassign", "takes the stateless node back to ready: its node name and addresses are freed and its node token stops working; the system running in memory is not stopped"},
	{"Rename…", 'l', "rename", "", "", ""},
	{"Clear BMC", 'k', "bmc-clear", "", "Clear BMC", "forgets its BMC: driver, address, user and the sealed password; it is powered by hand until a BMC is set again"},
	{"Delete", 'd', "delete", "", "Delete", "forgets the machine, its inventory and history"},
}

var bootDevices = []struct {
	dev  string
	key  rune
	text string
}{
	{"pxe", 'p', "Network (PXE)"}, {"disk", 'd', "Disk"}, {"cdrom", 'c', "CD/DVD"}, {"bios", 'b', "BIOS setup"}, {"none", 'n', "No override"},
}

// actionsFor opens the actions menu for ms.
func (c *console) actionsFor(ms []wire.MachineView) {
	if len(ms) == 0 {
		c.setMsg("no machine to act on", true)
		return
	}
	l := tview.NewList().ShowSecondaryText(false).SetHighlightFullLine(true)
	l.SetBorder(true).SetTitle(" " + targetTitle(ms) + " ")
	for _, it := range actionMenu {
		l.AddItem(it.label, "", it.key, func() {
			switch it.kind {
			case "bootdev":
				c.bootMenu(ms)
				return
			case "deploy":
				c.deployMenu(ms)
				return
			case "release":
				c.releaseMenu(ms)
				return
			case "rename":
				c.renameForm(ms)
				return
			case "assign":
				c.assignMenu(ms)
				return
			}
			c.closeDialog()
			c.confirmRun(ms, it)
		})
	}
	l.SetDoneFunc(c.closeDialog)
	c.dialog(center(l, 44, len(actionMenu)+2), l)
}

func (c *console) bootMenu(ms []wire.MachineView) {
	l := tview.NewList().ShowSecondaryText(false).SetHighlightFullLine(true)
	l.SetBorder(true).SetTitle(" Boot device: " + targetTitle(ms) + " ")
	for _, d := range bootDevices {
		l.AddItem(d.text, "", d.key, func() {
			c.closeDialog()
			c.run(ms, menuItem{label: "Boot device " + d.dev, kind: "bootdev", arg: d.dev})
		})
	}
	l.SetDoneFunc(c.closeDialog)
	c.dialog(center(l, 44, len(bootDevices)+2), l)
}

func targetTitle(ms []wire.MachineView) string {
	if len(ms) == 1 {
		return nameOf(ms[0])
	}
	return fmt.Sprintf("%d machines", len(ms))
}

// namesOf lists up to n names and says how many more.
func namesOf(ms []wire.MachineView, n int) string {
	var names []string
	for i, m := range ms {
		if i == n {
			names = append(names, fmt.Sprintf("and %d more", len(ms)-n))
			break
		}
		names = append(names, nameOf(m))
	}
	return strings.Join(names, ", ")
}

// confirmRun asks first for a destructive action, then runs it.
func (c *console) confirmRun(ms []wire.MachineView, it menuItem) {
	if it.confirm == "" {
		c.run(ms, it)
		return
	}
	q := fmt.Sprintf("%s %s?\n\n%s\n\nThis %s.", it.confirm, targetTitle(ms), namesOf(ms, 6), it.describe)
	if len(ms) == 1 {
		q = fmt.Sprintf("%s %s (%s)?\n\nThis %s.", it.confirm, nameOf(ms[0]), ms[0].ID, it.describe)
	}
	c.modal(q, []string{"Cancel", it.confirm}, func(label string) {
		if label == it.confirm {
			c.run(ms, it)
			return
		}
		c.setMsg(strings.ToLower(it.confirm)+": cancelled", false)
	})
}

type outcome struct {
	m   wire.MachineView
	out string
	err error
}

// run does an action on every machine, eight at a time, in the background;
// the results come back as a message, or a list when there are several.
func (c *console) run(ms []wire.MachineView, it menuItem) {
	what := strings.ToLower(it.label)
	if i := strings.Index(what, " ("); i > 0 {
		what = what[:i]
	}
	c.busy++
	c.setMsg(fmt.Sprintf("%s: %s…", what, targetTitle(ms)), false)
	results := make([]outcome, len(ms))
	work := func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				out, err := c.src.Do(c.ctx, Action{Machine: m.ID, Kind: it.kind, Arg: it.arg})
				results[i] = outcome{m, out, err}
			}()
		}
		wg.Wait()
	}
	done := func() {
		c.busy--
		c.report(what, results)
		if it.kind == "delete" {
			for _, r := range results {
				if r.err == nil {
					delete(c.selected, r.m.ID)
				}
			}
			if c.page == "machine" && len(ms) == 1 && results[0].err == nil {
				c.closeMachine()
			}
			if !c.live {
				c.load("machines")
			}
		}
		if c.page == "machine" {
			c.load("machine:" + c.detailID)
		}
		c.render()
	}
	if !c.live {
		work()
		done()
		return
	}
	go func() {
		work()
		c.app.QueueUpdateDraw(done)
	}()
}

// report says how an action went: one line for one machine or when all
// went well without an answer worth reading, else a list.
func (c *console) report(what string, rs []outcome) {
	failed := 0
	for _, r := range rs {
		if r.err != nil {
			failed++
		}
	}
	if len(rs) == 1 {
		r := rs[0]
		if r.err != nil {
			c.setMsg(fmt.Sprintf("%s %s: %v", what, nameOf(r.m), r.err), true)
		} else {
			c.setMsg(fmt.Sprintf("%s %s: %s", what, nameOf(r.m), r.out), false)
		}
		return
	}
	c.setMsg(fmt.Sprintf("%s: %d ok, %d failed", what, len(rs)-failed, failed), failed > 0)
	if failed == 0 && what != "power status" {
		return
	}
	var b strings.Builder
	for _, r := range rs {
		if r.err != nil {
			fmt.Fprintf(&b, "[red]%-16s %s[-]\n", esc(nameOf(r.m)), esc(r.err.Error()))
		} else {
			fmt.Fprintf(&b, "%-16s %s\n", esc(nameOf(r.m)), esc(r.out))
		}
	}
	tv := tview.NewTextView().SetDynamicColors(true).SetText(b.String())
	tv.SetBorder(true).SetTitle(fmt.Sprintf(" %s: %d ok, %d failed (Esc closes) ", what, len(rs)-failed, failed))
	tv.SetInputCapture(func(ev *tcell.EventKey) *tcell.EventKey {
		if ev.Key() == tcell.KeyEscape || ev.Key() == tcell.KeyEnter {
			c.closeDialog()
			return nil
		}
		return ev
	})
	c.dialog(center(tv, 72, min(len(rs), 16)+2), tv)
}
