package pgexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/store"
)

// MirrorConfig configures a Mirror.
type MirrorConfig struct {
	Target Target
	Logger *slog.Logger
	// Batch is about how many changes one PostgreSQL transaction carries
	// (whole Raft indexes; default 2000).
	Batch int
	// RetryMin and RetryMax bound the wait between attempts after a
	// failure, doubling from one to the other (default 250ms and 30s).
	RetryMin, RetryMax time.Duration
	// Idle is how often an idle mirror checks its connection (default 5s).
	Idle time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Exported, when set, is called after each committed PostgreSQL
	// transaction with the index now exported.
	Exported func(index uint64)
}

// Mirror keeps a PostgreSQL schema current with the store: it applies each
// committed change from the store's change log, one PostgreSQL transaction
// per batch that also records the exported Raft index, and falls back to a
// full export when the change log no longer reaches back to that index.
// Run it on one node at a time (the leader); two that overlap do not
// corrupt anything (each transaction checks the index it started from).
type Mirror struct {
	db  *store.DB
	cfg MirrorConfig
	log *slog.Logger

	mu      sync.Mutex
	st      Status
	pending []seen // commits not yet exported, oldest first
}

type seen struct {
	index uint64
	at    time.Time
}

// Status is where a mirror stands.
type Status struct {
	Target        string  `json:"target"` // DSN without password, and schema
	Running       bool    `json:"running"`
	Connected     bool    `json:"connected"`
	ExportedIndex uint64  `json:"exported_index"` // last Raft index in PostgreSQL
	AppliedIndex  uint64  `json:"applied_index"`  // last Raft index in the local store
	LagIndexes    uint64  `json:"lag_indexes"`
	LagSeconds    float64 `json:"lag_seconds"` // age of the oldest commit not yet exported
	// Changes counts change-log entries applied since Run started.
	Changes     uint64    `json:"changes"`
	FullExports int       `json:"full_exports"`
	LastExport  time.Time `json:"last_export,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// NewMirror checks the target and returns a mirror ready to Run.
func NewMirror(db *store.DB, cfg MirrorConfig) (*Mirror, error) {
	if err := cfg.Target.Check(); err != nil {
		return nil, err
	}
	if _, err := LoadSchema(); err != nil {
		return nil, err
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 2000
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 250 * time.Millisecond
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(30*time.Second, cfg.RetryMin)
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Mirror{db: db, cfg: cfg, log: cfg.Logger.With("component", "pgexport", "target", cfg.Target.String())}
	m.st.Target = cfg.Target.String()
	return m, nil
}

// Status reports the mirror's position and lag.
func (m *Mirror) Status() Status {
	applied, _, _ := m.db.Applied()
	m.observe(applied)
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st
	st.AppliedIndex = applied
	if applied > st.ExportedIndex {
		st.LagIndexes = applied - st.ExportedIndex
		if len(m.pending) > 0 {
			st.LagSeconds = m.cfg.Now().Sub(m.pending[0].at).Seconds()
		}
	}
	return st
}

// observe notes when a commit was first seen, for the lag in seconds.
func (m *Mirror) observe(applied uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if applied <= m.st.ExportedIndex {
		return
	}
	if n := len(m.pending); n > 0 && m.pending[n-1].index >= applied {
		return
	} else if n >= 1<<16 {
		m.pending[n-1].index = applied // keep the older time: lag errs high, never low
		return
	}
	m.pending = append(m.pending, seen{applied, m.cfg.Now()})
}

func (m *Mirror) exported(index uint64, changes int, full bool) {
	m.mu.Lock()
	m.st.ExportedIndex = index
	m.st.Changes += uint64(changes)
	m.st.LastExport = m.cfg.Now()
	m.st.Connected = true
	if full {
		m.st.FullExports++
	}
	i := 0
	for i < len(m.pending) && m.pending[i].index <= index {
		i++
	}
	m.pending = append(m.pending[:0], m.pending[i:]...)
	m.mu.Unlock()
	if m.cfg.Exported != nil {
		m.cfg.Exported(index)
	}
}

func (m *Mirror) set(fn func(*Status)) {
	m.mu.Lock()
	fn(&m.st)
	m.mu.Unlock()
}

// Run mirrors until ctx is done, retrying with backoff through PostgreSQL
// outages (nothing is lost: the next attempt resumes from the index stored
// in PostgreSQL). It returns nil when ctx ends.
func (m *Mirror) Run(ctx context.Context) error {
	m.set(func(s *Status) { s.Running = true })
	defer m.set(func(s *Status) { s.Running, s.Connected = false, false })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.watchCommits(ctx) }()
	defer wg.Wait()

	wait := m.cfg.RetryMin
	for {
		progressed, err := m.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if progressed {
			wait = m.cfg.RetryMin
		}
		err = m.cfg.Target.scrub(err)
		m.set(func(s *Status) {
			s.Connected, s.LastError, s.LastErrorAt = false, err.Error(), m.cfg.Now()
		})
		m.log.Warn("PostgreSQL export interrupted; retrying", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(wait*2, m.cfg.RetryMax)
	}
}

// watchCommits records when each commit is seen, so the lag in seconds
// holds through a PostgreSQL outage.
func (m *Mirror) watchCommits(ctx context.Context) {
	for {
		w := m.db.Watch()
		if applied, _, err := m.db.Applied(); err == nil {
			m.observe(applied)
		}
		select {
		case <-ctx.Done():
			return
		case <-w:
		}
	}
}

// errMoved means another mirror advanced the exported index.
var errMoved = errors.New("export state moved under this mirror")

// session connects and mirrors until an error.
func (m *Mirror) session(ctx context.Context) (progressed bool, err error) {
	t := m.cfg.Target
	conn, err := t.connect(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	m.set(func(s *Status) { s.Connected = true })

	idx, err := m.resume(ctx, conn)
	if err != nil {
		return false, err
	}
	m.log.Info("PostgreSQL mirror running", "from_index", idx)
	for {
		watch := m.db.Watch()
		p, err := m.read(idx)
		if errors.Is(err, store.ErrChangesTruncated) {
			m.log.Warn("change log no longer reaches the exported index: exporting everything", "exported_index", idx)
			if idx, err = m.full(ctx, conn); err != nil {
				return progressed, err
			}
			progressed = true
			continue
		}
		if err != nil {
			return progressed, err
		}
		if p.through > idx {
			err := m.apply(ctx, conn, idx, p)
			if errors.Is(err, errMoved) {
				m.log.Warn("another mirror advanced the export; resuming from its index")
				if idx, err = m.resume(ctx, conn); err != nil {
					return progressed, err
				}
				continue
			}
			if err != nil {
				return progressed, err
			}
			idx, progressed = p.through, true
			m.exported(idx, p.changes, false)
			continue
		}
		m.set(func(s *Status) { s.ExportedIndex = idx })
		select {
		case <-ctx.Done():
			return progressed, ctx.Err()
		case <-watch:
		case <-time.After(m.cfg.Idle):
			if err := conn.Ping(ctx); err != nil {
				return progressed, fmt.Errorf("ping: %w", err)
			}
		}
	}
}

// resume makes sure the tables exist and returns the exported index,
// loading everything first when nothing was exported yet.
func (m *Mirror) resume(ctx context.Context, conn *pgx.Conn) (uint64, error) {
	s, err := LoadSchema()
	if err != nil {
		return 0, err
	}
	var st state
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := ensureSchema(ctx, tx, s, m.cfg.Target.schema()); err != nil {
			return err
		}
		st, err = lockState(ctx, tx, m.cfg.Target.schema())
		return err
	})
	if err != nil {
		return 0, err
	}
	if !st.loaded {
		return m.full(ctx, conn)
	}
	m.exported(st.index, 0, false)
	return st.index, nil
}

func (m *Mirror) full(ctx context.Context, conn *pgx.Conn) (uint64, error) {
	st, err := fullExport(ctx, conn, m.db, m.cfg.Target, "mirror-full")
	if err != nil {
		return 0, err
	}
	m.log.Info("PostgreSQL mirror loaded everything", "index", st.Index, "machines", st.Machines, "took", st.Duration)
	m.exported(st.Index, 0, true)
	return st.Index, nil
}

// plan is one batch of changes turned into rows, read in one store
// transaction.
type plan struct {
	through    uint64
	changes    int
	rows       *rowSet
	upMachines []string // replaced with their child rows
	delMachine []string
	delAddr    []netip.Addr
	delNode    []string
	delBlock   []netip.Addr
	delLease   []netip.Addr
	upImages   []string // replaced with their files
	delImage   []string
	delJob     []string
	delTag     []string
	delRack    []string
	delCert    []string
	delAudit   []int64
	delLayout  []string
	upOS       []string // replaced with their versions
	delOS      []string
	delDeploy  []string
	delProfile []string
	upOverlays []string // replaced with their files
	delOverlay []string
	delNodeOf  []string // stateless nodes, by machine
	net        bool     // fabrics, VLANs, subnets and ranges are reloaded
	vars       bool     // the cluster's variables are reloaded
	cas        bool     // the cluster's CA roots are reloaded
}

func (m *Mirror) read(after uint64) (*plan, error) {
	s, err := LoadSchema()
	if err != nil {
		return nil, err
	}
	p := &plan{rows: newRowSet(s)}
	err = m.db.View(func(tx *store.Tx) error {
		changes, through, err := tx.ChangeBatch(after, m.cfg.Batch)
		if err != nil {
			return err
		}
		p.through, p.changes = through, len(changes)
		machines, events, dropped := map[string]bool{}, map[string]bool{}, map[string]bool{}
		addrs, nodes := map[string]bool{}, map[string]bool{}
		blocks, leases, images, jobs := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
		tags, racks, layouts := map[string]bool{}, map[string]bool{}, map[string]bool{}
		osImages, deploys := map[string]bool{}, map[string]bool{}
		profiles, overlays, stateless := map[string]bool{}, map[string]bool{}, map[string]bool{}
		certs, audit := map[string]bool{}, map[string]bool{}
		for _, c := range changes {
			switch c.Table {
			case "machines", "inventory":
				machines[c.Key] = true
				if c.Op == store.OpDelete {
					dropped[c.Key] = true // its events went too, even if the ID is back
				}
			case "events":
				events[c.Key] = true
			case "addresses":
				addrs[c.Key] = true
			case "nodes":
				nodes[c.Key] = true
			case "lease_blocks":
				blocks[c.Key] = true
			case "leases":
				leases[c.Key] = true
			case "images":
				images[c.Key] = true
			case "jobs":
				jobs[c.Key] = true
			case store.TableTags:
				tags[c.Key] = true
			case store.TableRacks:
				racks[c.Key] = true
			case store.TableLayouts:
				layouts[c.Key] = true
			case store.TableOSImages:
				osImages[c.Key] = true
			case store.TableDeployJobs:
				deploys[c.Key] = true
			case store.TableProfiles:
				profiles[c.Key] = true
			case store.TableOverlays:
				overlays[c.Key] = true
			case store.TableStatelessNodes:
				stateless[c.Key] = true
			case store.TableClusterVars:
				p.vars = true
			case "certificates":
				certs[c.Key] = true
			case store.TableClusterCAs:
				p.cas = true
			case "audit":
				audit[c.Key] = true
			case "net":
				// The key (the bucket key in hex, store.Tx.NetRecord)
				// names a fabric, a VLAN, a subnet or a range; the network
				// tables are small, so they are reloaded whole rather than
				// record by record.
				p.net = true
			default:
				// A table this version does not export (a newer store).
			}
		}
		// A deploy job changes its machine's deploy_* columns: the
		// machine's row is written again too.
		for _, k := range sortedKeys(deploys) {
			j, err := tx.DeployJob(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delDeploy = append(p.delDeploy, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("deploy_jobs", s.Table("deploy_jobs").row(nil, j))
			machines[j.Machine] = true
		}
		for _, k := range sortedKeys(osImages) {
			o, err := tx.OSImage(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delOS = append(p.delOS, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.addOSImage(o)
			p.upOS = append(p.upOS, k)
		}
		// Every record is read as it is now: a change names what to look
		// at, and whatever the record's state, the rows follow it.
		for _, id := range sortedKeys(machines) {
			mach, err := tx.Machine(id)
			if errors.Is(err, store.ErrNotFound) {
				p.delMachine = append(p.delMachine, id)
				continue
			}
			if err != nil {
				return err
			}
			doc, err := tx.Inventory(id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if dropped[id] {
				p.delMachine = append(p.delMachine, id)
			}
			dep, err := machineDeployment(tx, id)
			if err != nil {
				return err
			}
			if err := p.rows.addMachine(mach, doc, dep); err != nil {
				return err
			}
			p.upMachines = append(p.upMachines, id)
		}
		for _, k := range sortedKeys(events) {
			e, err := tx.EventByChangeKey(k)
			if errors.Is(err, store.ErrNotFound) {
				continue // its machine was deleted since: the delete removes its rows
			}
			if err != nil {
				return err
			}
			seq, err := store.EventSeq(k)
			if err != nil {
				return err
			}
			p.rows.addEvent(e, seq)
		}
		for _, k := range sortedKeys(addrs) {
			ip, err := netip.ParseAddr(k)
			if err != nil {
				return fmt.Errorf("change names address %q: %w", k, err)
			}
			a, err := tx.Address(ip)
			if errors.Is(err, store.ErrNotFound) {
				p.delAddr = append(p.delAddr, ip)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("addresses", s.Table("addresses").row(nil, a))
		}
		for _, k := range sortedKeys(nodes) {
			n, err := tx.Node(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delNode = append(p.delNode, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("nodes", s.Table("nodes").row(nil, n))
		}
		for _, k := range sortedKeys(blocks) {
			first, err := netip.ParseAddr(k)
			if err != nil {
				return fmt.Errorf("change names lease block %q: %w", k, err)
			}
			b, err := tx.LeaseBlock(first)
			if errors.Is(err, store.ErrNotFound) {
				p.delBlock = append(p.delBlock, first)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("lease_blocks", s.Table("lease_blocks").row(nil, b))
		}
		for _, k := range sortedKeys(leases) {
			ip, err := netip.ParseAddr(k)
			if err != nil {
				return fmt.Errorf("change names lease %q: %w", k, err)
			}
			l, err := tx.Lease(ip)
			if errors.Is(err, store.ErrNotFound) {
				p.delLease = append(p.delLease, ip)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("leases", s.Table("leases").row(nil, l))
		}
		for _, k := range sortedKeys(images) {
			im, err := tx.Image(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delImage = append(p.delImage, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.addImage(im)
			p.upImages = append(p.upImages, k)
		}
		for _, k := range sortedKeys(jobs) {
			j, err := tx.Job(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delJob = append(p.delJob, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("bmc_jobs", s.Table("bmc_jobs").row(nil, j))
		}
		for _, k := range sortedKeys(tags) {
			tg, err := tx.Tag(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delTag = append(p.delTag, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("tags", s.Table("tags").row(nil, tg))
		}
		for _, k := range sortedKeys(racks) {
			rk, err := tx.Rack(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delRack = append(p.delRack, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("racks", s.Table("racks").row(nil, rk))
		}
		for _, k := range sortedKeys(certs) {
			c, ok := tx.Cert(k)
			if !ok {
				p.delCert = append(p.delCert, k)
				continue
			}
			p.rows.add("certificates", s.Table("certificates").row(nil, c))
		}
		for _, k := range sortedKeys(audit) {
			seq, err := strconv.ParseUint(k, 10, 64)
			if err != nil {
				return fmt.Errorf("change names audit event %q: %w", k, err)
			}
			e, ok := tx.AuditEventBySeq(seq)
			if !ok {
				p.delAudit = append(p.delAudit, int64(seq))
				continue
			}
			p.rows.add("audit", s.Table("audit").row(nil, e))
		}
		for _, k := range sortedKeys(layouts) {
			l, err := tx.Layout(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delLayout = append(p.delLayout, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("layouts", s.Table("layouts").row(nil, l))
		}
		for _, k := range sortedKeys(profiles) {
			pr, err := tx.Profile(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delProfile = append(p.delProfile, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("profiles", s.Table("profiles").row(nil, pr))
		}
		for _, k := range sortedKeys(overlays) {
			o, err := tx.Overlay(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delOverlay = append(p.delOverlay, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.addOverlay(o)
			p.upOverlays = append(p.upOverlays, k)
		}
		for _, k := range sortedKeys(stateless) {
			n, err := tx.StatelessNode(k)
			if errors.Is(err, store.ErrNotFound) {
				p.delNodeOf = append(p.delNodeOf, k)
				continue
			}
			if err != nil {
				return err
			}
			p.rows.add("stateless_nodes", s.Table("stateless_nodes").row(nil, n))
		}
		if p.vars {
			if err := p.rows.addClusterVars(tx); err != nil {
				return err
			}
		}
		if p.cas {
			if err := p.rows.addClusterCAs(tx); err != nil {
				return err
			}
		}
		if p.net {
			return p.rows.addNetwork(tx)
		}
		return nil
	})
	return p, err
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// apply writes one plan in one transaction that also moves the exported
// index from after to p.through.
func (m *Mirror) apply(ctx context.Context, conn *pgx.Conn, after uint64, p *plan) error {
	s, err := LoadSchema()
	if err != nil {
		return err
	}
	schema := m.cfg.Target.schema()
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		st, err := lockState(ctx, tx, schema)
		if err != nil {
			return err
		}
		if !st.loaded || st.index != after {
			return errMoved
		}
		exec := func(q string, args ...any) error {
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return fmt.Errorf("%s: %w", firstWords(q), err)
			}
			return nil
		}
		copyRows := func(t *Table) error {
			rows := p.rows.rows[t.Name]
			if len(rows) == 0 {
				return nil
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{schema, t.Name}, t.ColumnNames(), pgx.CopyFromRows(rows)); err != nil {
				return fmt.Errorf("copy into %s: %w", t.Name, err)
			}
			return nil
		}
		if len(p.delMachine) > 0 {
			if err := exec("DELETE FROM "+ident(schema, "machines")+" WHERE id = ANY($1)", p.delMachine); err != nil {
				return err
			}
		}
		if len(p.upMachines) > 0 {
			if err := upsert(ctx, tx, schema, s.Table("machines"), p.rows.rows["machines"]); err != nil {
				return err
			}
			for _, t := range s.Tables {
				if !t.Child || t.Name == "events" {
					continue
				}
				if err := exec("DELETE FROM "+ident(schema, t.Name)+" WHERE machine_id = ANY($1)", p.upMachines); err != nil {
					return err
				}
				if err := copyRows(t); err != nil {
					return err
				}
			}
		}
		if err := upsert(ctx, tx, schema, s.Table("events"), p.rows.rows["events"]); err != nil {
			return err
		}
		if len(p.delAddr) > 0 {
			if err := exec("DELETE FROM "+ident(schema, "addresses")+" WHERE ip = ANY($1)", p.delAddr); err != nil {
				return err
			}
		}
		if err := upsert(ctx, tx, schema, s.Table("addresses"), p.rows.rows["addresses"]); err != nil {
			return err
		}
		if len(p.delNode) > 0 {
			if err := exec("DELETE FROM "+ident(schema, "nodes")+" WHERE name = ANY($1)", p.delNode); err != nil {
				return err
			}
		}
		if err := upsert(ctx, tx, schema, s.Table("nodes"), p.rows.rows["nodes"]); err != nil {
			return err
		}
		// Deletes by primary key, then upserts, table by table.
		for _, d := range []struct {
			table, column string
			keys          any
			n             int
		}{
			{"lease_blocks", "first", p.delBlock, len(p.delBlock)},
			{"leases", "ip", p.delLease, len(p.delLease)},
			{"images", "name", p.delImage, len(p.delImage)}, // their files go with them
			{"bmc_jobs", "id", p.delJob, len(p.delJob)},
			{"tags", "name", p.delTag, len(p.delTag)},
			{"racks", "name", p.delRack, len(p.delRack)},
			{"certificates", "serial", p.delCert, len(p.delCert)},
			{"audit", "seq", p.delAudit, len(p.delAudit)},
			{"layouts", "name", p.delLayout, len(p.delLayout)},
			{"os_images", "name", p.delOS, len(p.delOS)}, // their versions go with them
			{"deploy_jobs", "id", p.delDeploy, len(p.delDeploy)},
			{"profiles", "name", p.delProfile, len(p.delProfile)},
			{"overlays", "name", p.delOverlay, len(p.delOverlay)}, // their files go with them
			{"stateless_nodes", "machine_id", p.delNodeOf, len(p.delNodeOf)},
		} {
			if d.n > 0 {
				if err := exec("DELETE FROM "+ident(schema, d.table)+" WHERE "+pgx.Identifier{d.column}.Sanitize()+" = ANY($1)", d.keys); err != nil {
					return err
				}
			}
			if err := upsert(ctx, tx, schema, s.Table(d.table), p.rows.rows[d.table]); err != nil {
				return err
			}
		}
		if len(p.upImages) > 0 {
			if err := exec("DELETE FROM "+ident(schema, "image_files")+" WHERE image = ANY($1)", p.upImages); err != nil {
				return err
			}
			if err := copyRows(s.Table("image_files")); err != nil {
				return err
			}
		}
		if len(p.upOS) > 0 {
			if err := exec("DELETE FROM "+ident(schema, "os_versions")+" WHERE os = ANY($1)", p.upOS); err != nil {
				return err
			}
			if err := copyRows(s.Table("os_versions")); err != nil {
				return err
			}
		}
		if len(p.upOverlays) > 0 {
			if err := exec("DELETE FROM "+ident(schema, "overlay_files")+" WHERE overlay = ANY($1)", p.upOverlays); err != nil {
				return err
			}
			if err := copyRows(s.Table("overlay_files")); err != nil {
				return err
			}
		}
		if p.vars {
			if err := exec("DELETE FROM " + ident(schema, "cluster_vars")); err != nil {
				return err
			}
			if err := copyRows(s.Table("cluster_vars")); err != nil {
				return err
			}
		}
		if p.cas {
			if err := exec("DELETE FROM " + ident(schema, "cluster_cas")); err != nil {
				return err
			}
			if err := copyRows(s.Table("cluster_cas")); err != nil {
				return err
			}
		}
		if p.net {
			for _, name := range []string{"fabrics", "vlans", "subnets", "ranges"} {
				if err := exec("DELETE FROM " + ident(schema, name)); err != nil {
					return err
				}
				if err := copyRows(s.Table(name)); err != nil {
					return err
				}
			}
		}
		return saveState(ctx, tx, m.cfg.Target, p.through, "mirror", false)
	})
}

// upsert inserts rows or replaces the ones with the same primary key, in
// one pipelined batch.
func upsert(ctx context.Context, tx pgx.Tx, schema string, t *Table, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	var cols, params, set, pk []string
	for i, c := range t.Columns {
		q := pgx.Identifier{c.Name}.Sanitize()
		cols = append(cols, q)
		params = append(params, "$"+strconv.Itoa(i+1))
		if slices.Contains(t.Primary, c.Name) {
			continue
		}
		set = append(set, q+" = EXCLUDED."+q)
	}
	for _, p := range t.Primary {
		pk = append(pk, pgx.Identifier{p}.Sanitize())
	}
	q := "INSERT INTO " + ident(schema, t.Name) + " (" + strings.Join(cols, ", ") + ") VALUES (" +
		strings.Join(params, ", ") + ") ON CONFLICT (" + strings.Join(pk, ", ") + ") DO "
	if len(set) == 0 {
		q += "NOTHING"
	} else {
		q += "UPDATE SET " + strings.Join(set, ", ")
	}
	b := &pgx.Batch{}
	for _, r := range rows {
		b.Queue(q, r...)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("upsert into %s: %w", t.Name, err)
	}
	return nil
}

func firstWords(q string) string {
	f := strings.Fields(q)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}
