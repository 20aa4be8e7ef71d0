package raftfsm

import (
	"net/netip"
	"time"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// Bodies: the records that commands carry, written out as the log carries
// them. A command never embeds a store record: a field added to the record
// would change the log format unnoticed, and a node of the older version
// would refuse the entry (decoding is strict). Each body lists its fields
// with the JSON names, order and omitempty the log has always had (the
// goldens in testdata/golden pin the bytes). Proposers convert a record
// with its XBody function; apply converts back with record().
// TestBodiesDecideEveryField fails when a record gains a field its body has
// not decided on: carry it (with a new body version) or list it as left out
// of the log, with the reason.
//
// Several records have an Index: the log has always carried it, but the
// store stamps its own when it writes the record, so the value a proposer
// sends means nothing.

// ClusterIdentity is store.ClusterIdentity in a ClusterInit.
type ClusterIdentity struct {
	CACertPEM        string    `json:"ca_cert_pem"`
	SealedCAKey      []byte    `json:"sealed_ca_key"`
	AdminTokenHash   string    `json:"admin_token_hash"`
	SealedAdminToken []byte    `json:"sealed_admin_token,omitempty"`
	AgentTokenHash   string    `json:"agent_token_hash,omitempty"`
	SealedAgentToken []byte    `json:"sealed_agent_token,omitempty"`
	Created          time.Time `json:"created"`
}

// ClusterIdentityBody is the body of a cluster identity.
func ClusterIdentityBody(id store.ClusterIdentity) ClusterIdentity {
	return ClusterIdentity{
		CACertPEM: id.CACertPEM, SealedCAKey: id.SealedCAKey, AdminTokenHash: id.AdminTokenHash,
		SealedAdminToken: id.SealedAdminToken, AgentTokenHash: id.AgentTokenHash, SealedAgentToken: id.SealedAgentToken,
		Created: id.Created,
	}
}

func (b ClusterIdentity) record() store.ClusterIdentity {
	return store.ClusterIdentity{
		CACertPEM: b.CACertPEM, SealedCAKey: b.SealedCAKey, AdminTokenHash: b.AdminTokenHash,
		SealedAdminToken: b.SealedAdminToken, AgentTokenHash: b.AgentTokenHash, SealedAgentToken: b.SealedAgentToken,
		Created: b.Created,
	}
}

// Node is store.Node in a NodePut.
type Node struct {
	Name     string    `json:"name"`
	RaftAddr string    `json:"raft_addr"`
	HTTPAddr string    `json:"http_addr,omitempty"`
	Joined   time.Time `json:"joined"`
	Index    uint64    `json:"index"`
}

// NodeBody is the body of a node record.
func NodeBody(n store.Node) Node {
	return Node{Name: n.Name, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Joined: n.Joined, Index: n.Index}
}

func (b Node) record() store.Node {
	return store.Node{Name: b.Name, RaftAddr: b.RaftAddr, HTTPAddr: b.HTTPAddr, Joined: b.Joined, Index: b.Index}
}

// JoinCode is store.JoinCode in a JoinCodeAdd.
type JoinCode struct {
	SecretHash string    `json:"secret_hash"`
	Expires    time.Time `json:"expires"`
	CreatedBy  string    `json:"created_by,omitempty"`
	Created    time.Time `json:"created"`
	UsedBy     string    `json:"used_by,omitempty"`
	Used       time.Time `json:"used,omitzero"`
}

// JoinCodeBody is the body of a join code record.
func JoinCodeBody(j store.JoinCode) JoinCode {
	return JoinCode{SecretHash: j.SecretHash, Expires: j.Expires, CreatedBy: j.CreatedBy, Created: j.Created, UsedBy: j.UsedBy, Used: j.Used}
}

func (b JoinCode) record() store.JoinCode {
	return store.JoinCode{SecretHash: b.SecretHash, Expires: b.Expires, CreatedBy: b.CreatedBy, Created: b.Created, UsedBy: b.UsedBy, Used: b.Used}
}

// ImageFile is store.ImageFile in an ImagePut and an ImageHave.
type ImageFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ImageFilesBody is the body of an image's files.
func ImageFilesBody(fs []store.ImageFile) []ImageFile { return convertAll(fs, imageFileBody) }

func imageFileBody(f store.ImageFile) ImageFile {
	return ImageFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256}
}

func (b ImageFile) record() store.ImageFile {
	return store.ImageFile{Name: b.Name, Size: b.Size, SHA256: b.SHA256}
}

// Image is store.Image in an ImagePut.
type Image struct {
	Name    string      `json:"name"`
	Files   []ImageFile `json:"files"`
	Nodes   []string    `json:"nodes"`
	Created time.Time   `json:"created"`
	Index   uint64      `json:"index"`
}

// ImageBody is the body of an image record.
func ImageBody(im store.Image) Image {
	return Image{Name: im.Name, Files: ImageFilesBody(im.Files), Nodes: im.Nodes, Created: im.Created, Index: im.Index}
}

func (b Image) record() store.Image {
	return store.Image{Name: b.Name, Files: records(b.Files), Nodes: b.Nodes, Created: b.Created, Index: b.Index}
}

// Seen is store.Seen in a LeaseBatch.
type Seen struct {
	MAC       string    `json:"mac"`
	Node      string    `json:"node"`
	Interface string    `json:"interface,omitempty"`
	VLAN      string    `json:"vlan,omitempty"`
	Arch      int       `json:"arch,omitempty"`
	UserClass string    `json:"user_class,omitempty"`
	Last      time.Time `json:"last"`
}

// SeenBody is the body of a DHCP server's sightings.
func SeenBody(ss []store.Seen) []Seen { return convertAll(ss, seenBody) }

func seenBody(s store.Seen) Seen {
	return Seen{MAC: s.MAC, Node: s.Node, Interface: s.Interface, VLAN: s.VLAN, Arch: s.Arch, UserClass: s.UserClass, Last: s.Last}
}

func (b Seen) record() store.Seen {
	return store.Seen{MAC: b.MAC, Node: b.Node, Interface: b.Interface, VLAN: b.VLAN, Arch: b.Arch, UserClass: b.UserClass, Last: b.Last}
}

// Event is store.Event in a MachineEvent and a JobFinish.
type Event struct {
	Machine string    `json:"machine"`
	Index   uint64    `json:"index"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
}

// EventBody is the body of a machine event.
func EventBody(e store.Event) Event {
	return Event{Machine: e.Machine, Index: e.Index, Time: e.Time, Kind: e.Kind, Message: e.Message}
}

func (b Event) record() store.Event {
	return store.Event{Machine: b.Machine, Index: b.Index, Time: b.Time, Kind: b.Kind, Message: b.Message}
}

// BMC is store.BMC in a Commission and a BMCSet: the password already
// sealed.
type BMC struct {
	Driver         string            `json:"driver,omitempty"`
	Address        string            `json:"address,omitempty"`
	MAC            string            `json:"mac,omitempty"`
	User           string            `json:"user,omitempty"`
	PasswordSealed []byte            `json:"password_sealed,omitempty"`
	PasswordAAD    string            `json:"password_aad,omitempty"`
	CertSHA256     string            `json:"cert_sha256,omitempty"`
	Operator       bool              `json:"operator,omitempty"`
	Source         string            `json:"source,omitempty"`
	Settings       map[string]string `json:"settings,omitempty"`
	Errors         []string          `json:"errors,omitempty"`
	UpdatedAt      time.Time         `json:"updated_at,omitzero"`
}

// BMCBody is the body of a BMC record.
func BMCBody(b store.BMC) BMC {
	return BMC{
		Driver: b.Driver, Address: b.Address, MAC: b.MAC, User: b.User, PasswordSealed: b.PasswordSealed, PasswordAAD: b.PasswordAAD,
		CertSHA256: b.CertSHA256, Operator: b.Operator, Source: b.Source, Settings: b.Settings, Errors: b.Errors, UpdatedAt: b.UpdatedAt,
	}
}

func (b BMC) record() store.BMC {
	return store.BMC{
		Driver: b.Driver, Address: b.Address, MAC: b.MAC, User: b.User, PasswordSealed: b.PasswordSealed, PasswordAAD: b.PasswordAAD,
		CertSHA256: b.CertSHA256, Operator: b.Operator, Source: b.Source, Settings: b.Settings, Errors: b.Errors, UpdatedAt: b.UpdatedAt,
	}
}

// Summary is inventory.Summary in a Commission.
type Summary struct {
	Manufacturer string   `json:"manufacturer,omitempty"`
	Product      string   `json:"product,omitempty"`
	CPUModel     string   `json:"cpu_model,omitempty"`
	Sockets      int      `json:"sockets,omitempty"`
	Cores        int      `json:"cores,omitempty"`
	Threads      int      `json:"threads,omitempty"`
	MemoryBytes  int64    `json:"memory_bytes,omitempty"`
	DIMMs        int      `json:"dimms,omitempty"`
	Disks        int      `json:"disks,omitempty"`
	DiskBytes    int64    `json:"disk_bytes,omitempty"`
	NVMe         int      `json:"nvme,omitempty"`
	NICs         int      `json:"nics,omitempty"`
	GPUs         int      `json:"gpus,omitempty"`
	GPUModels    []string `json:"gpu_models,omitempty"`
	IBHCAs       int      `json:"ib_hcas,omitempty"`
	TPM          string   `json:"tpm,omitempty"`
}

// SummaryBody is the body of an inventory summary.
func SummaryBody(s inventory.Summary) Summary {
	return Summary{
		Manufacturer: s.Manufacturer, Product: s.Product, CPUModel: s.CPUModel, Sockets: s.Sockets, Cores: s.Cores,
		Threads: s.Threads, MemoryBytes: s.MemoryBytes, DIMMs: s.DIMMs, Disks: s.Disks, DiskBytes: s.DiskBytes,
		NVMe: s.NVMe, NICs: s.NICs, GPUs: s.GPUs, GPUModels: s.GPUModels, IBHCAs: s.IBHCAs, TPM: s.TPM,
	}
}

func (b Summary) record() inventory.Summary {
	return inventory.Summary{
		Manufacturer: b.Manufacturer, Product: b.Product, CPUModel: b.CPUModel, Sockets: b.Sockets, Cores: b.Cores,
		Threads: b.Threads, MemoryBytes: b.MemoryBytes, DIMMs: b.DIMMs, Disks: b.Disks, DiskBytes: b.DiskBytes,
		NVMe: b.NVMe, NICs: b.NICs, GPUs: b.GPUs, GPUModels: b.GPUModels, IBHCAs: b.IBHCAs, TPM: b.TPM,
	}
}

// Fabric is store.Fabric in a FabricPut.
type Fabric struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"`
}

// FabricBody is the body of a fabric record.
func FabricBody(f store.Fabric) Fabric {
	return Fabric{Name: f.Name, Kind: f.Kind, Created: f.Created, Index: f.Index}
}

func (b Fabric) record() store.Fabric {
	return store.Fabric{Name: b.Name, Kind: b.Kind, Created: b.Created, Index: b.Index}
}

// VLANServer is store.VLANServer in a VLANPut.
type VLANServer struct {
	Node  string `json:"node"`
	Iface string `json:"iface"`
}

func vlanServerBody(s store.VLANServer) VLANServer { return VLANServer{Node: s.Node, Iface: s.Iface} }

func (b VLANServer) record() store.VLANServer { return store.VLANServer{Node: b.Node, Iface: b.Iface} }

// VLAN is store.VLAN in a VLANPut.
type VLAN struct {
	Fabric     string       `json:"fabric"`
	VID        int          `json:"vid"`
	MTU        int          `json:"mtu"`
	DHCP       string       `json:"dhcp"`
	Servers    []VLANServer `json:"servers,omitempty"`
	BootLoader string       `json:"boot_loader,omitempty"`
	Implicit   bool         `json:"implicit,omitempty"`
	Created    time.Time    `json:"created"`
	Index      uint64       `json:"index"`
}

// VLANBody is the body of a VLAN record.
func VLANBody(v store.VLAN) VLAN {
	return VLAN{
		Fabric: v.Fabric, VID: v.VID, MTU: v.MTU, DHCP: v.DHCP,
		Servers:    convertAll(v.Servers, vlanServerBody),
		BootLoader: v.BootLoader, Implicit: v.Implicit, Created: v.Created, Index: v.Index,
	}
}

func (b VLAN) record() store.VLAN {
	return store.VLAN{
		Fabric: b.Fabric, VID: b.VID, MTU: b.MTU, DHCP: b.DHCP,
		Servers:    records(b.Servers),
		BootLoader: b.BootLoader, Implicit: b.Implicit, Created: b.Created, Index: b.Index,
	}
}

// Subnet is store.Subnet in a SubnetPut.
type Subnet struct {
	CIDR    netip.Prefix `json:"cidr"`
	Name    string       `json:"name,omitempty"`
	Fabric  string       `json:"fabric"`
	VID     int          `json:"vid"`
	Purpose string       `json:"purpose"`
	Gateway netip.Addr   `json:"gateway,omitzero"`
	DNS     []netip.Addr `json:"dns,omitempty"`
	Domain  string       `json:"domain,omitempty"`
	Created time.Time    `json:"created"`
	Index   uint64       `json:"index"`
}

// SubnetBody is the body of a subnet record.
func SubnetBody(s store.Subnet) Subnet {
	return Subnet{
		CIDR: s.CIDR, Name: s.Name, Fabric: s.Fabric, VID: s.VID, Purpose: s.Purpose, Gateway: s.Gateway,
		DNS: s.DNS, Domain: s.Domain, Created: s.Created, Index: s.Index,
	}
}

func (b Subnet) record() store.Subnet {
	return store.Subnet{
		CIDR: b.CIDR, Name: b.Name, Fabric: b.Fabric, VID: b.VID, Purpose: b.Purpose, Gateway: b.Gateway,
		DNS: b.DNS, Domain: b.Domain, Created: b.Created, Index: b.Index,
	}
}

// Range is store.Range in a RangePut.
type Range struct {
	Subnet  netip.Prefix `json:"subnet"`
	Kind    string       `json:"kind"`
	First   netip.Addr   `json:"first"`
	Last    netip.Addr   `json:"last"`
	Comment string       `json:"comment,omitempty"`
	Created time.Time    `json:"created"`
	Index   uint64       `json:"index"`
}

// RangeBody is the body of a range record.
func RangeBody(r store.Range) Range {
	return Range{Subnet: r.Subnet, Kind: r.Kind, First: r.First, Last: r.Last, Comment: r.Comment, Created: r.Created, Index: r.Index}
}

func (b Range) record() store.Range {
	return store.Range{Subnet: b.Subnet, Kind: b.Kind, First: b.First, Last: b.Last, Comment: b.Comment, Created: b.Created, Index: b.Index}
}

// Address is store.Address in an AddressClaim.
type Address struct {
	IP        netip.Addr   `json:"ip"`
	Subnet    netip.Prefix `json:"subnet"`
	How       string       `json:"how"`
	Machine   string       `json:"machine,omitempty"`
	Interface string       `json:"interface,omitempty"`
	Name      string       `json:"name,omitempty"`
	Created   time.Time    `json:"created"`
	Index     uint64       `json:"index"`
}

// AddressBody is the body of an address record.
func AddressBody(a store.Address) Address {
	return Address{IP: a.IP, Subnet: a.Subnet, How: a.How, Machine: a.Machine, Interface: a.Interface, Name: a.Name, Created: a.Created, Index: a.Index}
}

func (b Address) record() store.Address {
	return store.Address{IP: b.IP, Subnet: b.Subnet, How: b.How, Machine: b.Machine, Interface: b.Interface, Name: b.Name, Created: b.Created, Index: b.Index}
}

// Job is store.Job in a JobEnqueue. Only the request fields matter there:
// the state machine resets the run fields (Done, StartedBy, Attempts) and
// stamps Created, but the log has always carried every field.
type Job struct {
	ID           string    `json:"id"`
	Machine      string    `json:"machine"`
	Kind         string    `json:"kind"`
	Arg          string    `json:"arg,omitempty"`
	Persistent   bool      `json:"persistent,omitempty"`
	UEFI         bool      `json:"uefi,omitempty"`
	Runner       string    `json:"runner,omitempty"`
	Created      time.Time `json:"created"`
	Requester    string    `json:"requester,omitempty"`
	StartedBy    string    `json:"started_by,omitempty"`
	Started      time.Time `json:"started,omitzero"`
	StartedUntil time.Time `json:"started_until,omitzero"`
	Attempts     int       `json:"attempts,omitempty"`
	Done         bool      `json:"done"`
	Finished     time.Time `json:"finished,omitzero"`
	Result       string    `json:"result,omitempty"`
	Error        string    `json:"error,omitempty"`
	Index        uint64    `json:"index"`
}

// JobBody is the body of a job record.
func JobBody(j store.Job) Job {
	return Job{
		ID: j.ID, Machine: j.Machine, Kind: j.Kind, Arg: j.Arg, Persistent: j.Persistent, UEFI: j.UEFI, Runner: j.Runner,
		Created: j.Created, Requester: j.Requester, StartedBy: j.StartedBy, Started: j.Started, StartedUntil: j.StartedUntil,
		Attempts: j.Attempts, Done: j.Done, Finished: j.Finished, Result: j.Result, Error: j.Error, Index: j.Index,
	}
}

func (b Job) record() store.Job {
	return store.Job{
		ID: b.ID, Machine: b.Machine, Kind: b.Kind, Arg: b.Arg, Persistent: b.Persistent, UEFI: b.UEFI, Runner: b.Runner,
		Created: b.Created, Requester: b.Requester, StartedBy: b.StartedBy, Started: b.Started, StartedUntil: b.StartedUntil,
		Attempts: b.Attempts, Done: b.Done, Finished: b.Finished, Result: b.Result, Error: b.Error, Index: b.Index,
	}
}

// Layout is store.Layout in a LayoutPut.
type Layout struct {
	Name    string    `json:"name"`
	JSON    string    `json:"json"`
	Comment string    `json:"comment,omitempty"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"`
}

// LayoutBody is the body of a layout record.
func LayoutBody(l store.Layout) Layout {
	return Layout{Name: l.Name, JSON: l.JSON, Comment: l.Comment, Created: l.Created, Index: l.Index}
}

func (b Layout) record() store.Layout {
	return store.Layout{Name: b.Name, JSON: b.JSON, Comment: b.Comment, Created: b.Created, Index: b.Index}
}

// Tag is store.Tag in a TagPut: what an operator saves. The state machine
// stamps the times and the rule index.
type Tag struct {
	Name        string   `json:"name"`
	Match       string   `json:"match,omitempty"`
	CloudConfig string   `json:"cloud_config,omitempty"`
	Overlays    []string `json:"overlays,omitempty"`
	Layout      string   `json:"layout,omitempty"`
	Comment     string   `json:"comment,omitempty"`
}

// TagBody is the body of a tag definition.
func TagBody(t store.Tag) Tag {
	return Tag{Name: t.Name, Match: t.Match, CloudConfig: t.CloudConfig, Overlays: t.Overlays, Layout: t.Layout, Comment: t.Comment}
}

func (b Tag) record() store.Tag {
	return store.Tag{Name: b.Name, Match: b.Match, CloudConfig: b.CloudConfig, Overlays: b.Overlays, Layout: b.Layout, Comment: b.Comment}
}

// Location is store.Location in a LocationSet.
type Location struct {
	Building string `json:"building,omitempty"`
	Room     string `json:"room,omitempty"`
	Rack     string `json:"rack,omitempty"`
	Unit     int    `json:"unit,omitempty"`
	Height   int    `json:"height,omitempty"`
	AssetTag string `json:"asset_tag,omitempty"`
}

// LocationBody is the body of a machine's location.
func LocationBody(l store.Location) Location {
	return Location{Building: l.Building, Room: l.Room, Rack: l.Rack, Unit: l.Unit, Height: l.Height, AssetTag: l.AssetTag}
}

func (b Location) record() store.Location {
	return store.Location{Building: b.Building, Room: b.Room, Rack: b.Rack, Unit: b.Unit, Height: b.Height, AssetTag: b.AssetTag}
}

// Rack is store.Rack in a RackPut. The state machine stamps its creation
// time.
type Rack struct {
	Name     string `json:"name"`
	Building string `json:"building,omitempty"`
	Room     string `json:"room,omitempty"`
	Height   int    `json:"height"`
}

// RackBody is the body of a rack record.
func RackBody(r store.Rack) Rack {
	return Rack{Name: r.Name, Building: r.Building, Room: r.Room, Height: r.Height}
}

func (b Rack) record() store.Rack {
	return store.Rack{Name: b.Name, Building: b.Building, Room: b.Room, Height: b.Height}
}

// records converts bodies back to their records.
func records[B interface{ record() R }, R any](bs []B) []R {
	return convertAll(bs, B.record)
}

// convertAll converts each element, keeping nil nil: a JSON body writes
// null and [] differently.
func convertAll[A, B any](in []A, f func(A) B) []B {
	if in == nil {
		return nil
	}
	out := make([]B, len(in))
	for i, a := range in {
		out[i] = f(a)
	}
	return out
}
