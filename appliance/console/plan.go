package console

import (
	"fmt"
	"strings"

	"github.com/mattn/go-runewidth"
)

// renderPlan writes the machine's network plan as rollcall net show shows
// it: the layout and why, the NIC each selector chose and why, the
// addresses a deployment would take, the notes. The two rendered files
// are left to net show: they are long, and a screen is for reading.
func (c *console) renderPlan(b *strings.Builder) {
	b.WriteString("\n[yellow]Network plan[-]\n")
	switch {
	case c.planErr != nil:
		fmt.Fprintf(b, "  [red]%s[-]\n", esc(c.planErr.Error()))
		return
	case c.plan == nil:
		b.WriteString("  loading…\n")
		return
	}
	p := c.plan
	fmt.Fprintf(b, "  %s\n", esc(p.Why))
	if len(p.Choices) > 0 {
		rows := [][]string{{"INTERFACE", "SELECTOR", "NIC", "MAC", "WHY"}}
		for _, ch := range p.Choices {
			rows = append(rows, []string{ch.Interface, ch.Selector, ch.NIC, dash(ch.MAC), ch.Reason})
		}
		b.WriteString("  NICs\n")
		writeColumns(b, rows)
	}
	b.WriteString("  Addresses (a preview: nothing is allocated until deployment)\n")
	if len(p.Addresses) == 0 {
		b.WriteString("    none (DHCP or link only)\n")
	} else {
		rows := [][]string{{"INTERFACE", "ADDRESS", "HOW", "WHY"}}
		for _, a := range p.Addresses {
			how := a.How
			if a.Held {
				how += " (held)"
			}
			rows = append(rows, []string{a.Interface, a.Address, how, a.Reason})
		}
		writeColumns(b, rows)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(b, "  - %s\n", esc(n))
	}
	b.WriteString("  [gray]rollcall net show " + esc(p.Machine) + " prints the network-config and udev rules[-]\n")
}

// writeColumns writes rows as aligned columns, indented, the first row a
// heading; the last column runs on.
func writeColumns(b *strings.Builder, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, v := range r[:len(r)-1] {
			widths[i] = max(widths[i], runewidth.StringWidth(v))
		}
	}
	for n, r := range rows {
		b.WriteString("    ")
		if n == 0 {
			b.WriteString("[gray]")
		}
		for i, v := range r {
			if i == len(r)-1 {
				b.WriteString(esc(v))
				break
			}
			b.WriteString(esc(v) + strings.Repeat(" ", widths[i]-runewidth.StringWidth(v)+2))
		}
		if n == 0 {
			b.WriteString("[-]")
		}
		b.WriteString("\n")
	}
}
