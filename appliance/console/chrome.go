package console

import (
	"fmt"
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
)

// The console's chrome: the status line, the key hints, dialogs and help.

// statusLine is the message on the left and the connection on the right.
func (c *console) statusLine() (left, right string) {
	switch {
	case c.msg != "" && c.msgErr:
		left = "[red]" + esc(c.msg) + "[-]"
	case c.msg != "":
		left = "[green]" + esc(c.msg) + "[-]"
	}
	var r []string
	if c.busy > 0 {
		r = append(r, fmt.Sprintf("[yellow]%d running[-]", c.busy))
	}
	if c.cluster.Node != "" {
		leader := esc(c.cluster.Leader)
		if leader == "" {
			leader = "[red]none[-]"
		}
		r = append(r, fmt.Sprintf("%s · leader %s", esc(c.cluster.Node), leader))
	}
	if c.live && c.haveMach {
		r = append(r, fmt.Sprintf("live @%d", c.machines.Index))
	}
	return left, strings.Join(r, " · ")
}

type statusBar struct {
	*tview.Box
	c *console
}

func (s *statusBar) Draw(screen tcell.Screen) {
	s.Box.DrawForSubclass(screen, s)
	x, y, w, _ := s.GetInnerRect()
	left, right := s.c.statusLine()
	rw := tview.TaggedStringWidth(right)
	if lw := tview.TaggedStringWidth(left); rw+2 < w && (lw == 0 || lw+rw+3 <= w) { // a long message wins
		tview.Print(screen, right+" ", x, y, w, tview.AlignRight, tcell.ColorWhite)
		w -= rw + 2
	}
	tview.Print(screen, " "+left, x, y, w, tview.AlignLeft, tcell.ColorWhite)
}

// dialog shows p (already laid out) over the console and gives the
// keyboard to focus until closeDialog; a dialog replacing another keeps the
// first one's focus to return to.
func (c *console) dialog(p, focus tview.Primitive) {
	if !c.dialogOn {
		c.before = c.app.GetFocus()
	}
	c.dialogOn = true
	c.root.RemovePage("dialog")
	c.root.AddPage("dialog", p, true, true)
	c.app.SetFocus(focus)
}

func (c *console) closeDialog() {
	c.dialogOn = false
	c.root.RemovePage("dialog")
	if c.before != nil {
		c.app.SetFocus(c.before)
	}
}

func center(p tview.Primitive, w, h int) tview.Primitive {
	return tview.NewFlex().
		AddItem(nil, 0, 1, false).
		AddItem(tview.NewFlex().SetDirection(tview.FlexRow).
			AddItem(nil, 0, 1, false).
			AddItem(p, h, 0, true).
			AddItem(nil, 0, 1, false), w, 0, true).
		AddItem(nil, 0, 1, false)
}

// modal asks a question; buttons[0] is the safe choice and has the focus,
// and Esc picks it too.
func (c *console) modal(text string, buttons []string, done func(label string)) {
	m := tview.NewModal().SetText(text).AddButtons(buttons)
	m.SetDoneFunc(func(i int, label string) {
		c.closeDialog()
		if i < 0 {
			label = buttons[0]
		}
		if done != nil {
			done(label)
		}
	})
	c.dialog(m, m)
}

func (c *console) showHelp() {
	tv := tview.NewTextView().SetDynamicColors(true).SetText(helpText)
	tv.SetBorder(true).SetTitle(" Keys (Esc closes) ")
	tv.SetInputCapture(func(ev *tcell.EventKey) *tcell.EventKey {
		if ev.Key() == tcell.KeyEscape || ev.Key() == tcell.KeyEnter || ev.Rune() == '?' || ev.Rune() == 'q' {
			c.closeDialog()
			return nil
		}
		return ev
	})
	c.dialog(center(tv, 64, strings.Count(helpText, "\n")+2), tv)
}

const helpText = `[yellow]Anywhere[-]
  1-9, 0     a page: overview, machines, racks, tags, cluster,
             events, network, images, OS images, profiles
  Tab, Esc   between the list and the page (Esc: back)
  r          refresh (changes also arrive on their own)
  ?          these keys          q  quit
[yellow]Machines[-]
  / filter (name, serial, MAC, IP)   s cycle the state filter
  Space select   * select all shown   Enter open the machine
  a actions for the selection or the row: power, boot
    device, re-commission, deploy, assign to a profile or
    unassign, rename, clear the BMC, delete (destructive
    ones ask)
[yellow]Racks, tags and profiles[-]
  Enter on a rack: its elevation; on a unit: its machine
  Enter on a tag: the tag and its machines    Esc back
  Enter on a profile: its definition and its nodes
[yellow]OS images[-]
  s sync the sources now (asks)   p promote a version (asks)
[yellow]Dialogs[-]
  arrows, Tab, Enter choose    Esc cancel
`

// hint is one key along the bottom; the lowest prio goes first when the
// screen is narrow.
type hint struct {
	key, label string
	prio       int
}

func (c *console) hints() []hint {
	if c.dialogOn {
		return []hint{{"Enter", "choose", 3}, {"Tab", "next", 2}, {"Esc", "cancel", 3}}
	}
	if c.filterIn.HasFocus() { // (hints are drawn under the app's lock: no GetFocus)
		return []hint{{"Enter", "keep filter", 3}, {"Esc", "clear", 3}}
	}
	common := []hint{{"r", "refresh", 1}, {"?", "keys", 3}, {"q", "quit", 3}}
	var h []hint
	switch {
	case c.nav.HasFocus():
		keys := fmt.Sprintf("1-%d", len(navPages))
		if len(navPages) > 9 {
			keys = "0-9"
		}
		h = []hint{{keys, "page", 2}, {"Enter", "open", 2}, {"Tab", "page", 1}}
	case c.page == "machines":
		h = []hint{{"/", "filter", 3}, {"s", "state", 3}, {"Space", "select", 3}, {"*", "all", 2}, {"Enter", "open", 3}, {"a", "actions", 3}}
	case c.page == "machine":
		h = []hint{{"a", "actions", 3}, {"Esc", "back", 3}}
	case c.page == "events", c.page == "rack":
		h = []hint{{"Enter", "open machine", 3}, {"Esc", "list", 2}}
	case c.page == "racks":
		h = []hint{{"Enter", "elevation", 3}, {"Esc", "list", 2}}
	case c.page == "tags":
		h = []hint{{"Enter", "show tag", 3}, {"Esc", "list", 2}}
	case c.page == "tag":
		h = []hint{{"Esc", "tags", 3}}
	case c.page == "profiles":
		h = []hint{{"Enter", "show profile", 3}, {"Esc", "list", 2}}
	case c.page == "profile":
		h = []hint{{"Esc", "profiles", 3}}
	case c.page == "os":
		h = []hint{{"s", "sync now", 3}, {"p", "promote", 3}, {"Esc", "list", 2}}
	default:
		h = []hint{{"Esc", "list", 2}}
	}
	return append(h, common...)
}

// fitHints lays hints out in width columns, dropping the least important
// ones first and keeping the order.
func fitHints(hs []hint, width int) string {
	text := func(hs []hint, sep string) (string, int) {
		var b strings.Builder
		n := 0
		for i, h := range hs {
			if i > 0 {
				b.WriteString(sep)
				n += len(sep)
			}
			fmt.Fprintf(&b, "[black:aqua]%s[-:-] %s", esc(h.key), h.label)
			n += len([]rune(h.key)) + 1 + len([]rune(h.label))
		}
		return b.String(), n
	}
	var s string
	for drop := 0; drop <= 2; drop++ {
		var keep []hint
		for _, h := range hs {
			if h.prio > drop {
				keep = append(keep, h)
			}
		}
		for _, sep := range []string{"  ", " "} {
			var n int
			if s, n = text(keep, sep); n <= width {
				return s
			}
		}
	}
	return s
}

type hintBar struct {
	*tview.Box
	hints func() []hint
}

func (h *hintBar) Draw(screen tcell.Screen) {
	h.Box.DrawForSubclass(screen, h)
	x, y, w, _ := h.GetInnerRect()
	tview.Print(screen, " "+fitHints(h.hints(), w-1), x, y, w, tview.AlignLeft, tcell.ColorWhite)
}
