package wire

import "time"

// Interface layouts and a machine's network (the reference's "Machine
// interfaces").

// ---- layouts

// LayoutView is an interface layout: GET /api/v1/layouts/{name}, and each
// entry of the list.
type LayoutView struct {
	Name string `json:"name"`
	// JSON is the layout's file as it was saved (rollcall layout show
	// prints it as it was written).
	JSON    string    `json:"json"`
	Comment string    `json:"comment,omitempty"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"`
}

// LayoutList is GET /api/v1/layouts, by name.
type LayoutList struct {
	Index   uint64       `json:"index"`
	Layouts []LayoutView `json:"layouts"`
}

// LayoutDoc is the body of POST and PUT /api/v1/layouts/{name}: the layout
// itself, in the reference's shape (?comment= gives it a comment). The
// node reads it strictly: an unknown field, a field in another case or
// given twice, or anything after the object is refused with the reason.
type LayoutDoc struct {
	Interfaces []LayoutInterface `json:"interfaces"`
}

// LayoutInterface is one interface of a layout: physical (select), bond
// (name, members, bond) or vlan (parent, vid).
type LayoutInterface struct {
	Type    string       `json:"type"` // physical, bond or vlan
	Name    string       `json:"name,omitempty"`
	Select  string       `json:"select,omitempty"`  // boot, name:X, mac:X, fastest:1, ib:N, all
	Members []string     `json:"members,omitempty"` // selectors; fastest:N chooses N
	Bond    *LayoutBond  `json:"bond,omitempty"`
	Parent  string       `json:"parent,omitempty"`
	VID     int          `json:"vid,omitempty"`
	MTU     int          `json:"mtu,omitempty"`
	Links   []LayoutLink `json:"links,omitempty"`
}

// LayoutBond is a bond's mode (802.3ad by default) and options.
type LayoutBond struct {
	Mode               string `json:"mode,omitempty"`
	LACPRate           string `json:"lacp_rate,omitempty"`
	MIIMonitor         int    `json:"mii_monitor_interval,omitempty"`
	TransmitHashPolicy string `json:"transmit_hash_policy,omitempty"`
	MinLinks           int    `json:"min_links,omitempty"`
	UpDelay            int    `json:"up_delay,omitempty"`
	DownDelay          int    `json:"down_delay,omitempty"`
}

// LayoutLink is one address configuration of an interface.
type LayoutLink struct {
	Subnet         string `json:"subnet,omitempty"` // a CIDR, a subnet's name, or boot
	Mode           string `json:"mode"`             // auto, static, dhcp or link_up
	Address        string `json:"address,omitempty"`
	DefaultGateway bool   `json:"default_gateway,omitempty"`
}

// ---- a machine's network

// NetworkRequest is PUT /api/v1/machines/{id}/network. A field left out
// (null) is left as it is.
type NetworkRequest struct {
	// Layout is the machine's layout from now on; "" clears it (its tags'
	// layout, else the default, applies).
	Layout *string `json:"layout"`
	// Static pins addresses to interfaces, IFACE → ADDR (several
	// addresses of one interface separated by commas: "10.50.0.60,
	// fd00:50::60"): the machine's pins from now on, held in IPAM at once
	// and used by the interface's auto link on each address's subnet. {}
	// releases them all.
	Static map[string]string `json:"static"`
}

// NetworkView is a machine's own network settings: the PUT's answer.
type NetworkView struct {
	Machine string `json:"machine"`
	// Layout is the machine's own layout, "" when it has none.
	Layout string            `json:"layout"`
	Static map[string]string `json:"static"`
	// PlanError says why the machine has no plan with these settings
	// (GET …/network-plan answers 422 with it); empty when it has one or
	// no inventory to make one from yet.
	PlanError string `json:"plan_error,omitempty"`
	Index     uint64 `json:"index"`
}

// NetworkPlan is GET /api/v1/machines/{id}/network-plan: the machine's
// layout resolved against its inventory and the network model, a preview
// (nothing is allocated).
type NetworkPlan struct {
	Machine string `json:"machine"`
	Layout  string `json:"layout,omitempty"` // "" for the default
	// Source is where the layout comes from: machine (its own), tag (Tag
	// names it) or default; Why says it in words.
	Source    string        `json:"source"`
	Tag       string        `json:"tag,omitempty"`
	Why       string        `json:"why"`
	Choices   []PlanChoice  `json:"choices"`
	Addresses []PlanAddress `json:"addresses"`
	Notes     []string      `json:"notes"`
	// NetworkConfig is the cloud-init network-config (version 2) a
	// deployment writes beside the seed; UdevRules the rules it writes
	// to UdevRulesPath.
	NetworkConfig string `json:"network_config"`
	UdevRules     string `json:"udev_rules"`
	UdevRulesPath string `json:"udev_rules_path"`
	Index         uint64 `json:"index"`
}

// PlanChoice is one NIC a selector chose, and why.
type PlanChoice struct {
	Interface string `json:"interface"`
	Selector  string `json:"selector"`
	NIC       string `json:"nic"`
	MAC       string `json:"mac"`
	Reason    string `json:"reason"`
}

// PlanAddress is an address the plan gives an interface.
type PlanAddress struct {
	Interface string `json:"interface"`
	Address   string `json:"address"` // with its subnet's prefix length: 10.50.0.60/24
	Subnet    string `json:"subnet"`
	How       string `json:"how"` // auto, static or pinned
	// Held: the machine holds it already (a pin, an earlier deployment's).
	Held   bool   `json:"held,omitempty"`
	Reason string `json:"reason"`
}
