package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// The cluster consistency check (etcd's corruption check is the model; the
// state machine's side, hashing at each StateCheck, is raftfsm's).
// Every node applies the same commands, so every node's store must hash the
// same at the same index. The leader proposes a StateCheck now and then;
// each node, having applied it, hashes its store as of exactly that index
// (the FSM ends its transaction there) and compares with the other nodes.
// A node whose hash differs from every other node's, while those agree,
// holds a damaged copy: it stops serving, says so in its status and health,
// remembers it across restarts (a marker file), and repairs itself from the
// leader's store, on `rollcall cluster repair NODE` or when it starts.

const (
	divergedFile     = "diverged.json"
	hashAskTimeout   = 30 * time.Second
	defaultCheckRate = 10 * time.Minute
)

// Divergence says this node's store differs from the cluster's.
type Divergence struct {
	Index  uint64            `json:"index"`
	Mine   string            `json:"mine"`
	Others map[string]string `json:"others"` // node → hash
	Since  time.Time         `json:"since"`
}

func (d *Divergence) String() string {
	return fmt.Sprintf("this node's store differs from every other node's at index %d (hash %.12s…, theirs %v): it serves nothing until repaired (rollcall cluster repair NODE, or a restart)", d.Index, d.Mine, short12(d.Others))
}

func short12(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v[:min(12, len(v))] + "…"
	}
	return out
}

// Diverged is this node's divergence, or nil while its store agrees.
func (c *Cluster) Diverged() *Divergence { return c.diverged.Load() }

func (c *Cluster) setDiverged(d *Divergence) {
	c.diverged.Store(d)
	path := filepath.Join(c.cfg.Dir, divergedFile)
	if d == nil {
		os.Remove(path)
		return
	}
	b, _ := json.Marshal(d)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		c.log.Error("state check: cannot record the divergence", "err", err)
	}
}

// loadDiverged reads what an earlier run found.
func (c *Cluster) loadDiverged() {
	b, err := os.ReadFile(filepath.Join(c.cfg.Dir, divergedFile))
	if err != nil {
		return
	}
	var d Divergence
	if json.Unmarshal(b, &d) == nil {
		c.diverged.Store(&d)
	}
}

// compareHash asks every other member for its hash at h.Index and decides.
func (c *Cluster) compareHash(h store.StateHash) {
	ctx, cancel := context.WithTimeout(context.Background(), hashAskTimeout+5*time.Second)
	defer cancel()
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	mine := h.String()
	others := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == c.cfg.Name {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var theirs store.StateHash
			if err := c.call(ctx, string(s.Address), http.MethodGet, "/v1/state-hash?index="+strconv.FormatUint(h.Index, 10), nil, &theirs); err != nil {
				c.log.Debug("state check: no hash from a peer", "peer", s.ID, "index", h.Index, "err", err)
				return
			}
			if theirs.Version != h.Version || theirs.Index != h.Index {
				return
			}
			mu.Lock()
			others[string(s.ID)] = theirs.String()
			mu.Unlock()
		}()
	}
	wg.Wait()
	agree, same := 0, ""
	for _, o := range others {
		if o == mine {
			agree++
		}
		if same == "" {
			same = o
		} else if same != o {
			same = "mixed"
		}
	}
	c.Metrics.stateChecks.Inc()
	switch {
	case len(others) == 0:
	case agree > 0:
		c.log.Debug("state check: agrees", "index", h.Index, "hash", mine, "peers", len(others))
	case len(others) >= 2 && same != "mixed":
		d := &Divergence{Index: h.Index, Mine: mine, Others: others, Since: time.Now().UTC()}
		c.log.Error("state check: this node's store is damaged", "index", h.Index, "mine", mine, "others", others)
		c.Metrics.stateDiverged.Inc()
		c.setDiverged(d)
	default:
		// One peer, or peers that disagree among themselves: no majority
		// to say which copy is wrong.
		c.log.Error("state check: stores differ across nodes; no majority says which is damaged", "index", h.Index, "mine", mine, "others", others)
		c.Metrics.stateDiverged.Inc()
	}
}

func (c *Cluster) handleStateHash(w http.ResponseWriter, r *http.Request) {
	idx, err := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	if err != nil {
		http.Error(w, "index must be an integer", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), hashAskTimeout)
	defer cancel()
	h, err := c.fsm.StateHash(ctx, idx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	writeJSON(w, h)
}

// runStateChecks proposes a StateCheck on the leader after each election
// and every interval.
func (c *Cluster) runStateChecks(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = defaultCheckRate
	}
	if c.Diverged() != nil {
		// An earlier run found this store damaged: rebuild it from the
		// leader's before anything else.
		go c.repairOnStart(ctx)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	leaderCh := c.raft.LeaderCh()
	propose := func() {
		if c.raft.State() != raft.Leader {
			return
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.Apply(actx, &raftfsm.StateCheck{Now: time.Now().UTC()}); err != nil && !errors.Is(err, context.Canceled) {
			c.log.Warn("state check: not proposed", "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case isLeader := <-leaderCh:
			if isLeader {
				propose()
			}
		case <-tick.C:
			propose()
		}
	}
}

func (c *Cluster) repairOnStart(ctx context.Context) {
	for wait := time.Second; c.Diverged() != nil; wait = min(2*wait, time.Minute) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := c.Repair(rctx)
		cancel()
		if err == nil {
			return
		}
		c.log.Warn("store damaged at an earlier check; repair from the leader failed, retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// CheckState proposes a StateCheck now and returns its index: every node
// hashes its store there and compares (tests, `rollcall cluster check`).
func (c *Cluster) CheckState(ctx context.Context) (uint64, error) {
	return c.Apply(ctx, &raftfsm.StateCheck{Now: time.Now().UTC()})
}

// StateHash is this node's hash at a checked index, waiting for it.
func (c *Cluster) StateHash(ctx context.Context, idx uint64) (store.StateHash, error) {
	return c.fsm.StateHash(ctx, idx)
}

// Repair replaces this node's store with the leader's and clears its
// divergence. The leader's copy is taken at an index no lower than what
// this node has applied, and swapped in between two applies, so no entry is
// lost or applied twice. The leader itself hands leadership on first.
func (c *Cluster) Repair(ctx context.Context) error {
	if c.raft.State() == raft.Leader {
		if err := c.raft.LeadershipTransfer().Error(); err != nil {
			return fmt.Errorf("repair: hand leadership on first: %w", err)
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		_, addr := c.Leader()
		if addr == "" || addr == c.cfg.Advertise {
			select {
			case <-ctx.Done():
				return fmt.Errorf("repair: no other leader: %w", ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		tmp, at, err := c.fetchStore(ctx, addr, c.fsm.AppliedIndex())
		if err != nil {
			return fmt.Errorf("repair: fetch the leader's store: %w", err)
		}
		swapped, err := c.fsm.SwapIfAhead(tmp, at)
		os.Remove(tmp)
		if err != nil {
			return fmt.Errorf("repair: %w", err)
		}
		if swapped {
			c.setDiverged(nil)
			c.log.Info("repaired: the store is the leader's as of its index", "index", at, "leader", addr)
			return nil
		}
	}
	return errors.New("repair: this node kept applying past the leader's copy; try again")
}

// fetchStore downloads the leader's store (at an index of at least min)
// into a temporary file beside this node's.
func (c *Cluster) fetchStore(ctx context.Context, addr string, min uint64) (string, uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/v1/store?min="+strconv.FormatUint(min, 10), nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := c.peers.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", 0, fmt.Errorf("%s: %s", resp.Status, b)
	}
	at, err := strconv.ParseUint(resp.Header.Get("X-Rollcall-Applied"), 10, 64)
	if err != nil {
		return "", 0, errors.New("the leader did not say its index")
	}
	f, err := os.CreateTemp(filepath.Dir(c.db.Path()), "repair-*.db")
	if err != nil {
		return "", 0, err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), at, nil
}

// handleStore streams this node's store, once it has applied min.
func (c *Cluster) handleStore(w http.ResponseWriter, r *http.Request) {
	min, _ := strconv.ParseUint(r.URL.Query().Get("min"), 10, 64)
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := c.fsm.WaitApplied(ctx, min); err != nil {
		http.Error(w, "not at that index yet", http.StatusServiceUnavailable)
		return
	}
	if c.Diverged() != nil {
		http.Error(w, "this node's own store is damaged", http.StatusConflict)
		return
	}
	s, err := c.db.BeginSnapshot()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer s.Release()
	w.Header().Set("X-Rollcall-Applied", strconv.FormatUint(s.Index, 10))
	s.WriteTo(w)
}

func (c *Cluster) handleRepair(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	if err := c.Repair(ctx); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	writeJSON(w, map[string]uint64{"applied_index": c.fsm.AppliedIndex()})
}

// RepairMember asks a member (this node or another) to repair its store.
func (c *Cluster) RepairMember(ctx context.Context, name string) error {
	if name == c.cfg.Name {
		return c.Repair(ctx)
	}
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == name {
			return c.call(ctx, string(s.Address), http.MethodPost, "/v1/repair", nil, nil)
		}
	}
	return store.Errorf(store.ErrNotFound, "node %q is not a member", name)
}
