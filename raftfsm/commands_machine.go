package raftfsm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// MachineCreate adds a machine in state new. The proposer picks the ID and
// the time.
type MachineCreate struct {
	ID   string    `json:"id"`
	Name string    `json:"name,omitempty"`
	MACs []string  `json:"macs,omitempty"`
	Now  time.Time `json:"now"`
}

// MachineDelete forgets a machine and its history.
type MachineDelete struct {
	ID string `json:"id"`
}

// MachineEvent appends to a machine's history.
type MachineEvent struct {
	Event Event `json:"event"`
}

// MachineRename gives a machine a new name. Names are unique: a name
// another machine holds is refused with that machine's ID. Templates, tag
// rules and DNS see the new name from this index on; the proposer then
// evaluates the tag rules over the renamed machine (a rule may read
// .Node.Name) and proposes what changes, as after a manual tag change.
type MachineRename struct {
	ID   string    `json:"id"`
	Name string    `json:"name"`
	Now  time.Time `json:"now"`
}

func (*MachineCreate) Type() Type { return TypeMachineCreate }
func (*MachineDelete) Type() Type { return TypeMachineDelete }
func (*MachineEvent) Type() Type  { return TypeMachineEvent }
func (*MachineRename) Type() Type { return TypeMachineRename }

func (*MachineCreate) Version() uint8 { return 1 }
func (*MachineDelete) Version() uint8 { return 1 }
func (*MachineEvent) Version() uint8  { return 1 }
func (*MachineRename) Version() uint8 { return 1 }

func (c *MachineCreate) apply(tx *store.Tx) error {
	if c.Name != "" {
		if err := store.ValidName(c.Name); err != nil {
			return err
		}
	}
	for _, mac := range c.MACs {
		if n, err := store.NormalizeMAC(mac); err != nil || n != mac {
			return store.Errorf(store.ErrInvalid, "mac %q is not in normal form", mac)
		}
		if err := store.CheckMachineMAC(mac); err != nil {
			return err
		}
	}
	if _, err := tx.Machine(c.ID); err == nil {
		return store.Errorf(store.ErrConflict, "machine %s already exists", c.ID)
	}
	m := store.Machine{
		ID: c.ID, Name: c.Name, State: store.StateNew, MACs: c.MACs,
		CreatedAt: c.Now, UpdatedAt: c.Now,
	}
	if len(c.MACs) > 0 {
		m.BootMAC = c.MACs[0]
	}
	if err := tx.PutMachine(m); err != nil {
		return err
	}
	return tx.AddEvent(store.Event{Machine: c.ID, Time: c.Now, Kind: "created", Message: "machine created"})
}

func (c *MachineDelete) apply(tx *store.Tx) error {
	// A stateless node's name, addresses and host key go with an
	// unassign, which a delete would leave behind.
	if n, err := tx.StatelessNode(c.ID); err == nil {
		return store.Errorf(store.ErrConflict, "machine %s is node %s of profile %s: unassign it first", c.ID, n.Name, n.Profile)
	}
	return tx.DeleteMachine(c.ID)
}

func (c *MachineRename) apply(tx *store.Tx) error {
	if err := store.ValidName(c.Name); err != nil {
		return err
	}
	m, err := tx.Machine(c.ID)
	if err != nil {
		return err
	}
	if m.Name == c.Name {
		return nil // already so: nothing to write, no event
	}
	for _, id := range tx.MachineIDsByName(c.Name) {
		if id != m.ID {
			return store.Errorf(store.ErrConflict, "name %q is taken by machine %s", c.Name, id)
		}
	}
	msg := "named " + c.Name
	if m.Name != "" {
		msg = "renamed " + m.Name + " → " + c.Name
	}
	m.Name, m.UpdatedAt = c.Name, c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: "renamed", Message: msg}})
}

func (c *MachineEvent) apply(tx *store.Tx) error {
	if _, err := tx.Machine(c.Event.Machine); err != nil {
		return err
	}
	return tx.AddEvent(c.Event.record())
}

func machineCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeMachineCreate: {"machine-create", 1, func() Command { return &MachineCreate{} }},
		TypeMachineDelete: {"machine-delete", 1, func() Command { return &MachineDelete{} }},
		TypeMachineEvent:  {"machine-event", 1, func() Command { return &MachineEvent{} }},
		TypeMachineRename: {"machine-rename", 1, func() Command { return &MachineRename{} }},
		TypeMachineEnlist: {"machine-enlist", 2, func() Command { return &MachineEnlist{} }},
		TypeCommission:    {"commission", 3, func() Command { return &Commission{} }},
		TypeRecommission:  {"recommission", 1, func() Command { return &Recommission{} }},
	}
}

// Identity is what an agent reports about who a machine is. The state
// machine resolves it to a record (see resolve).
type Identity struct {
	Key     string   `json:"key"` // inventory.Key of the fields below
	UUID    string   `json:"uuid,omitempty"`
	Serial  string   `json:"serial,omitempty"`
	BootMAC string   `json:"boot_mac,omitempty"`
	MACs    []string `json:"macs,omitempty"`
}

// MachineEnlist is an agent's first contact in a commissioning run: it finds
// or creates the machine and moves it to commissioning.
type MachineEnlist struct {
	NewID    string    `json:"new_id"` // used if the machine is new
	Identity Identity  `json:"identity"`
	Node     string    `json:"node,omitempty"`
	Now      time.Time `json:"now"`
	// AgentMAC is the MAC the agent's boot token was minted for ("" for the
	// shared agent token): the command may then act only on that machine
	// (CheckAgentScope). Added in body version 2.
	AgentMAC string `json:"agent_mac,omitempty"`
}

// Commission stores an inventory upload and moves the machine to ready. The
// BMC password in BMC is already sealed; Inventory carries no password.
type Commission struct {
	NewID     string          `json:"new_id"`
	Identity  Identity        `json:"identity"`
	IPs       []string        `json:"ips,omitempty"`
	Summary   Summary         `json:"summary"`
	Inventory json.RawMessage `json:"inventory"`
	BMC       *BMC            `json:"bmc,omitempty"`
	Node      string          `json:"node,omitempty"`
	Now       time.Time       `json:"now"`
	// AgentMAC is the MAC of the boot token the upload came with, as for
	// MachineEnlist. Added in body version 3.
	AgentMAC string `json:"agent_mac,omitempty"`
}

// Recommission sends a machine back to new, so that its next network boot
// runs the commissioning image again.
type Recommission struct {
	ID     string    `json:"id"`
	Reason string    `json:"reason,omitempty"`
	Now    time.Time `json:"now"`
}

func (*MachineEnlist) Type() Type     { return TypeMachineEnlist }
func (*Commission) Type() Type        { return TypeCommission }
func (*Recommission) Type() Type      { return TypeRecommission }
func (*MachineEnlist) Version() uint8 { return 2 }
func (*Commission) Version() uint8    { return 3 }
func (*Recommission) Version() uint8  { return 1 }

// resolve finds the machine an identity belongs to:
//  1. a machine with the same identity key (system UUID, else serial, else
//     boot MAC: placeholders never make a key);
//  2. otherwise a machine without a firmware identity (added by hand, or
//     known only by MAC) that has one of the reported MACs.
//
// A machine whose key differs is never taken over by MAC alone: a NIC moved
// into another server does not make it the same server.
func resolve(tx *store.Tx, id Identity) (store.Machine, bool, error) {
	if id.Key != "" {
		if ids := tx.MachineIDsByKey(id.Key); len(ids) > 0 {
			m, err := tx.Machine(ids[0])
			return m, err == nil, err
		}
	}
	for _, mac := range append([]string{id.BootMAC}, id.MACs...) {
		for _, mid := range tx.MachineIDsByMAC(mac) {
			m, err := tx.Machine(mid)
			if err != nil {
				return m, false, err
			}
			if m.IdentityKey == "" || strings.HasPrefix(m.IdentityKey, "mac:") {
				return m, true, nil
			}
		}
	}
	return store.Machine{}, false, nil
}

func (id Identity) check() error {
	if id.Key == "" && id.BootMAC == "" && len(id.MACs) == 0 {
		return store.Errorf(store.ErrInvalid, "identity names no UUID, serial or MAC")
	}
	for _, mac := range append([]string{id.BootMAC}, id.MACs...) {
		if mac == "" {
			continue
		}
		if n, err := store.NormalizeMAC(mac); err != nil || n != mac {
			return store.Errorf(store.ErrInvalid, "mac %q is not in normal form", mac)
		}
		if err := store.CheckMachineMAC(mac); err != nil {
			return err
		}
	}
	return nil
}

// findOrCreate resolves an identity, or makes a new machine record (not yet
// written) with newID.
func findOrCreate(tx *store.Tx, id Identity, newID string, now time.Time) (store.Machine, bool, error) {
	if err := id.check(); err != nil {
		return store.Machine{}, false, err
	}
	m, found, err := resolve(tx, id)
	if err != nil || found {
		return m, found, err
	}
	if !store.ValidMachineID(newID) {
		return m, false, store.Errorf(store.ErrInvalid, "new machine id %q", newID)
	}
	if _, err := tx.Machine(newID); err == nil {
		return m, false, store.Errorf(store.ErrConflict, "machine %s already exists", newID)
	}
	return store.Machine{ID: newID, State: store.StateNew, CreatedAt: now}, false, nil
}

// adopt sets the identity fields and takes the reported MACs, and returns
// the moves of those that another machine held (a NIC moved between
// servers). It only reads: the caller checks everything else, then writes
// the moves (each with an event on the machine that lost the MAC) before m.
func adopt(tx *store.Tx, m *store.Machine, id Identity, now time.Time) ([]macMove, error) {
	macs := dedupeStrings(append([]string{id.BootMAC}, id.MACs...))
	var moves []macMove
	// A machine that gives up several MACs is written once for each, as it
	// stands after the moves before: the writes (and so the change log and
	// the state hash) stay what they were when adopt wrote as it went.
	moved := map[string]store.Machine{}
	for _, mac := range macs {
		for _, other := range tx.MachineIDsByMAC(mac) {
			if other == m.ID {
				continue
			}
			o, ok := moved[other]
			if !ok {
				var err error
				if o, err = tx.Machine(other); err != nil {
					return nil, err
				}
			}
			o.MACs = removeString(o.MACs, mac)
			if o.BootMAC == mac {
				o.BootMAC = ""
			}
			o.UpdatedAt = now
			moved[other] = o
			moves = append(moves, macMove{
				machine: o,
				event:   store.Event{Machine: o.ID, Time: now, Kind: "mac-moved", Message: fmt.Sprintf("%s now belongs to %s", mac, m.ID)},
			})
		}
	}
	if id.Key != "" {
		m.IdentityKey = id.Key
	}
	if id.UUID != "" {
		m.SystemUUID = id.UUID
	}
	if id.Serial != "" {
		m.Serial = id.Serial
	}
	if len(macs) > 0 {
		m.MACs = macs
	}
	if id.BootMAC != "" {
		m.BootMAC = id.BootMAC
	} else if m.BootMAC == "" && len(macs) > 0 {
		m.BootMAC = macs[0]
	}
	m.LastSeen, m.UpdatedAt = now, now
	return moves, nil
}

// macMove is one MAC taken from another machine: that machine as it is
// written without it, and its event.
type macMove struct {
	machine store.Machine
	event   store.Event
}

// putAdopted writes what adopt decided and then m with its events. Every
// check has passed by then: the moves free m's MACs, m keeps its name, and
// a new m's ID was checked (findOrCreate), so PutMachine refuses nothing.
func putAdopted(tx *store.Tx, moves []macMove, m store.Machine, now time.Time, events []store.Event) error {
	for _, mv := range moves {
		if err := tx.PutMachine(mv.machine); err != nil {
			return err
		}
		if err := tx.AddEvent(mv.event); err != nil {
			return err
		}
	}
	return putWithEvents(tx, m, now, events)
}

func (c *MachineEnlist) apply(tx *store.Tx) error {
	if err := CheckAgentScope(tx, c.Identity, c.AgentMAC); err != nil {
		return err
	}
	m, found, err := findOrCreate(tx, c.Identity, c.NewID, c.Now)
	if err != nil {
		return err
	}
	events := []store.Event{}
	if !found {
		events = append(events, store.Event{Kind: "enlisted", Message: "first contact from " + describe(c.Identity)})
	}
	if m.State != store.StateCommissioning {
		if err := store.CheckTransition(m.State, store.StateCommissioning); err != nil {
			return err
		}
		events = append(events, store.Event{Kind: "state", Message: m.State + " → " + store.StateCommissioning + " (agent started)"})
		m.State = store.StateCommissioning
	}
	moves, err := adopt(tx, &m, c.Identity, c.Now)
	if err != nil {
		return err
	}
	return putAdopted(tx, moves, m, c.Now, events)
}

func (c *Commission) apply(tx *store.Tx) error {
	if err := CheckAgentScope(tx, c.Identity, c.AgentMAC); err != nil {
		return err
	}
	m, found, err := findOrCreate(tx, c.Identity, c.NewID, c.Now)
	if err != nil {
		return err
	}
	if err := store.CheckTransition(m.State, store.StateReady); err != nil {
		return store.Errorf(store.ErrTransition, "machine %s: %s", m.ID, store.Public(err))
	}
	if len(c.Inventory) == 0 {
		return store.Errorf(store.ErrInvalid, "commission without an inventory")
	}
	var events []store.Event
	if !found {
		events = append(events, store.Event{Kind: "enlisted", Message: "first contact from " + describe(c.Identity)})
	}
	events = append(events, store.Event{Kind: "commissioned", Message: fmt.Sprintf("%s → ready: inventory received (%s)", m.State, summaryLine(c.Summary.record()))})
	moves, err := adopt(tx, &m, c.Identity, c.Now)
	if err != nil {
		return err
	}
	m.State = store.StateReady
	m.Summary = c.Summary.record()
	m.IPs = c.IPs
	m.Commissioned = c.Now
	switch {
	case c.BMC == nil:
	case m.BMC != nil && m.BMC.Operator:
		// An agent never changes a BMC an operator set: its report could
		// otherwise point the operator's credentials at any address.
		if c.BMC.Address != m.BMC.Address || c.BMC.Driver != m.BMC.Driver || c.BMC.PasswordSealed != nil {
			events = append(events, store.Event{Kind: "bmc-kept", Message: fmt.Sprintf("the agent reported BMC %s %s; kept the one an operator set (%s %s)", c.BMC.Driver, c.BMC.Address, m.BMC.Driver, m.BMC.Address)})
		}
	default:
		bmc := mergeBMC(m.BMC, c.BMC.record())
		bmc.UpdatedAt = c.Now
		m.BMC = &bmc
		if len(bmc.Errors) > 0 {
			events = append(events, store.Event{Kind: "bmc-error", Message: strings.Join(bmc.Errors, "; ")})
		}
	}
	if err := putAdopted(tx, moves, m, c.Now, events); err != nil {
		return err
	}
	return tx.PutInventory(m.ID, c.Inventory)
}

// mergeBMC is the one rule for replacing a BMC record: a sealed password
// and a certificate pin carry over from the old record only while the
// address stays the same (IPMI to Redfish on one BMC keeps them). A password
// is bound to the BMC it was created for: a new address needs a new
// password, or none is sent.
func mergeBMC(old *store.BMC, b store.BMC) store.BMC {
	if old == nil || old.Address != b.Address {
		return b
	}
	if b.PasswordSealed == nil {
		b.PasswordSealed, b.PasswordAAD = old.PasswordSealed, old.PasswordAAD
	}
	if b.CertSHA256 == "" {
		b.CertSHA256 = old.CertSHA256
	}
	return b
}

// CheckAgentScope narrows what a booted machine's agent may touch: with a
// boot token for agentMAC, the command may act only on the machine that
// owns agentMAC (or create one when none does), only while that machine is
// new or commissioning, and may claim no MAC and no identity of another
// machine that is past commissioning. agentMAC "" (the shared agent token,
// which only operators hold now) is not narrowed. The proposer calls it
// before proposing and the state machine again when it applies.
func CheckAgentScope(tx *store.Tx, id Identity, agentMAC string) error {
	if agentMAC == "" {
		return nil
	}
	if id.BootMAC != agentMAC {
		return store.Errorf(store.ErrForbidden, "the boot token is for %s, not boot MAC %q", agentMAC, id.BootMAC)
	}
	open := func(m store.Machine) bool {
		return m.State == store.StateNew || m.State == store.StateCommissioning
	}
	var owner string
	if ids := tx.MachineIDsByMAC(agentMAC); len(ids) > 0 {
		m, err := tx.Machine(ids[0])
		if err != nil {
			return err
		}
		if !open(m) {
			return store.Errorf(store.ErrForbidden, "machine %s is %s: its boot token acts only while it is new or commissioning", m.ID, m.State)
		}
		owner = m.ID
	}
	target, found, err := resolve(tx, id)
	if err != nil {
		return err
	}
	if found && target.ID != owner && !open(target) {
		return store.Errorf(store.ErrForbidden, "the report names machine %s (%s), which does not own %s", target.ID, target.State, agentMAC)
	}
	for _, mac := range id.MACs {
		for _, other := range tx.MachineIDsByMAC(mac) {
			if other == owner || found && other == target.ID {
				continue
			}
			o, err := tx.Machine(other)
			if err != nil {
				return err
			}
			if !open(o) {
				return store.Errorf(store.ErrForbidden, "mac %s belongs to machine %s (%s): an operator must release it", mac, o.ID, o.State)
			}
		}
	}
	return nil
}

func (c *Recommission) apply(tx *store.Tx) error {
	m, err := tx.Machine(c.ID)
	if err != nil {
		return err
	}
	if err := store.CheckTransition(m.State, store.StateNew); err != nil {
		return store.Errorf(store.ErrTransition, "machine %s: %s", m.ID, store.Public(err))
	}
	msg := m.State + " → new: re-commission requested"
	if c.Reason != "" {
		msg += " (" + c.Reason + ")"
	}
	if m.State == store.StateDeployed || m.State == store.StateDeployFailed {
		// The deployment's addresses go with it, as a release frees them
		// (the disk is not wiped: commissioning reads it, never writes).
		if d, ok, err := tx.CurrentDeployment(m.ID); err != nil {
			return err
		} else if ok {
			if err := freeAddresses(tx, d); err != nil {
				return err
			}
		}
	}
	m.State, m.UpdatedAt = store.StateNew, c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: "recommission", Message: msg}})
}

func putWithEvents(tx *store.Tx, m store.Machine, now time.Time, events []store.Event) error {
	if err := tx.PutMachine(m); err != nil {
		return err
	}
	for _, e := range events {
		e.Machine, e.Time = m.ID, now
		if err := tx.AddEvent(e); err != nil {
			return err
		}
	}
	return nil
}

func describe(id Identity) string {
	switch {
	case id.UUID != "" && strings.HasPrefix(id.Key, "uuid:"):
		return "system UUID " + id.UUID
	case id.Serial != "" && strings.HasPrefix(id.Key, "serial:"):
		return "serial " + id.Serial
	case id.BootMAC != "":
		return "MAC " + id.BootMAC
	}
	return "an agent"
}

func summaryLine(s inventory.Summary) string {
	parts := []string{}
	if s.Manufacturer != "" || s.Product != "" {
		parts = append(parts, strings.TrimSpace(s.Manufacturer+" "+s.Product))
	}
	if s.Sockets > 0 {
		parts = append(parts, fmt.Sprintf("%d×%s, %d cores", s.Sockets, s.CPUModel, s.Cores))
	}
	if s.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf("%d GiB", s.MemoryBytes>>30))
	}
	if s.Disks > 0 {
		parts = append(parts, fmt.Sprintf("%d disks", s.Disks))
	}
	if s.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", s.GPUs))
	}
	if len(parts) == 0 {
		return "empty"
	}
	return strings.Join(parts, ", ")
}

func dedupeStrings(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func removeString(in []string, s string) []string {
	out := in[:0:0]
	for _, v := range in {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

// Commission body, version 2: uvarint length of a JSON header (every field
// but the inventory), the header, then the inventory document as raw bytes,
// so that no node scans a 50 KB inventory to decode the command. Version 1
// was all JSON.
func (c *Commission) marshalBody() ([]byte, error) {
	h := *c
	h.Inventory = nil
	head, err := json.Marshal(&h)
	if err != nil {
		return nil, err
	}
	out := binary.AppendUvarint(make([]byte, 0, len(head)+len(c.Inventory)+binary.MaxVarintLen64), uint64(len(head)))
	out = append(out, head...)
	return append(out, c.Inventory...), nil
}

func (c *Commission) unmarshalBody(version uint8, b []byte) error {
	if version == 1 {
		return decodeStrict(b, c)
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return fmt.Errorf("commission body: bad header length")
	}
	if err := decodeStrict(b[k:k+int(n)], c); err != nil {
		return err
	}
	c.Inventory = append(json.RawMessage(nil), b[k+int(n):]...)
	return nil
}
