package wire

import (
	"encoding/json"
	"time"

	"github.com/rollcall/rollcall/store/inventory"
)

// Machine states, the values of MachineView.State and of ?state= (the
// store's lifecycle; appliance's wire test checks that the two agree).
const (
	StateNew           = "new"
	StateCommissioning = "commissioning"
	StateReady         = "ready"
	StateDeploying     = "deploying"
	StateDeployed      = "deployed"
	StateDeployFailed  = "deploy-failed"
	StateReleasing     = "releasing"
	StateStateless     = "stateless"
	StateBooted        = "booted"
)

// States are the machine states in lifecycle order.
var States = []string{StateNew, StateCommissioning, StateReady, StateDeploying, StateDeployed, StateDeployFailed, StateReleasing, StateStateless, StateBooted}

// EnlistRequest is POST /api/v1/enlist: a commissioning agent's first
// contact, before it has an inventory. The node finds the machine by UUID,
// serial or MAC, or creates it, and moves it to commissioning.
type EnlistRequest struct {
	SystemUUID string `json:"system_uuid"`
	Serial     string `json:"serial"`
	// BootMAC, with a boot token, must be the MAC the token was handed to
	// (empty: that MAC).
	BootMAC string   `json:"boot_mac"`
	MACs    []string `json:"macs"` // every NIC's, at most 512
}

// EnlistReply tells the agent which machine it is and what to do.
type EnlistReply struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Index uint64 `json:"index"` // the Raft index of the enlist
}

// CommissionReply answers an inventory upload (POST /api/v1/commission,
// whose body is an inventory.Report).
type CommissionReply struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Index uint64 `json:"index"`
}

// BMCHintReply is GET /api/v1/bmc-hint: the one answer that carries a BMC
// password, to the agent only, because the agent must verify the hint out of
// band and then report it (the reference's bmc_hints).
type BMCHintReply struct {
	MAC      string `json:"mac"`
	Driver   string `json:"driver"`
	Address  string `json:"address"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
}

// CreateMachineRequest is POST /api/v1/machines: a machine added by hand, in
// state new. It needs a name or a MAC.
type CreateMachineRequest struct {
	Name string   `json:"name"` // a DNS label
	MAC  string   `json:"mac"`  // the boot MAC: listed first
	MACs []string `json:"macs"`
}

// RenameMachineRequest is POST /api/v1/machines/{id}/rename: the
// machine's new name, a DNS label no other machine holds.
type RenameMachineRequest struct {
	Name string `json:"name"`
}

// BMCView is a machine's BMC as the API shows it: never the password, only
// whether one is sealed on record.
type BMCView struct {
	Driver      string            `json:"driver,omitempty"`
	Address     string            `json:"address,omitempty"`
	MAC         string            `json:"mac,omitempty"`
	User        string            `json:"user,omitempty"`
	HasPassword bool              `json:"has_password"`
	Source      string            `json:"source,omitempty"` // in-band, operator, …
	Settings    map[string]string `json:"settings,omitempty"`
	Errors      []string          `json:"errors,omitempty"` // what the agent or a probe found wrong
	UpdatedAt   time.Time         `json:"updated_at,omitzero"`
}

// MachineView is a machine record as the API shows it (lists and show).
type MachineView struct {
	ID         string   `json:"id"`
	Name       string   `json:"name,omitempty"`
	State      string   `json:"state"` // one of States
	SystemUUID string   `json:"system_uuid,omitempty"`
	Serial     string   `json:"serial,omitempty"`
	MACs       []string `json:"macs,omitempty"`
	BootMAC    string   `json:"boot_mac,omitempty"`
	// IdentityKey is how the machine is recognised: uuid:…, serial:… or
	// mac:… (inventory.Key); empty for a machine added by hand.
	IdentityKey  string            `json:"identity_key,omitempty"`
	IPs          []string          `json:"ips,omitempty"` // as the agent reported them
	Summary      inventory.Summary `json:"summary,omitzero"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	LastSeen     time.Time         `json:"last_seen,omitzero"`
	Commissioned time.Time         `json:"commissioned,omitzero"`
	// Layout is the interface layout an operator gave the machine (net
	// set -layout); GET …/network-plan says which one applies and why.
	Layout string `json:"layout,omitempty"`
	// Index is the Raft index of the command that last changed the record.
	Index uint64   `json:"index"`
	BMC   *BMCView `json:"bmc,omitempty"`
	// Tags are the tags an operator gave it; AutoTags those whose rule
	// matched it (both sorted). A machine carries both.
	Tags     []string `json:"tags,omitempty"`
	AutoTags []string `json:"auto_tags,omitempty"`
	Location Location `json:"location,omitzero"`
}

// MachineDetail is GET /api/v1/machines/{id}: the record, the inventory as
// the agent sent it (without the BMC password) and the history.
type MachineDetail struct {
	MachineView
	Inventory json.RawMessage `json:"inventory,omitempty"` // an inventory.Report
	Events    []Event         `json:"events"`
	// Deployment is the machine's latest deploy job, while it is
	// deploying, deployed, failed or releasing.
	Deployment *Deployment `json:"deployment,omitempty"`
}

// MachineList is GET /api/v1/machines.
type MachineList struct {
	Index    uint64        `json:"index"` // the machines table's change index
	Machines []MachineView `json:"machines"`
	// Next is the ?after= of the next page when ?limit= cut the list.
	Next string `json:"next,omitempty"`
}

// Event is one entry in a machine's history.
type Event struct {
	Machine string    `json:"machine"`
	Index   uint64    `json:"index"` // the Raft index that recorded it
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
}

// EventList is GET /api/v1/machines/{id}/events, oldest first.
type EventList struct {
	Events []Event `json:"events"`
}

// RecentEvents is GET /api/v1/events: the fleet's newest events, newest
// first.
type RecentEvents struct {
	Events []Event `json:"events"`
	Index  uint64  `json:"index"` // the machines table's change index
}

// Deleted answers a DELETE: what is gone (an ID, a name, an address).
type Deleted struct {
	Deleted string `json:"deleted"`
}
