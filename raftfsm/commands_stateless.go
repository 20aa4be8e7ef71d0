package raftfsm

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/store"
)

// Stateless nodes (issue 20; records in store/stateless.go). The proposer
// brings what cannot be derived from the store: the times, the node's SSH
// host key and the cluster's munge key, both sealed under the master key
// before they enter a command (the FSM only stores sealed bytes). What can
// be derived is derived here, deterministically from the state the command
// is applied to: an assign takes the next free number of its profile's
// name pool and the next free address of each of its subnets (ipam.Pick,
// the same pick the proposer's precheck makes), so that assigning a rack
// of machines at once never races two proposers for one name or address.
//
// Decisions:
//   - Assigning a machine to the profile it is assigned to already is
//     answered as done and changes nothing (a `rollcall assign tag:rack-3`
//     run twice); to another profile, it is refused: unassign first.
//   - A node's Generation is the index of its assign: its token names it,
//     so a token handed to an earlier assignment of the same machine
//     stops working when the machine is unassigned or reassigned.
//   - Seen times come in batches from the proposers' coalescers (at most
//     one per node per store.SeenInterval); an item for another generation
//     than the node's is ignored, not refused: the node was reassigned
//     while the item was in flight.

// Profile is store.Profile in a ProfilePut: what an operator decides.
type Profile struct {
	Name       string            `json:"name"`
	Image      string            `json:"image"`
	Overlays   []string          `json:"overlays"`
	Args       string            `json:"args,omitempty"`
	NameFormat string            `json:"name_format"`
	NameFirst  int               `json:"name_first"`
	NameLast   int               `json:"name_last"`
	Subnets    []string          `json:"subnets,omitempty"`
	Vars       map[string]string `json:"vars,omitempty"`
}

// ProfileBody is the body of a profile.
func ProfileBody(p store.Profile) Profile {
	return Profile{Name: p.Name, Image: p.Image, Overlays: p.Overlays, Args: p.Args, NameFormat: p.NameFormat,
		NameFirst: p.NameFirst, NameLast: p.NameLast, Subnets: p.Subnets, Vars: p.Vars}
}

func (b Profile) record() store.Profile {
	return store.Profile{Name: b.Name, Image: b.Image, Overlays: b.Overlays, Args: b.Args, NameFormat: b.NameFormat,
		NameFirst: b.NameFirst, NameLast: b.NameLast, Subnets: b.Subnets, Vars: b.Vars}
}

// OverlayFile is store.OverlayFile in an OverlayPut.
type OverlayFile struct {
	Path    string `json:"path"`
	Mode    uint32 `json:"mode"`
	Content []byte `json:"content"`
}

// OverlayFileBody is the body of an overlay file.
func OverlayFileBody(f store.OverlayFile) OverlayFile {
	return OverlayFile{Path: f.Path, Mode: f.Mode, Content: f.Content}
}

func (b OverlayFile) record() store.OverlayFile {
	return store.OverlayFile{Path: b.Path, Mode: b.Mode, Content: b.Content}
}

// ProfilePut creates a profile, or replaces one (Replace).
type ProfilePut struct {
	Profile Profile   `json:"profile"`
	Replace bool      `json:"replace,omitempty"`
	Now     time.Time `json:"now"`
}

// ProfileDelete removes a profile no node is assigned to.
type ProfileDelete struct {
	Name string `json:"name"`
}

// Assign makes a ready machine a stateless node of a profile.
type Assign struct {
	Machine string `json:"machine"`
	Profile string `json:"profile"`
	// SSHHostKeySealed is the node's new ed25519 host key (OpenSSH PEM),
	// sealed under the master key with AAD store.SSHHostKeyAAD(Machine);
	// SSHHostKeyPub its public half.
	SSHHostKeySealed []byte    `json:"ssh_host_key_sealed"`
	SSHHostKeyPub    string    `json:"ssh_host_key_pub"`
	Now              time.Time `json:"now"`
}

// Unassign takes a stateless node back to ready: its name and addresses
// are freed, its record (and host key) dropped.
type Unassign struct {
	Machine string    `json:"machine"`
	Now     time.Time `json:"now"`
}

// OverlayPut creates or replaces an overlay.
type OverlayPut struct {
	Name  string        `json:"name"`
	Files []OverlayFile `json:"files"`
	Now   time.Time     `json:"now"`
}

// OverlayDelete removes an overlay no profile names.
type OverlayDelete struct {
	Name string `json:"name"`
}

// NodeSeen is one node's fetches since the coalescer last wrote it.
type NodeSeen struct {
	Machine    string    `json:"machine"`
	Generation uint64    `json:"generation"`
	Time       time.Time `json:"time"`
	// Booted marks the node booted if it is not yet (any fetch does).
	Booted bool `json:"booted,omitempty"`
}

// StatelessSeen records nodes' overlay fetches (the heartbeat).
type StatelessSeen struct {
	Nodes []NodeSeen `json:"nodes"`
}

// MungeKeySet stores the cluster's munge key, sealed with AAD
// store.MungeKeyAAD; a cluster that has one keeps it (two proposers that
// raced to make the first both succeed, the first one's key stays).
type MungeKeySet struct {
	Sealed []byte    `json:"sealed"`
	Now    time.Time `json:"now"`
}

// ClusterVarsSet replaces the cluster's variables (templates' .ClusterVars).
type ClusterVarsSet struct {
	Vars map[string]string `json:"vars"`
	Now  time.Time         `json:"now"`
}

func (*ProfilePut) Type() Type         { return TypeProfilePut }
func (*ProfileDelete) Type() Type      { return TypeProfileDelete }
func (*Assign) Type() Type             { return TypeAssign }
func (*Unassign) Type() Type           { return TypeUnassign }
func (*OverlayPut) Type() Type         { return TypeOverlayPut }
func (*OverlayDelete) Type() Type      { return TypeOverlayDelete }
func (*StatelessSeen) Type() Type      { return TypeStatelessSeen }
func (*MungeKeySet) Type() Type        { return TypeMungeKeySet }
func (*ClusterVarsSet) Type() Type     { return TypeClusterVarsSet }
func (*ProfilePut) Version() uint8     { return 1 }
func (*ProfileDelete) Version() uint8  { return 1 }
func (*Assign) Version() uint8         { return 1 }
func (*Unassign) Version() uint8       { return 1 }
func (*OverlayPut) Version() uint8     { return 1 }
func (*OverlayDelete) Version() uint8  { return 1 }
func (*StatelessSeen) Version() uint8  { return 1 }
func (*MungeKeySet) Version() uint8    { return 1 }
func (*ClusterVarsSet) Version() uint8 { return 1 }

func statelessCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeProfilePut:     {"profile-put", 1, func() Command { return &ProfilePut{} }},
		TypeProfileDelete:  {"profile-delete", 1, func() Command { return &ProfileDelete{} }},
		TypeAssign:         {"assign", 1, func() Command { return &Assign{} }},
		TypeUnassign:       {"unassign", 1, func() Command { return &Unassign{} }},
		TypeOverlayPut:     {"overlay-put", 1, func() Command { return &OverlayPut{} }},
		TypeOverlayDelete:  {"overlay-delete", 1, func() Command { return &OverlayDelete{} }},
		TypeStatelessSeen:  {"stateless-seen", 1, func() Command { return &StatelessSeen{} }},
		TypeMungeKeySet:    {"munge-key-set", 1, func() Command { return &MungeKeySet{} }},
		TypeClusterVarsSet: {"cluster-vars-set", 1, func() Command { return &ClusterVarsSet{} }},
	}
}

// Bounds of the secrets a command carries (sealing adds 28 bytes).
const (
	maxSealedHostKey = 2 << 10
	maxHostKeyPub    = 256
	maxSealedMunge   = store.MungeKeySize + 256
)

func (c *ProfilePut) apply(tx *store.Tx) error {
	p := c.Profile.record().WithDefaults()
	if err := store.CheckProfile(p); err != nil {
		return err
	}
	old, err := tx.Profile(p.Name)
	switch {
	case err == nil && !c.Replace:
		return store.Errorf(store.ErrConflict, "profile %s exists already (rollcall profile set changes it)", p.Name)
	case err == nil:
		p.Created = old.Created
	case !errors.Is(err, store.ErrNotFound) || c.Replace:
		return err
	default:
		p.Created = c.Now
	}
	if _, err := tx.Image(p.Image); err != nil {
		return store.Errorf(store.ErrNotFound, "profile %s: image %q: not found (import it with rollcall image import %s -kernel F -initrd F -squashfs F)", p.Name, p.Image, p.Image)
	}
	for _, o := range p.Overlays {
		if _, err := tx.Overlay(o); err != nil {
			return store.Errorf(store.ErrNotFound, "profile %s: overlay %q: not found (rollcall overlay import %s DIR)", p.Name, o, o)
		}
	}
	for _, s := range p.Subnets {
		if _, err := tx.Subnet(netip.MustParsePrefix(s)); err != nil {
			return store.Errorf(store.ErrNotFound, "profile %s: subnet %s: not found (rollcall subnet add)", p.Name, s)
		}
	}
	return tx.PutProfile(p)
}

func (c *ProfileDelete) apply(tx *store.Tx) error {
	if _, err := tx.Profile(c.Name); err != nil {
		return err
	}
	if u := tx.ProfileUser(c.Name); u != "" {
		return store.Errorf(store.ErrConflict, "profile %s is assigned to %s; unassign them first", c.Name, u)
	}
	return tx.DeleteProfile(c.Name)
}

// CheckHostKey bounds an assign's host key; the API runs it before
// proposing.
func (c *Assign) checkKey() error {
	if len(c.SSHHostKeySealed) == 0 || len(c.SSHHostKeySealed) > maxSealedHostKey {
		return store.Errorf(store.ErrInvalid, "assign %s: the sealed host key must be 1 to %d bytes", c.Machine, maxSealedHostKey)
	}
	if len(c.SSHHostKeyPub) > maxHostKeyPub || !strings.HasPrefix(c.SSHHostKeyPub, "ssh-ed25519 ") ||
		strings.IndexFunc(c.SSHHostKeyPub, func(r rune) bool { return r > unicode.MaxASCII || unicode.IsControl(r) }) >= 0 {
		return store.Errorf(store.ErrInvalid, "assign %s: the public host key must be one ssh-ed25519 line of at most %d bytes", c.Machine, maxHostKeyPub)
	}
	return nil
}

func (c *Assign) apply(tx *store.Tx) error {
	if !store.ValidMachineID(c.Machine) {
		return store.Errorf(store.ErrInvalid, "machine id %q", store.Clip(c.Machine))
	}
	m, err := tx.Machine(c.Machine)
	if err != nil {
		return err
	}
	p, err := tx.Profile(c.Profile)
	if err != nil {
		return err
	}
	if n, err := tx.StatelessNode(m.ID); err == nil {
		if n.Profile == p.Name {
			return nil // assigned already: done
		}
		return store.Errorf(store.ErrConflict, "machine %s is node %s of profile %s: unassign it first", m.ID, n.Name, n.Profile)
	}
	if m.State != store.StateReady {
		return store.Errorf(store.ErrTransition, "machine %s is %s: only a ready machine is assigned (commission it, or release a deployed one, first)", m.ID, m.State)
	}
	if err := c.checkKey(); err != nil {
		return err
	}
	number, name, err := tx.NextNodeNumber(p, m.ID)
	if err != nil {
		return err
	}
	claims := make([]store.Address, 0, len(p.Subnets))
	var addrs []string
	for _, s := range p.Subnets {
		pfx := netip.MustParsePrefix(s)
		ip, err := ipam.Pick(tx, pfx)
		if err != nil {
			return store.Errorf(store.ErrConflict, "profile %s: %s", p.Name, store.Public(err))
		}
		claims = append(claims, store.Address{IP: ip, Subnet: pfx, How: store.HowStateless, Machine: m.ID, Name: name, Created: c.Now})
		addrs = append(addrs, netip.PrefixFrom(ip, pfx.Bits()).String())
	}
	// ClaimAll checks every claim before it writes the first; everything
	// after it has been checked above (the name is free, by
	// NextNodeNumber), so nothing is left half-written.
	if err := ipam.ClaimAll(tx, claims); err != nil {
		return err
	}
	n := store.StatelessNode{
		Machine: m.ID, Profile: p.Name, Name: name, Number: number, Addresses: addrs,
		Generation: tx.Index, Assigned: c.Now, SSHHostKeySealed: c.SSHHostKeySealed, SSHHostKeyPub: c.SSHHostKeyPub,
	}
	if err := tx.PutStatelessNode(n); err != nil {
		return err
	}
	msg := fmt.Sprintf("ready → stateless: node %s of profile %s", name, p.Name)
	if len(addrs) > 0 {
		msg += " (" + strings.Join(addrs, ", ") + ")"
	}
	m.State, m.UpdatedAt = store.StateStateless, c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: "stateless", Message: msg}})
}

func (c *Unassign) apply(tx *store.Tx) error {
	m, err := tx.Machine(c.Machine)
	if err != nil {
		return err
	}
	n, err := tx.StatelessNode(m.ID)
	if err != nil {
		return store.Errorf(store.ErrConflict, "machine %s is %s, not assigned to a profile", m.ID, m.State)
	}
	if err := releaseNodeAddresses(tx, n); err != nil {
		return err
	}
	if err := tx.DeleteStatelessNode(m.ID); err != nil {
		return err
	}
	msg := fmt.Sprintf("%s → ready: node %s of profile %s unassigned, %d addresses freed", m.State, n.Name, n.Profile, len(n.Addresses))
	m.State, m.UpdatedAt = store.StateReady, c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: "stateless", Message: msg}})
}

// releaseNodeAddresses frees the addresses a node's assign claimed that
// the machine still holds (an operator may have freed one by hand).
func releaseNodeAddresses(tx *store.Tx, n store.StatelessNode) error {
	for _, a := range n.Addresses {
		pfx, err := netip.ParsePrefix(a)
		if err != nil {
			continue
		}
		rec, err := tx.Address(pfx.Addr())
		if err != nil || rec.Machine != n.Machine || rec.How != store.HowStateless {
			continue
		}
		if err := ipam.Release(tx, pfx.Addr()); err != nil {
			return err
		}
	}
	return nil
}

func (c *OverlayPut) apply(tx *store.Tx) error {
	if err := store.ValidImageName(c.Name); err != nil {
		return store.Errorf(store.ErrInvalid, "overlay name %q must be lowercase letters, digits, '.', '_' or '-' (1 to 63, not starting with a dot)", store.Clip(c.Name))
	}
	files := convertAll(c.Files, OverlayFile.record)
	if err := store.CheckOverlayFiles(files); err != nil {
		return store.Errorf(store.ErrInvalid, "overlay %s: %s", c.Name, store.Public(err))
	}
	files = slices.Clone(files)
	store.SortOverlayFiles(files)
	if files == nil {
		files = []store.OverlayFile{}
	}
	sum, size := store.OverlayDigest(files)
	return tx.PutOverlay(store.Overlay{Name: c.Name, Files: files, SHA256: sum, Size: size, Updated: c.Now})
}

func (c *OverlayDelete) apply(tx *store.Tx) error {
	if _, err := tx.Overlay(c.Name); err != nil {
		return err
	}
	ps, err := tx.Profiles()
	if err != nil {
		return err
	}
	for _, p := range ps {
		if slices.Contains(p.Overlays, c.Name) {
			return store.Errorf(store.ErrConflict, "overlay %s is named by profile %s; take it out of the profile first", c.Name, p.Name)
		}
	}
	return tx.DeleteOverlay(c.Name)
}

// CheckSeen bounds a seen batch; the coalescer builds only valid ones.
func (c *StatelessSeen) check() error {
	if len(c.Nodes) > maxCommandMachines {
		return store.Errorf(store.ErrInvalid, "stateless-seen: %d nodes is more than the %d one command may name", len(c.Nodes), maxCommandMachines)
	}
	for _, s := range c.Nodes {
		if !store.ValidMachineID(s.Machine) {
			return store.Errorf(store.ErrInvalid, "stateless-seen: machine id %q", store.Clip(s.Machine))
		}
	}
	return nil
}

func (c *StatelessSeen) apply(tx *store.Tx) error {
	if err := c.check(); err != nil {
		return err
	}
	for _, s := range c.Nodes {
		n, err := tx.StatelessNode(s.Machine)
		if errors.Is(err, store.ErrNotFound) || err == nil && n.Generation != s.Generation {
			continue // unassigned or reassigned since: a stale item
		} else if err != nil {
			return err
		}
		if s.Time.After(n.LastSeen) {
			n.LastSeen = s.Time
		}
		booted := s.Booted && n.Booted.IsZero()
		if booted {
			n.Booted = s.Time
		}
		if err := tx.PutStatelessNode(n); err != nil {
			return err
		}
		if !booted {
			continue
		}
		m, err := tx.Machine(s.Machine)
		if err != nil {
			return err
		}
		if m.State != store.StateStateless {
			continue
		}
		m.State, m.UpdatedAt = store.StateBooted, s.Time
		if err := putWithEvents(tx, m, s.Time, []store.Event{{Kind: "stateless", Message: fmt.Sprintf("stateless → booted: node %s fetched its overlay", n.Name)}}); err != nil {
			return err
		}
	}
	return nil
}

func (c *MungeKeySet) apply(tx *store.Tx) error {
	if len(c.Sealed) == 0 || len(c.Sealed) > maxSealedMunge {
		return store.Errorf(store.ErrInvalid, "munge-key-set: the sealed key must be 1 to %d bytes", maxSealedMunge)
	}
	if _, ok, err := tx.MungeKey(); err != nil || ok {
		return err // one exists: it stays
	}
	return tx.PutMungeKey(store.MungeKey{Sealed: c.Sealed, Created: c.Now})
}

func (c *ClusterVarsSet) apply(tx *store.Tx) error {
	return tx.PutClusterVars(store.ClusterVars{Vars: c.Vars, Updated: c.Now})
}
