package lease

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"log/slog"
	"math"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/rollcall/rollcall/store"
)

// PoolConfig configures the dynamic leases of one subnet on one node.
type PoolConfig struct {
	Node    string
	Subnet  netip.Prefix
	DB      *store.DB
	Rep     Replicator
	Batcher *Batcher
	// BlockSize is how many addresses a block spans; every node must use
	// the same size, since blocks are cut from each range's first address.
	BlockSize int
	// BlockTTL is how long a claim or renewal holds a block.
	BlockTTL time.Duration
	// LeaseTime is the longest lease handed out.
	LeaseTime time.Duration
	// OfferHold keeps an offered address for the client that long.
	OfferHold time.Duration
	// DeclineHold keeps a declined address out of use that long.
	DeclineHold time.Duration
	// Margin is the clock skew allowed between nodes: a block is used
	// only until Margin before it expires.
	Margin time.Duration
	// LowWater is the fewest free addresses to keep ready; below it the
	// pool claims blocks. Under load the pool keeps more: two seconds of
	// the rate at which it hands out new addresses (see lowWater).
	LowWater int
	// Exclude lists addresses never handed out (this node's own).
	Exclude []netip.Addr
	Now     func() time.Time
	Log     *slog.Logger
	Stats   PoolStats
}

// PoolStats receives gauges.
type PoolStats interface {
	PoolState(subnet netip.Prefix, blocks, free int)
}

// Verdict is the answer to a REQUEST.
type Verdict int

// Verdicts.
const (
	ACK    Verdict = iota
	NAK            // the client may not have that address: tell it
	Silent         // another node's lease: let that node answer
)

type state uint8

const (
	offered state = iota
	bound
	releasing // released by the client; free once the release is replicated
	declined
)

type entry struct {
	ip       netip.Addr
	mac      string
	clientID string
	hostname string
	st       state
	until    time.Time
	blk      *block
}

type block struct {
	first, last netip.Addr
	expires     time.Time
	free        []netip.Addr
}

// Pool leases addresses from the blocks this node owns in one subnet.
type Pool struct {
	cfg PoolConfig

	mu      sync.Mutex
	ready   bool
	blocks  []*block // by first address
	entries map[netip.Addr]*entry
	byMAC   map[string]*entry
	nfree   int
	kick    chan struct{}
	warned  time.Time
	swept   time.Time // wall clock: a throttle, not lease time
	// noBlock is when a claim last found no block to claim: kicks do not
	// rescan the store again for a second (only the ticker does), or a
	// pool below its low water mark on an exhausted range would rescan on
	// every packet (measured: a fifth of the server's CPU).
	noBlock time.Time
	scans   int // claim scans of the store (tests)
	// taken counts new addresses asked for since demandAt (handed out, or
	// refused because the pool was dry); demand is the rate of that,
	// rising at once and decaying slowly.
	taken    int
	demand   float64
	demandAt time.Time
	// reserve is the range's share kept free at any time (reserveShare),
	// set from the ranges on every claim scan.
	reserve int
}

// A pool keeps 1/reserveShare of its subnet's dynamic addresses free, at
// most maxReserve, even when idle: a burst from nothing (a rack powering on
// at once; perfdhcp starting at 10,000 clients/s) is answered from it while
// the demand-driven claims catch up, instead of finding a pool of LowWater
// addresses that lasts 13 ms (lab/bench/dhcp: 0.6% of the first second's
// DISCOVERs unanswered). A share, so that small ranges stay shared between
// the nodes serving them; what a node holds is out of use for up to two
// lease times if it dies, so the share is small.
const (
	reserveShare = 32
	maxReserve   = 4096
)

// demandWindow is how many seconds of demand the pool keeps free beyond
// LowWater: enough that a burst of new clients (a rack powering on, or
// perfdhcp at 10,000 clients/s) never waits for the Raft round trips of
// block claims. With the default 64-address blocks and a low mark of two
// blocks, such a burst emptied the pool within 13 ms and 6% of DISCOVERs
// went unanswered (lab/bench/dhcp with real nodes).
const demandWindow = 2

// lowWater is the free-address mark below which the pool claims blocks.
func (p *Pool) lowWater() int {
	return max(p.cfg.LowWater, int(p.demand*demandWindow), p.reserve)
}

// updateDemandLocked folds the addresses taken since the last update into
// the demand rate: a higher rate is taken at once, a lower one decays
// towards it by a quarter a second.
func (p *Pool) updateDemandLocked(now time.Time) {
	el := now.Sub(p.demandAt).Seconds()
	if p.demandAt.IsZero() || el <= 0 {
		p.demandAt = now
		p.taken = 0
		return
	}
	if el < 0.1 {
		return
	}
	rate := float64(p.taken) / el
	if rate >= p.demand {
		p.demand = rate
	} else {
		p.demand = rate + (p.demand-rate)*math.Pow(0.75, el)
	}
	p.taken = 0
	p.demandAt = now
}

// NewPool makes a pool. It leases nothing until SetReady (after the node
// gave up the blocks it held before a restart) and Run claims blocks.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 64
	}
	if cfg.LeaseTime <= 0 {
		cfg.LeaseTime = time.Hour
	}
	if cfg.BlockTTL <= 0 {
		cfg.BlockTTL = 2 * cfg.LeaseTime
	}
	if cfg.OfferHold <= 0 {
		cfg.OfferHold = 30 * time.Second
	}
	if cfg.DeclineHold <= 0 {
		cfg.DeclineHold = 10 * time.Minute
	}
	if cfg.Margin <= 0 {
		cfg.Margin = 5 * time.Second
	}
	if cfg.LowWater <= 0 {
		cfg.LowWater = 2 * cfg.BlockSize
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pool{cfg: cfg, entries: map[netip.Addr]*entry{}, byMAC: map[string]*entry{}, kick: make(chan struct{}, 1)}
}

// Subnet is the pool's subnet.
func (p *Pool) Subnet() netip.Prefix { return p.cfg.Subnet }

// SetReady lets the pool claim blocks and lease.
func (p *Pool) SetReady() {
	p.mu.Lock()
	p.ready = true
	p.mu.Unlock()
	p.Kick()
}

// Kick asks Run to look at the blocks now.
func (p *Pool) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// leaseFor is how long a lease from b may run from now: never past the
// block's expiry (less the skew margin). Zero when the block is too close
// to its end to be worth leasing from (under a quarter of LeaseTime, at most
// a minute).
func (p *Pool) leaseFor(b *block, now time.Time) time.Duration {
	d := b.expires.Add(-p.cfg.Margin).Sub(now)
	if d > p.cfg.LeaseTime {
		d = p.cfg.LeaseTime
	}
	if d < min(p.cfg.LeaseTime/4, time.Minute) {
		return 0
	}
	return d.Truncate(time.Second)
}

func (p *Pool) blockOf(a netip.Addr) *block {
	i := sort.Search(len(p.blocks), func(i int) bool { return a.Less(p.blocks[i].first) })
	if i == 0 {
		return nil
	}
	b := p.blocks[i-1]
	if b.last.Less(a) {
		return nil
	}
	return b
}

func (b *block) take(a netip.Addr) bool {
	for i, f := range b.free {
		if f == a {
			b.free[i] = b.free[len(b.free)-1]
			b.free = b.free[:len(b.free)-1]
			return true
		}
	}
	return false
}

func (p *Pool) owned(b *block) bool {
	x := p.blockOf(b.first)
	return x == b
}

// drop forgets an entry and returns its address to its block.
func (p *Pool) drop(e *entry) {
	if p.entries[e.ip] == e {
		delete(p.entries, e.ip)
	}
	if p.byMAC[e.mac] == e {
		delete(p.byMAC, e.mac)
	}
	if p.owned(e.blk) {
		e.blk.free = append(e.blk.free, e.ip)
		p.nfree++
	}
}

func (p *Pool) lowLocked() {
	// After a scan found no block, kicking per packet would only wake Run
	// for nothing: the ticker tries again.
	if p.nfree < p.lowWater() && time.Since(p.noBlock) >= time.Second {
		p.Kick()
	}
}

// Offer picks an address for a DISCOVER: the client's current offer or
// lease when it still stands, else the address it asks for when free, else
// any free one. It returns the lease time to offer.
func (p *Pool) Offer(mac, clientID string, requested netip.Addr) (netip.Addr, time.Duration, bool) {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.lowLocked()
	if !p.ready {
		return netip.Addr{}, 0, false
	}
	if e := p.byMAC[mac]; e != nil && (e.st == offered || e.st == bound) && p.owned(e.blk) {
		if d := p.leaseFor(e.blk, now); d > 0 {
			if e.st == offered {
				e.until = now.Add(p.cfg.OfferHold)
			}
			return e.ip, d, true
		}
	}
	var pick netip.Addr
	var blk *block
	if requested.IsValid() {
		if b := p.blockOf(requested); b != nil && p.leaseFor(b, now) > 0 && b.take(requested) {
			pick, blk = requested, b
		}
	}
	if blk == nil {
		for _, b := range p.blocks {
			if len(b.free) > 0 && p.leaseFor(b, now) > 0 {
				blk = b
				pick = b.free[len(b.free)-1]
				b.free = b.free[:len(b.free)-1]
				break
			}
		}
	}
	if blk == nil {
		p.taken++ // demand all the same: a dry pool must learn how dry
		return netip.Addr{}, 0, false
	}
	p.nfree--
	p.taken++
	if old := p.byMAC[mac]; old != nil && old.st == offered {
		p.drop(old)
	}
	e := &entry{ip: pick, mac: mac, clientID: clientID, st: offered, until: now.Add(p.cfg.OfferHold), blk: blk}
	p.entries[pick] = e
	p.byMAC[mac] = e
	return pick, p.leaseFor(blk, now), true
}

// Commit answers a REQUEST for ip (selecting, renewing, rebinding or
// rebooting). On ACK the grant is queued for replication and the lease time
// returned.
func (p *Pool) Commit(mac, clientID, hostname string, ip netip.Addr) (time.Duration, Verdict) {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.lowLocked()
	if !p.ready {
		return 0, p.elsewhere(ip, now)
	}
	e := p.entries[ip]
	if e != nil && e.mac != mac {
		live := e.until.After(now) || e.st == releasing || e.st == declined
		if live {
			return 0, NAK
		}
		p.drop(e) // a stale offer or an ended lease: the address is free again
		e = nil
	}
	var blk *block
	if e != nil {
		if e.st != offered && e.st != bound {
			return 0, NAK
		}
		blk = e.blk
		if !p.owned(blk) {
			p.drop(e)
			return 0, p.elsewhere(ip, now)
		}
	} else {
		blk = p.blockOf(ip)
		if blk == nil {
			return 0, p.elsewhere(ip, now)
		}
		if p.leaseFor(blk, now) == 0 || !blk.take(ip) {
			return 0, NAK
		}
		p.nfree--
		p.taken++
		e = &entry{ip: ip, mac: mac, blk: blk}
		p.entries[ip] = e
	}
	d := p.leaseFor(blk, now)
	if d == 0 {
		return 0, NAK
	}
	if old := p.byMAC[mac]; old != nil && old != e && old.st == offered {
		p.drop(old)
	}
	e.st, e.until, e.clientID = bound, now.Add(d), clientID
	if hostname != "" {
		e.hostname = hostname
	}
	p.byMAC[mac] = e
	p.cfg.Batcher.Grant(Grant{IP: ip, MAC: mac, ClientID: clientID, Hostname: e.hostname, Granted: now, Expires: e.until})
	return d, ACK
}

// elsewhere decides about an address outside this node's blocks, from the
// local copy of the store: silent when another node owns its block (that
// node answers), NAK otherwise.
func (p *Pool) elsewhere(ip netip.Addr, now time.Time) Verdict {
	v := NAK
	_ = p.cfg.DB.View(func(tx *store.Tx) error {
		if b, ok := tx.BlockOf(ip); ok && b.Node != "" && b.Node != p.cfg.Node && now.Before(b.Expires) {
			v = Silent
		}
		return nil
	})
	return v
}

// Release handles a client's RELEASE of ip.
func (p *Pool) Release(mac string, ip netip.Addr) bool {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[ip]
	if e == nil || e.mac != mac || (e.st != bound && e.st != offered) {
		return false
	}
	if e.st == offered {
		p.drop(e)
		return true
	}
	e.st, e.until = releasing, now
	p.cfg.Batcher.Release(Release{IP: ip, MAC: mac}, func() { p.released(e) })
	return true
}

func (p *Pool) released(e *entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.entries[e.ip] == e && e.st == releasing {
		p.drop(e)
	}
}

// Decline handles a DECLINE: the client found ip in use. The address stays
// out of use for DeclineHold, here and (replicated) everywhere.
func (p *Pool) Decline(mac string, ip netip.Addr) bool {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	blk := p.blockOf(ip)
	if blk == nil {
		return false
	}
	e := p.entries[ip]
	if e != nil && e.mac != mac {
		return false // not the client's address: ignore a bogus decline
	}
	if e == nil {
		if !blk.take(ip) {
			return false
		}
		p.nfree--
		e = &entry{ip: ip, mac: mac, blk: blk}
		p.entries[ip] = e
	}
	if p.byMAC[mac] == e {
		delete(p.byMAC, mac)
	}
	e.st, e.until = declined, now.Add(p.cfg.DeclineHold)
	p.cfg.Batcher.Release(Release{IP: ip, MAC: mac, Declined: true, Until: e.until}, nil)
	return true
}

// Forget drops the offer made to mac (it chose another server).
func (p *Pool) Forget(mac string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.byMAC[mac]; e != nil && e.st == offered {
		p.drop(e)
	}
}

// Lease returns the address bound to mac, if any (for tests and INFORM).
func (p *Pool) Lease(mac string) (netip.Addr, time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.byMAC[mac]; e != nil && e.st == bound {
		return e.ip, e.until, true
	}
	return netip.Addr{}, time.Time{}, false
}

// Snapshot reports the blocks owned and the free addresses.
func (p *Pool) Snapshot() (blocks, free int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.blocks), p.nfree
}

// Run claims, renews and gives back blocks, and frees ended offers and
// leases, until ctx ends.
func (p *Pool) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		p.Maintain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
	}
}

// Maintain does one round of Run's work.
func (p *Pool) Maintain(ctx context.Context) {
	now := p.cfg.Now()
	p.mu.Lock()
	if !p.ready {
		p.mu.Unlock()
		return
	}
	// Sweeping walks every entry under the lock: at most once a second,
	// however often claims kick the loop.
	if time.Since(p.swept) >= time.Second {
		p.swept = time.Now()
		p.sweepLocked(now)
	}
	p.dropExpiredLocked(now)
	var renew []netip.Addr
	for _, b := range p.blocks {
		if b.expires.Sub(now) < p.cfg.BlockTTL*2/3 {
			renew = append(renew, b.first)
		}
	}
	p.updateDemandLocked(now)
	need := p.nfree < p.lowWater() && time.Since(p.noBlock) >= time.Second
	surplus := p.surplusLocked()
	p.mu.Unlock()

	if len(renew) > 0 {
		p.renew(ctx, renew, now)
	}
	if need {
		p.claim(ctx, now)
	}
	if len(surplus) > 0 {
		p.giveBack(ctx, surplus)
	}
	if p.cfg.Stats != nil {
		b, f := p.Snapshot()
		p.cfg.Stats.PoolState(p.cfg.Subnet, b, f)
	}
}

// sweepLocked frees ended offers, leases and declines.
func (p *Pool) sweepLocked(now time.Time) {
	for _, e := range p.entries {
		switch e.st {
		case offered, bound, declined:
			if !e.until.After(now) {
				p.drop(e)
			}
		}
	}
}

// dropExpiredLocked forgets blocks past their usable end: every lease from
// them has ended too.
func (p *Pool) dropExpiredLocked(now time.Time) {
	kept := p.blocks[:0]
	var gone map[*block]bool
	for _, b := range p.blocks {
		if now.Before(b.expires.Add(-p.cfg.Margin)) {
			kept = append(kept, b)
			continue
		}
		p.nfree -= len(b.free)
		if gone == nil {
			gone = map[*block]bool{}
		}
		gone[b] = true
	}
	for i := len(kept); i < len(p.blocks); i++ {
		p.blocks[i] = nil
	}
	p.blocks = kept
	if gone == nil {
		return
	}
	for ip, e := range p.entries {
		if gone[e.blk] {
			delete(p.entries, ip)
			if p.byMAC[e.mac] == e {
				delete(p.byMAC, e.mac)
			}
		}
	}
}

// surplusLocked picks wholly free blocks beyond what the pool needs, so
// other nodes can claim them; they leave the pool at once.
func (p *Pool) surplusLocked() []netip.Addr {
	high := 2*p.lowWater() + 2*p.cfg.BlockSize
	if p.nfree <= high {
		return nil
	}
	busy := map[*block]bool{}
	for _, e := range p.entries {
		busy[e.blk] = true
	}
	var out []netip.Addr
	for i := len(p.blocks) - 1; i >= 0 && p.nfree-len(p.blocks[i].free) > high; i-- {
		b := p.blocks[i]
		if busy[b] {
			continue
		}
		out = append(out, b.first)
		p.nfree -= len(b.free)
		p.blocks = append(p.blocks[:i], p.blocks[i+1:]...)
	}
	return out
}

func (p *Pool) usableAddr(a netip.Addr) bool {
	s := p.cfg.Subnet.Masked()
	if a == s.Addr() || a == broadcast(s) || !s.Contains(a) {
		return false
	}
	for _, x := range p.cfg.Exclude {
		if x == a {
			return false
		}
	}
	return true
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func (p *Pool) giveBack(ctx context.Context, firsts []netip.Addr) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// No quarantine: nothing was ever leased from these blocks that has not
	// ended or been released through Raft.
	if err := p.cfg.Rep.ReleaseBlocks(cctx, firsts, time.Time{}); err != nil && !refused(err) {
		p.cfg.Log.Debug("surplus blocks not released; they will expire", "blocks", len(firsts), "err", err)
	}
}

func (p *Pool) renew(ctx context.Context, firsts []netip.Addr, now time.Time) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := p.cfg.Rep.RenewBlocks(cctx, firsts, now.Add(p.cfg.BlockTTL))
	if err != nil && !refused(err) {
		if now.Sub(p.warned) > 10*time.Second {
			p.warned = now
			p.cfg.Log.Warn("blocks not renewed; leasing on from them until they expire", "subnet", p.cfg.Subnet, "blocks", len(firsts), "err", err)
		}
		return
	}
	// Take the expiry the replicated state recorded.
	got := map[netip.Addr]time.Time{}
	_ = p.cfg.DB.View(func(tx *store.Tx) error {
		for _, f := range firsts {
			if lb, err := tx.LeaseBlock(f); err == nil && lb.Node == p.cfg.Node {
				got[f] = lb.Expires
			}
		}
		return nil
	})
	p.mu.Lock()
	for _, b := range p.blocks {
		if e, ok := got[b.first]; ok && e.After(b.expires) {
			b.expires = e
		}
	}
	p.mu.Unlock()
}

type span struct{ first, last netip.Addr }

// grid cuts the subnet's dynamic ranges into blocks.
func (p *Pool) grid(tx *store.Tx) []span {
	ranges, err := tx.Ranges(p.cfg.Subnet)
	if err != nil {
		return nil
	}
	var out []span
	for _, r := range ranges {
		if r.Kind != store.RangeDynamic || !r.First.Is4() || !r.Last.Is4() {
			continue
		}
		f, l := u32(r.First), u32(r.Last)
		for a := uint64(f); a <= uint64(l); a += uint64(p.cfg.BlockSize) {
			e := a + uint64(p.cfg.BlockSize) - 1
			if e > uint64(l) {
				e = uint64(l)
			}
			out = append(out, span{a4(uint32(a)), a4(uint32(e))})
		}
	}
	return out
}

func u32(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }
func a4(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// claim takes blocks until the pool has LowWater free addresses, trying
// candidates from a per-node offset so nodes rarely race for one block.
func (p *Pool) claim(ctx context.Context, now time.Time) {
	var cands []span
	whole := false // this pool holds every block of the ranges
	p.mu.Lock()
	p.scans++
	p.mu.Unlock()
	_ = p.cfg.DB.View(func(tx *store.Tx) error {
		grid := p.grid(tx)
		if len(grid) == 0 {
			return nil
		}
		addrs := 0
		for _, s := range grid {
			addrs += int(u32(s.last)-u32(s.first)) + 1
		}
		known, _ := tx.LeaseBlocks(p.cfg.Subnet)
		byFirst := make(map[netip.Addr]store.LeaseBlock, len(known))
		for _, b := range known {
			byFirst[b.First] = b
		}
		h := fnv.New32a()
		h.Write([]byte(p.cfg.Node + p.cfg.Subnet.String()))
		start := int(h.Sum32() % uint32(len(grid)))
		p.mu.Lock()
		defer p.mu.Unlock()
		p.reserve = min(addrs/reserveShare, maxReserve)
		held := 0
		for i := range grid {
			s := grid[(start+i)%len(grid)]
			if p.blockOf(s.first) != nil {
				held++
				continue
			}
			if b, ok := byFirst[s.first]; ok && (!b.Free(now) || b.Last != s.last) {
				continue
			}
			cands = append(cands, s)
		}
		whole = held == len(grid)
		return nil
	})
	// Claim what the deficit needs in parallel: Raft commits concurrent
	// proposals together, so a burst of clients costs few rounds.
	for tried := 0; tried < len(cands) && tried < 128 && ctx.Err() == nil; {
		p.mu.Lock()
		deficit := p.lowWater() - p.nfree
		p.mu.Unlock()
		if deficit <= 0 {
			return
		}
		n := min((deficit+p.cfg.BlockSize-1)/p.cfg.BlockSize, 32, len(cands)-tried)
		batch := cands[tried : tried+n]
		tried += n
		errs := make([]error, n)
		var wg sync.WaitGroup
		for k, s := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				errs[k] = p.cfg.Rep.ClaimBlock(cctx, p.cfg.Subnet, s.first, s.last, now.Add(p.cfg.BlockTTL))
			}()
		}
		wg.Wait()
		failed := false
		for k, err := range errs {
			switch {
			case err == nil:
				p.load(batch[k], now)
			case refused(err):
				// another node was quicker, or the range changed
			default:
				failed = true
				if now.Sub(p.warned) > 10*time.Second {
					p.warned = now
					p.cfg.Log.Warn("cannot claim a lease block; serving from the blocks held", "subnet", p.cfg.Subnet, "err", err)
				}
			}
		}
		if failed {
			return
		}
	}
	if len(cands) == 0 {
		p.mu.Lock()
		low := p.nfree < p.lowWater()
		p.noBlock = time.Now()
		p.mu.Unlock()
		// A range smaller than the mark, all of it held here, is no
		// shortage: nothing to warn about.
		if low && !whole && now.Sub(p.warned) > 30*time.Second {
			p.warned = now
			p.cfg.Log.Warn("no free lease block left to claim", "subnet", p.cfg.Subnet)
		}
	}
}

// Adopt loads the blocks of this pool's subnet that the node owns in the
// store and that are still usable, with their leases, as a pool that
// claimed them would; it returns their first addresses. Only for blocks
// whose every grant is in the store (see dhcp.Handoff).
func (p *Pool) Adopt(now time.Time) []netip.Addr {
	var spans []span
	_ = p.cfg.DB.View(func(tx *store.Tx) error {
		grid := map[netip.Addr]span{}
		for _, s := range p.grid(tx) {
			grid[s.first] = s
		}
		blocks, err := tx.LeaseBlocks(p.cfg.Subnet)
		for _, b := range blocks {
			if s, ok := grid[b.First]; ok && s.last == b.Last && b.Node == p.cfg.Node && now.Before(b.Expires.Add(-p.cfg.Margin)) {
				spans = append(spans, s)
			}
		}
		return err
	})
	var firsts []netip.Addr
	for _, s := range spans {
		p.mu.Lock()
		held := p.blockOf(s.first) != nil
		p.mu.Unlock()
		if !held {
			p.load(s, now)
		}
		firsts = append(firsts, s.first)
	}
	return firsts
}

// load adds a block this node just claimed, from the local store: its live
// leases (given by earlier owners) and declines stay; the rest is free.
func (p *Pool) load(s span, now time.Time) {
	b := &block{first: s.first, last: s.last}
	var live []store.Lease
	used := map[netip.Addr]bool{}
	err := p.cfg.DB.View(func(tx *store.Tx) error {
		lb, err := tx.LeaseBlock(s.first)
		if err != nil {
			return err
		}
		if lb.Node != p.cfg.Node {
			return store.ErrConflict
		}
		b.expires = lb.Expires
		if err := tx.Leases(s.first, s.last, func(l store.Lease) bool {
			if now.Before(l.Expires) {
				live = append(live, l)
			}
			return true
		}); err != nil {
			return err
		}
		return tx.AddressesBetween(s.first, s.last, func(a store.Address) bool {
			used[a.IP] = true
			return true
		})
	})
	if err != nil {
		p.cfg.Log.Warn("claimed block not readable in the local store", "first", s.first, "err", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range live {
		e := &entry{ip: l.IP, mac: l.MAC, clientID: l.ClientID, hostname: l.Hostname, st: bound, until: l.Expires, blk: b}
		if l.Declined {
			e.st = declined
		}
		p.entries[l.IP] = e
		if e.st == bound && p.byMAC[l.MAC] == nil {
			p.byMAC[l.MAC] = e
		}
	}
	for a := s.first; a.IsValid() && !s.last.Less(a); a = a.Next() {
		if !p.usableAddr(a) || used[a] || p.entries[a] != nil {
			continue
		}
		b.free = append(b.free, a)
	}
	// Hand out low addresses first.
	sort.Slice(b.free, func(i, j int) bool { return b.free[j].Less(b.free[i]) })
	p.nfree += len(b.free)
	i := sort.Search(len(p.blocks), func(i int) bool { return b.first.Less(p.blocks[i].first) })
	p.blocks = append(p.blocks, nil)
	copy(p.blocks[i+1:], p.blocks[i:])
	p.blocks[i] = b
}

// SetExclude replaces the addresses never handed out (this node's own).
func (p *Pool) SetExclude(addrs []netip.Addr) {
	p.mu.Lock()
	p.cfg.Exclude = append([]netip.Addr(nil), addrs...)
	p.mu.Unlock()
}
