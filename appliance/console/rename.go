package console

import (
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/rollcall/rollcall/appliance/wire"
)

// renameForm asks one machine's new name and sends it; the API's refusal
// (a taken name, one that is not a DNS label) shows under the field and
// the form stays open to correct it.
func (c *console) renameForm(ms []wire.MachineView) {
	if len(ms) != 1 {
		c.closeDialog()
		c.setMsg("rename: one machine at a time (names are unique)", true)
		return
	}
	m := ms[0]
	status := tview.NewTextView().SetDynamicColors(true).SetWrap(true)
	name := tview.NewInputField().SetLabel("New name ").SetText(m.Name).SetFieldWidth(32)
	f := tview.NewForm().AddFormItem(name)
	save := func() {
		n := strings.TrimSpace(name.GetText())
		status.SetText("[gray]renaming…[-]")
		work := func() (string, error) { return c.src.Do(c.ctx, Action{Machine: m.ID, Kind: "rename", Arg: n}) }
		done := func(out string, err error) {
			if err != nil {
				status.SetText("[red]" + esc(err.Error()) + "[-]")
				c.app.SetFocus(name)
				return
			}
			c.closeDialog()
			c.setMsg("rename "+nameOf(m)+": "+out, false)
			if !c.live {
				c.load("machines")
			}
			if c.page == "machine" {
				c.load("machine:" + c.detailID)
			}
			c.render()
		}
		if !c.live {
			done(work())
			return
		}
		go func() {
			out, err := work()
			c.app.QueueUpdateDraw(func() { done(out, err) })
		}()
	}
	f.AddButton("Rename", save).AddButton("Cancel", func() {
		c.closeDialog()
		c.setMsg("rename: cancelled", false)
	})
	f.SetCancelFunc(func() {
		c.closeDialog()
		c.setMsg("rename: cancelled", false)
	})
	name.SetInputCapture(func(ev *tcell.EventKey) *tcell.EventKey {
		if ev.Key() == tcell.KeyEnter { // Enter in the field sends it, as the button does
			save()
			return nil
		}
		return ev
	})
	help := tview.NewTextView().SetText(" A DNS label: lowercase letters, digits and -, unique in the fleet.")
	box := tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(help, 1, 0, false).
		AddItem(f, 5, 0, true).
		AddItem(status, 2, 0, false)
	box.SetBorder(true).SetTitle(" Rename " + nameOf(m) + " (" + m.ID + ") ")
	c.dialog(center(box, 72, 10), f)
}
