package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store/inventory"
)

// Buckets of the machine table and its indexes. Index keys are
// value + "\x00" + machine ID so that non-unique values (two boards with one
// serial) coexist; lookups scan the value's prefix.
var (
	bucketMachines      = []byte("machines")
	bucketMachineByMAC  = []byte("machines.by_mac")
	bucketMachineByUUID = []byte("machines.by_uuid")
	bucketMachineBySer  = []byte("machines.by_serial")
	bucketMachineByStat = []byte("machines.by_state")
	bucketMachineByName = []byte("machines.by_name")
	bucketMachineByKey  = []byte("machines.by_key")
	bucketMachineByIP   = []byte("machines.by_ip")
	bucketInventory     = []byte("inventory")
	bucketEvents        = []byte("events")
	bucketCluster       = []byte("cluster")
	// The tag and rack indexes are made by the first command that needs
	// them (ensureBuckets), not at Open: a store nobody tagged or placed
	// then holds the buckets an older node's does, so the two hash alike
	// at one index during a rolling upgrade (StateCheck). Reads treat a
	// missing one as empty.
	bucketMachineByTag    = []byte("machines.by_tag")
	bucketMachineByRack   = []byte("machines.by_rack")
	bucketMachineByLayout = []byte("machines.by_layout")

	allBuckets = [][]byte{
		bucketMachines, bucketMachineByMAC, bucketMachineByUUID, bucketMachineBySer,
		bucketMachineByStat, bucketMachineByName, bucketMachineByKey, bucketMachineByIP,
		bucketInventory, bucketEvents, bucketCluster, bucketNet, bucketAddresses, bucketAddrByMac,
		bucketChanges, bucketLeases, bucketLeaseByMAC, bucketLeaseBlocks, bucketSeen,
		bucketImages, bucketJobs,
	}
)

// ChangesInventory is the table name change log entries give a stored
// inventory report (keyed by machine ID). The reports have no table
// index of their own: a commission writes the machine too.
const ChangesInventory = "inventory"

// TableMachines names the machines table for TableIndex and blocking queries.
const TableMachines = "machines"

// Machine states. Later work (deploy, stateless) adds more; the allowed
// moves between them are in Transitions.
const (
	StateNew           = "new"
	StateCommissioning = "commissioning"
	StateReady         = "ready"
)

// Transitions lists, for each state, the states a machine may move to.
// Later states (stateless, …) extend this table. A deployment
// (deployjobs.go): ready → deploying → deployed or deploy-failed (back to
// ready when cancelled before it wrote); deployed and deploy-failed →
// releasing → ready (a failed release → deploy-failed; one cancelled
// before it wiped → the state it left); re-commissioning takes a deployed
// or failed machine back to new. A stateless node (stateless.go): ready →
// stateless (assigned) → booted (its first overlay fetch); unassign takes
// either back to ready (re-commissioning one takes an unassign first).
var Transitions = map[string][]string{
	StateNew:           {StateCommissioning, StateReady},
	StateCommissioning: {StateReady, StateNew},
	StateReady:         {StateNew, StateDeploying, StateStateless},
	StateDeploying:     {StateDeployed, StateDeployFailed, StateReady},
	StateDeployed:      {StateReleasing, StateNew},
	StateDeployFailed:  {StateReleasing, StateNew},
	StateReleasing:     {StateReady, StateDeployFailed, StateDeployed},
	StateStateless:     {StateBooted, StateReady},
	StateBooted:        {StateReady},
}

// States lists the known states in lifecycle order.
var States = []string{StateNew, StateCommissioning, StateReady, StateDeploying, StateDeployed, StateDeployFailed, StateReleasing, StateStateless, StateBooted}

// CheckTransition fails with the current state and the allowed ones when
// from → to is not a permitted move.
func CheckTransition(from, to string) error {
	allowed, ok := Transitions[from]
	if !ok {
		return Errorf(ErrTransition, "machine in unknown state %q", from)
	}
	for _, s := range allowed {
		if s == to {
			return nil
		}
	}
	return Errorf(ErrTransition, "cannot move from %s to %s (allowed from %s: %s)",
		from, to, from, strings.Join(allowed, ", "))
}

// Machine is a server Rollcall knows.
type Machine struct {
	ID         string   `json:"id"`
	Name       string   `json:"name,omitempty"`
	State      string   `json:"state"`
	SystemUUID string   `json:"system_uuid,omitempty"`
	Serial     string   `json:"serial,omitempty"`
	MACs       []string `json:"macs,omitempty"`
	BootMAC    string   `json:"boot_mac,omitempty"`
	// IdentityKey is how the machine is recognised: uuid:…, serial:… or
	// mac:… (see inventory.Key); empty for machines an operator added by hand.
	IdentityKey  string            `json:"identity_key,omitempty"`
	IPs          []string          `json:"ips,omitempty"`
	Summary      inventory.Summary `json:"summary,omitzero"`
	BMC          *BMC              `json:"bmc,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	LastSeen     time.Time         `json:"last_seen,omitzero"`
	Commissioned time.Time         `json:"commissioned,omitzero"`
	// Tags are the tags an operator gave the machine; rules never touch
	// them. Sorted.
	Tags []string `json:"tags,omitempty"`
	// AutoTags are the tags whose match rule matched the machine when it
	// was last evaluated (at commissioning, or when the tag was saved).
	// Sorted.
	AutoTags []string `json:"auto_tags,omitempty"`
	// Location is where the machine stands.
	Location Location `json:"location,omitzero"`
	// Layout names the interface layout an operator gave the machine
	// (rollcall net set ID -layout L); "" when none, and then the first
	// of its tags that names one, else the default, applies (see
	// raftfsm.MachinePlan). Its pinned addresses are IPAM records of kind
	// pinned, not fields here.
	Layout string `json:"layout,omitempty"`
	// Index is the Raft index of the command that last changed the record.
	Index uint64 `json:"index"`
}

var machineIDPattern = regexp.MustCompile(`^m-[0-9a-f]{12}$`)

// ValidMachineID reports whether s has the form m- + 12 lowercase hex digits.
func ValidMachineID(s string) bool { return machineIDPattern.MatchString(s) }

// NormalizeMAC returns a MAC in lowercase colon form, or an error naming the
// bad value.
func NormalizeMAC(s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return "", Errorf(ErrInvalid, "mac %q is not a 48-bit MAC address", clipMAC(s))
	}
	return hw.String(), nil
}

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidName checks a machine name: a DNS label (lowercase letters, digits,
// hyphens, at most 63 characters), and not something that looks like an ID.
func ValidName(s string) error {
	if !namePattern.MatchString(s) {
		return Errorf(ErrInvalid, "name %q must be a DNS label: lowercase letters, digits and '-', 1 to 63 characters", s)
	}
	if ValidMachineID(s) {
		return Errorf(ErrInvalid, "name %q has the form of a machine ID", s)
	}
	return nil
}

func ikey(value, id string) []byte { return []byte(value + "\x00" + id) }

// Machine returns the machine with this ID.
func (t *Tx) Machine(id string) (Machine, error) {
	raw := t.tx.Bucket(bucketMachines).Get([]byte(id))
	if raw == nil {
		return Machine{}, Errorf(ErrNotFound, "machine %q", id)
	}
	return t.decodeMachine(id, raw)
}

// MachineByRef finds a machine by ID or by name.
func (t *Tx) MachineByRef(ref string) (Machine, error) {
	if ValidMachineID(ref) {
		return t.Machine(ref)
	}
	if ids := t.lookup(bucketMachineByName, ref); len(ids) > 0 {
		return t.Machine(ids[0])
	}
	return Machine{}, Errorf(ErrNotFound, "machine %q", ref)
}

// MachineIDsByMAC returns the machines that have this MAC.
func (t *Tx) MachineIDsByMAC(mac string) []string { return t.lookup(bucketMachineByMAC, mac) }

// MachineIDsByUUID returns the machines with this system UUID.
func (t *Tx) MachineIDsByUUID(uuid string) []string {
	return t.lookup(bucketMachineByUUID, strings.ToLower(uuid))
}

// MachineIDsBySerial returns the machines with this serial number.
func (t *Tx) MachineIDsBySerial(serial string) []string { return t.lookup(bucketMachineBySer, serial) }

// MachineIDsByState returns the machines in this state.
func (t *Tx) MachineIDsByState(state string) []string { return t.lookup(bucketMachineByStat, state) }

// MachineIDsByName returns the machine with this name (names are unique:
// one at most).
func (t *Tx) MachineIDsByName(name string) []string { return t.lookup(bucketMachineByName, name) }

func (t *Tx) lookup(bucket []byte, value string) []string {
	if value == "" {
		return nil
	}
	b := t.tx.Bucket(bucket)
	if b == nil {
		return nil // an index made on first use, not made yet
	}
	var ids []string
	p := []byte(value + "\x00")
	c := b.Cursor()
	for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
		// A value with a NUL in it ("S\x00x") sorts under the prefix of
		// "S": its key's rest is not an ID, skip it.
		if id := k[len(p):]; bytes.IndexByte(id, 0) < 0 {
			ids = append(ids, string(id))
		}
	}
	return ids
}

// MachineFilter selects machines in Machines. Fields that are set must
// all hold.
type MachineFilter struct {
	State string // exact state, or "" for all
	Tag   string // carries this tag (manual or automatic), or ""
	Rack  string // stands in this rack, or ""
}

// Machines returns machines sorted by ID. A filter reads the records
// through the narrowest index it names (rack, tag, then state), not the
// whole table.
func (t *Tx) Machines(f MachineFilter) ([]Machine, error) {
	var out []Machine
	var ids []string
	switch {
	case f.Rack != "":
		ids = t.MachineIDsInRack(f.Rack)
	case f.Tag != "":
		ids = t.MachineIDsByTag(f.Tag)
	case f.State != "":
		ids = t.MachineIDsByState(f.State)
	}
	if f != (MachineFilter{}) {
		for _, id := range ids {
			m, err := t.Machine(id)
			if err != nil {
				return nil, err
			}
			if (f.State == "" || m.State == f.State) && (f.Tag == "" || m.HasTag(f.Tag)) && (f.Rack == "" || m.Location.Rack == f.Rack) {
				out = append(out, m)
			}
		}
		return out, nil
	}
	c := t.tx.Bucket(bucketMachines).Cursor()
	for k, raw := c.First(); k != nil; k, raw = c.Next() {
		m, err := t.decodeMachine(string(k), raw)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// CountMachines returns the number of machine records.
func (t *Tx) CountMachines() int { return t.tx.Bucket(bucketMachines).Stats().KeyN }

// PutMachine writes a machine and brings its indexes up to date. Name and
// MAC are unique: a clash fails with ErrConflict and writes nothing.
func (t *Tx) PutMachine(m Machine) error {
	if !t.write {
		return ErrReadOnly
	}
	if !ValidMachineID(m.ID) {
		return Errorf(ErrInvalid, "machine id %q", m.ID)
	}
	old, err := t.Machine(m.ID)
	if err != nil && !isNotFound(err) {
		return err
	}
	if err != nil {
		return t.putMachine(nil, m)
	}
	return t.putMachine(&old, m)
}

// ReplaceMachine is PutMachine for a caller that has just read the record
// in this transaction: old is that record, as it still is (not written
// since), so it is not read again. Commands that rewrite thousands of
// machines (a TagPut over a fleet) spend most of their time decoding
// records.
func (t *Tx) ReplaceMachine(old, m Machine) error {
	if !t.write {
		return ErrReadOnly
	}
	if old.ID != m.ID || !ValidMachineID(m.ID) {
		return Errorf(ErrInvalid, "machine id %q in place of %q", m.ID, old.ID)
	}
	return t.putMachine(&old, m)
}

// putMachine writes m over old (nil: a new record).
func (t *Tx) putMachine(old *Machine, m Machine) error {
	var err error
	// A name or MAC the record already held is its own: the index let
	// nobody else take it since. Only new ones are looked up (a tag save
	// rewrites 10,000 machines and changes neither).
	if m.Name != "" && (old == nil || old.Name != m.Name) {
		for _, id := range t.lookup(bucketMachineByName, m.Name) {
			if id != m.ID {
				return Errorf(ErrConflict, "name %q is taken by %s", m.Name, id)
			}
		}
	}
	for _, mac := range m.MACs {
		if old != nil && slices.Contains(old.MACs, mac) {
			continue
		}
		for _, id := range t.lookup(bucketMachineByMAC, mac) {
			if id != m.ID {
				return Errorf(ErrConflict, "mac %s belongs to %s", mac, id)
			}
		}
	}
	m.Index = t.Index
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", bucketMachines, m.ID, err)
	}
	if err := t.tx.Bucket(bucketMachines).Put([]byte(m.ID), raw); err != nil {
		return err
	}
	if t.machines != nil {
		// What it will decode to when read, when that is certain (see
		// decodesAs): a tag save reads back the machines it writes.
		if d, ok := m.clone().decodesAs(); ok {
			t.machines.put(m.ID, raw, d)
		} else {
			t.machines.drop(m.ID)
		}
	}
	if old != nil {
		err = t.reindex(*old, m)
	} else {
		err = t.index(m)
	}
	if err != nil {
		return err
	}
	if err := t.logChange("machines", m.ID, OpPut); err != nil {
		return err
	}
	return t.touch(TableMachines)
}

// DeleteMachine removes a machine, its index entries and its events.
func (t *Tx) DeleteMachine(id string) error {
	if !t.write {
		return ErrReadOnly
	}
	m, err := t.Machine(id)
	if err != nil {
		return err
	}
	if err := t.unindex(m); err != nil {
		return err
	}
	if err := t.del(bucketMachines, id); err != nil {
		return err
	}
	if t.machines != nil {
		t.machines.drop(id)
	}
	if err := t.deletePrefix(bucketEvents, id+"\x00"); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketInventory).Delete([]byte(id)); err != nil {
		return err
	}
	if err := t.logChange("machines", id, OpDelete); err != nil {
		return err
	}
	return t.touch(TableMachines)
}

func (t *Tx) deletePrefix(bucket []byte, prefix string) error {
	b := t.tx.Bucket(bucket)
	p := []byte(prefix)
	c := b.Cursor()
	for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Seek(p) {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

type indexEntry struct {
	bucket []byte
	value  string
}

func (e indexEntry) same(o indexEntry) bool {
	return e.value == o.value && bytes.Equal(e.bucket, o.bucket)
}

// BMC is a machine's baseboard management controller as Rollcall knows it.
// PasswordSealed is AES-256-GCM under the cluster master key; no API answer
// carries it.
type BMC struct {
	Driver         string `json:"driver,omitempty"`
	Address        string `json:"address,omitempty"`
	MAC            string `json:"mac,omitempty"`
	User           string `json:"user,omitempty"`
	PasswordSealed []byte `json:"password_sealed,omitempty"`
	PasswordAAD    string `json:"password_aad,omitempty"` // what the seal is bound to
	// CertSHA256 pins an HTTPS BMC's certificate: no credentials go to a
	// BMC presenting another one.
	CertSHA256 string `json:"cert_sha256,omitempty"`
	// Operator is set when an operator chose the driver and address: they
	// are never changed automatically (Redfish detection) after that.
	Operator  bool              `json:"operator,omitempty"`
	Source    string            `json:"source,omitempty"`
	Settings  map[string]string `json:"settings,omitempty"`
	Errors    []string          `json:"errors,omitempty"`
	UpdatedAt time.Time         `json:"updated_at,omitzero"`
}

// MachineIDsByKey returns the machines recognised by this identity key.
func (t *Tx) MachineIDsByKey(key string) []string { return t.lookup(bucketMachineByKey, key) }

// MachineIDsByIP returns the machines that have this address.
func (t *Tx) MachineIDsByIP(ip string) []string { return t.lookup(bucketMachineByIP, ip) }

// Inventory returns the last inventory report stored for a machine, as the
// agent sent it (without the BMC password), as JSON.
func (t *Tx) Inventory(id string) ([]byte, error) {
	b := t.tx.Bucket(bucketInventory).Get([]byte(id))
	if b == nil {
		return nil, Errorf(ErrNotFound, "inventory of %q", id)
	}
	return ExpandDocument(b)
}

// PutInventory stores a machine's inventory report: JSON, or the form
// CompressDocument made.
func (t *Tx) PutInventory(id string, doc []byte) error {
	if !t.write {
		return ErrReadOnly
	}
	if err := t.tx.Bucket(bucketInventory).Put([]byte(id), doc); err != nil {
		return err
	}
	return t.logChange(ChangesInventory, id, OpPut)
}

func machineIndexes(m Machine) []indexEntry {
	e := []indexEntry{{bucketMachineByStat, m.State}}
	if m.IdentityKey != "" {
		e = append(e, indexEntry{bucketMachineByKey, m.IdentityKey})
	}
	for _, ip := range m.IPs {
		e = append(e, indexEntry{bucketMachineByIP, ip})
	}
	if m.Name != "" {
		e = append(e, indexEntry{bucketMachineByName, m.Name})
	}
	if m.SystemUUID != "" {
		e = append(e, indexEntry{bucketMachineByUUID, strings.ToLower(m.SystemUUID)})
	}
	if m.Serial != "" {
		e = append(e, indexEntry{bucketMachineBySer, m.Serial})
	}
	for _, mac := range m.MACs {
		e = append(e, indexEntry{bucketMachineByMAC, mac})
	}
	// A tag both manual and automatic is one entry: Put and Delete of the
	// same key twice do the same as once.
	for _, tag := range m.Tags {
		e = append(e, indexEntry{bucketMachineByTag, tag})
	}
	for _, tag := range m.AutoTags {
		e = append(e, indexEntry{bucketMachineByTag, tag})
	}
	if m.Location.Rack != "" {
		e = append(e, indexEntry{bucketMachineByRack, m.Location.Rack})
	}
	if m.Layout != "" {
		e = append(e, indexEntry{bucketMachineByLayout, m.Layout})
	}
	return e
}

func (t *Tx) index(m Machine) error {
	for _, e := range machineIndexes(m) {
		if err := t.ensureBuckets(e.bucket); err != nil {
			return err
		}
		if err := t.tx.Bucket(e.bucket).Put(ikey(e.value, m.ID), nil); err != nil {
			return err
		}
	}
	return nil
}

// reindex moves a machine's index entries from old to m, touching only
// the ones that differ: a command that retags 10,000 machines rewrites
// their tag entries, not their MAC, name and state entries.
func (t *Tx) reindex(old, m Machine) error {
	if sameIndexedButTags(old, m) {
		return t.retag(old, m)
	}
	before, after := machineIndexes(old), machineIndexes(m)
	// A machine has a few dozen entries at most: comparing each with each
	// costs less than the maps of keys it would take otherwise.
	for _, e := range before {
		if slices.ContainsFunc(after, e.same) {
			continue
		}
		if b := t.tx.Bucket(e.bucket); b != nil {
			if err := b.Delete(ikey(e.value, m.ID)); err != nil {
				return err
			}
		}
	}
	for _, e := range after {
		if slices.ContainsFunc(before, e.same) {
			continue
		}
		if err := t.ensureBuckets(e.bucket); err != nil {
			return err
		}
		if err := t.tx.Bucket(e.bucket).Put(ikey(e.value, m.ID), nil); err != nil {
			return err
		}
	}
	return nil
}

// sameIndexedButTags: every indexed field but the tags is as it was (a tag
// save, a placement in the same rack).
func sameIndexedButTags(a, b Machine) bool {
	return a.State == b.State && a.IdentityKey == b.IdentityKey && a.Name == b.Name && a.SystemUUID == b.SystemUUID &&
		a.Serial == b.Serial && a.Location.Rack == b.Location.Rack && a.Layout == b.Layout &&
		slices.Equal(a.IPs, b.IPs) && slices.Equal(a.MACs, b.MACs)
}

// retag moves the tag index entries of a machine whose other indexed
// fields did not change: reindex's work without listing every entry.
func (t *Tx) retag(old, m Machine) error {
	has := func(x Machine, tag string) bool {
		return slices.Contains(x.Tags, tag) || slices.Contains(x.AutoTags, tag)
	}
	for _, list := range [][]string{old.Tags, old.AutoTags} {
		for _, tag := range list {
			if has(m, tag) {
				continue
			}
			if b := t.tx.Bucket(bucketMachineByTag); b != nil {
				if err := b.Delete(ikey(tag, m.ID)); err != nil {
					return err
				}
			}
		}
	}
	for _, list := range [][]string{m.Tags, m.AutoTags} {
		for _, tag := range list {
			if has(old, tag) {
				continue
			}
			if err := t.ensureBuckets(bucketMachineByTag); err != nil {
				return err
			}
			if err := t.tx.Bucket(bucketMachineByTag).Put(ikey(tag, m.ID), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *Tx) unindex(m Machine) error {
	for _, e := range machineIndexes(m) {
		if b := t.tx.Bucket(e.bucket); b != nil {
			if err := b.Delete(ikey(e.value, m.ID)); err != nil {
				return err
			}
		}
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// Event is one entry in a machine's history.
type Event struct {
	Machine string    `json:"machine"`
	Index   uint64    `json:"index"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
}

// eventKey orders a machine's events by the Raft index that recorded them;
// seq separates events recorded by one command.
func eventKey(machine string, index uint64, seq uint32) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], index)
	binary.BigEndian.PutUint32(b[8:], seq)
	return machine + "\x00" + string(b[:])
}

// AddEvent appends an event to a machine's history, stamped with the
// current command's index.
func (t *Tx) AddEvent(e Event) error {
	if !t.write {
		return ErrReadOnly
	}
	e.Index = t.Index
	for seq := uint32(0); ; seq++ {
		k := eventKey(e.Machine, t.Index, seq)
		if t.tx.Bucket(bucketEvents).Get([]byte(k)) == nil {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := t.tx.Bucket(bucketEvents).Put([]byte(k), b); err != nil {
				return err
			}
			if err := t.logChange("events", hex.EncodeToString([]byte(k)), OpPut); err != nil {
				return err
			}
			return t.touch(TableMachines)
		}
	}
}

// EventByChangeKey reads the event a change-log entry of table "events"
// names.
func (t *Tx) EventByChangeKey(key string) (Event, error) {
	var e Event
	k, err := hex.DecodeString(key)
	if err != nil {
		return e, Errorf(ErrInvalid, "event key %q", key)
	}
	b := t.tx.Bucket(bucketEvents).Get(k)
	if b == nil {
		return e, Errorf(ErrNotFound, "event %q", key)
	}
	return e, json.Unmarshal(b, &e)
}

// Events returns a machine's events, oldest first.
func (t *Tx) Events(machine string) ([]Event, error) {
	var out []Event
	err := forEachJSON(t, bucketEvents, machine+"\x00", func(_ string, e *Event) error {
		out = append(out, *e)
		return nil
	})
	return out, err
}
