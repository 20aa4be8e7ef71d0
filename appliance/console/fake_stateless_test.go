package console

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The fake fleet's stateless profiles: compute (two overlays, a subnet,
// variables) and gpu (no subnet); no machine is assigned to either until a
// test assigns one.
func fakeProfiles() []wire.Profile {
	return []wire.Profile{
		{Name: "compute", Image: "compute-2026.03", Overlays: []string{"compute", "slurm"}, Args: "console=ttyS0,115200", NameFormat: "cn%03d",
			NameFirst: 1, NameLast: 512, Subnets: []string{"10.0.0.0/24"}, Vars: map[string]string{"slurm_partition": "batch", "site": "b1"},
			Created: ago(12 * 24 * time.Hour), Index: 80},
		{Name: "gpu", Image: "compute-2026.03", Overlays: []string{"compute", "slurm", "nvidia"}, NameFormat: "gpu%02d",
			NameFirst: 1, NameLast: 64, Created: ago(3 * 24 * time.Hour), Index: 81},
	}
}

// Profiles answers as the API does: each with the count of its nodes.
func (f *fleet) Profiles(context.Context) ([]wire.Profile, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.profiles)
	for i := range out {
		for _, n := range f.nodes {
			if n.Profile == out[i].Name {
				out[i].Nodes++
			}
		}
	}
	return out, nil
}

func (f *fleet) StatelessNodes(ctx context.Context, index uint64, wait time.Duration) (wire.StatelessNodeList, error) {
	if err := f.block(ctx, index, wait); err != nil {
		return wire.StatelessNodeList{}, err
	}
	defer f.mu.Unlock()
	return wire.StatelessNodeList{Index: f.index, Nodes: slices.Clone(f.nodes)}, nil
}

// doStateless plays the API's assign and unassign on machine i; f.mu is
// held.
func (f *fleet) doStateless(i int, a Action) (string, error) {
	m := &f.machines[i]
	at := slices.IndexFunc(f.nodes, func(n wire.StatelessNode) bool { return n.Machine == m.ID })
	if a.Kind == "unassign" {
		if at < 0 {
			return "", fmt.Errorf("machine %s is %s, not assigned to a profile", m.ID, m.State)
		}
		n := f.nodes[at]
		f.nodes = slices.Delete(f.nodes, at, at+1)
		m.State = wire.StateReady
		f.bump()
		return unassignOutcome(n), nil
	}
	name, boot := strings.CutSuffix(a.Arg, bootSuffix)
	p := slices.IndexFunc(f.profiles, func(p wire.Profile) bool { return p.Name == name })
	switch {
	case p < 0:
		return "", fmt.Errorf("profile %q: not found", name)
	case at >= 0 && f.nodes[at].Profile == name:
		return assignOutcome(wire.AssignResult{Node: f.nodes[at]}), nil // assigned already: done
	case at >= 0:
		return "", fmt.Errorf("machine %s is node %s of profile %s: unassign it first", m.ID, f.nodes[at].Name, f.nodes[at].Profile)
	case m.State != wire.StateReady:
		return "", fmt.Errorf("machine %s is %s: only a ready machine is assigned (commission it, or release a deployed one, first)", m.ID, m.State)
	}
	n := f.assign(m, f.profiles[p])
	r := wire.AssignResult{Node: n}
	if boot {
		if m.BMC == nil {
			r.PowerError = "machine " + m.ID + " has no BMC on record"
		} else {
			r.PowerJob = fmt.Sprintf("j-%016x", len(f.calls))
		}
	}
	return assignOutcome(r), nil
}

// assign makes m a node of p with the lowest free number; f.mu is held.
func (f *fleet) assign(m *wire.MachineView, p wire.Profile) wire.StatelessNode {
	num := p.NameFirst
	for slices.ContainsFunc(f.nodes, func(n wire.StatelessNode) bool { return n.Profile == p.Name && n.Number == num }) {
		num++
	}
	n := wire.StatelessNode{Machine: m.ID, Profile: p.Name, Name: fmt.Sprintf(p.NameFormat, num), Number: num, Generation: 1, Assigned: fakeNow,
		SSHHostKeyPub: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + strings.Repeat("x", 43)}
	if len(p.Subnets) > 0 {
		n.Addresses = []string{fmt.Sprintf("10.0.0.%d", 100+num)}
	}
	f.nodes = append(f.nodes, n)
	m.State = wire.StateStateless
	f.bump()
	return n
}

// boot plays a node's overlay fetches: booted at booted ago, last seen at
// seen ago, stale as the API would say.
func (f *fleet) boot(id string, booted, seen time.Duration, stale bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.nodes {
		if f.nodes[i].Machine == id {
			f.nodes[i].Booted, f.nodes[i].LastSeen, f.nodes[i].Stale = ago(booted), ago(seen), stale
		}
	}
	for i := range f.machines {
		if f.machines[i].ID == id {
			f.machines[i].State = wire.StateBooted
		}
	}
	f.bump()
}

// withNodes is the fleet with three stateless nodes of compute: web-02
// booted and seen a minute ago, db-01 booted and stale, stor-01 assigned
// and not booted yet.
func withNodes() *fleet {
	f := newFleet()
	f.mu.Lock()
	for _, name := range []string{"web-02", "db-01", "stor-01"} {
		i, _ := f.find(name)
		f.assign(&f.machines[i], f.profiles[0])
	}
	f.mu.Unlock()
	f.boot("m-0a1b2c3d4e02", 3*time.Hour, time.Minute, false)
	f.boot("m-0a1b2c3d4e03", 26*time.Hour, 47*time.Minute, true)
	return f
}
