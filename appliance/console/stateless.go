package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/rollcall/rollcall/appliance/wire"
)

// Stateless nodes in the console: the Profiles page (the list; Enter
// shows a profile's definition and its nodes), each assigned machine's
// node name and heartbeat in the machine list and view, and Assign
// profile… (which profile, then Assign or Assign + power-cycle) and
// Unassign (confirmed) in the actions menu. The nodes are followed with
// blocking queries on /stateless/nodes and read afresh at least every 30
// s, since a node turns stale without a write.

// Profiles implements Source: GET /api/v1/profiles.
func (c *Client) Profiles(ctx context.Context) ([]wire.Profile, error) {
	var v wire.ProfileList
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/profiles", nil, &v)
	return v.Profiles, err
}

// StatelessNodes implements Source with a blocking query when index > 0.
func (c *Client) StatelessNodes(ctx context.Context, index uint64, wait time.Duration) (wire.StatelessNodeList, error) {
	path, timeout := "/api/v1/stateless/nodes", readTimeout
	if index > 0 {
		path += fmt.Sprintf("?index=%d&wait=%s", index, wait)
		timeout += wait
	}
	var v wire.StatelessNodeList
	err := c.do(ctx, timeout, http.MethodGet, path, nil, &v)
	return v, err
}

// bootSuffix on an assign's Arg asks for the power cycle too.
const bootSuffix = "+boot"

// doStateless runs assign and unassign; ok is false for another kind.
func (c *Client) doStateless(ctx context.Context, a Action) (out string, ok bool, err error) {
	p := machinePath(a.Machine)
	switch a.Kind {
	case "assign":
		profile, boot := strings.CutSuffix(a.Arg, bootSuffix)
		var r wire.AssignResult
		if err := c.do(ctx, actionTimeout, http.MethodPost, p+"/assign", wire.AssignRequest{Profile: profile, Boot: boot}, &r); err != nil {
			return "", true, err
		}
		return assignOutcome(r), true, nil
	case "unassign":
		var n wire.StatelessNode
		if err := c.do(ctx, actionTimeout, http.MethodPost, p+"/unassign", nil, &n); err != nil {
			return "", true, err
		}
		return unassignOutcome(n), true, nil
	}
	return "", false, nil
}

// assignOutcome says what an assign made: the node, and the power cycle
// when one was asked for.
func assignOutcome(r wire.AssignResult) string {
	n := r.Node
	s := fmt.Sprintf("node %s of %s", n.Name, n.Profile)
	if len(n.Addresses) > 0 {
		s += " (" + strings.Join(n.Addresses, ", ") + ")"
	}
	switch {
	case r.PowerError != "":
		s += "; not power-cycled: " + r.PowerError
	case r.PowerJob != "":
		s += "; power cycle job " + r.PowerJob
	default:
		s += "; boots it on its next network boot"
	}
	return s
}

func unassignOutcome(n wire.StatelessNode) string {
	return fmt.Sprintf("ready; was node %s of %s", n.Name, n.Profile)
}

// notServed reports whether the API lacks a route (an older node during
// a rolling upgrade answers 404 for the stateless ones).
func notServed(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// ---- the nodes

// setNodes takes a node list (by machine).
func (c *console) setNodes(l wire.StatelessNodeList) {
	c.nodes, c.haveNodes = make(map[string]wire.StatelessNode, len(l.Nodes)), true
	for _, n := range l.Nodes {
		c.nodes[n.Machine] = n
	}
}

// watchNodes follows the stateless nodes with blocking queries and applies
// every answer, a changed one or the same one after the wait (its stale
// flags and ages are new). An API without the route has no nodes.
func (c *console) watchNodes() {
	var index uint64
	for c.ctx.Err() == nil {
		began := time.Now()
		l, err := c.src.StatelessNodes(c.ctx, index, 30*time.Second)
		if c.ctx.Err() != nil {
			return
		}
		if notServed(err) {
			return
		}
		if err != nil {
			index = 0
			c.sleep(3 * time.Second)
			continue
		}
		c.app.QueueUpdateDraw(func() {
			c.setNodes(l)
			c.render()
		})
		if l.Index == index && time.Since(began) < 100*time.Millisecond {
			c.sleep(time.Second) // an API that does not block: do not spin
		}
		index = l.Index
	}
}

// age is how long ago t was, in a few characters.
func (c *console) age(t time.Time) string {
	d := max(c.now().Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// heartbeat is a node's heartbeat in words: not booted yet, or when it was
// last seen, and whether it is stale.
func (c *console) heartbeat(n wire.StatelessNode) string {
	switch {
	case n.Booted.IsZero():
		return "not booted"
	case n.LastSeen.IsZero():
		return "booted, never seen"
	case n.Stale:
		return "stale, seen " + c.age(n.LastSeen) + " ago"
	}
	return "seen " + c.age(n.LastSeen) + " ago"
}

// nodeColumn is the machine list's NODE column: the node name and, in
// few words, its heartbeat (listed only while there are nodes).
var nodeColumn = column{"NODE", 22, func(c *console, m wire.MachineView) string {
	n, ok := c.nodes[m.ID]
	switch {
	case !ok:
		return ""
	case n.Booted.IsZero():
		return n.Name + " not booted"
	case n.LastSeen.IsZero():
		return n.Name + " never seen"
	case n.Stale:
		return n.Name + " stale " + c.age(n.LastSeen)
	}
	return n.Name + " seen " + c.age(n.LastSeen)
}}

// renderNode writes the machine view's node rows.
func (c *console) renderNode(b *strings.Builder, id string) {
	n, ok := c.nodes[id]
	if !ok {
		return
	}
	addrs := "no addresses"
	if len(n.Addresses) > 0 {
		addrs = strings.Join(n.Addresses, ", ")
	}
	fmt.Fprintf(b, "[yellow]%-13s[-] %s of profile %s · %s\n", "Node", esc(n.Name), esc(n.Profile), esc(addrs))
	beat := esc(c.heartbeat(n))
	if n.Stale {
		beat = "[red]" + beat + "[-]"
	}
	if !n.Booted.IsZero() {
		beat += " · booted " + fullStamp(n.Booted)
	}
	fmt.Fprintf(b, "[yellow]%-13s[-] %s\n", "Heartbeat", beat)
}

// ---- the Profiles page

type profileView struct {
	name string
	err  error
}

func (c *console) buildProfiles() {
	c.profilesT = c.listTable("profiles", " Profiles ", func(ref string) { c.openProfile(ref) })
	c.profileTV = c.textPage("profile", " Profile ")
	c.profileTV.SetWrap(true)
}

func (c *console) openProfile(name string) {
	c.profile = profileView{name: name}
	c.show("profile")
	c.app.SetFocus(c.profileTV)
}

// setProfiles takes the profile list; the profile on show that is not in
// it any more is not found.
func (c *console) setProfiles(ps []wire.Profile) {
	c.profiles, c.haveProfiles = ps, true
	if c.profile.name != "" {
		c.profile.err = nil
		if _, ok := c.findProfile(c.profile.name); !ok {
			c.profile.err = fmt.Errorf("profile %q: not found", c.profile.name)
		}
	}
}

func (c *console) findProfile(name string) (wire.Profile, bool) {
	i := slices.IndexFunc(c.profiles, func(p wire.Profile) bool { return p.Name == name })
	if i < 0 {
		return wire.Profile{}, false
	}
	return c.profiles[i], true
}

// nodesOf are a profile's nodes, by number.
func (c *console) nodesOf(profile string) []wire.StatelessNode {
	var out []wire.StatelessNode
	for _, n := range c.nodes {
		if n.Profile == profile {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// pool is a profile's name pool: cn%03d 1–512.
func pool(p wire.Profile) string {
	return fmt.Sprintf("%s %d–%d", p.NameFormat, p.NameFirst, p.NameLast)
}

func (c *console) renderProfiles() {
	t := c.profilesT
	defer header(t, "PROFILE", "IMAGE", "OVERLAYS", "NAMES", "SUBNETS", "NODES")()
	if err := c.errs["profiles"]; err != nil {
		note(t, 1, "cannot load profiles: "+err.Error(), tcell.ColorRed)
		return
	}
	for r, p := range c.profiles {
		nodes := p.Nodes
		if c.haveNodes {
			nodes = len(c.nodesOf(p.Name))
		}
		t.SetCell(r+1, 0, tview.NewTableCell(esc(p.Name)).SetReference(p.Name))
		t.SetCell(r+1, 1, tview.NewTableCell(esc(p.Image)))
		t.SetCell(r+1, 2, tview.NewTableCell(esc(dash(strings.Join(p.Overlays, ", ")))))
		t.SetCell(r+1, 3, tview.NewTableCell(esc(pool(p))))
		t.SetCell(r+1, 4, tview.NewTableCell(esc(dash(strings.Join(p.Subnets, ", ")))))
		t.SetCell(r+1, 5, tview.NewTableCell(fmt.Sprint(nodes)).SetAlign(tview.AlignRight).SetExpansion(1))
	}
	if c.haveProfiles && len(c.profiles) == 0 {
		note(t, 1, "no profiles: rollcall profile add NAME -image IMAGE -overlays A,B", tcell.ColorGray)
	}
	t.SetTitle(fmt.Sprintf(" Profiles · %d ", len(c.profiles)))
}

// renderProfile is one profile's definition and its nodes.
func (c *console) renderProfile() {
	tv := c.profileTV
	pv := c.profile
	tv.SetTitle(" Profile " + esc(pv.name) + " ")
	p, ok := c.findProfile(pv.name)
	switch {
	case c.errs["profiles"] != nil:
		tv.SetText("[red]" + esc(c.errs["profiles"].Error()) + "[-]")
		return
	case pv.err != nil:
		tv.SetText("[red]" + esc(pv.err.Error()) + "[-]")
		return
	case !ok:
		tv.SetText("loading…")
		return
	}
	var b strings.Builder
	row := func(k, v string) { fmt.Fprintf(&b, "[yellow]%-13s[-] %s\n", k, esc(v)) }
	row("Name", p.Name)
	row("Image", p.Image)
	row("Overlays", dash(strings.Join(p.Overlays, ", "))+" (then the nodes' tags' overlays)")
	row("Kernel args", dash(p.Args))
	row("Node names", pool(p))
	row("Subnets", dash(strings.Join(p.Subnets, ", ")))
	row("Created", fullStamp(p.Created))
	b.WriteString("\n[yellow]Variables[-]\n")
	if len(p.Vars) == 0 {
		b.WriteString("  none\n")
	}
	keys := make([]string, 0, len(p.Vars))
	for k := range p.Vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s=%s\n", esc(k), esc(p.Vars[k]))
	}
	nodes := c.nodesOf(p.Name)
	names := c.names()
	fmt.Fprintf(&b, "\n[yellow]Nodes[-] %d\n", len(nodes))
	for _, n := range nodes {
		beat := esc(c.heartbeat(n))
		if n.Stale {
			beat = "[red]" + beat + "[-]"
		}
		fmt.Fprintf(&b, "  %-10s %-16s %-15s %s\n", esc(n.Name), esc(dash(names[n.Machine])), esc(first(n.Addresses)), beat)
	}
	b.WriteString("\n change it: rollcall profile set " + esc(p.Name) + " … · assign: a on a machine\n")
	tv.SetText(b.String())
}

// ---- the actions

// assignMenu reads the profiles (in the background when live), then
// offers them.
func (c *console) assignMenu(ms []wire.MachineView) {
	c.closeDialog()
	if !c.live {
		c.fetch(c.ctx, "profiles")()
		c.profileMenu(ms)
		return
	}
	c.setMsg("assign: reading the profiles…", false)
	go func() {
		apply := c.fetch(c.ctx, "profiles")
		c.app.QueueUpdateDraw(func() {
			apply()
			if c.errs["profiles"] == nil {
				c.setMsg("", false)
				c.profileMenu(ms)
			}
		})
	}()
}

// profileMenu picks a profile, then asks: Assign, or Assign and
// power-cycle.
func (c *console) profileMenu(ms []wire.MachineView) {
	if len(c.profiles) == 0 {
		c.closeDialog()
		c.setMsg("assign: there are no profiles (rollcall profile add NAME -image IMAGE)", true)
		return
	}
	l := tview.NewList().ShowSecondaryText(false).SetHighlightFullLine(true)
	l.SetBorder(true).SetTitle(" Assign " + targetTitle(ms) + " to profile ")
	shown := c.profiles[:min(len(c.profiles), 9)]
	for i, p := range shown {
		l.AddItem(esc(fmt.Sprintf("%s (image %s, %s)", p.Name, p.Image, pool(p))), "", rune('1'+i), func() {
			c.closeDialog()
			c.confirmAssign(ms, p)
		})
	}
	l.SetDoneFunc(c.closeDialog)
	c.dialog(center(l, 60, len(shown)+2), l)
}

func (c *console) confirmAssign(ms []wire.MachineView, p wire.Profile) {
	who := fmt.Sprintf("%s (%s)", nameOf(ms[0]), ms[0].ID)
	if len(ms) > 1 {
		who = targetTitle(ms) + ": " + namesOf(ms, 6)
	}
	q := fmt.Sprintf("Assign %s to profile %s?\n\nIt boots image %s into memory as a stateless node named from %s; only a ready machine is assigned. Power-cycle boots it now; otherwise it does on its next network boot.",
		who, p.Name, p.Image, pool(p))
	const now = "Assign + power-cycle"
	c.modal(q, []string{"Cancel", "Assign", now}, func(label string) {
		switch label {
		case "Assign":
			c.run(ms, menuItem{label: "Assign to " + p.Name, kind: "assign", arg: p.Name})
		case now:
			c.run(ms, menuItem{label: "Assign to " + p.Name, kind: "assign", arg: p.Name + bootSuffix})
		default:
			c.setMsg("assign: cancelled", false)
		}
	})
}
