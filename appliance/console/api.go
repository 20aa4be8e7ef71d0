package console

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Source is what the console reads and does: the management API, seen from
// a client. *Client implements it over HTTP; tests use a fixed fleet.
type Source interface {
	// Machines is GET /api/v1/machines; with index > 0 it blocks until the
	// machines table moves past index or wait passes.
	Machines(ctx context.Context, index uint64, wait time.Duration) (MachineList, error)
	Machine(ctx context.Context, id string) (MachineDetail, error)
	Jobs(ctx context.Context, id string) ([]store.Job, error)
	// Events are the fleet's recent events, newest first, at most limit.
	Events(ctx context.Context, limit int) ([]store.Event, error)
	Cluster(ctx context.Context) (ClusterView, error)
	Network(ctx context.Context) (Network, error)
	Images(ctx context.Context) ([]store.Image, error)
	// Do runs one action on one machine and returns what the API said in a
	// few words (a power state, a job result).
	Do(ctx context.Context, a Action) (string, error)
}

// Clock may be implemented by a Source to fix the time the console shows
// (recorded dumps and golden tests); the console uses time.Now otherwise.
type Clock interface{ Now() time.Time }

// Action is one thing done to one machine.
type Action struct {
	Machine string // ID
	Kind    string // power, bootdev, recommission, delete
	Arg     string // power: on|off|soft|cycle|reset|status; bootdev: pxe|disk|cdrom|bios|none; recommission: "" or "now"
}

// The JSON shapes below copy the fields the console shows from the API's
// answers (appliance/api_*.go); the console may not import package
// appliance, which wires it.

// BMC is a machine's BMC as the API shows it (never the password).
type BMC struct {
	Driver      string   `json:"driver,omitempty"`
	Address     string   `json:"address,omitempty"`
	MAC         string   `json:"mac,omitempty"`
	User        string   `json:"user,omitempty"`
	HasPassword bool     `json:"has_password"`
	Source      string   `json:"source,omitempty"`
	Errors      []string `json:"errors,omitempty"`
}

// Machine is a machine record as the API lists it.
type Machine struct {
	store.Machine
	BMC *BMC `json:"bmc,omitempty"`
}

// MachineList is GET /api/v1/machines.
type MachineList struct {
	Index    uint64    `json:"index"`
	Machines []Machine `json:"machines"`
}

// MachineDetail is GET /api/v1/machines/{id}.
type MachineDetail struct {
	Machine
	Inventory json.RawMessage `json:"inventory,omitempty"`
	Events    []store.Event   `json:"events"`
}

// ClusterView is GET /api/v1/cluster.
type ClusterView struct {
	Node          string       `json:"node"`
	Leader        string       `json:"leader"`
	CAFingerprint string       `json:"ca_fingerprint"`
	Members       []Member     `json:"members"`
	Nodes         []store.Node `json:"nodes"`
}

// Member is one Raft member with the status it reported, if it answered.
type Member struct {
	ID        string        `json:"id"`
	Address   string        `json:"address"`
	Voter     bool          `json:"voter"`
	Leader    bool          `json:"leader"`
	Reachable bool          `json:"reachable"`
	Status    *MemberStatus `json:"status,omitempty"`
	Error     string        `json:"error,omitempty"`
}

// MemberStatus is a member's own view of Raft.
type MemberStatus struct {
	State       string    `json:"state"`
	Leader      string    `json:"leader"`
	Term        uint64    `json:"term"`
	Applied     uint64    `json:"applied_index"`
	Commit      uint64    `json:"commit_index"`
	LastContact time.Time `json:"last_contact,omitzero"`
	Diverged    string    `json:"diverged,omitempty"` // its store differs from the cluster's
}

// Subnet is a subnet with the number of addresses recorded in it.
type Subnet struct {
	store.Subnet
	Used int `json:"used"`
}

// Network is the network model: GET /api/v1/fabrics, /vlans and /subnets.
type Network struct {
	Fabrics []store.Fabric
	VLANs   []store.VLAN
	Subnets []Subnet
}
