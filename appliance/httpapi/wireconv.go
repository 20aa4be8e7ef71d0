package httpapi

import (
	"crypto/x509"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport"
)

// The conversions from records to wire types write every field by name: a
// field added to a record reaches clients only when it is written here too
// (wire_test.go fails until each field is carried or left out on purpose).

// convert converts each element; nil stays nil and empty stays empty, so
// the JSON (null or []) is what the record's would be.
func convert[R, W any](in []R, f func(R) W) []W {
	if in == nil {
		return nil
	}
	out := make([]W, len(in))
	for i, r := range in {
		out[i] = f(r)
	}
	return out
}

func wireMachine(m store.Machine) wire.MachineView {
	v := wire.MachineView{
		ID: m.ID, Name: m.Name, State: m.State, SystemUUID: m.SystemUUID, Serial: m.Serial,
		MACs: m.MACs, BootMAC: m.BootMAC, IdentityKey: m.IdentityKey, IPs: m.IPs, Summary: m.Summary,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, LastSeen: m.LastSeen, Commissioned: m.Commissioned, Layout: m.Layout, Index: m.Index,
		Tags: m.Tags, AutoTags: m.AutoTags, Location: wireLocation(m.Location),
	}
	if m.BMC != nil {
		b := wireBMC(*m.BMC)
		v.BMC = &b
	}
	return v
}

// wireBMC shows a BMC without its secret: only whether a password is sealed.
func wireBMC(b store.BMC) wire.BMCView {
	return wire.BMCView{
		Driver: b.Driver, Address: b.Address, MAC: b.MAC, User: b.User, HasPassword: len(b.PasswordSealed) > 0,
		Source: b.Source, Settings: b.Settings, Errors: b.Errors, UpdatedAt: b.UpdatedAt,
	}
}

func wireEvent(e store.Event) wire.Event {
	return wire.Event{Machine: e.Machine, Index: e.Index, Time: e.Time, Kind: e.Kind, Message: e.Message}
}

func wireJob(j store.Job) wire.Job {
	return wire.Job{
		ID: j.ID, Machine: j.Machine, Kind: j.Kind, Arg: j.Arg, Persistent: j.Persistent, UEFI: j.UEFI,
		Runner: j.Runner, Created: j.Created, Requester: j.Requester, StartedBy: j.StartedBy, Started: j.Started,
		StartedUntil: j.StartedUntil, Attempts: j.Attempts, Done: j.Done, Finished: j.Finished,
		Result: j.Result, Error: j.Error, Index: j.Index,
	}
}

func wireDriver(d power.DriverInfo) wire.Driver {
	return wire.Driver{Name: d.Name, Description: d.Description}
}

func wireImageFile(f store.ImageFile) wire.ImageFile {
	return wire.ImageFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256}
}

func storeImageFile(f wire.ImageFile) store.ImageFile {
	return store.ImageFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256}
}

func wireImage(im store.Image) wire.Image {
	return wire.Image{Name: im.Name, Files: convert(im.Files, wireImageFile), Nodes: im.Nodes, Created: im.Created, Index: im.Index}
}

func wireFabric(f store.Fabric) wire.Fabric {
	return wire.Fabric{Name: f.Name, Kind: f.Kind, Created: f.Created, Index: f.Index}
}

func wireVLANServer(s store.VLANServer) wire.VLANServer {
	return wire.VLANServer{Node: s.Node, Iface: s.Iface}
}

func storeVLANServer(s wire.VLANServer) store.VLANServer {
	return store.VLANServer{Node: s.Node, Iface: s.Iface}
}

func wireVLAN(v store.VLAN) wire.VLAN {
	return wire.VLAN{
		Fabric: v.Fabric, VID: v.VID, MTU: v.MTU, DHCP: v.DHCP, Servers: convert(v.Servers, wireVLANServer),
		BootLoader: v.BootLoader, Implicit: v.Implicit, Created: v.Created, Index: v.Index,
	}
}

func wireSubnet(s store.Subnet) wire.Subnet {
	return wire.Subnet{
		CIDR: s.CIDR, Name: s.Name, Fabric: s.Fabric, VID: s.VID, Purpose: s.Purpose,
		Gateway: s.Gateway, DNS: s.DNS, Domain: s.Domain, Created: s.Created, Index: s.Index,
	}
}

func wireRange(r store.Range) wire.Range {
	return wire.Range{Subnet: r.Subnet, Kind: r.Kind, First: r.First, Last: r.Last, Comment: r.Comment, Created: r.Created, Index: r.Index}
}

func wireAddress(a store.Address) wire.Address {
	return wire.Address{
		IP: a.IP, Subnet: a.Subnet, How: a.How, Machine: a.Machine, Interface: a.Interface,
		Name: a.Name, Created: a.Created, Index: a.Index,
	}
}

func wireNode(n store.Node) wire.Node {
	return wire.Node{Name: n.Name, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Joined: n.Joined, Index: n.Index}
}

func wireMember(m cluster.Member) wire.Member {
	v := wire.Member{ID: m.ID, Address: m.Address, Voter: m.Voter, Leader: m.Leader, Reachable: m.Reachable, Error: m.Error}
	if m.Status != nil {
		st := wireNodeStatus(*m.Status)
		v.Status = &st
	}
	return v
}

func wireNodeStatus(s cluster.NodeStatus) wire.NodeStatus {
	return wire.NodeStatus{
		ID: s.ID, Address: s.Address, State: s.State, Leader: s.Leader, Term: s.Term, Applied: s.Applied,
		Commit: s.Commit, LastContact: s.LastContact, Diverged: s.Diverged, Parts: convert(s.Parts, wirePart), Time: s.Time,
		Build: s.Build, Gate: wireGate(s.Gate),
	}
}

func wireCA(ca *x509.Certificate, certPEM []byte) wire.CAView {
	pathLen := ca.MaxPathLen
	if !ca.MaxPathLenZero && pathLen == 0 {
		pathLen = -1
	}
	return wire.CAView{
		Fingerprint: pki.FingerprintHex(ca), Subject: ca.Subject.String(), Serial: ca.SerialNumber.Text(16),
		NotBefore: ca.NotBefore.UTC(), NotAfter: ca.NotAfter.UTC(), MaxPathLen: pathLen, PEM: string(certPEM),
	}
}

func wireGate(g *cluster.GateStatus) *wire.GateStatus {
	if g == nil {
		return nil
	}
	return &wire.GateStatus{Pending: g.Pending, Waiting: g.Waiting}
}

func wirePart(p cluster.Part) wire.Part {
	return wire.Part{Name: p.Name, State: p.State, Error: p.Error, Since: p.Since, Restarts: p.Restarts}
}

func wireExportStats(s pgexport.Stats) wire.ExportStats {
	return wire.ExportStats{Index: s.Index, Machines: s.Machines, Rows: s.Rows, Created: s.Created, Duration: s.Duration}
}

func wireExportStatus(s pgexport.Status) wire.ExportStatus {
	return wire.ExportStatus{
		Target: s.Target, Running: s.Running, Connected: s.Connected, ExportedIndex: s.ExportedIndex,
		AppliedIndex: s.AppliedIndex, LagIndexes: s.LagIndexes, LagSeconds: s.LagSeconds, Changes: s.Changes,
		FullExports: s.FullExports, LastExport: s.LastExport, LastError: s.LastError, LastErrorAt: s.LastErrorAt,
	}
}

func wireLocation(l store.Location) wire.Location {
	return wire.Location{Building: l.Building, Room: l.Room, Rack: l.Rack, Unit: l.Unit, Height: l.Height, Asset: l.AssetTag}
}

// wireTag is a tag definition; machines, its count of machines, is the
// caller's to fill.
func wireTag(t store.Tag) wire.Tag {
	return wire.Tag{
		Name: t.Name, Match: t.Match, CloudConfig: t.CloudConfig, Overlays: t.Overlays, Layout: t.Layout, Comment: t.Comment,
		Created: t.Created, Updated: t.Updated, RuleIndex: t.RuleIndex, Index: t.Index,
	}
}

// wireRack is a rack; its used units and machines are the caller's to
// count.
func wireRack(r store.Rack) wire.Rack {
	return wire.Rack{Name: r.Name, Building: r.Building, Room: r.Room, Height: r.Height, Created: r.Created, Index: r.Index}
}
