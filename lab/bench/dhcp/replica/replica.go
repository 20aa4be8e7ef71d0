// Package replica is a replicated store for DHCP tests and benchmarks (and
// the BMC job runner's tests): n bbolt stores, each behind a raftfsm.FSM,
// fed one ordered log the way a Raft cluster feeds its members, without the
// network. Writes are grouped (one ApplyBatch per store for everything
// queued, as raft's BatchApplyCh does), and a member can be cut off: its
// writes fail and it stops receiving entries until it is healed, when it
// catches up.
package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/dhcp/lease"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// ErrCutOff is returned by a member's writes while it is partitioned.
var ErrCutOff = errors.New("replica: member cut off from the quorum")

// Cluster is n stores fed one log.
type Cluster struct {
	Now func() time.Time

	mu      sync.Mutex
	log     []*raft.Log
	members []*member
	queue   []*proposal
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

type member struct {
	name    string
	db      *store.DB
	fsm     *raftfsm.FSM
	applied int // entries of log applied
	cut     bool
}

type proposal struct {
	from int
	data []byte
	res  chan error
}

// New opens n stores under dir, named n1…nn.
func New(dir string, n int, now func() time.Time) (*Cluster, error) {
	if now == nil {
		now = time.Now
	}
	c := &Cluster{Now: now, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	for i := 1; i <= n; i++ {
		db, err := store.Open(filepath.Join(dir, fmt.Sprintf("n%d.db", i)))
		if err != nil {
			c.Close()
			return nil, err
		}
		f, err := raftfsm.NewFSM(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			db.Close()
			c.Close()
			return nil, err
		}
		c.members = append(c.members, &member{name: fmt.Sprintf("n%d", i), db: db, fsm: f})
	}
	go c.applier()
	return c, nil
}

// Close stops the log and closes the stores.
func (c *Cluster) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
		<-c.done
	}
	for _, m := range c.members {
		m.db.Close()
	}
}

// DB is member i's store (0-based).
func (c *Cluster) DB(i int) *store.DB { return c.members[i].db }

// Name is member i's node name.
func (c *Cluster) Name(i int) string { return c.members[i].name }

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Cut partitions member i (on) or heals it (off); a healed member catches up
// before Cut returns.
func (c *Cluster) Cut(i int, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	m.cut = on
	if !on {
		c.catchUp(m)
	}
}

func (c *Cluster) catchUp(m *member) {
	if m.applied < len(c.log) {
		m.fsm.ApplyBatch(c.log[m.applied:])
		m.applied = len(c.log)
	}
}

// Apply proposes cmd from member i and waits until it is applied on every
// member that is not cut off; it returns the command's business error.
func (c *Cluster) Apply(ctx context.Context, i int, cmd raftfsm.Command) error {
	c.mu.Lock()
	cut := c.members[i].cut
	c.mu.Unlock()
	if cut {
		return ErrCutOff
	}
	data, err := raftfsm.Encode(cmd)
	if err != nil {
		return err
	}
	p := &proposal{from: i, data: data, res: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-p.res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("replica: %w", ctx.Err())
	}
}

func (c *Cluster) applier() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		for {
			c.mu.Lock()
			q := c.queue
			c.queue = nil
			if len(q) == 0 {
				c.mu.Unlock()
				break
			}
			start := len(c.log)
			var lost []bool // proposer cut off before its entry reached it: outcome unknown to it
			for _, p := range q {
				lost = append(lost, c.members[p.from].cut)
			}
			for k, p := range q {
				c.log = append(c.log, &raft.Log{Index: uint64(start + k + 1), Term: 1, Type: raft.LogCommand, Data: p.data})
			}
			// Members apply one after the other: on a two-core machine that
			// shares its CPUs with the DHCP server and the load generator,
			// three parallel applies would starve the server in bursts.
			var results []any
			for _, m := range c.members {
				if m.cut {
					continue
				}
				from := m.applied
				m.applied = len(c.log)
				r := m.fsm.ApplyBatch(c.log[from:])
				if results == nil {
					results = r[len(r)-len(q):]
				}
			}
			c.mu.Unlock()
			for k, p := range q {
				var err error
				if lost[k] {
					p.res <- ErrCutOff
					continue
				}
				if results != nil {
					if res, ok := results[k].(*raftfsm.Result); ok {
						err = res.Err
					}
				}
				p.res <- err
			}
		}
	}
}

// Node is member i's lease.Replicator and lease.Housekeeper.
func (c *Cluster) Node(i int) *Node { return &Node{c: c, i: i, name: c.members[i].name} }

// Node writes as one member.
type Node struct {
	c    *Cluster
	i    int
	name string
	// Delay slows every write (a distant or loaded leader).
	Delay time.Duration
}

var (
	_ lease.Replicator  = (*Node)(nil)
	_ lease.Housekeeper = (*Node)(nil)
)

func (n *Node) apply(ctx context.Context, cmd raftfsm.Command) error {
	if n.Delay > 0 {
		time.Sleep(n.Delay)
	}
	return n.c.Apply(ctx, n.i, cmd)
}

func (n *Node) ClaimBlock(ctx context.Context, subnet netip.Prefix, first, last netip.Addr, expires time.Time) error {
	return n.apply(ctx, &raftfsm.LeaseBlockClaim{Subnet: subnet, First: first, Last: last, Node: n.name, Expires: expires, Now: n.c.Now()})
}

func (n *Node) RenewBlocks(ctx context.Context, firsts []netip.Addr, expires time.Time) error {
	return n.apply(ctx, &raftfsm.LeaseBlockRenew{Node: n.name, Blocks: firsts, Expires: expires, Now: n.c.Now()})
}

func (n *Node) ReleaseBlocks(ctx context.Context, firsts []netip.Addr, quarantine time.Time) error {
	return n.apply(ctx, &raftfsm.LeaseBlockRelease{Node: n.name, Blocks: firsts, Quarantine: quarantine, Now: n.c.Now()})
}

func (n *Node) ReclaimBlocks(ctx context.Context, node string, firsts []netip.Addr, quarantine time.Time) error {
	return n.apply(ctx, &raftfsm.LeaseBlockRelease{Node: node, Blocks: firsts, Quarantine: quarantine, Now: n.c.Now()})
}

func (n *Node) ExpireLeases(ctx context.Context, first, last netip.Addr) error {
	return n.apply(ctx, &raftfsm.LeaseExpire{First: first, Last: last, Now: n.c.Now()})
}

func (n *Node) Batch(ctx context.Context, grants []lease.Grant, releases []lease.Release, seen []store.Seen) error {
	b := &raftfsm.LeaseBatch{Node: n.name, Now: n.c.Now(), Seen: raftfsm.SeenBody(seen)}
	for _, g := range grants {
		b.Grants = append(b.Grants, raftfsm.LeaseGrant{IP: g.IP, MAC: g.MAC, ClientID: g.ClientID, Hostname: g.Hostname, Granted: g.Granted, Expires: g.Expires})
	}
	for _, r := range releases {
		b.Releases = append(b.Releases, raftfsm.LeaseRelease{IP: r.IP, MAC: r.MAC, Declined: r.Declined, Until: r.Until})
	}
	return n.apply(ctx, b)
}

// Network puts a fabric, VLAN, subnet and dynamic range in the log, as an
// operator would.
func (c *Cluster) Network(ctx context.Context, vlan store.VLAN, subnet store.Subnet, ranges ...store.Range) error {
	now := c.Now()
	cmds := []raftfsm.Command{&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: vlan.Fabric, Kind: store.FabricEthernet, Created: now}}}
	// A VLAN is served by members of the cluster: the nodes it names are.
	for _, srv := range vlan.Servers {
		cmds = append(cmds, &raftfsm.NodePut{Node: raftfsm.Node{Name: srv.Node, RaftAddr: "replica/" + srv.Node, Joined: now}})
	}
	vlan.Created = now
	subnet.Created = now
	cmds = append(cmds, &raftfsm.VLANPut{VLAN: raftfsm.VLANBody(vlan)}, &raftfsm.SubnetPut{Subnet: raftfsm.SubnetBody(subnet)})
	for _, r := range ranges {
		r.Created = now
		cmds = append(cmds, &raftfsm.RangePut{Range: raftfsm.RangeBody(r)})
	}
	for _, cmd := range cmds {
		if err := c.Apply(ctx, 0, cmd); err != nil {
			return fmt.Errorf("replica: %T: %w", cmd, err)
		}
	}
	return nil
}

// Apply0 applies any command from member 0 (machines, addresses).
func (c *Cluster) Apply0(ctx context.Context, cmd raftfsm.Command) error { return c.Apply(ctx, 0, cmd) }
