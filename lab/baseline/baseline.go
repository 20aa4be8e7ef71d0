// Package baseline is the yardstick for raftfsm's numbers: a plain
// hashicorp/raft cluster with nothing tuned. Its state machine is a
// non-batching raft.FSM doing one bbolt Update (fsynced) per entry; the log
// is raft-boltdb/v2; nodes talk over raft.NewTCPTransport on loopback
// without TLS; timeouts are raft.DefaultConfig's (1 s). It lives under lab/
// so that both raftfsm's benchmarks and the lab program can import it; it
// must not import raftfsm (raftfsm's tests import it).
package baseline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

var (
	bucketKV   = []byte("kv")
	bucketMeta = []byte("meta")
	keyApplied = []byte("applied")
)

// ErrExists is an entry's result when its key is already stored.
var ErrExists = errors.New("key exists")

// Entry encodes a command for the baseline FSM: a one-byte key length, the
// key, then the value. The FSM refuses a key it already has, like a create.
func Entry(key string, value []byte) []byte {
	b := make([]byte, 0, 1+len(key)+len(value))
	b = append(b, byte(len(key)))
	b = append(b, key...)
	return append(b, value...)
}

// FSM applies each entry in its own bbolt transaction.
type FSM struct {
	path string
	mu   sync.RWMutex // only Restore swaps db
	db   *bolt.DB
}

func openFSM(path string) (*FSM, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketKV); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketMeta)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &FSM{path: path, db: db}, nil
}

// Apply implements raft.FSM: one Update, one fsync, per entry.
func (f *FSM) Apply(l *raft.Log) any {
	if len(l.Data) < 1 || len(l.Data) < 1+int(l.Data[0]) {
		return errors.New("short entry")
	}
	key, value := l.Data[1:1+l.Data[0]], l.Data[1+l.Data[0]:]
	f.mu.RLock()
	defer f.mu.RUnlock()
	var result error
	err := f.db.Update(func(tx *bolt.Tx) error {
		kv := tx.Bucket(bucketKV)
		if kv.Get(key) != nil {
			result = ErrExists
		} else if err := kv.Put(key, value); err != nil {
			return err
		}
		var idx [8]byte
		binary.BigEndian.PutUint64(idx[:], l.Index)
		return tx.Bucket(bucketMeta).Put(keyApplied, idx[:])
	})
	if err != nil {
		panic(fmt.Sprintf("baseline: apply %d: %v", l.Index, err))
	}
	return result
}

// Has reports whether key is stored.
func (f *FSM) Has(key string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	found := false
	f.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketKV).Get([]byte(key)) != nil
		return nil
	})
	return found
}

// Snapshot streams the bbolt file from one read transaction.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	tx, err := f.db.Begin(false)
	if err != nil {
		f.mu.RUnlock()
		return nil, err
	}
	return &snapshot{tx: tx, done: f.mu.RUnlock}, nil
}

// Restore replaces the bbolt file with the snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp := f.path + ".restore"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, rc); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	out.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.db.Close()
	if err := os.Rename(tmp, f.path); err != nil {
		return err
	}
	db, err := bolt.Open(f.path, 0o600, &bolt.Options{Timeout: time.Second})
	f.db = db
	return err
}

func (f *FSM) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.db.Close()
}

type snapshot struct {
	tx   *bolt.Tx
	done func()
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.tx.WriteTo(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() { s.tx.Rollback(); s.done() }

// Node is one baseline server.
type Node struct {
	ID   raft.ServerID
	Addr raft.ServerAddress
	dir  string

	mu    sync.Mutex
	raft  *raft.Raft
	fsm   *FSM
	logs  *raftboltdb.BoltStore
	trans *raft.NetworkTransport
}

// Raft is the running node, nil when stopped.
func (n *Node) Raft() *raft.Raft {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.raft
}

// FSM is the node's state machine, nil when stopped.
func (n *Node) FSM() *FSM {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fsm
}

// Cluster is a set of baseline nodes in this process.
type Cluster struct {
	Nodes []*Node
	tune  func(*raft.Config)
}

// Start runs n nodes under dir on 127.0.0.1 and bootstraps them as one
// cluster. tune, if not nil, adjusts each raft.Config (which starts as
// raft.DefaultConfig()).
func Start(dir string, n int, tune func(*raft.Config)) (*Cluster, error) {
	c := &Cluster{tune: tune}
	var servers []raft.Server
	for i := 1; i <= n; i++ {
		nd := &Node{ID: raft.ServerID(fmt.Sprintf("b%d", i)), dir: filepath.Join(dir, fmt.Sprintf("b%d", i))}
		if err := c.open(nd, "127.0.0.1:0"); err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
		servers = append(servers, raft.Server{ID: nd.ID, Address: nd.Addr, Suffrage: raft.Voter})
	}
	if err := c.Nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) open(nd *Node, bind string) error {
	if err := os.MkdirAll(nd.dir, 0o700); err != nil {
		return err
	}
	quiet := hclog.New(&hclog.LoggerOptions{Name: "baseline", Level: hclog.Error, Output: io.Discard})
	fsm, err := openFSM(filepath.Join(nd.dir, "fsm.db"))
	if err != nil {
		return err
	}
	logs, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(nd.dir, "raft.db")})
	if err != nil {
		fsm.close()
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(nd.dir, 2, quiet)
	if err != nil {
		fsm.close()
		logs.Close()
		return err
	}
	var trans *raft.NetworkTransport
	for attempt := 0; ; attempt++ {
		trans, err = raft.NewTCPTransportWithLogger(bind, nil, 3, 10*time.Second, quiet)
		if err == nil || attempt == 20 {
			break
		}
		time.Sleep(100 * time.Millisecond) // a restart's port may still be held for a moment
	}
	if err != nil {
		fsm.close()
		logs.Close()
		return err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = nd.ID
	rc.Logger = quiet
	if c.tune != nil {
		c.tune(rc)
	}
	r, err := raft.NewRaft(rc, fsm, logs, logs, snaps, trans)
	if err != nil {
		trans.Close()
		fsm.close()
		logs.Close()
		return err
	}
	nd.mu.Lock()
	nd.Addr, nd.raft, nd.fsm, nd.logs, nd.trans = trans.LocalAddr(), r, fsm, logs, trans
	nd.mu.Unlock()
	return nil
}

// Stop shuts a node down (its files stay).
func (c *Cluster) Stop(nd *Node) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.raft == nil {
		return nil
	}
	err := nd.raft.Shutdown().Error()
	nd.trans.Close()
	nd.logs.Close()
	nd.fsm.close()
	nd.raft, nd.fsm, nd.logs, nd.trans = nil, nil, nil, nil
	return err
}

// Restart starts a stopped node again on its address and files.
func (c *Cluster) Restart(nd *Node) error { return c.open(nd, string(nd.Addr)) }

// Close stops every node.
func (c *Cluster) Close() {
	for _, nd := range c.Nodes {
		c.Stop(nd)
	}
}

// Leader waits for a running node that leads.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	for {
		for _, nd := range c.Nodes {
			if r := nd.Raft(); r != nil && r.State() == raft.Leader {
				return nd, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("baseline: no leader: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Apply proposes data on the current leader and waits for its result.
// Plain hashicorp/raft has no forwarding: a client must find the leader.
func (c *Cluster) Apply(ctx context.Context, data []byte) error {
	nd, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	r := nd.Raft()
	if r == nil {
		return raft.ErrRaftShutdown
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := r.Apply(data, timeout)
	if err := f.Error(); err != nil {
		return err
	}
	if err, _ := f.Response().(error); err != nil {
		return err
	}
	return nil
}

// Result is the outcome of a Drive run.
type Result struct {
	Writes  int
	Errors  int
	Elapsed time.Duration
	First   error // the first error seen
}

// PerSecond is acknowledged writes per second.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Writes-r.Errors) / r.Elapsed.Seconds()
}

// Drive calls write(i) for i in [0, n) from p goroutines and times it.
// With p = 1 the writes are strictly sequential.
func Drive(n, p int, write func(i int) error) Result {
	var next, errs atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := write(i); err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	r := Result{Writes: n, Errors: int(errs.Load()), Elapsed: time.Since(start)}
	if e := first.Load(); e != nil {
		r.First = *e
	}
	return r
}

// Key is the key of write i, shaped like a machine ID.
func Key(i int) string { return fmt.Sprintf("m-%012x", i) }

// Value is a JSON body about the size of raftfsm's MachineCreate.
func Value(i int) []byte {
	return fmt.Appendf(nil, `{"id":%q,"macs":["52:54:00:%02x:%02x:%02x"],"now":"2026-11-30T08:00:00Z"}`,
		Key(i), (i>>16)&0xff, (i>>8)&0xff, i&0xff)
}

// ApplyN applies n creates (keys offset..offset+n) from p proposers.
func (c *Cluster) ApplyN(ctx context.Context, offset, n, p int) Result {
	return Drive(n, p, func(i int) error {
		return c.Apply(ctx, Entry(Key(offset+i), Value(offset+i)))
	})
}
