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

// grid lays rows out in aligned columns under a yellow header; paint may
// colour a cell (it gets the padded text, already escaped).
func grid(header []string, rows [][]string, paint func(row, col int, padded string) string) string {
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = runewidth.StringWidth(h)
	}
	for _, r := range rows {
		for i, s := range r {
			widths[i] = max(widths[i], runewidth.StringWidth(s))
		}
	}
	line := func(r []string, ri int) string {
		var b strings.Builder
		b.WriteString(" ")
		for i, s := range r {
			cell := esc(s)
			if i < len(r)-1 {
				cell += strings.Repeat(" ", widths[i]-runewidth.StringWidth(s)+2)
			}
			if paint != nil && ri >= 0 {
				cell = paint(ri, i, cell)
			}
			b.WriteString(cell)
		}
		return strings.TrimRight(b.String(), " ") + "\n"
	}
	var b strings.Builder
	b.WriteString("[yellow]" + strings.TrimSuffix(line(header, -1), "\n") + "[-]\n")
	for i, r := range rows {
		b.WriteString(line(r, i))
	}
	return b.String()
}

func (c *console) errText(what ...string) string {
	var b strings.Builder
	for _, w := range what {
		if err := c.errs[w]; err != nil {
			fmt.Fprintf(&b, "[red]%s: %s[-]\n", w, esc(err.Error()))
		}
	}
	return b.String()
}

func (c *console) renderOverview() {
	var b strings.Builder
	b.WriteString(c.errText("machines", "cluster", "events", "network", "images"))
	ms := c.machines.Machines
	count := map[string]int{}
	var bmcBad []string
	for _, m := range ms {
		count[m.State]++
		if m.BMC != nil && len(m.BMC.Errors) > 0 {
			bmcBad = append(bmcBad, nameOf(m))
		}
	}
	fmt.Fprintf(&b, "[yellow]Machines[-]  %d\n", len(ms))
	states := slices.Clone(wire.States)
	for s := range count {
		if !slices.Contains(states, s) {
			states = append(states, s)
		}
	}
	most := 1
	for _, n := range count {
		most = max(most, n)
	}
	for _, s := range states {
		bar := strings.Repeat("█", (count[s]*24+most-1)/most)
		fmt.Fprintf(&b, "  %-14s %4d  [%s]%s[-]\n", s, count[s], colorName(s), bar)
	}
	if len(bmcBad) > 0 {
		fmt.Fprintf(&b, "  [red]%-14s %4d  %s[-]\n", "BMC problems", len(bmcBad), esc(strings.Join(bmcBad, ", ")))
	}
	b.WriteString("\n")
	cv := c.cluster
	up := 0
	for _, m := range cv.Members {
		if m.Reachable || m.Status != nil {
			up++
		}
	}
	leader := cv.Leader
	if leader == "" {
		leader = "[red]none: writes fail until a majority is up[-]"
	}
	fmt.Fprintf(&b, "[yellow]Cluster[-]   %d nodes, %d reachable · leader %s\n", len(cv.Members), up, leader)
	net := c.network
	used := 0
	for _, s := range net.Subnets {
		used += s.Used
	}
	fmt.Fprintf(&b, "[yellow]Network[-]   %d fabrics · %d VLANs · %d subnets · %d addresses used\n", len(net.Fabrics), len(net.VLANs), len(net.Subnets), used)
	fmt.Fprintf(&b, "[yellow]Images[-]    %d", len(c.images))
	for i, im := range c.images {
		if i == 3 {
			b.WriteString(", …")
			break
		}
		sep := ", "
		if i == 0 {
			sep = " · "
		}
		fmt.Fprintf(&b, "%s%s on %d of %d nodes", sep, esc(im.Name), len(im.Nodes), len(cv.Members))
	}
	b.WriteString("\n\n[yellow]Recent events[-]\n")
	names := c.names()
	if len(c.events) == 0 {
		b.WriteString("  none\n")
	}
	for _, e := range c.events[:min(len(c.events), 12)] {
		name := names[e.Machine]
		if name == "" {
			name = e.Machine
		}
		fmt.Fprintf(&b, "  %s  %-14s %-13s %s\n", c.stamp(e.Time), esc(name), esc(e.Kind), esc(e.Message))
	}
	c.overview.SetText(b.String())
}

// names maps machine IDs to what the console calls them.
func (c *console) names() map[string]string {
	out := map[string]string{}
	for _, m := range c.machines.Machines {
		out[m.ID] = nameOf(m)
	}
	return out
}

func (c *console) renderCluster() {
	cv := c.cluster
	var b strings.Builder
	b.WriteString(c.errText("cluster"))
	leader := cv.Leader
	if leader == "" {
		leader = "[red]none: writes fail until a majority of voters is up[-]"
	}
	fmt.Fprintf(&b, " Leader %s · answered by %s\n", leader, esc(dash(cv.Node)))
	if cv.CAFingerprint != "" {
		fmt.Fprintf(&b, " CA SHA-256 %s\n", esc(cv.CAFingerprint))
	}
	b.WriteString("\n")
	http := map[string]string{}
	for _, n := range cv.Nodes {
		http[n.Name] = n.HTTPAddr
	}
	members := slices.Clone(cv.Members)
	slices.SortFunc(members, func(a, b wire.Member) int { return strings.Compare(a.ID, b.ID) })
	var rows [][]string
	for _, m := range members {
		role, voter := "follower", "no"
		if m.Leader {
			role = "leader"
		} else if m.Status == nil {
			role = "-"
		}
		if m.Voter {
			voter = "yes"
		}
		state, applied, contact, build := "unreachable", "-", "-", "-"
		if m.Status != nil {
			state, applied, build = strings.ToLower(m.Status.State), fmt.Sprint(m.Status.Applied), dash(m.Status.Build)
			if !m.Leader && !m.Status.LastContact.IsZero() {
				contact = c.now().Sub(m.Status.LastContact).Round(1e6).String() + " ago"
			}
			if m.Status.Diverged != "" {
				state = "damaged"
			}
		}
		rows = append(rows, []string{m.ID, role, voter, state, applied, contact, m.Address, dash(http[m.ID]), build})
	}
	b.WriteString(grid([]string{"NAME", "ROLE", "VOTER", "STATE", "APPLIED", "CONTACT", "RAFT", "API", "BUILD"}, rows, func(r, col int, s string) string {
		if col == 3 && (rows[r][3] == "unreachable" || rows[r][3] == "damaged") {
			return "[red]" + s + "[-]"
		}
		if col == 1 && rows[r][1] == "leader" {
			return "[green]" + s + "[-]"
		}
		return s
	}))
	for _, m := range members {
		if m.Error != "" {
			fmt.Fprintf(&b, "\n [red]%s: %s[-]", esc(m.ID), esc(m.Error))
		}
		if m.Status != nil && m.Status.Diverged != "" {
			fmt.Fprintf(&b, "\n [red]%s: %s[-]", esc(m.ID), esc(m.Status.Diverged))
		}
		if m.Leader && m.Status != nil && m.Status.Gate != nil {
			fmt.Fprintf(&b, "\n [yellow]version gate: %s not open yet[-]", esc(strings.Join(m.Status.Gate.Pending, ", ")))
			for _, w := range m.Status.Gate.Waiting {
				fmt.Fprintf(&b, "\n   waiting for %s", esc(w))
			}
		}
	}
	c.clusterTV.SetText(b.String())
}

func (c *console) renderEvents() {
	t := c.eventsT
	t.Clear()
	for i, h := range []string{"TIME", "MACHINE", "KIND", "MESSAGE"} {
		t.SetCell(0, i, tview.NewTableCell(h).SetSelectable(false).SetTextColor(tcell.ColorYellow))
	}
	if err := c.errs["events"]; err != nil {
		t.SetCell(1, 0, tview.NewTableCell(esc("cannot load events: "+err.Error())).SetSelectable(false).SetTextColor(tcell.ColorRed))
		return
	}
	names := c.names()
	for r, e := range c.events {
		name := names[e.Machine]
		if name == "" {
			name = e.Machine
		}
		t.SetCell(r+1, 0, tview.NewTableCell(c.stamp(e.Time)).SetReference(e.Machine))
		t.SetCell(r+1, 1, tview.NewTableCell(esc(name)).SetMaxWidth(20))
		t.SetCell(r+1, 2, tview.NewTableCell(esc(e.Kind)).SetTextColor(tcell.ColorAqua))
		t.SetCell(r+1, 3, tview.NewTableCell(esc(e.Message)).SetExpansion(1))
	}
	if len(c.events) == 0 {
		t.SetCell(1, 0, tview.NewTableCell("no events").SetSelectable(false).SetTextColor(tcell.ColorGray))
	}
	t.SetTitle(fmt.Sprintf(" Events · %d most recent ", len(c.events)))
}

func (c *console) renderNetwork() {
	n := c.network
	var b strings.Builder
	b.WriteString(c.errText("network"))
	b.WriteString("[::b]Fabrics[::-]\n")
	var rows [][]string
	for _, f := range n.Fabrics {
		vlans := 0
		for _, v := range n.VLANs {
			if v.Fabric == f.Name {
				vlans++
			}
		}
		rows = append(rows, []string{f.Name, f.Kind, fmt.Sprint(vlans)})
	}
	b.WriteString(grid([]string{"NAME", "KIND", "VLANS"}, rows, nil))
	b.WriteString("\n[::b]VLANs[::-]\n")
	rows = nil
	for _, v := range n.VLANs {
		var servers []string
		for _, s := range v.Servers {
			servers = append(servers, s.Node+"/"+s.Iface)
		}
		vid := fmt.Sprint(v.VID)
		if v.VID == 0 {
			vid = "untagged"
		}
		rows = append(rows, []string{v.Fabric, vid, fmt.Sprint(v.MTU), v.DHCP, dash(strings.Join(servers, ", "))})
	}
	b.WriteString(grid([]string{"FABRIC", "VID", "MTU", "DHCP", "SERVED BY"}, rows, nil))
	b.WriteString("\n[::b]Subnets[::-]\n")
	rows = nil
	for _, s := range n.Subnets {
		gw := "-"
		if s.Gateway.IsValid() {
			gw = s.Gateway.String()
		}
		rows = append(rows, []string{s.CIDR.String(), fmt.Sprintf("%s/%d", s.Fabric, s.VID), s.Purpose, gw, fmt.Sprint(s.Used), dash(s.Name)})
	}
	b.WriteString(grid([]string{"CIDR", "VLAN", "PURPOSE", "GATEWAY", "USED", "NAME"}, rows, nil))
	c.networkTV.SetText(b.String())
}

func (c *console) renderImages() {
	var b strings.Builder
	b.WriteString(c.errText("images"))
	total := len(c.cluster.Members)
	var rows [][]string
	for _, im := range c.images {
		var files []string
		for _, f := range im.Files {
			files = append(files, fmt.Sprintf("%s %s", f.Name, humanBytes(f.Size)))
		}
		nodes := fmt.Sprintf("%d", len(im.Nodes))
		if total > 0 {
			nodes = fmt.Sprintf("%d of %d", len(im.Nodes), total)
		}
		rows = append(rows, []string{im.Name, nodes, c.stamp(im.Created), strings.Join(files, ", ")})
	}
	if len(rows) == 0 {
		b.WriteString(" no boot images: rollcall image import NAME -kernel F -initrd F\n")
	} else {
		b.WriteString(grid([]string{"NAME", "ON NODES", "CREATED", "FILES"}, rows, func(r, col int, s string) string {
			if col == 1 && total > 0 && len(c.images[r].Nodes) < total {
				return "[yellow]" + s + "[-]"
			}
			return s
		}))
		b.WriteString("\n")
		for _, im := range c.images {
			fmt.Fprintf(&b, " [::b]%s[::-]  held by %s\n", esc(im.Name), esc(dash(strings.Join(im.Nodes, ", "))))
			for _, f := range im.Files {
				fmt.Fprintf(&b, "   %-9s sha256 %s\n", esc(f.Name), esc(f.SHA256))
			}
		}
	}
	c.imagesTV.SetText(b.String())
}

// accessView is what the Access page shows.
type accessView struct {
	ca    wire.CAState
	certs wire.CertList
	audit wire.AuditLog
}

// renderAccess is the cluster CA (its current root, when and by whom it
// was rotated, and the replaced roots still trusted, as rollcall ca show
// prints them), who may act on the cluster (the certificates the CA
// recorded, with their state) and what they did (the audit log, newest
// first), as rollcall ca certs and rollcall audit print them.
func (c *console) renderAccess() {
	var b strings.Builder
	b.WriteString(c.errText("access"))
	v := c.access
	if v == nil {
		c.accessTV.SetText(b.String())
		return
	}
	b.WriteString(" [::b]Cluster CA[::-] (rollcall ca show; rollcall ca rotate -yes)\n")
	ca := v.ca
	fmt.Fprintf(&b, " fingerprint  SHA256:%s\n", esc(ca.Fingerprint))
	fmt.Fprintf(&b, " subject      %s\n", esc(ca.Subject))
	fmt.Fprintf(&b, " valid        %s to %s\n", ca.NotBefore.UTC().Format("2006-01-02"), ca.NotAfter.UTC().Format("2006-01-02"))
	if !ca.Rotated.IsZero() {
		fmt.Fprintf(&b, " rotated      %s by %s\n", ca.Rotated.Local().Format("2006-01-02 15:04"), esc(ca.RotatedBy))
	}
	// Trusted-until first: what an operator acts on (clients must take the
	// new CA before it; yellow in its last week), and what a narrow screen
	// keeps.
	for _, p := range ca.Previous {
		until := "trusted until " + p.TrustedUntil.Local().Format("2006-01-02 15:04")
		if p.TrustedUntil.Sub(c.now()) < 7*24*time.Hour {
			until = "[yellow]" + until + "[-]"
		}
		fmt.Fprintf(&b, " previous     %s  SHA256:%s\n", until, esc(p.Fingerprint))
	}
	if len(ca.Previous) == 0 {
		b.WriteString(" previous     none still trusted\n")
	}
	b.WriteString("\n [::b]Certificates[::-] (rollcall ca certs; revoke with rollcall admin-cert revoke NAME or ca revoke SERIAL)\n")
	color := map[string]string{"valid": "green", "revoked": "red", "expired": "yellow"}
	for _, ct := range v.certs.Certificates {
		fmt.Fprintf(&b, " %-12s %-16s %-34s [%s]%-7s[-] until %s\n", esc(ct.Kind), esc(ct.Name), esc(ct.Serial), color[ct.State], esc(ct.State), ct.NotAfter.UTC().Format("2006-01-02"))
	}
	if len(v.certs.Certificates) == 0 {
		b.WriteString(" none recorded yet\n")
	}
	b.WriteString("\n [::b]Audit log[::-] (newest first; rollcall audit)\n")
	for _, e := range v.audit.Events {
		out := "[green]ok[-]"
		if e.Outcome != "ok" {
			out = "[red]" + esc(e.Outcome) + "[-]"
		}
		fmt.Fprintf(&b, " %s  %-12s %-15s %-8s %s %s  %s\n", c.stamp(e.Time), esc(e.Actor), esc(e.From), esc(e.Node), esc(e.Action), esc(e.Target), out)
	}
	if len(v.audit.Events) == 0 {
		b.WriteString(" nothing yet: every administrator's write appears here\n")
	}
	c.accessTV.SetText(b.String())
}

// renderDoctor is the node's checks as rollcall doctor prints them, each
// with what to do; r (refresh) runs them again.
func (c *console) renderDoctor() {
	var b strings.Builder
	b.WriteString(c.errText("doctor"))
	r := c.doctor
	if r == nil {
		if c.errs["doctor"] == nil {
			b.WriteString(" running the checks…\n")
		}
		c.doctorTV.SetText(b.String())
		return
	}
	verdict := "[green]all checks pass[-]"
	if !r.OK {
		n := 0
		for _, ch := range r.Checks {
			if ch.Status == wire.DoctorFail {
				n++
			}
		}
		verdict = fmt.Sprintf("[red]%d failed[-]", n)
	}
	fmt.Fprintf(&b, " node %s · %s · %s (r runs them again)\n\n", esc(r.Node), c.stamp(r.Time), verdict)
	color := map[string]string{wire.DoctorOK: "green", wire.DoctorWarn: "yellow", wire.DoctorFail: "red"}
	for _, ch := range r.Checks {
		fmt.Fprintf(&b, " [%s]%-4s[-] [::b]%s[::-]  %s\n", color[ch.Status], esc(ch.Status), esc(ch.Name), esc(ch.Message))
		if ch.Fix != "" {
			fmt.Fprintf(&b, "      → %s\n", esc(ch.Fix))
		}
	}
	c.doctorTV.SetText(b.String())
}
