// Package overlay renders stateless nodes' overlays: the file trees of
// store.Overlay, whose files ending in .tmpl are Go templates (text/template)
// executed with a Data per node. A node's tree is its profile's overlays in
// order, then its tags' overlays (the reference: "a tag's overlays are
// applied after the profile's"); a later overlay's file replaces an earlier
// one's of the same path.
//
// Templates are parsed once per overlay change (the cache is keyed by the
// overlay's digest) and a node's rendered tree is kept until one of its
// inputs changes (the tables it reads, by their change index), so that a
// rack of nodes refreshing at once costs one render each, not one each per
// fetch. Errors name the file and line (text/template's "template:
// system/etc/hosts.tmpl:3: …").
//
// Secrets: a node's SSH host key and the cluster's munge key are unsealed
// for that node's own tree only; Data.Nodes never holds a private key, and
// an operator's render (Redacted) shows placeholders instead.
package overlay

import (
	"regexp"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/store"
)

// Data is what a template sees. It is documented field by field because
// it is the contract overlay authors write against (docs/stateless.md).
type Data struct {
	// Node is the node the tree is rendered for; the zero Node for the
	// controller's view (rollcall render without -node).
	Node Node
	// Nodes is every stateless node of the cluster, by name (all
	// profiles), without private keys: /etc/hosts and slurm.conf.
	Nodes []Node
	// Profile is the node's profile (or the one rendered for).
	Profile Profile
	// ClusterVars are the cluster's variables (rollcall cluster vars).
	ClusterVars map[string]string
	// Vars are ClusterVars overridden by the profile's Vars: what most
	// templates want ({{ .Vars.slurm_controller }}).
	Vars map[string]string
	// CA is the cluster CA certificate (PEM).
	CA string
	// MungeKey is the cluster's munge key (1024 random bytes): write it
	// to a file of mode 0400 (system/etc/munge/munge.key.tmpl holding
	// {{ .MungeKey }}).
	MungeKey string

	steps int // the running template's budget spent (step)
}

// Node is one stateless node as templates see it.
type Node struct {
	Name    string // the node name (node007), also its hostname
	Machine string // the machine ID
	Profile string
	Number  int
	// Addresses are the node's IPAM addresses with their prefix length
	// ("10.40.0.7/24"); IP is the first one's address alone.
	Addresses []string
	IP        string
	// Tags are the machine's tags, the operator's and the rules', sorted.
	Tags []string
	// Where the machine is (rollcall location): rack drives a Slurm
	// topology.conf.
	Building, Room, Rack string
	Unit                 int
	// The commissioning inventory, as Slurm's node lines want it.
	Sockets        int
	CoresPerSocket int
	ThreadsPerCore int
	CPUs           int   // logical CPUs (sockets × cores × threads)
	MemoryMB       int64 // installed memory, MiB
	// RealMemoryMB is MemoryMB less 5 % for the kernel and the image in
	// RAM: what slurm.conf's RealMemory may claim without draining the node.
	RealMemoryMB int64
	GPUs         int
	GPUModels    []string
	// GPUType is the first GPU model as a Slurm GRES type ("a100" from
	// "NVIDIA A100-SXM4-80GB"); "" without GPUs.
	GPUType string
	// SSHHostKeyPub is the node's SSH host key's public line.
	SSHHostKeyPub string
	// SSHHostKey is the node's private host key (OpenSSH PEM), in its own
	// tree only: empty for every other node.
	SSHHostKey string
}

// Profile is the profile as templates see it.
type Profile struct {
	Name     string
	Image    string
	Overlays []string
	Args     string
	Vars     map[string]string
}

// Placeholders of an operator's render (Redacted).
const (
	RedactedHostKey = "<the node's SSH host key, sealed in the store; only the node gets it>"
	RedactedMunge   = "<the cluster's munge key, sealed in the store; only nodes get it>"
)

// nodeData is the public part of a node's Data.
func nodeData(n store.StatelessNode, m store.Machine) Node { return machineData(m).withNode(n) }

// withNode is d with what a node's Data takes from its stateless node
// record (the rest comes from its machine: machineData).
func (d Node) withNode(n store.StatelessNode) Node {
	d.Name, d.Machine, d.Profile, d.Number, d.Addresses = n.Name, n.Machine, n.Profile, n.Number, n.Addresses
	d.SSHHostKeyPub, d.IP = n.SSHHostKeyPub, ""
	if len(n.Addresses) > 0 {
		d.IP, _, _ = strings.Cut(n.Addresses[0], "/")
	}
	return d
}

// machineData is what a node's Data takes from its machine record.
func machineData(m store.Machine) Node {
	s := m.Summary
	d := Node{
		Building: m.Location.Building, Room: m.Location.Room, Rack: m.Location.Rack, Unit: m.Location.Unit,
		Sockets: s.Sockets, CPUs: s.Threads, MemoryMB: s.MemoryBytes >> 20, GPUs: s.GPUs, GPUModels: s.GPUModels,
	}
	d.Tags = append(append([]string(nil), m.Tags...), m.AutoTags...)
	sortUnique(&d.Tags)
	if s.Sockets > 0 && s.Cores > 0 {
		d.CoresPerSocket = s.Cores / s.Sockets
		d.ThreadsPerCore = max(1, s.Threads/s.Cores)
	}
	if d.CPUs == 0 {
		d.CPUs = s.Sockets * d.CoresPerSocket * d.ThreadsPerCore
	}
	d.RealMemoryMB = d.MemoryMB * 95 / 100
	if len(s.GPUModels) > 0 {
		d.GPUType = GRESType(s.GPUModels[0])
	}
	return d
}

var gresWord = regexp.MustCompile(`[A-Za-z]*[0-9]+[A-Za-z0-9]*`)

// GRESType names a GPU model the way Slurm sites name GRES types: the
// first word with a digit, lowercased ("NVIDIA A100-SXM4-80GB" → "a100",
// "AMD Instinct MI250X" → "mi250x"); else the last word, else "gpu".
func GRESType(model string) string {
	for _, w := range strings.FieldsFunc(model, func(r rune) bool { return r == ' ' || r == '-' || r == '_' || r == '/' }) {
		if m := gresWord.FindString(w); m != "" && m == w {
			return strings.ToLower(m)
		}
	}
	if f := strings.Fields(model); len(f) > 0 {
		return strings.ToLower(strings.Trim(f[len(f)-1], "-_/"))
	}
	return "gpu"
}

func sortUnique(s *[]string) {
	if len(*s) == 0 {
		*s = nil
		return
	}
	out := (*s)[:0]
	seen := map[string]bool{}
	for _, v := range *s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	*s = out
	slices.Sort(out)
}
