package dhcp

import (
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/rollcall/rollcall/dhcp/boot"
	"github.com/rollcall/rollcall/dhcp/lease"
	"github.com/rollcall/rollcall/store"
)

// Replicator writes this node's lease state through Raft (see
// lease.Replicator for the contract).
type Replicator = lease.Replicator

// Housekeeper is the leader's cleanup through Raft (see lease.Housekeeper).
type Housekeeper = lease.Housekeeper

// Grant mirrors raftfsm.LeaseGrant.
type Grant = lease.Grant

// Release mirrors raftfsm.LeaseRelease.
type Release = lease.Release

// BootConfig names the boot loaders and where they are served.
type BootConfig = boot.Config

// Network is one subnet served on one interface.
type Network struct {
	Iface  string       // the node's interface the VLAN is on
	VLAN   string       // "fabric/vid", recorded in sightings
	Subnet netip.Prefix // IPv4
	Mode   string       // store.DHCPFull or store.DHCPProxy
	// Addr is this node's address answering for the network (option 54,
	// siaddr, boot URLs). Empty: the interface's address inside Subnet, else
	// its first IPv4 address.
	Addr netip.Addr
	// BootLoader is the VLAN's store.BootLoader: store.BootLoaderPXELinux
	// hands BIOS PXE firmware Boot.LegacyBIOS instead of iPXE.
	BootLoader string
}

// Config is the DHCP service of one appliance node.
type Config struct {
	Node string    // this node's name, as in store.VLANServer.Node
	DB   *store.DB // the local copy of the replicated store (read only)

	Replicator  Replicator
	Housekeeper Housekeeper // used while IsLeader() is true; nil: none
	IsLeader    func() bool

	// Networks to serve. Empty: every subnet of every VLAN whose Servers
	// list this node, in the VLAN's mode, read from the store at start.
	Networks []Network

	Boot BootConfig

	LeaseTime time.Duration // longest lease; default 1h
	BlockSize int           // addresses per lease block, the same on every node; default 64
	// BlockTTL is how long a block claim lasts unless renewed; default
	// twice LeaseTime. A lease never outlives its block, so it must exceed
	// LeaseTime for clients to get full leases; it is also how long a dead
	// node's addresses stay out of use.
	BlockTTL      time.Duration
	LowWater      int           // free addresses kept ready per subnet; default 2 blocks
	OfferHold     time.Duration // default 30s
	DeclineHold   time.Duration // default 10m
	ClockSkew     time.Duration // allowed between nodes; default 5s
	BatchInterval time.Duration // default 100ms
	BatchMax      int           // default 512
	Housekeeping  time.Duration // leader's expiry round; default 30s
	SeenEvery     time.Duration // a MAC's sighting is replicated at most this often; default 1m

	// RatePerMAC and RateBurst bound the packets accepted from one MAC
	// (token bucket); default 10/s with bursts of 20.
	RatePerMAC float64
	RateBurst  int
	// Workers read each socket concurrently; default 2, or 1 on a
	// one-CPU machine (or a process confined to one CPU).
	Workers int
	// WorkersAhead runs the reader threads at nice 0, for a process whose
	// other threads run at a positive nice value (rollcall serve: see
	// node.LowerBackground): replies then go ahead of the node's
	// background work (Raft, applying lease batches, the collector)
	// instead of queueing behind it.
	WorkersAhead bool

	// Handoff, shared by the services one process starts one after the
	// other (the appliance restarts its service when the network model or
	// an interface address changes), lets a service that stopped cleanly
	// pass its lease blocks to the next one. Without it every start
	// quarantines the blocks the node held, as after a crash.
	Handoff *Handoff

	Metrics *Metrics
	Now     func() time.Time // default time.Now
}

func (c Config) withDefaults() Config {
	if c.LeaseTime <= 0 {
		c.LeaseTime = time.Hour
	}
	if c.BlockSize <= 0 {
		c.BlockSize = 64
	}
	if c.BlockTTL <= 0 {
		c.BlockTTL = 2 * c.LeaseTime
	}
	if c.LowWater <= 0 {
		c.LowWater = 2 * c.BlockSize
	}
	if c.OfferHold <= 0 {
		c.OfferHold = 30 * time.Second
	}
	if c.DeclineHold <= 0 {
		c.DeclineHold = 10 * time.Minute
	}
	if c.ClockSkew <= 0 {
		c.ClockSkew = 5 * time.Second
	}
	if c.BatchInterval <= 0 {
		c.BatchInterval = 100 * time.Millisecond
	}
	if c.BatchMax <= 0 {
		c.BatchMax = 512
	}
	if c.Housekeeping <= 0 {
		c.Housekeeping = 30 * time.Second
	}
	if c.SeenEvery <= 0 {
		c.SeenEvery = time.Minute
	}
	if c.RatePerMAC <= 0 {
		c.RatePerMAC = 10
	}
	if c.RateBurst <= 0 {
		c.RateBurst = 20
	}
	if c.Workers <= 0 {
		// No more readers than CPUs: two threads taking turns on one CPU
		// add each other's time slices to reply latency (lab/bench/dhcp
		// with the server confined to one CPU: fewer failed exchanges
		// with one reader).
		c.Workers = min(2, runtime.NumCPU())
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.IsLeader == nil {
		c.IsLeader = func() bool { return false }
	}
	c.Boot = c.Boot.WithDefaults()
	return c
}

func (c Config) validate() error {
	if c.Node == "" {
		return fmt.Errorf("dhcp: Node is required")
	}
	if c.DB == nil {
		return fmt.Errorf("dhcp: DB is required")
	}
	for _, n := range c.Networks {
		if n.Mode != store.DHCPFull && n.Mode != store.DHCPProxy {
			return fmt.Errorf("dhcp: network %s on %s: mode %q is not one of %s, %s", n.Subnet, n.Iface, n.Mode, store.DHCPFull, store.DHCPProxy)
		}
		if !n.Subnet.Addr().Is4() {
			return fmt.Errorf("dhcp: network %s on %s: only IPv4 subnets are served", n.Subnet, n.Iface)
		}
		if n.Iface == "" {
			return fmt.Errorf("dhcp: network %s: Iface is required", n.Subnet)
		}
		if n.BootLoader != "" && n.BootLoader != store.BootLoaderIPXE && n.BootLoader != store.BootLoaderPXELinux {
			return fmt.Errorf("dhcp: network %s on %s: boot loader %q is not one of %s, %s", n.Subnet, n.Iface, n.BootLoader, store.BootLoaderIPXE, store.BootLoaderPXELinux)
		}
		if n.Mode == store.DHCPFull && c.Replicator == nil {
			return fmt.Errorf("dhcp: full mode on %s needs a Replicator", n.Iface)
		}
		if err := checkReplyFits(n, c.Boot); err != nil {
			return err
		}
	}
	return nil
}

// networksFromStore lists what this node serves according to the network
// model: subnets of VLANs whose Servers name this node.
func networksFromStore(db *store.DB, node string) ([]Network, error) {
	var out []Network
	err := db.View(func(tx *store.Tx) error {
		vlans, err := tx.VLANs()
		if err != nil {
			return err
		}
		subnets, err := tx.Subnets()
		if err != nil {
			return err
		}
		for _, v := range vlans {
			if v.DHCP != store.DHCPFull && v.DHCP != store.DHCPProxy {
				continue
			}
			for _, srv := range v.Servers {
				if srv.Node != node {
					continue
				}
				for _, s := range subnets {
					if s.Fabric == v.Fabric && s.VID == v.VID && s.CIDR.Addr().Is4() {
						out = append(out, Network{Iface: srv.Iface, VLAN: v.Fabric + "/" + strconv.Itoa(v.VID), Subnet: s.CIDR, Mode: v.DHCP, BootLoader: v.BootLoader})
					}
				}
			}
		}
		return nil
	})
	return out, err
}

// Handoff passes a node's lease blocks from a DHCP service that stopped
// cleanly to the next one started in the same process. A stop is clean when
// every grant it made was replicated after its sockets closed: the store
// then holds every lease from those blocks, and the next service loads them
// and leases on, instead of quarantining the blocks for a lease time (on a
// small range, that left nothing to lease for an hour after a restart).
type Handoff struct {
	mu    sync.Mutex
	clean bool
}

func (h *Handoff) set(clean bool) {
	if h != nil {
		h.mu.Lock()
		h.clean = clean
		h.mu.Unlock()
	}
}

// take reports whether the last service stopped cleanly, and forgets it:
// one handoff per stop.
func (h *Handoff) take() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.clean
	h.clean = false
	return c
}
