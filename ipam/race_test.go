package ipam_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// TestConcurrentProposers simulates three nodes, each picking from its own
// local copy that lags behind a shared ordered log, and proposing claims and
// releases into that log, which is applied to all three copies. Whatever the
// interleaving: no address is ever handed out twice, every copy agrees on
// every result and on the final state, and after the releases nothing is
// lost (the free count is total - used).
func TestConcurrentProposers(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { raceOnce(t, seed) })
	}
}

func raceOnce(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 42))
	p := pfx("10.80.0.0/24")
	const total = 120 // static range 10.80.0.10 – 10.80.0.129
	var log [][]byte
	type outcome struct {
		err error
	}
	results := map[int]outcome{} // log position → result, from the first copy that applied it
	nodes := []*copyFSM{newCopy(t), newCopy(t), newCopy(t)}
	// catchUp applies the log on node i up to position upto.
	catchUp := func(i, upto int) {
		n := nodes[i]
		for int(n.Index) < upto {
			pos := int(n.Index)
			err := n.ApplyRaw(log[pos])
			if first, ok := results[pos]; !ok {
				results[pos] = outcome{err}
			} else if (first.err == nil) != (err == nil) || err != nil && err.Error() != first.err.Error() {
				t.Fatalf("entry %d: node %d got %v, another node %v", pos, i, err, first.err)
			}
		}
	}
	propose := func(c raftfsm.Command) { log = append(log, encode(t, c)) }

	propose(fabric("hall-a"))
	propose(vlan("hall-a", 0))
	propose(subnet("10.80.0.0/24", "10.80.0.1"))
	propose(rng("10.80.0.0/24", store.RangeStatic, "10.80.0.10", "10.80.0.129"))
	for m := range 4 {
		propose(&raftfsm.MachineCreate{ID: machineID(m), Now: t0})
	}
	for i := range nodes {
		catchUp(i, len(log))
	}

	// held is the truth by log order: who holds each address after every
	// successful claim and release.
	held := map[netip.Addr]bool{}
	judged := 0
	judge := func() { // walk the results known so far, in log order
		for ; ; judged++ {
			res, ok := results[judged]
			if !ok {
				return
			}
			c, err := raftfsm.Decode(log[judged])
			if err != nil {
				t.Fatal(err)
			}
			switch c := c.(type) {
			case *raftfsm.AddressClaim:
				if res.err == nil {
					if held[c.Address.IP] {
						t.Fatalf("entry %d: %s handed out twice", judged, c.Address.IP)
					}
					held[c.Address.IP] = true
				} else if !errors.Is(res.err, store.ErrConflict) {
					t.Fatalf("entry %d: claim of %s refused with %v, want a conflict", judged, c.Address.IP, res.err)
				}
			case *raftfsm.AddressRelease:
				if res.err == nil {
					if !held[c.IP] {
						t.Fatalf("entry %d: released %s, which nobody held", judged, c.IP)
					}
					delete(held, c.IP)
				}
			}
		}
	}

	for range 600 {
		i := r.IntN(len(nodes))
		n := nodes[i]
		// The node catches up part of the way: it lags by a random amount.
		catchUp(i, int(n.Index)+r.IntN(len(log)-int(n.Index)+1))
		if r.IntN(4) == 0 {
			// Release something this node believes is used.
			if used := n.used(p); len(used) > 0 {
				propose(&raftfsm.AddressRelease{IP: used[r.IntN(len(used))].IP})
			}
		} else {
			a, err := n.pick(p)
			if errors.Is(err, ipam.ErrFull) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			propose(claim(store.HowAuto, a.String(), machineID(r.IntN(4))))
		}
		judge()
	}
	for i := range nodes {
		catchUp(i, len(log))
	}
	judge()

	want := nodes[0].dump()
	for i, n := range nodes[1:] {
		if got := n.dump(); got != want {
			t.Fatalf("node %d differs from node 0:\n%s\n%s", i+1, got, want)
		}
	}
	if used := nodes[0].used(p); len(used) != len(held) {
		t.Fatalf("the copies hold %d addresses, the log says %d", len(used), len(held))
	}
	for a := range held {
		for i, n := range nodes {
			if err := n.DB.View(func(tx *store.Tx) error {
				if !tx.AddressUsed(a) {
					return fmt.Errorf("%s claimed but not recorded", a)
				}
				return nil
			}); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
		}
	}
	// Nothing lost: node 0 can still hand out exactly total - used.
	free := 0
	for {
		a, err := nodes[0].pick(p)
		if errors.Is(err, ipam.ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := nodes[0].Apply(claim(store.HowAuto, a.String(), machineID(0))); err != nil {
			t.Fatalf("claim %s on a caught-up copy: %v", a, err)
		}
		free++
	}
	if free != total-len(held) {
		t.Fatalf("%d addresses were still free, want total %d - used %d", free, total, len(held))
	}
}
