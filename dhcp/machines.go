package dhcp

import (
	"net/netip"
	"sync"

	"github.com/rollcall/rollcall/dhcp/full"
	"github.com/rollcall/rollcall/store"
)

// machineCache answers full mode's "is this a known machine with an
// address here?" from memory: what the store said for each MAC and
// subnet, until the machines or network tables change. Every DISCOVER and
// REQUEST asks, and a read transaction per packet was a twentieth of the
// server's CPU in lab/bench/dhcp; a client's REQUEST and renewals now find
// the answer its DISCOVER left.
type machineCache struct {
	db *store.DB

	mu sync.Mutex
	// changed is closed by the store's next commit to those tables: the
	// answers in m are good until then. It is taken before any answer in
	// m was read, so a change that lands during a read is not missed.
	changed <-chan struct{}
	m       map[machineKey]machineAnswer
}

type machineKey struct {
	mac    string
	subnet netip.Prefix
}

type machineAnswer struct {
	a     full.Assignment
	found bool
}

// maxCachedMachines bounds the cache; past it, it starts over.
const maxCachedMachines = 100000

func newMachineCache(db *store.DB) *machineCache {
	return &machineCache{db: db}
}

// Assigned is the machine's address in subnet, if a known machine has the
// MAC and an address there.
func (c *machineCache) Assigned(mac string, subnet netip.Prefix) (full.Assignment, bool) {
	k := machineKey{mac, subnet}
	c.mu.Lock()
	c.freshLocked()
	e, ok := c.m[k]
	changed := c.changed
	c.mu.Unlock()
	if ok {
		return e.a, e.found
	}
	a, found := assigned(c.db, mac, subnet)
	c.mu.Lock()
	if !closed(changed) && c.changed == changed { // nothing changed since before the read
		c.m[k] = machineAnswer{a, found}
	}
	c.mu.Unlock()
	return a, found
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// freshLocked drops every answer once the tables changed (or when there
// are too many) and watches for the next change.
func (c *machineCache) freshLocked() {
	if c.changed != nil && !closed(c.changed) && len(c.m) < maxCachedMachines {
		return
	}
	c.changed = c.db.WatchTables(store.TableMachines, store.TableNetwork, store.TableStatelessNodes)
	c.m = make(map[machineKey]machineAnswer)
}

// assigned reads a known machine's address in subnet from the store.
func assigned(db *store.DB, mac string, subnet netip.Prefix) (full.Assignment, bool) {
	var out full.Assignment
	found := false
	_ = db.View(func(tx *store.Tx) error {
		for _, id := range tx.MachineIDsByMAC(mac) {
			addrs, err := tx.MachineAddresses(id)
			if err != nil {
				continue
			}
			for _, a := range addrs {
				if subnet.Contains(a.IP) {
					out.IP, found = a.IP, true
					if mc, err := tx.Machine(id); err == nil {
						out.Hostname = mc.Name
					}
					// A stateless node is known by its node name.
					if n, err := tx.StatelessNode(id); err == nil {
						out.Hostname = n.Name
					}
					return nil
				}
			}
		}
		return nil
	})
	return out, found
}
