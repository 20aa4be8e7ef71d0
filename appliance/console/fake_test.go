package console

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/inventory"
)

// fakeNow is the time the fixed fleet lives at.
var fakeNow = time.Date(2026, 3, 14, 15, 0, 0, 0, time.UTC)

// fleet is a Source with a fixed fleet: machines in every state, events, a
// 3-node cluster, a network and images. It records every action and follows
// blocking queries like the API.
type fleet struct {
	mu       sync.Mutex
	index    uint64
	changed  chan struct{} // closed and replaced on every change
	machines []wire.MachineView
	events   []wire.Event
	racks    []wire.Rack
	tags     []wire.Tag
	fail     map[string]error // machine ID → error for every action on it
	calls    []Action
	deploys  map[string][]wire.DeployJob // machine ID → its deploy and release jobs, newest first
	profiles []wire.Profile
	nodes    []wire.StatelessNode // by machine ID
	// The OS page's actions: the current version a promote set, by name,
	// and what they were asked.
	osCurrent map[string]string
	osCalls   []string
}

func (f *fleet) Now() time.Time { return fakeNow }

// ClusterVars implements ClusterVarsSource.
func (f *fleet) ClusterVars(context.Context) (wire.ClusterVars, error) {
	return wire.ClusterVars{Vars: map[string]string{"slurm_controller": "head1", "cluster_name": "hpc"}, Index: 80}, nil
}

func ago(d time.Duration) time.Time { return fakeNow.Add(-d) }

func newFleet() *fleet {
	f := &fleet{index: 120, changed: make(chan struct{}), fail: map[string]error{}, deploys: map[string][]wire.DeployJob{}}
	type spec struct {
		id, name, state, serial, mac, ip, product string
		sockets, cores                            int
		memGiB                                    int64
		bmc                                       string
		bmcErr                                    string
		age                                       time.Duration
	}
	specs := []spec{
		{"m-0a1b2c3d4e01", "web-01", "ready", "S211X5A01", "0c:c4:7a:aa:00:01", "10.0.0.21", "SYS-2029U-TR4", 2, 40, 384, "10.0.20.21", "", 3 * time.Hour},
		{"m-0a1b2c3d4e02", "web-02", "ready", "S211X5A02", "0c:c4:7a:aa:00:02", "10.0.0.22", "SYS-2029U-TR4", 2, 40, 384, "10.0.20.22", "", 3 * time.Hour},
		{"m-0a1b2c3d4e03", "db-01", "ready", "CZ2D1K0ABC", "3c:ec:ef:10:20:31", "10.0.0.31", "HPE ProLiant DL380 Gen10", 2, 48, 768, "10.0.20.31", "", 26 * time.Hour},
		{"m-0a1b2c3d4e04", "stor-01", "ready", "J30ABCD1", "b8:83:03:5e:11:01", "10.0.0.41", "Dell PowerEdge R740xd", 2, 36, 256, "10.0.20.41", "ipmi 10.0.20.41: connection refused", 50 * time.Hour},
		{"m-0a1b2c3d4e05", "gpu-01", "commissioning", "S3N4GPU001", "a0:36:9f:21:00:01", "10.0.0.51", "SYS-420GP-TNR", 2, 64, 1024, "10.0.20.51", "", 4 * time.Minute},
		{"m-0a1b2c3d4e06", "gpu-02", "commissioning", "S3N4GPU002", "a0:36:9f:21:00:02", "10.0.0.52", "SYS-420GP-TNR", 2, 64, 1024, "10.0.20.52", "", 6 * time.Minute},
		{"m-0a1b2c3d4e07", "rack2-n01", "new", "", "52:54:00:12:34:01", "", "", 0, 0, 0, "", "", 20 * time.Minute},
		{"m-0a1b2c3d4e08", "", "new", "", "52:54:00:12:34:02", "", "", 0, 0, 0, "", "", 22 * time.Minute},
		{"m-0a1b2c3d4e09", "edge-01", "new", "ZZ0001", "52:54:00:12:34:03", "10.0.0.61", "", 0, 0, 0, "", "", 2 * time.Minute},
	}
	for i, s := range specs {
		m := wire.MachineView{
			ID: s.id, Name: s.name, State: s.state, Serial: s.serial, MACs: []string{s.mac}, BootMAC: s.mac,
			CreatedAt: ago(s.age + time.Hour), UpdatedAt: ago(s.age), Index: uint64(100 + i),
		}
		if s.ip != "" {
			m.IPs = []string{s.ip}
		}
		if s.product != "" {
			m.SystemUUID = fmt.Sprintf("4c4c4544-0042-3510-8051-b7c04f5632%02d", i)
			maker, product, _ := strings.Cut(s.product, " ")
			if !strings.HasPrefix(s.product, "HPE ") && !strings.HasPrefix(s.product, "Dell ") {
				maker, product = "Supermicro", s.product
			}
			m.Summary = inventory.Summary{Manufacturer: maker, Product: product, CPUModel: "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
				Sockets: s.sockets, Cores: s.cores, Threads: 2 * s.cores, MemoryBytes: s.memGiB << 30, DIMMs: 12, Disks: 4, DiskBytes: 7_680_000_000_000, NICs: 2}
			if s.state == "ready" {
				m.Commissioned = ago(s.age)
			}
		}
		if s.bmc != "" {
			m.BMC = &wire.BMCView{Driver: "ipmi", Address: s.bmc, User: "rollcall", HasPassword: true, Source: "in-band"}
			if s.bmcErr != "" {
				m.BMC.Errors = []string{s.bmcErr}
			}
		}
		f.machines = append(f.machines, m)
		f.events = append(f.events, wire.Event{Machine: s.id, Index: uint64(100 + i), Time: ago(s.age + time.Hour), Kind: "enlisted", Message: "first seen on mgmt/0 via " + s.mac})
		switch s.state {
		case "commissioning":
			f.events = append(f.events, wire.Event{Machine: s.id, Index: uint64(200 + i), Time: ago(s.age), Kind: "commissioning", Message: "agent booted, collecting inventory"})
		case "ready":
			f.events = append(f.events, wire.Event{Machine: s.id, Index: uint64(200 + i), Time: ago(s.age), Kind: "commissioned", Message: "inventory received: 2 CPUs, 4 disks, 2 NICs"})
		}
	}
	f.events = append(f.events, wire.Event{Machine: "m-0a1b2c3d4e04", Index: 300, Time: ago(49 * time.Hour), Kind: "bmc", Message: "ipmi 10.0.20.41: connection refused"})
	// Where they stand, and their tags.
	places := map[string]wire.Location{
		"web-01":    {Building: "B1", Room: "hall-2", Rack: "R12", Unit: 10},
		"web-02":    {Building: "B1", Room: "hall-2", Rack: "R12", Unit: 11},
		"db-01":     {Building: "B1", Room: "hall-2", Rack: "R12", Unit: 14, Height: 2, Asset: "A-3301"},
		"stor-01":   {Building: "B1", Room: "hall-2", Rack: "R12", Unit: 20, Height: 2},
		"rack2-n01": {Building: "B1", Room: "hall-2", Rack: "R12"},
		"gpu-01":    {Building: "B1", Room: "hall-2", Rack: "R13", Unit: 1, Height: 4},
		"gpu-02":    {Building: "B1", Room: "hall-2", Rack: "R13", Unit: 5, Height: 4},
	}
	tags := map[string][2][]string{ // manual, auto
		"web-01":  {{"web"}, nil},
		"web-02":  {{"web"}, nil},
		"stor-01": {nil, {"storage"}},
		"gpu-01":  {{"burn-in"}, {"gpu"}},
		"gpu-02":  {nil, {"gpu"}},
	}
	for i := range f.machines {
		m := &f.machines[i]
		m.Location = places[m.Name]
		m.Tags, m.AutoTags = tags[m.Name][0], tags[m.Name][1]
	}
	f.racks = []wire.Rack{
		{Name: "R12", Building: "B1", Room: "hall-2", Height: 42, Created: ago(90 * 24 * time.Hour)},
		{Name: "R13", Building: "B1", Room: "hall-2", Height: 42, Created: ago(90 * 24 * time.Hour)},
		{Name: "R14", Building: "B2", Height: 24, Created: ago(9 * 24 * time.Hour)},
	}
	f.tags = []wire.Tag{
		{Name: "burn-in", Comment: "48 h stress test before handover", Updated: ago(2 * time.Hour)},
		{Name: "gpu", Match: "{{ gt .Node.GPUs 0 }}", CloudConfig: "#cloud-config\npackages:\n  - nvidia-driver\n", Comment: "NVIDIA nodes", Updated: ago(30 * 24 * time.Hour)},
		{Name: "storage", Match: `{{ ge .Node.Disks 12 }}`, Layout: "bond-25g", Updated: ago(30 * 24 * time.Hour)},
		{Name: "web", Comment: "front ends", Updated: ago(5 * 24 * time.Hour)},
	}
	f.profiles = fakeProfiles()
	return f
}

// Racks answers as the API does: each rack with its used units and
// machines, counted from the machines' places.
func (f *fleet) Racks(context.Context) ([]wire.Rack, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wire.Rack
	for _, r := range f.racks {
		for _, m := range f.machines {
			if m.Location.Rack == r.Name {
				r.Machines++
				if m.Location.Unit > 0 {
					r.UsedUnits += max(m.Location.Height, 1)
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func (f *fleet) Rack(ctx context.Context, name string) (wire.RackDetail, error) {
	rs, _ := f.Racks(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range rs {
		if r.Name != name {
			continue
		}
		d := wire.RackDetail{Rack: r}
		for _, m := range f.machines {
			if m.Location.Rack != name {
				continue
			}
			u := wire.RackUnit{Unit: m.Location.Unit, Height: max(m.Location.Height, 1), Machine: m.ID, Name: m.Name, State: m.State}
			if u.Unit == 0 {
				d.Unplaced = append(d.Unplaced, u)
			} else {
				d.Elevation = append(d.Elevation, u)
			}
		}
		slices.SortFunc(d.Elevation, func(a, b wire.RackUnit) int { return a.Unit - b.Unit })
		return d, nil
	}
	return wire.RackDetail{}, fmt.Errorf("rack %q: not found", name)
}

func (f *fleet) Tags(context.Context) ([]wire.Tag, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wire.Tag
	for _, t := range f.tags {
		for _, m := range f.machines {
			if slices.Contains(m.Tags, t.Name) || slices.Contains(m.AutoTags, t.Name) {
				t.Machines++
			}
		}
		out = append(out, t)
	}
	return out, nil
}

func (f *fleet) Tag(ctx context.Context, name string) (wire.TagDetail, error) {
	ts, _ := f.Tags(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range ts {
		if t.Name != name {
			continue
		}
		d := wire.TagDetail{Tag: t}
		for _, m := range f.machines {
			if slices.Contains(m.Tags, t.Name) {
				d.Manual = append(d.Manual, m.ID)
			}
			if slices.Contains(m.Tags, t.Name) || slices.Contains(m.AutoTags, t.Name) {
				d.MachineIDs = append(d.MachineIDs, m.ID)
			}
		}
		return d, nil
	}
	return wire.TagDetail{}, fmt.Errorf("tag %q: not found", name)
}

// bump records a change and wakes blocking queries; f.mu is held.
func (f *fleet) bump() {
	f.index++
	close(f.changed)
	f.changed = make(chan struct{})
}

// update changes the fleet from a test, as another operator would.
func (f *fleet) update(fn func(ms []wire.MachineView) []wire.MachineView) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.machines = fn(f.machines)
	f.bump()
}

func (f *fleet) actions() []Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fleet) Machines(ctx context.Context, index uint64, wait time.Duration) (wire.MachineList, error) {
	if err := f.block(ctx, index, wait); err != nil {
		return wire.MachineList{}, err
	}
	defer f.mu.Unlock()
	return wire.MachineList{Index: f.index, Machines: slices.Clone(f.machines)}, nil
}

// block is a blocking query: with index > 0 it waits until the fleet
// changes past index or wait passes. It returns with f.mu held, unless it
// fails.
func (f *fleet) block(ctx context.Context, index uint64, wait time.Duration) error {
	f.mu.Lock()
	if index > 0 && f.index <= index {
		ch := f.changed
		f.mu.Unlock()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		f.mu.Lock()
	}
	return nil
}

func (f *fleet) find(id string) (int, error) {
	for i, m := range f.machines {
		if m.ID == id || m.Name == id {
			return i, nil
		}
	}
	return -1, fmt.Errorf("machine %q: not found", id) // as the API says it
}

func (f *fleet) Machine(_ context.Context, id string) (wire.MachineDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, err := f.find(id)
	if err != nil {
		return wire.MachineDetail{}, err
	}
	d := wire.MachineDetail{MachineView: f.machines[i]}
	for _, e := range f.events {
		if e.Machine == d.ID {
			d.Events = append(d.Events, e)
		}
	}
	return d, nil
}

func (f *fleet) Jobs(_ context.Context, id string) ([]wire.Job, error) {
	if id != "m-0a1b2c3d4e01" {
		return nil, nil
	}
	return []wire.Job{
		{ID: "j-2", Machine: id, Kind: "power", Arg: "status", Created: ago(10 * time.Minute), Done: true, Result: "on"},
		{ID: "j-1", Machine: id, Kind: "bootdev", Arg: "pxe", Created: ago(3 * time.Hour), Done: true, Result: "pxe"},
	}, nil
}

func (f *fleet) Events(_ context.Context, limit int) ([]wire.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	es := slices.Clone(f.events)
	sortEvents(es)
	return es[:min(limit, len(es))], nil
}

func (f *fleet) Cluster(context.Context) (wire.ClusterView, error) {
	st := func(id, state string, applied uint64, contact time.Duration) *wire.NodeStatus {
		return &wire.NodeStatus{State: state, Leader: "node-1", Term: 7, Applied: applied, Commit: applied, LastContact: ago(contact)}
	}
	return wire.ClusterView{
		Node: "node-1", Leader: "node-1", CAFingerprint: "15860131cf605b8c57a43a60b325f566d79bf6b7ac9a565ef89f6070076c99f3",
		Members: []wire.Member{
			{ID: "node-1", Address: "10.0.0.2:8300", Voter: true, Leader: true, Reachable: true, Status: st("node-1", "Leader", 1480, 0)},
			{ID: "node-2", Address: "10.0.0.3:8300", Voter: true, Reachable: true, Status: st("node-2", "Follower", 1480, 42*time.Millisecond)},
			{ID: "node-3", Address: "10.0.0.4:8300", Voter: true, Error: "dial tcp 10.0.0.4:8300: i/o timeout"},
		},
		Nodes: []wire.Node{
			{Name: "node-1", RaftAddr: "10.0.0.2:8300", HTTPAddr: "10.0.0.2:8080"},
			{Name: "node-2", RaftAddr: "10.0.0.3:8300", HTTPAddr: "10.0.0.3:8080"},
			{Name: "node-3", RaftAddr: "10.0.0.4:8300", HTTPAddr: "10.0.0.4:8080"},
		},
	}, nil
}

func (f *fleet) Network(context.Context) (Network, error) {
	sub := func(cidr, fabric string, vid int, purpose, gw string, used int) wire.SubnetView {
		s := wire.SubnetView{Subnet: wire.Subnet{CIDR: netip.MustParsePrefix(cidr), Fabric: fabric, VID: vid, Purpose: purpose}, Used: used}
		if gw != "" {
			s.Gateway = netip.MustParseAddr(gw)
		}
		return s
	}
	return Network{
		Fabrics: []wire.Fabric{{Name: "mgmt", Kind: "ethernet"}, {Name: "ib0", Kind: "infiniband"}},
		VLANs: []wire.VLAN{
			{Fabric: "mgmt", VID: 0, MTU: 1500, DHCP: "full", Servers: []wire.VLANServer{{Node: "node-1", Iface: "eth1"}, {Node: "node-2", Iface: "eth1"}}},
			{Fabric: "mgmt", VID: 20, MTU: 1500, DHCP: "proxy", Servers: []wire.VLANServer{{Node: "node-1", Iface: "eth1.20"}}},
			{Fabric: "ib0", VID: 0, MTU: 2044, DHCP: "off"},
		},
		Subnets: []wire.SubnetView{
			sub("10.0.0.0/24", "mgmt", 0, "provisioning", "10.0.0.1", 12),
			sub("10.0.20.0/24", "mgmt", 20, "bmc", "", 8),
			sub("192.168.100.0/22", "ib0", 0, "storage", "", 4),
		},
	}, nil
}

func (f *fleet) Images(context.Context) ([]wire.Image, error) {
	return []wire.Image{
		{Name: "commission-2026.03", Nodes: []string{"node-1", "node-2", "node-3"}, Created: ago(5 * 24 * time.Hour), Files: []wire.ImageFile{
			{Name: "kernel", Size: 11_812_864, SHA256: "9f2b8e3c41d0a7b6e5f4c3d2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2"},
			{Name: "initrd", Size: 68_157_440, SHA256: "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"},
			{Name: "squashfs", Size: 781_189_120, SHA256: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"},
		}},
		{Name: "commission-2026.01", Nodes: []string{"node-1", "node-2"}, Created: ago(60 * 24 * time.Hour), Files: []wire.ImageFile{
			{Name: "kernel", Size: 11_800_000, SHA256: "aa2b8e3c41d0a7b6e5f4c3d2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2"},
			{Name: "initrd", Size: 67_000_000, SHA256: "bb2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"},
		}},
	}, nil
}

var fakeName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func validName(s string) bool { return fakeName.MatchString(s) }

// Plan is web-01's plan: the spec's example layout (boot NIC, a bond of
// the two fastest, a VLAN on it), with one address held and one to take.
// Every other machine has none, with the API's reason.
func (f *fleet) Plan(_ context.Context, id string) (wire.NetworkPlan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, err := f.find(id)
	if err != nil {
		return wire.NetworkPlan{}, err
	}
	m := f.machines[i]
	if m.Name != "web-01" {
		return wire.NetworkPlan{}, fmt.Errorf("machine %s has no network plan: machine %s has no inventory to lay out", m.ID, m.ID)
	}
	return wire.NetworkPlan{
		Machine: m.ID, Layout: "web-bond", Source: "tag", Tag: "web",
		Why: "layout web-bond: named by tag web (manual), the first of the machine's tags that names a layout",
		Choices: []wire.PlanChoice{
			{Interface: "boot", Selector: "boot", NIC: "eno1", MAC: "0c:c4:7a:aa:00:01", Reason: "the NIC the machine network-booted from"},
			{Interface: "bond0", Selector: "fastest:2", NIC: "ens1f0", MAC: "0c:c4:7a:aa:10:01", Reason: "25 Gb/s, the fastest"},
			{Interface: "bond0", Selector: "fastest:2", NIC: "ens1f1", MAC: "0c:c4:7a:aa:10:02", Reason: "25 Gb/s, the second fastest"},
		},
		Addresses: []wire.PlanAddress{
			{Interface: "boot", Address: "10.0.0.21/24", Subnet: "10.0.0.0/24", How: "auto", Held: true, Reason: "the machine holds it already (deployed)"},
			{Interface: "bond0.20", Address: "10.0.20.121/24", Subnet: "10.0.20.0/24", How: "static", Reason: "static: pinned by rollcall net set -static"},
		},
		Notes:         []string{"bond0: 802.3ad (the default mode)"},
		NetworkConfig: "network:\n  version: 2\n", UdevRules: "# rules\n", UdevRulesPath: "/etc/udev/rules.d/70-rollcall-net.rules",
	}, nil
}

func (f *fleet) Do(_ context.Context, a Action) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, a)
	i, err := f.find(a.Machine)
	if err != nil {
		return "", err
	}
	if err := f.fail[a.Machine]; err != nil {
		return "", err
	}
	switch a.Kind {
	case "power":
		if a.Arg == "status" {
			return "on", nil
		}
		return map[string]string{"on": "on", "off": "off", "soft": "off", "cycle": "on", "reset": "on"}[a.Arg], nil
	case "bootdev":
		return a.Arg, nil
	case "recommission":
		f.machines[i].State = wire.StateNew
		f.bump()
		return "new", nil
	case "delete":
		f.machines = slices.Delete(f.machines, i, i+1)
		f.bump()
		return "deleted", nil
	case "deploy", "release", "cancel":
		return f.doDeploy(i, a)
	case "assign", "unassign":
		return f.doStateless(i, a)
	case "rename":
		// As the API: a DNS label, unique in the fleet.
		if !validName(a.Arg) {
			return "", fmt.Errorf("name %q must be a DNS label: lowercase letters, digits and '-', 1 to 63 characters", a.Arg)
		}
		for _, o := range f.machines {
			if o.Name == a.Arg && o.ID != f.machines[i].ID {
				return "", fmt.Errorf("name %q is taken by machine %s", a.Arg, o.ID)
			}
		}
		f.machines[i].Name = a.Arg
		f.bump()
		return "named " + a.Arg, nil
	case "bmc-clear":
		if f.machines[i].BMC == nil {
			return "", fmt.Errorf("BMC of machine %s: not found", f.machines[i].ID)
		}
		f.machines[i].BMC = nil
		f.bump()
		return "BMC cleared: powered by hand until one is set", nil
	}
	return "", errors.New("unknown action " + a.Kind)
}

// CA is a cluster whose root was rotated three days ago: the replaced
// root stays trusted for the 30-day transition.
func (f *fleet) CA(context.Context) (wire.CAState, error) {
	rotated := ago(3 * 24 * time.Hour)
	return wire.CAState{
		CAView: wire.CAView{Fingerprint: "15860131cf605b8c57a43a60b325f566d79bf6b7ac9a565ef89f6070076c99f3", Subject: "CN=Rollcall cluster CA 2026-03-11T15:00:00Z",
			Serial: "4f2a9c", NotBefore: rotated.Add(-5 * time.Minute), NotAfter: rotated.AddDate(10, 0, 0), MaxPathLen: 1, PEM: "-----BEGIN CERTIFICATE-----\n(new root)\n-----END CERTIFICATE-----\n"},
		Rotated: rotated, RotatedBy: "admin:ada",
		Previous: []wire.PreviousCA{{
			CAView: wire.CAView{Fingerprint: "9c12bd95ee1932c7862b7fbeae873f3c7640a9350404ed5319de6989401b97ca", Subject: "CN=Rollcall cluster CA",
				Serial: "01", NotBefore: ago(400 * 24 * time.Hour), NotAfter: ago(400*24*time.Hour).AddDate(10, 0, 0), MaxPathLen: 1, PEM: "-----BEGIN CERTIFICATE-----\n(old root)\n-----END CERTIFICATE-----\n"},
			TrustedUntil: rotated.Add(720 * time.Hour),
		}},
		BundlePEM: "-----BEGIN CERTIFICATE-----\n(new root)\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\n(old root)\n-----END CERTIFICATE-----\n",
	}, nil
}

func (f *fleet) Access(context.Context) (wire.CertList, wire.AuditLog, error) {
	return wire.CertList{Certificates: []wire.CertView{
			{Serial: "5d1f0c2a9e", Kind: "admin", Name: "ada", NotAfter: ago(-365 * 24 * time.Hour), Issued: ago(time.Hour), IssuedBy: "token", State: "valid"},
			{Serial: "77ab01", Kind: "admin", Name: "bob", NotAfter: ago(-300 * 24 * time.Hour), Issued: ago(48 * time.Hour), IssuedBy: "token", Revoked: ago(2 * time.Hour), RevokedBy: "admin:ada", State: "revoked"},
			{Serial: "c0ffee", Kind: "node", Name: "node-1", NotAfter: ago(-200 * 24 * time.Hour), Issued: ago(100 * 24 * time.Hour), IssuedBy: "node-1", State: "valid"},
		}}, wire.AuditLog{Events: []wire.AuditEvent{
			{Seq: 2, Index: 90, Time: ago(2 * time.Hour), Actor: "admin:ada", From: "10.0.0.9", Node: "node-1", Action: "DELETE /api/v1/admin-certs/:name", Target: "/api/v1/admin-certs/bob", Command: "cert-revoke", Outcome: "ok"},
			{Seq: 1, Index: 80, Time: ago(3 * time.Hour), Actor: "token", From: "127.0.0.1", Node: "node-1", Action: "POST /api/v1/admin-certs", Target: "/api/v1/admin-certs", Command: "cert-put", Outcome: "ok"},
		}}, nil
}

func (f *fleet) Doctor(context.Context) (wire.DoctorReport, error) {
	return wire.DoctorReport{Node: "node-1", Time: ago(0), OK: false, Checks: []wire.DoctorCheck{
		{Name: "raft", Status: wire.DoctorOK, Message: "leader node-1, term 4; this node Leader, 0 entries behind"},
		{Name: "members", Status: wire.DoctorOK, Message: "3 members answer: node-1, node-2, node-3"},
		{Name: "certificates", Status: wire.DoctorWarn, Message: "node.pem (node-1) ends 2027-01-02, in 29 days", Fix: "it renews itself a week before; check the node-cert part if it does not"},
		{Name: "interfaces", Status: wire.DoctorOK, Message: "VLAN mgmt/0: DHCP on eth1"},
		{Name: "foreign-dhcp", Status: wire.DoctorFail, Message: "VLAN mgmt/0 on eth1: another DHCP server hands out addresses beside Rollcall: 10.0.0.254 (offered 10.0.0.77)",
			Fix: "stop the other server on this VLAN, or make the VLAN proxy mode so Rollcall only adds the boot: rollcall vlan set … -dhcp proxy"},
	}}, nil
}
