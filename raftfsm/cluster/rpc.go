package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Node-to-node calls on the cluster port (HTTP/1.1 inside mutual TLS).
//
//	POST /v1/apply        an encoded command, applied on the leader
//	GET  /v1/status       this node's Raft view
//	GET  /v1/read-index   the leader's read index (ReadIndex; leader only)
//	POST /v1/members      add a voter (the caller is that node, or a member forwarding)
//	DELETE /v1/members/ID remove a server (leader only)
//	/open/...             routes from Config.Calls that need no certificate
//	anything else         routes from Config.Calls, certificate required
const maxCommandBytes = 16 << 20

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type applyReply struct {
	Index uint64       `json:"index"`
	Error *wireError   `json:"error,omitempty"`
	Errs  []*wireError `json:"errs,omitempty"`
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	code := store.Code(err)
	switch {
	case errors.Is(err, ErrNoLeader):
		code = "no_leader"
	case errors.Is(err, ErrUnknownOutcome):
		code = "unknown_outcome"
	case errors.Is(err, errBadCommand):
		code = "bad_command"
	}
	// A refusal travels with its public text, so the node that answers the
	// client says what the leader's command said, no more.
	msg := err.Error()
	var se *store.Error
	if errors.As(err, &se) {
		msg = se.Message()
	}
	return &wireError{Code: code, Message: msg}
}

func fromWire(w *wireError) error {
	if w == nil {
		return nil
	}
	switch w.Code {
	case "no_leader":
		return ErrNoLeader
	case "unknown_outcome":
		return fmt.Errorf("%w (on the leader: %s)", ErrUnknownOutcome, w.Message)
	case "bad_command":
		return fmt.Errorf("%w: %s", errBadCommand, w.Message)
	}
	return store.FromCode(w.Code, w.Message)
}

func (c *Cluster) callHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/apply", c.handleApply)
	mux.HandleFunc("GET /v1/status", c.handleStatus)
	mux.HandleFunc("GET /v1/read-index", c.handleReadIndex)
	mux.HandleFunc("POST /v1/members", c.handleAddMember)
	mux.HandleFunc("DELETE /v1/members/{id}", c.handleRemoveMember)
	mux.HandleFunc("GET /v1/state-hash", c.handleStateHash)
	mux.HandleFunc("GET /v1/store", c.handleStore)
	mux.HandleFunc("POST /v1/repair", c.handleRepair)
	if c.cfg.Calls != nil {
		mux.Handle("/", c.cfg.Calls)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/open/") {
			cs := peerState(r)
			if cs == nil {
				http.Error(w, "cluster certificate required", http.StatusUnauthorized)
				return
			}
			cn, ok := c.cfg.VerifyPeer(*cs)
			if !ok {
				http.Error(w, "cluster certificate required", http.StatusUnauthorized)
				return
			}
			if err := c.cfg.PeerCheck(cn, cs.VerifiedChains[0][0]); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

func (c *Cluster) handleApply(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxCommandBytes+1))
	if err != nil || len(data) > maxCommandBytes {
		http.Error(w, "command too large or unreadable", http.StatusBadRequest)
		return
	}
	reply := applyReply{}
	if c.raft.State() != raft.Leader {
		reply.Error = toWire(ErrNoLeader) // no second hop: the caller re-resolves the leader
	} else if cmd, derr := raftfsm.Decode(data); derr != nil {
		reply.Error = toWire(fmt.Errorf("%w: %v", errBadCommand, derr))
	} else if perr := c.fsm.Precheck(cmd); perr != nil {
		reply.Error = toWire(perr)
	} else {
		idx, aerr := c.applyLocal(r.Context(), data)
		reply.Index = idx
		var be *BatchError
		if errors.As(aerr, &be) {
			for _, e := range be.Errs {
				reply.Errs = append(reply.Errs, toWire(e))
			}
		} else {
			reply.Error = toWire(aerr)
		}
	}
	writeJSON(w, reply)
}

// forward sends an entry to the leader, following one leader change.
func (c *Cluster) forward(ctx context.Context, data []byte) (uint64, error) {
	deadline := time.Now().Add(c.cfg.ApplyTimeout)
	for attempt := 0; ; attempt++ {
		_, leaderAddr := c.Leader()
		if leaderAddr == "" {
			return 0, ErrNoLeader
		}
		if leaderAddr == c.cfg.Advertise {
			return c.applyLocal(ctx, data)
		}
		var reply applyReply
		var sent, answered atomic.Bool
		tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest:         func(httptrace.WroteRequestInfo) { sent.Store(true) },
			GotFirstResponseByte: func() { answered.Store(true) },
		})
		err := c.call(tctx, leaderAddr, http.MethodPost, "/v1/apply", data, &reply)
		if err != nil {
			if sent.Load() && !answered.Load() {
				// The leader may have the entry and commit it: not safe to retry blindly.
				return 0, fmt.Errorf("%w: forward to leader %s: %v", ErrUnknownOutcome, leaderAddr, err)
			}
			return 0, fmt.Errorf("%w: forward to leader %s: %v", ErrNoLeader, leaderAddr, err)
		}
		if reply.Error != nil && reply.Error.Code == "no_leader" && attempt < 3 && time.Now().Before(deadline) {
			// Leadership moved between our lookup and the call; give the
			// cluster a moment to tell us the new leader.
			select {
			case <-ctx.Done():
				return 0, ErrUnknownOutcome
			case <-time.After(c.cfg.HeartbeatTimeout / 2):
			}
			continue
		}
		if reply.Errs != nil {
			be := &BatchError{}
			for _, e := range reply.Errs {
				be.Errs = append(be.Errs, fromWire(e))
			}
			return reply.Index, be
		}
		return reply.Index, fromWire(reply.Error)
	}
}

// call makes a node-to-node call and decodes a JSON reply.
func (c *Cluster) call(ctx context.Context, nodeAddr, method, path string, body []byte, out any) error {
	return c.callHeader(ctx, nodeAddr, method, path, body, out, nil)
}

// callHeader is call with extra request headers.
func (c *Cluster) callHeader(ctx context.Context, nodeAddr, method, path string, body []byte, out any, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, method, "https://"+nodeAddr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.peers.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCommandBytes))
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return store.Errorf(store.ErrNotFound, "%s", strings.TrimSpace(string(b)))
	case http.StatusMisdirectedRequest:
		return fmt.Errorf("%s %s on %s: %w", method, path, nodeAddr, ErrNoLeader)
	case http.StatusBadRequest, http.StatusForbidden:
		return fmt.Errorf("%s %s on %s: %s: %w", method, path, nodeAddr, strings.TrimSpace(string(b)), errRefused)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s on %s: %s: %s", method, path, nodeAddr, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// Stream GETs path from another node over the cluster's mutual TLS and hands
// the body to fn (large files: image blobs).
func (c *Cluster) Stream(ctx context.Context, nodeAddr, path string, fn func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+nodeAddr+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.peers.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s on %s: %s: %s", path, nodeAddr, resp.Status, strings.TrimSpace(string(b)))
	}
	return fn(resp.Body)
}

// Call lets the appliance make its own node-to-node calls (image fetches,
// joins) over the cluster's mutual TLS.
func (c *Cluster) Call(ctx context.Context, nodeAddr, method, path string, body []byte, out any) error {
	return c.call(ctx, nodeAddr, method, path, body, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// NodeStatus is one node's own view of Raft.
type NodeStatus struct {
	ID          string    `json:"id"`
	Address     string    `json:"address"`
	State       string    `json:"state"`
	Leader      string    `json:"leader"`
	Term        uint64    `json:"term"`
	Applied     uint64    `json:"applied_index"`
	Commit      uint64    `json:"commit_index"`
	LastContact time.Time `json:"last_contact,omitzero"`
	// Diverged says why this node's store is not trusted ("" while it
	// agrees with the cluster's).
	Diverged string `json:"diverged,omitempty"`
	// Parts are the node's services and their states (SetParts).
	Parts []Part `json:"parts,omitempty"`
	// Time is the node's clock when it answered (rollcall doctor compares
	// the members'); zero from a node that does not say.
	Time time.Time `json:"time,omitzero"`
	// Build is the node's build version; Gate what its version gate has
	// shut and waits for (empty from a node without the gate).
	Build string      `json:"build,omitempty"`
	Gate  *GateStatus `json:"gate,omitempty"`
}

// Part is one long-running service of a node and how it fares.
type Part struct {
	Name     string    `json:"name"`
	State    string    `json:"state"` // starting, running, failed, stopped
	Error    string    `json:"error,omitempty"`
	Since    time.Time `json:"since"`
	Restarts int       `json:"restarts,omitempty"`
}

// SetParts gives the cluster a function that lists the node's parts for
// its status (the appliance's supervisor).
func (c *Cluster) SetParts(f func() []Part) { c.parts.Store(&f) }

// LocalStatus is this node's view.
func (c *Cluster) LocalStatus() NodeStatus {
	id, _ := c.Leader()
	st := NodeStatus{
		ID: c.cfg.Name, Address: c.cfg.Advertise, State: c.raft.State().String(),
		Leader: id, Applied: c.fsm.AppliedIndex(), Commit: c.raft.CommitIndex(),
		Term: c.raft.CurrentTerm(), Time: time.Now().UTC(), Build: raftfsm.BuildVersion(),
	}
	if g := c.Gate(); len(g.Pending) > 0 {
		st.Gate = &g
	}
	if d := c.Diverged(); d != nil {
		st.Diverged = d.String()
	}
	if f := c.parts.Load(); f != nil {
		st.Parts = (*f)()
	}
	if c.raft.State() == raft.Leader {
		st.LastContact = time.Now()
	} else if lc := c.raft.LastContact(); !lc.IsZero() {
		st.LastContact = lc
	}
	return st
}

func (c *Cluster) handleStatus(w http.ResponseWriter, _ *http.Request) { writeJSON(w, c.LocalStatus()) }

// Lag is how many entries this node's store is behind the cluster: the
// leader's commit index less the local applied index. A follower asks the
// leader (at most once a second, within timeout; a node that cannot ask
// says so); its own commit index would not do, since a follower far behind
// does not know how far the leader is.
func (c *Cluster) Lag(ctx context.Context, timeout time.Duration) (uint64, error) {
	applied := c.fsm.AppliedIndex()
	if c.raft.State() == raft.Leader {
		return sub(c.raft.CommitIndex(), applied), nil
	}
	c.lagMu.Lock()
	defer c.lagMu.Unlock()
	if time.Since(c.lagAt) > time.Second {
		_, addr := c.Leader()
		if addr == "" {
			return 0, ErrNoLeader
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var st NodeStatus
		if err := c.call(cctx, addr, http.MethodGet, "/v1/status", nil, &st); err != nil {
			return 0, fmt.Errorf("ask the leader how far it is: %w", err)
		}
		c.leaderIdx, c.lagAt = st.Commit, time.Now()
	}
	return sub(max(c.leaderIdx, c.raft.CommitIndex()), applied), nil
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Member is a server in the Raft configuration with what it says of itself.
type Member struct {
	ID        string      `json:"id"`
	Address   string      `json:"address"`
	Voter     bool        `json:"voter"`
	Leader    bool        `json:"leader"`
	Reachable bool        `json:"reachable"`
	Status    *NodeStatus `json:"status,omitempty"`
	Error     string      `json:"error,omitempty"`
}

// Members lists the configuration and asks each member for its own status,
// in parallel, each within timeout.
func (c *Cluster) Members(ctx context.Context, timeout time.Duration) ([]Member, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	leaderID, _ := c.Leader()
	servers := f.Configuration().Servers
	out := make([]Member, len(servers))
	done := make(chan struct{}, len(servers))
	for i, s := range servers {
		out[i] = Member{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter, Leader: string(s.ID) == leaderID}
		go func(m *Member) {
			defer func() { done <- struct{}{} }()
			if m.ID == c.cfg.Name {
				st := c.LocalStatus()
				m.Status, m.Reachable = &st, true
				return
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var st NodeStatus
			if err := c.call(cctx, m.Address, http.MethodGet, "/v1/status", nil, &st); err != nil {
				m.Error = err.Error()
				return
			}
			m.Status, m.Reachable = &st, true
		}(&out[i])
	}
	for range servers {
		<-done
	}
	return out, nil
}

type addMemberRequest struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
}

func (c *Cluster) handleAddMember(w http.ResponseWriter, r *http.Request) {
	var req addMemberRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		http.Error(w, "bad member request: "+err.Error(), http.StatusBadRequest)
		return
	}
	cn, _ := c.cfg.VerifyPeer(*peerState(r))
	// A member forwarding a join to the leader calls with its own
	// certificate, not the joiner's; members already speak Raft, so letting
	// them add others grants nothing new.
	if cn != req.ID && !c.isMember(cn) {
		http.Error(w, fmt.Sprintf("a node may only add itself (certificate is for %q)", cn), http.StatusForbidden)
		return
	}
	c.serveMemberChange(w, r, c.addLocal(req.ID, req.Address, req.Voter), func() error {
		return c.AddMember(r.Context(), req.ID, req.Address, req.Voter)
	})
}

func (c *Cluster) handleRemoveMember(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	tried := false
	c.serveMemberChange(w, r, c.removeLocal(id, &tried), func() error { return c.RemoveMember(r.Context(), id) })
}

// hopHeader marks a membership change forwarded by a member to the node it
// takes for the leader: that node only acts if it leads, so the retrying
// stays with the one caller and no request hops twice.
const hopHeader = "Rollcall-Forwarded"

// serveMemberChange answers a membership change: a forwarded one is tried
// here once, on the leader only; one from a joiner goes through the full
// retrying path.
func (c *Cluster) serveMemberChange(w http.ResponseWriter, r *http.Request, local func() (bool, error), full func() error) {
	var err error
	switch {
	case r.Header.Get(hopHeader) == "":
		err = full()
	case c.raft.State() != raft.Leader:
		err = ErrNoLeader
	default:
		_, err = local()
	}
	if err != nil {
		http.Error(w, err.Error(), memberStatus(err))
		return
	}
	writeJSON(w, map[string]bool{"ok": true})
}

// memberStatus is the node-call status for a failed membership change;
// call maps it back to the same error.
func memberStatus(err error) int {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrNoLeader):
		return http.StatusMisdirectedRequest
	case errors.Is(err, errRefused):
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

// isMember reports whether id is in the current Raft configuration.
func (c *Cluster) isMember(id string) bool {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// AddMember adds a server to the configuration, on the leader (forwarding
// when this node is not it). Voters are added as voters directly; hashicorp
// raft catches a new server up before it counts toward commit only for
// non-voters, so a large store should join as non-voter first. Adding a
// server that is already there with the same address changes nothing, so
// the change is retried through leader elections.
func (c *Cluster) AddMember(ctx context.Context, id, address string, voter bool) error {
	body, _ := json.Marshal(addMemberRequest{ID: id, Address: address, Voter: voter})
	return c.changeMembers(ctx, http.MethodPost, "/v1/members", body, c.addLocal(id, address, voter), new(bool))
}

// RemoveMember removes a server from the configuration, on the leader
// (forwarding when this node is not it), through leader elections. A server
// that is gone when an earlier attempt of this call may have removed it is
// success; one that was never a member is store.ErrNotFound.
func (c *Cluster) RemoveMember(ctx context.Context, id string) error {
	tried := false
	return c.changeMembers(ctx, http.MethodDelete, "/v1/members/"+id, nil, c.removeLocal(id, &tried), &tried)
}

// addLocal is AddMember's step on the leader; done reports success.
func (c *Cluster) addLocal(id, address string, voter bool) func() (done bool, err error) {
	return func() (bool, error) {
		var f raft.IndexFuture
		if voter {
			f = c.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(address), 0, c.cfg.ApplyTimeout)
		} else {
			f = c.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(address), 0, c.cfg.ApplyTimeout)
		}
		if err := f.Error(); err != nil {
			return false, fmt.Errorf("add member %s: %w", id, leadershipErr(err))
		}
		return true, nil
	}
}

// removeLocal is RemoveMember's step on the leader; *tried records that an
// attempt was made, so a server found gone afterwards counts as removed.
func (c *Cluster) removeLocal(id string, tried *bool) func() (done bool, err error) {
	return func() (bool, error) {
		if !c.isMember(id) {
			if *tried {
				return true, nil
			}
			return false, store.Errorf(store.ErrNotFound, "remove member: %q is not a member", id)
		}
		*tried = true
		if err := c.raft.RemoveServer(raft.ServerID(id), 0, c.cfg.ApplyTimeout).Error(); err != nil {
			return false, fmt.Errorf("remove member %s: %w", id, leadershipErr(err))
		}
		return true, nil
	}
}

// leadershipErr turns Raft's "not the leader" into ErrNoLeader, which the
// callers know to retry.
func leadershipErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
		return fmt.Errorf("%w (%v)", ErrNoLeader, err)
	}
	return err
}

// changeMembers runs a configuration change on the leader: local when this
// node leads, else forwarded over the node-call protocol. Both changes are
// idempotent, so every failure but a refusal of the request itself (no
// leader, leadership lost, the leader unreachable or no longer leading) is
// retried until ctx or ApplyTimeout ends; the last error is returned then.
// *tried is set once an attempt may have taken effect, so that a removal
// finding the server gone afterwards is success.
func (c *Cluster) changeMembers(ctx context.Context, method, path string, body []byte, local func() (bool, error), tried *bool) error {
	deadline := time.Now().Add(c.cfg.ApplyTimeout)
	for {
		var err error
		_, leader := c.Leader()
		switch {
		case c.raft.State() == raft.Leader:
			var done bool
			done, err = local()
			if done {
				return nil
			}
		case leader == "":
			err = ErrNoLeader
		default:
			err = c.callHeader(ctx, leader, method, path, body, nil, http.Header{hopHeader: {"1"}})
			if err == nil {
				return nil
			}
			if errors.Is(err, store.ErrNotFound) && *tried {
				// An earlier attempt whose answer was lost did it.
				return nil
			}
			// Only a leader refusing as "not the leader" surely did nothing.
			*tried = *tried || !errors.Is(err, ErrNoLeader)
		}
		if !retryable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(c.cfg.HeartbeatTimeout / 4):
		}
	}
}

// errRefused marks a node call the other side refused as malformed or
// not allowed: asking again cannot help.
var errRefused = errors.New("refused")

// retryable reports whether a membership change that failed with err can
// be tried again: everything but a refusal of the request itself.
func retryable(err error) bool {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, errRefused):
		return false
	}
	return true
}
