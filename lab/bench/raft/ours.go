package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
)

// ours is a three-node raftfsm cluster in this process, with mutual TLS
// under a throwaway CA, as raftfsm/cluster's tests build it.
type ours struct {
	nodes []*ourNode
}

type ourNode struct {
	cfg    cluster.Config
	dbPath string

	mu sync.Mutex
	db *store.DB
	c  *cluster.Cluster
}

func (n *ourNode) cluster() *cluster.Cluster {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.c
}

func startOurs(dir string, size int) (*ours, error) {
	ca, err := pki.NewCA("rollcall bench", time.Now())
	if err != nil {
		return nil, err
	}
	o := &ours{}
	for i := 1; i <= size; i++ {
		name := fmt.Sprintf("n%d", i)
		cert, key, err := ca.IssueNode(name, []string{"127.0.0.1"}, time.Now(), 24*time.Hour)
		if err != nil {
			return nil, err
		}
		tlsCfg, err := pki.PeerTLS(ca.CertPEM, cert, key)
		if err != nil {
			return nil, err
		}
		nd := &ourNode{
			cfg: cluster.Config{
				Name: name, Dir: filepath.Join(dir, name, "raft"), Bind: "127.0.0.1:0",
				TLS: tlsCfg, VerifyPeer: pki.PeerVerified,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			},
			dbPath: filepath.Join(dir, name, "state.db"),
		}
		if err := nd.start(); err != nil {
			o.close()
			return nil, err
		}
		nd.cfg.Bind = nd.c.Advertise()
		o.nodes = append(o.nodes, nd)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if i == 1 {
			err = nd.c.Bootstrap()
			if err == nil {
				_, err = o.leader(ctx)
			}
		} else {
			err = o.nodes[0].c.AddMember(ctx, name, nd.c.Advertise(), true)
		}
		cancel()
		if err != nil {
			o.close()
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
	}
	return o, nil
}

func (n *ourNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	db, err := store.Open(n.dbPath)
	if err != nil {
		return err
	}
	var c *cluster.Cluster
	for attempt := 0; ; attempt++ {
		c, err = cluster.Open(n.cfg, db)
		if err == nil || attempt == 20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		db.Close()
		return err
	}
	n.db, n.c = db, c
	return nil
}

func (n *ourNode) stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c == nil {
		return nil
	}
	err := n.c.Shutdown()
	n.db.Close()
	n.c, n.db = nil, nil
	return err
}

func (o *ours) close() {
	for _, n := range o.nodes {
		n.stop()
	}
}

func (o *ours) leader(ctx context.Context) (*ourNode, error) {
	for {
		for _, n := range o.nodes {
			if c := n.cluster(); c != nil && c.IsLeader() {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no leader: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (o *ours) running() []*ourNode {
	var out []*ourNode
	for _, n := range o.nodes {
		if n.cluster() != nil {
			out = append(out, n)
		}
	}
	return out
}

// converge commits a no-op and waits for every running node to apply it.
func (o *ours) converge(ctx context.Context) error {
	var idx uint64
	for {
		l, err := o.leader(ctx)
		if err != nil {
			return err
		}
		if idx, err = l.cluster().Apply(ctx, raftfsm.Noop{}); err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
	}
	for _, n := range o.running() {
		if err := n.cluster().FSM().WaitApplied(ctx, idx); err != nil {
			return err
		}
	}
	return nil
}
