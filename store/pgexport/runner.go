package pgexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Settings is postgres_export in rollcall.json: the continuous mirror of
// the store into PostgreSQL, run by the leader. Give every node the same
// settings so that the next leader takes over.
type Settings struct {
	// DSN is a libpq connection string or postgres:// URL without a
	// password.
	DSN string `json:"dsn"`
	// Schema holds the tables (default rollcall).
	Schema string `json:"schema,omitempty"`
	// PasswordFile holds the password (one line); without it PGPASSWORD
	// and ~/.pgpass of the node's user apply.
	PasswordFile string `json:"password_file,omitempty"`
}

// Check fills in the default schema and validates the settings without
// connecting; the password file must be readable now, so that a mistake
// shows at start rather than at the first leadership.
func (s *Settings) Check() error {
	if s.Schema == "" {
		s.Schema = DefaultSchema
	}
	if err := (Target{DSN: s.DSN, Schema: s.Schema}).Check(); err != nil {
		return err
	}
	if s.PasswordFile != "" {
		if _, err := ReadPasswordFile(s.PasswordFile); err != nil {
			return err
		}
	}
	return nil
}

// Target is where the settings export to, written by node. It reads the
// password file each time, so a rotated password is picked up by the next
// connection; on error the target still names the database (for messages).
func (s Settings) Target(node string) (Target, error) {
	t := Target{DSN: s.DSN, Schema: s.Schema, Node: node}
	if s.PasswordFile != "" {
		pw, err := ReadPasswordFile(s.PasswordFile)
		if err != nil {
			return t, err
		}
		t.Password = pw
	}
	return t, nil
}

// ReadPasswordFile reads a password kept alone on the first line of a file.
func ReadPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return "", fmt.Errorf("password file %s must hold the password on one line", path)
	}
	return pw, nil
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Settings Settings
	Node     string    // this node's name, recorded in export_state
	Store    *store.DB // the node's local copy
	// IsLeader says whether this node leads: the mirror runs only then.
	IsLeader func() bool
	// Poll is how often leadership is checked (default 1s).
	Poll time.Duration
}

// Runner is a node's continuous mirror: it runs a Mirror while the node
// leads and stops it when leadership is lost (an open PostgreSQL
// transaction rolls back); the next leader resumes from the index kept in
// PostgreSQL.
type Runner struct {
	cfg RunnerConfig

	mu  sync.Mutex
	m   *Mirror // the last mirror this node ran; nil if never leader
	err string  // why the mirror could not start
}

// NewRunner checks the configuration; nothing runs until Run.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if cfg.Store == nil || cfg.IsLeader == nil {
		return nil, errors.New("pgexport runner: a store and a leadership test are required")
	}
	if err := cfg.Settings.Check(); err != nil {
		return nil, err
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	return &Runner{cfg: cfg}, nil
}

// Run mirrors while this node leads, until ctx ends; it returns ctx's
// error.
func (r *Runner) Run(ctx context.Context, log *slog.Logger) error {
	rlog := log.With("component", "pgexport") // the mirror adds it to its own
	whileLeader(ctx, r.cfg.IsLeader, r.cfg.Poll, func(ctx context.Context) {
		t, err := r.cfg.Settings.Target(r.cfg.Node)
		var m *Mirror
		if err == nil {
			m, err = NewMirror(r.cfg.Store, MirrorConfig{Target: t, Logger: log})
		}
		r.mu.Lock()
		r.err = ""
		if err != nil {
			r.err = err.Error()
		} else {
			r.m = m
		}
		r.mu.Unlock()
		if err != nil {
			rlog.Error("PostgreSQL mirror cannot start", "err", err)
			return
		}
		rlog.Info("leader: running the PostgreSQL mirror", "target", t.String())
		m.Run(ctx)
		rlog.Info("PostgreSQL mirror stopped")
	})
	return ctx.Err()
}

// Target is where the mirror exports to, without the password.
func (r *Runner) Target() Target {
	return Target{DSN: r.cfg.Settings.DSN, Schema: r.cfg.Settings.Schema, Node: r.cfg.Node}
}

// Status is where the mirror stands as this node sees it. running says
// whether this node's own mirror runs; its status is then the mirror's.
// Otherwise the status is read from the position the leader's mirror keeps
// in PostgreSQL (ctx bounds that read), with why this node's own mirror
// could not start, if it could not, as LastError; err is why PostgreSQL
// could not be read, for the caller to log and word.
func (r *Runner) Status(ctx context.Context) (st Status, running bool, err error) {
	r.mu.Lock()
	m, startErr := r.m, r.err
	r.mu.Unlock()
	if m != nil {
		if st := m.Status(); st.Running {
			return st, true, nil
		}
	}
	t, err := r.cfg.Settings.Target(r.cfg.Node)
	st = Status{Target: t.String(), LastError: startErr}
	st.AppliedIndex, _, _ = r.cfg.Store.Applied()
	if err == nil {
		var ps State
		ps, err = ReadState(ctx, t)
		st.ExportedIndex, st.LastExport = ps.Index, ps.ExportedAt
		st.Connected = err == nil
	}
	if st.AppliedIndex > st.ExportedIndex {
		st.LagIndexes = st.AppliedIndex - st.ExportedIndex
		if !st.LastExport.IsZero() {
			st.LagSeconds = time.Since(st.LastExport).Seconds()
		}
	}
	return st, false, err
}

// whileLeader calls run while isLeader holds, cancelling it when
// leadership is lost (checked every poll) and calling it again, after a
// poll, if it returns on its own.
func whileLeader(ctx context.Context, isLeader func() bool, poll time.Duration, run func(context.Context)) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if isLeader() {
			rctx, rcancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); run(rctx) }()
		watch:
			for {
				select {
				case <-ctx.Done():
					rcancel()
					<-done
					return
				case <-done:
					break watch
				case <-tick.C:
					if !isLeader() {
						rcancel()
						<-done
						break watch
					}
				}
			}
			rcancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
