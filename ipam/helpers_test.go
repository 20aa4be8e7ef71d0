package ipam_test

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// copyFSM is one node's copy of the state: a real store under t.TempDir()
// driven by the real state machine with synthetic log entries (fsmtest),
// asked the questions IPAM answers.
type copyFSM struct {
	*fsmtest.Log
	t testing.TB
}

func newCopy(t testing.TB) *copyFSM { return &copyFSM{Log: fsmtest.Open(t), t: t} }

func encode(t testing.TB, c raftfsm.Command) []byte {
	t.Helper()
	b, err := raftfsm.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// must applies setup commands that have to succeed.
func (c *copyFSM) must(cmds ...raftfsm.Command) {
	c.t.Helper()
	c.Must(c.t, cmds...)
}

func (c *copyFSM) pick(p netip.Prefix) (netip.Addr, error) {
	var a netip.Addr
	err := c.DB.View(func(tx *store.Tx) error {
		var err error
		a, err = ipam.Pick(tx, p)
		return err
	})
	return a, err
}

// used lists the recorded addresses inside p (every one when p is zero).
func (c *copyFSM) used(p netip.Prefix) []store.Address {
	c.t.Helper()
	var out []store.Address
	if err := c.DB.View(func(tx *store.Tx) error {
		var err error
		out, err = tx.Addresses(p, 0)
		return err
	}); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// dump renders the whole network model for comparisons.
func (c *copyFSM) dump() string {
	c.t.Helper()
	var v struct {
		Fabrics   []store.Fabric
		VLANs     []store.VLAN
		Subnets   []store.Subnet
		Ranges    []store.Range
		Addresses []store.Address
	}
	err := c.DB.View(func(tx *store.Tx) (err error) {
		if v.Fabrics, err = tx.Fabrics(); err != nil {
			return err
		}
		if v.VLANs, err = tx.VLANs(); err != nil {
			return err
		}
		if v.Subnets, err = tx.Subnets(); err != nil {
			return err
		}
		if v.Ranges, err = tx.Ranges(netip.Prefix{}); err != nil {
			return err
		}
		v.Addresses, err = tx.Addresses(netip.Prefix{}, 0)
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

var (
	t0        = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	machineID = fsmtest.MachineID
	mac       = fsmtest.MAC
)

// commissioned is a machine that reported addresses in its inventory.
func commissioned(i int, ips ...string) raftfsm.Command {
	m := mac(i)
	return &raftfsm.Commission{
		NewID:     machineID(i),
		Identity:  raftfsm.Identity{Key: inventory.Key("", "", m), BootMAC: m},
		IPs:       ips,
		Inventory: json.RawMessage(`{}`),
		Now:       t0,
	}
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

func fabric(name string) raftfsm.Command {
	return &raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: name, Kind: store.FabricEthernet, Created: t0}}
}

func vlan(fab string, vid int) raftfsm.Command {
	return &raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: fab, VID: vid, DHCP: store.DHCPOff, Created: t0}}
}

func subnet(cidr, gw string) raftfsm.Command {
	s := store.Subnet{CIDR: pfx(cidr), Fabric: "hall-a", VID: 0, Purpose: "provisioning", Created: t0}
	if gw != "" {
		s.Gateway = ip(gw)
	}
	return &raftfsm.SubnetPut{Subnet: raftfsm.SubnetBody(s)}
}

func rng(cidr, kind, first, last string) raftfsm.Command {
	return &raftfsm.RangePut{Range: raftfsm.Range{Subnet: pfx(cidr), Kind: kind, First: ip(first), Last: ip(last), Created: t0}}
}

func claim(how, addr, machine string) raftfsm.Command {
	return &raftfsm.AddressClaim{Address: raftfsm.Address{IP: ip(addr), How: how, Machine: machine, Created: t0}}
}

func reserve(addr, name string) raftfsm.Command {
	return &raftfsm.AddressClaim{Address: raftfsm.Address{IP: ip(addr), How: store.HowReserved, Name: name, Created: t0}}
}

func release(addr string) raftfsm.Command { return &raftfsm.AddressRelease{IP: ip(addr)} }

// site is the reference's example: hall-a, VLAN 0, 10.50.0.0/24 with
// reserved, static and dynamic ranges, and a machine to give addresses to.
func site(t testing.TB) *copyFSM {
	c := newCopy(t)
	c.must(
		fabric("hall-a"), vlan("hall-a", 0),
		subnet("10.50.0.0/24", "10.50.0.1"),
		rng("10.50.0.0/24", store.RangeReserved, "10.50.0.1", "10.50.0.20"),
		rng("10.50.0.0/24", store.RangeStatic, "10.50.0.50", "10.50.0.199"),
		rng("10.50.0.0/24", store.RangeDynamic, "10.50.0.200", "10.50.0.250"),
		&raftfsm.MachineCreate{ID: machineID(1), Name: "node1", Now: t0},
	)
	return c
}
