package wire

import "time"

// Stateless nodes (the reference's "Stateless nodes (Warewulf-style)"):
// profiles, overlays, the nodes assigned to them, and what a node fetches
// with its node token.

// ---- profiles

// Profile is a stateless profile: GET /api/v1/profiles/{name}, and each
// entry of the list.
type Profile struct {
	Name     string   `json:"name"`
	Image    string   `json:"image"`    // a boot image (kernel, initrd, squashfs)
	Overlays []string `json:"overlays"` // applied in order, then the node's tags' overlays
	Args     string   `json:"args,omitempty"`
	// NameFormat is the node name format (node%03d); NameFirst..NameLast
	// the numbers it takes.
	NameFormat string            `json:"name_format"`
	NameFirst  int               `json:"name_first"`
	NameLast   int               `json:"name_last"`
	Subnets    []string          `json:"subnets,omitempty"` // IPAM subnets a node's addresses come from
	Vars       map[string]string `json:"vars,omitempty"`
	Created    time.Time         `json:"created"`
	Index      uint64            `json:"index"`
	// Nodes is how many machines are assigned to it.
	Nodes int `json:"nodes"`
}

// ProfileList is GET /api/v1/profiles, by name.
type ProfileList struct {
	Index    uint64    `json:"index"`
	Profiles []Profile `json:"profiles"`
}

// ProfileRequest is POST (add) and PUT (replace) /api/v1/profiles/{name}.
// A field left out takes its default (name format node%03d, numbers 1 to
// 999); rollcall profile set reads the profile, changes what it is told
// and PUTs the whole.
type ProfileRequest struct {
	Image      string            `json:"image"`
	Overlays   []string          `json:"overlays"`
	Args       string            `json:"args,omitempty"`
	NameFormat string            `json:"name_format,omitempty"`
	NameFirst  int               `json:"name_first,omitempty"`
	NameLast   int               `json:"name_last,omitempty"`
	Subnets    []string          `json:"subnets,omitempty"`
	Vars       map[string]string `json:"vars,omitempty"`
}

// ---- overlays

// OverlayFile is one file of an overlay. Path starts with system/ (applied
// once at boot, before the services) or runtime/ (refreshed every five
// minutes); a path ending in .tmpl is a Go template, rendered per node
// and written without the suffix.
type OverlayFile struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"` // permission bits (0644 when 0)
	Size int64  `json:"size"`
	// SHA256 is the file's as stored (the template's, not a rendering's).
	SHA256 string `json:"sha256,omitempty"`
	// Content is the file (base64): in a PUT, and in GET ?content=1.
	Content []byte `json:"content,omitempty"`
}

// Overlay is GET /api/v1/overlays/{name}, and each entry of the list
// (whose Files are left out).
type Overlay struct {
	Name      string        `json:"name"`
	SHA256    string        `json:"sha256"` // of the whole tree
	Size      int64         `json:"size"`
	FileCount int           `json:"file_count"`
	Templates int           `json:"templates"`
	Files     []OverlayFile `json:"files,omitempty"`
	Updated   time.Time     `json:"updated"`
	Index     uint64        `json:"index"`
	// Profiles name it.
	Profiles []string `json:"profiles,omitempty"`
}

// OverlayList is GET /api/v1/overlays, by name.
type OverlayList struct {
	Index    uint64    `json:"index"`
	Overlays []Overlay `json:"overlays"`
}

// OverlayRequest is PUT /api/v1/overlays/{name}: the whole tree (rollcall
// overlay import NAME DIR sends DIR's system/ and runtime/). Templates are
// parsed before anything is written: one that does not parse is refused
// with its file and line.
type OverlayRequest struct {
	Files []OverlayFile `json:"files"`
}

// ---- nodes

// StatelessNode is a machine assigned to a profile: GET
// /api/v1/stateless/nodes[/{machine}].
type StatelessNode struct {
	Machine    string    `json:"machine"`
	Profile    string    `json:"profile"`
	Name       string    `json:"name"`
	Number     int       `json:"number"`
	Addresses  []string  `json:"addresses,omitempty"`
	Generation uint64    `json:"generation"`
	Assigned   time.Time `json:"assigned"`
	Booted     time.Time `json:"booted,omitzero"`
	LastSeen   time.Time `json:"last_seen,omitzero"`
	// Stale: booted, and no heartbeat for two refreshes and a minute.
	Stale bool `json:"stale"`
	// SSHHostKeyPub is the public half of the node's SSH host key (the
	// private half is sealed in the store and goes to the node only).
	SSHHostKeyPub string `json:"ssh_host_key_pub,omitempty"`
}

// StatelessNodeList is GET /api/v1/stateless/nodes, by machine ID.
type StatelessNodeList struct {
	Index uint64          `json:"index"`
	Nodes []StatelessNode `json:"nodes"`
}

// AssignRequest is POST /api/v1/machines/{id}/assign.
type AssignRequest struct {
	Profile string `json:"profile"`
	// Boot power-cycles the machine through its BMC once it is assigned.
	Boot bool `json:"boot,omitempty"`
}

// AssignResult answers an assign: the node, and the power job when
// Boot asked for one.
type AssignResult struct {
	Node StatelessNode `json:"node"`
	// PowerJob is the power-cycle job's ID (Boot).
	PowerJob string `json:"power_job,omitempty"`
	// PowerError says why the machine was assigned but not power-cycled.
	PowerError string `json:"power_error,omitempty"`
}

// Render is GET /api/v1/profiles/{name}/render?path=P[&node=NAME]: the
// file a node (or, without node, the controller) would get. Secrets (a
// node's SSH host key, the munge key) are shown as placeholders.
type Render struct {
	Profile string `json:"profile"`
	Node    string `json:"node,omitempty"`
	Overlay string `json:"overlay"` // the overlay whose file won (the last that has it)
	Path    string `json:"path"`    // system/… or runtime/…, as rendered (no .tmpl)
	Mode    uint32 `json:"mode"`
	// Content is the rendering when it is UTF-8, ContentBase64 otherwise.
	Content       string `json:"content,omitempty"`
	ContentBase64 []byte `json:"content_base64,omitempty"`
}

// ---- the node's own calls (X-Rollcall-Node: the token on its command line)

// StatelessSelf is GET /api/v1/stateless/self.
type StatelessSelf struct {
	Machine        string   `json:"machine"`
	Name           string   `json:"name"`
	Profile        string   `json:"profile"`
	Addresses      []string `json:"addresses"`
	RefreshSeconds int      `json:"refresh_seconds"`
}

// ClusterVars is GET and PUT /api/v1/cluster/vars: the variables every
// node's templates see as .ClusterVars (and, under their profile's own,
// as .Vars). A PUT replaces them all.
type ClusterVars struct {
	Vars    map[string]string `json:"vars"`
	Updated time.Time         `json:"updated,omitzero"`
	Index   uint64            `json:"index,omitempty"`
}
