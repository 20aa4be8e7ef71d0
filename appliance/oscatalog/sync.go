package oscatalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

type counter = atomic.Int64

// SyncRequest is a sync of some os_sources (all when Names is empty).
type SyncRequest struct {
	Names []string
	// Force downloads even when the vendor's checksum is one a version
	// was made from.
	Force bool
	// Timer marks the nightly sync: the state machine refuses it while
	// the last start is younger than the interval.
	Timer bool
}

// Sync outcomes of one name.
const (
	SyncNew       = "new"
	SyncUnchanged = "unchanged"
	SyncFailed    = "failed"
)

// NameResult is what a sync did for one name.
type NameResult struct {
	Name     string   `json:"name"`
	Action   string   `json:"action"` // new, unchanged, failed
	Version  string   `json:"version,omitempty"`
	Upstream string   `json:"upstream,omitempty"`
	Current  bool     `json:"current,omitempty"` // the new version became current
	Pruned   []string `json:"pruned,omitempty"`
	Message  string   `json:"message,omitempty"` // why it failed, for the operator
}

func (r NameResult) line() string {
	switch r.Action {
	case SyncNew:
		return fmt.Sprintf("%s: new version %s", r.Name, r.Version)
	case SyncFailed:
		return fmt.Sprintf("%s: failed: %s", r.Name, r.Message)
	}
	return r.Name + ": " + r.Action
}

// Sync fetches each source's checksum file and, when the vendor's
// checksum differs from every version's (or Force), downloads, verifies,
// converts, compresses and records a new version; then prunes. It holds
// the cluster's sync claim throughout. One name failing does not stop the
// others; the error is for a sync that could not run at all.
func (c *Catalog) Sync(ctx context.Context, req SyncRequest, progress func(Progress)) ([]NameResult, error) {
	sources, err := c.pick(req.Names)
	if err != nil {
		return nil, err
	}
	if !c.busy.TryLock() {
		return nil, &Error{Kind: "conflict", Message: "this node is already importing or syncing an image: retry when it is done"}
	}
	defer c.busy.Unlock()
	started := c.now()
	claim := &raftfsm.OSSyncStart{Node: c.cfg.Node, Now: started, Until: started.Add(claimFor), Timer: req.Timer, Interval: c.cfg.Interval}
	if _, err := c.cfg.Cluster.Apply(ctx, claim); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, &Error{Kind: "conflict", Message: store.Public(err), cause: err}
		}
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		c.renew(ctx, cancel)
	}()

	var results []NameResult
	for _, src := range sources {
		r := c.syncOne(ctx, src, req.Force, named(src.Name, progress))
		if r.Action != SyncFailed {
			pruned, err := c.Prune(ctx, src.Name)
			if err != nil {
				c.log.Warn("OS prune failed", "os", src.Name, "err", err)
			}
			r.Pruned = pruned
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	cancel(nil)
	<-renewed
	lines := make([]string, len(results))
	for i, r := range results {
		lines[i] = r.line()
	}
	end := &raftfsm.OSSyncEnd{Node: c.cfg.Node, Started: started, Now: c.now(), Result: lines}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		end.Error = "the sync lost its claim: " + store.Public(cause)
	}
	// The claim ends even when the caller went away.
	ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer ecancel()
	if _, err := c.cfg.Cluster.Apply(ectx, end); err != nil {
		c.log.Warn("OS sync end not recorded; the claim lapses by itself", "err", err)
	}
	return results, nil
}

// renew extends the claim until ctx ends; when it cannot (another node
// took it after a long partition), the sync stops.
func (c *Catalog) renew(ctx context.Context, stop context.CancelCauseFunc) {
	t := time.NewTicker(renewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := c.now()
		_, err := c.cfg.Cluster.Apply(ctx, &raftfsm.OSSyncStart{Node: c.cfg.Node, Now: now, Until: now.Add(claimFor), Renew: true})
		if errors.Is(err, store.ErrConflict) {
			stop(err)
			return
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn("OS sync claim not renewed; retrying", "err", err)
		}
	}
}

// pick returns the sources names asks for, all when it is empty.
func (c *Catalog) pick(names []string) ([]Source, error) {
	if len(names) == 0 {
		return c.cfg.Sources, nil
	}
	var out []Source
	for _, n := range names {
		i := slices.IndexFunc(c.cfg.Sources, func(s Source) bool { return s.Name == n })
		if i < 0 {
			known := make([]string, len(c.cfg.Sources))
			for j, s := range c.cfg.Sources {
				known[j] = s.Name
			}
			return nil, store.Errorf(store.ErrInvalid, "%q is not in os_sources (configured: %s)", store.Clip(n), strings.Join(known, ", "))
		}
		if !slices.ContainsFunc(out, func(s Source) bool { return s.Name == n }) {
			out = append(out, c.cfg.Sources[i])
		}
	}
	return out, nil
}

// syncOne brings one source up to date.
func (c *Catalog) syncOne(ctx context.Context, src Source, force bool, progress func(Progress)) NameResult {
	r := NameResult{Name: src.Name}
	fail := func(err error) NameResult {
		r.Action = SyncFailed
		r.Message = publicText(err)
		c.log.Warn("OS sync failed", "os", src.Name, "err", err)
		report(progress, Progress{Step: "sync", State: "failed", Message: r.Message})
		return r
	}
	o, err := c.ensureName(ctx, src)
	if err != nil {
		return fail(err)
	}
	report(progress, Progress{Step: "checksum", State: "running"})
	b, err := c.readSmall(ctx, src.ChecksumURL, MaxChecksumFile)
	if err != nil {
		return fail(fetchFailure("checksum file", err))
	}
	sums, err := ParseChecksums(b)
	if err != nil {
		return fail(invalid("the checksum file does not read: "+err.Error(), nil))
	}
	sum, ok := sums.Lookup(fileName(src.URL))
	if !ok {
		return fail(invalid(fmt.Sprintf("the checksum file does not list %s", clipName(fileName(src.URL))), nil))
	}
	r.Upstream = sum.String()
	report(progress, Progress{Step: "checksum", State: "done", Message: r.Upstream})
	if !force {
		for _, v := range o.Versions {
			if v.Upstream == r.Upstream {
				r.Action, r.Version = SyncUnchanged, v.Version
				report(progress, Progress{Step: "sync", State: "skipped", Message: "unchanged upstream: version " + v.Version})
				return r
			}
		}
	}
	dir, err := os.MkdirTemp(c.cfg.WorkDir, "sync-*")
	if err != nil {
		return fail(internal("no scratch space for the sync", err))
	}
	defer os.RemoveAll(dir)
	path, err := c.downloadTo(ctx, src.URL, dir, progress)
	if err != nil {
		return fail(fetchFailure("download of "+fileName(src.URL), err))
	}
	if err := verify(ctx, path, sum, progress); err != nil {
		return fail(err)
	}
	v, err := c.build(ctx, path, dir, progress)
	if err != nil {
		return fail(err)
	}
	v.Upstream, v.Source = r.Upstream, src.URL
	v, err = c.record(ctx, src.Name, src.Family, src.Track, v, progress)
	if err != nil {
		return fail(err)
	}
	r.Action, r.Version = SyncNew, v.Version
	c.cfg.DB.View(func(tx *store.Tx) error {
		o, err := tx.OSImage(src.Name)
		r.Current = err == nil && o.Current == v.Version
		return nil
	})
	c.log.Info("OS version synced", "os", src.Name, "version", v.Version, "upstream", r.Upstream, "bytes", v.File.Size)
	return r
}

// ensureName makes the catalog's record of a source agree with os_sources
// on family and track.
func (c *Catalog) ensureName(ctx context.Context, src Source) (store.OSImage, error) {
	var o store.OSImage
	found := true
	err := c.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		o, err = tx.OSImage(src.Name)
		if errors.Is(err, store.ErrNotFound) {
			found, err = false, nil
		}
		return err
	})
	if err != nil {
		return o, err
	}
	if found && o.Family == src.Family && o.Track == src.Track {
		return o, nil
	}
	if _, err := c.cfg.Cluster.Apply(ctx, &raftfsm.OSImageSet{Name: src.Name, Family: src.Family, Track: src.Track, Now: c.now()}); err != nil {
		return o, err
	}
	o.Name, o.Family, o.Track = src.Name, src.Family, src.Track
	return o, nil
}

// publicText is what an operator may read of a failure.
func publicText(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	if p := store.Public(err); p != "" {
		return p
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	return "failed (the node's log says why)"
}

// PublicText is publicText for the API's streamed results.
func PublicText(err error) string { return publicText(err) }

// Run is the nightly sync: on the leader, once the last sync start is at
// least the interval old (as the replicated store says, so a new leader
// does not sync again), first FirstSync after start. It returns when ctx
// ends.
func (c *Catalog) Run(ctx context.Context, log *slog.Logger) error {
	if c.cfg.Interval < 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTimer(c.cfg.FirstSync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		t.Reset(checkEvery)
		if c.Due() {
			c.syncByTimer(ctx, log)
		}
	}
}

// Due reports whether this node should start the timed sync now: it
// leads, no sync runs, and the last started at least an interval ago.
func (c *Catalog) Due() bool {
	if !c.cfg.Cluster.IsLeader() {
		return false
	}
	var s store.OSSync
	if err := c.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		s, err = tx.OSSyncState()
		return err
	}); err != nil {
		return false
	}
	now := c.now()
	return !s.Running(now) && (s.Started.IsZero() || now.Sub(s.Started) >= c.cfg.Interval)
}

func (c *Catalog) syncByTimer(ctx context.Context, log *slog.Logger) {
	log.Info("OS sync started by the timer")
	results, err := c.Sync(ctx, SyncRequest{Timer: true}, nil)
	var e *Error
	switch {
	case errors.As(err, &e) && e.Kind == "conflict":
		log.Debug("OS sync not started", "why", e.Message)
	case err != nil:
		log.Warn("OS sync did not run", "err", err)
	default:
		for _, r := range results {
			log.Info("OS sync", "result", r.line())
		}
	}
}
