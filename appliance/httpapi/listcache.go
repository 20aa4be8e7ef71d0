package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/store"
)

// The machine list is the API's hottest read: the web UI, the console and
// `rollcall list -watch` ask for all of it on every change. Decoding 10,000
// records and encoding them again cost ~150 ms; this cache keeps each row's
// JSON ready and brings itself up to date from the store's change log, so a
// list is a filter plus a copy.

type listRow struct {
	id, name, serial, state string
	macs, ips               []string
	tags                    []string      // manual and auto, for ?tag=
	rack                    string        // for ?rack=
	m                       store.Machine // the record, decoded (tag rules read it: machinesIn)

	jsonOnce sync.Once
	json     []byte // the MachineView as the API sends it, encoded on first use
}

type listCache struct {
	mu    sync.Mutex
	index uint64 // the machines table index the rows reflect
	rows  map[string]*listRow
	order []*listRow // by ID

	// answers are the lists sent at index answersAt, by query: the
	// unfiltered one that every watcher asks for, and the filtered ones
	// a page of the web UI or a script repeats. Bounded by maxShared.
	answers     map[listQuery]*sharedAnswer
	answersAt   uint64
	answerBytes int
}

// maxSharedBytes and maxSharedAnswers bound the answers kept for one
// index: a few copies of a 10,000-machine list, a few dozen questions (a
// client asking a new ?q= each time gets its answer, uncached).
const (
	maxSharedBytes   = 64 << 20
	maxSharedAnswers = 64
)

// listQuery is one list request's question: filters and paging.
type listQuery struct {
	f     listFilter
	limit int
	after string
}

func newRow(m store.Machine) (*listRow, error) {
	return &listRow{
		id: m.ID, name: strings.ToLower(m.Name), serial: strings.ToLower(m.Serial), state: m.State,
		macs: m.MACs, ips: m.IPs, tags: slices.Concat(m.Tags, m.AutoTags), rack: m.Location.Rack, m: m,
	}, nil
}

// body is the row's JSON, encoded once, when a list first sends it: a
// change of 10,000 machines costs their decoding when the cache catches
// up, and their encoding only when a list wants them. A MachineView of
// plain fields always encodes; were it not to, the row says so in place
// of the machine rather than failing every list.
func (r *listRow) body() []byte {
	r.jsonOnce.Do(func() {
		b, err := json.Marshal(wireMachine(r.m))
		if err != nil {
			b, _ = json.Marshal(map[string]string{"id": r.id, "error": "cannot encode: " + err.Error()})
		}
		r.json = b
	})
	return r.json
}

// snapshot returns the rows as of the store's current machines index,
// refreshing changed rows from the change log (or everything, when the log
// no longer reaches back far enough).
// Warm keeps the machine list cache up to date in the background: a write
// of many machines (a tag save, a bulk placement) is then decoded once,
// when it lands, instead of in the next list request or tag save. The
// node runs it as one of its supervised parts; it returns when ctx ends.
func (s *Server) Warm(ctx context.Context) error {
	return s.cfg.DB.Follow(ctx, []string{store.TableMachines}, 0, nil, func(context.Context) error {
		_, _, err := s.machines.snapshot(s.cfg.DB)
		return err
	})
}

func (lc *listCache) snapshot(db *store.DB) ([]*listRow, uint64, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	err := db.View(lc.refresh)
	return lc.order, lc.index, err
}

// refresh brings the rows up to tx's machines table; lc.mu is held.
func (lc *listCache) refresh(tx *store.Tx) error {
	cur := tx.TableIndex(store.TableMachines)
	if lc.rows != nil && cur == lc.index {
		return nil
	}
	if lc.rows != nil {
		changes, err := tx.Changes(lc.index, 0)
		if err == nil {
			return lc.apply(tx, changes, cur)
		}
		if !errors.Is(err, store.ErrChangesTruncated) {
			return err
		}
	}
	return lc.rebuild(tx, cur)
}

// machinesIn returns every machine exactly as tx holds them, in ID order,
// from the cache (brought up to tx first): what a tag rule's evaluation
// reads without decoding 10,000 records. It returns nil when the cache
// is ahead of tx (another request refreshed it from a newer view): the
// caller reads tx itself. The records are shared: read them, never
// change them.
func (lc *listCache) machinesIn(tx *store.Tx) ([]store.Machine, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.rows != nil && tx.TableIndex(store.TableMachines) < lc.index {
		return nil, nil
	}
	if err := lc.refresh(tx); err != nil {
		return nil, err
	}
	ms := make([]store.Machine, len(lc.order))
	for i, r := range lc.order {
		ms[i] = r.m
	}
	return ms, nil
}

func (lc *listCache) rebuild(tx *store.Tx, cur uint64) error {
	ms, err := tx.Machines(store.MachineFilter{})
	if err != nil {
		return err
	}
	rows := make(map[string]*listRow, len(ms))
	order := make([]*listRow, 0, len(ms))
	for _, m := range ms {
		r, err := newRow(m)
		if err != nil {
			return err
		}
		rows[m.ID] = r
		order = append(order, r)
	}
	lc.rows, lc.order, lc.index = rows, order, cur
	return nil
}

func (lc *listCache) apply(tx *store.Tx, changes []store.Change, cur uint64) error {
	touched := map[string]bool{}
	for _, ch := range changes {
		if ch.Table == "machines" {
			touched[ch.Key] = true
		}
	}
	if len(touched) == 0 {
		lc.index = cur
		return nil
	}
	// Copy on write: a slice handed to an earlier request stays as it was.
	rows := make(map[string]*listRow, len(lc.rows)+len(touched))
	for k, v := range lc.rows {
		rows[k] = v
	}
	for id := range touched {
		m, err := tx.Machine(id)
		if errors.Is(err, store.ErrNotFound) {
			delete(rows, id)
			continue
		}
		if err != nil {
			return err
		}
		r, err := newRow(m)
		if err != nil {
			return err
		}
		rows[id] = r
	}
	order := make([]*listRow, 0, len(rows))
	for _, r := range rows {
		order = append(order, r)
	}
	slices.SortFunc(order, func(a, b *listRow) int { return strings.Compare(a.id, b.id) })
	lc.rows, lc.order, lc.index = rows, order, cur
	return nil
}

// matches is the q= filter: a substring of the ID, name, serial or an IP,
// or a MAC in any common notation (q is lowercase).
func (r *listRow) matches(q string) bool {
	if strings.Contains(r.id, q) || strings.Contains(r.name, q) || strings.Contains(r.serial, q) {
		return true
	}
	for _, ip := range r.ips {
		if strings.Contains(ip, q) {
			return true
		}
	}
	qm := strings.NewReplacer("-", ":", ".", "").Replace(q)
	bare := strings.ReplaceAll(qm, ":", "")
	for _, mac := range r.macs {
		if strings.Contains(mac, qm) || strings.Contains(strings.ReplaceAll(mac, ":", ""), bare) {
			return true
		}
	}
	return false
}

// sharedAnswer is an encoded answer shared by every request for it until
// the data changes: a thousand waiters woken by one write cost one encoding,
// not a thousand copies of a 7 MB list.
type sharedAnswer struct {
	index   uint64
	body    []byte
	gzOnce  sync.Once
	gzipped []byte
}

// gz is the body gzipped, computed once on first demand.
func (a *sharedAnswer) gz() []byte {
	a.gzOnce.Do(func() {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		w.Write(a.body)
		w.Close()
		a.gzipped = b.Bytes()
	})
	return a.gzipped
}

// fullList is the unfiltered machine list as of the store's current index.
func (lc *listCache) fullList(db *store.DB) (*sharedAnswer, error) {
	return lc.answer(db, listQuery{})
}

// answer is the list q asks for as of the store's current index, encoded
// once per index and shared by every request that asks the same.
func (lc *listCache) answer(db *store.DB, q listQuery) (*sharedAnswer, error) {
	rows, index, err := lc.snapshot(db)
	if err != nil {
		return nil, err
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if a := lc.answers[q]; a != nil && a.index == index {
		return a, nil
	}
	a := &sharedAnswer{index: index, body: q.render(rows, index)}
	if index >= lc.index { // not overtaken by a newer snapshot
		if lc.answers == nil || lc.answersAt != index {
			lc.answers, lc.answersAt, lc.answerBytes = map[listQuery]*sharedAnswer{}, index, 0
		}
		if q == (listQuery{}) || lc.answerBytes+len(a.body) <= maxSharedBytes && len(lc.answers) < maxSharedAnswers {
			lc.answers[q] = a
			lc.answerBytes += len(a.body)
		}
	}
	return a, nil
}

// render writes the wire.MachineList shape around the rows' JSON: the
// rows q picks, in a buffer of the answer's size (a guess from the whole
// fleet would allocate 11 MB for every filtered list of 10,000
// machines).
func (q listQuery) render(rows []*listRow, index uint64) []byte {
	var picked []*listRow
	size, next := 64, ""
	start, _ := slices.BinarySearchFunc(rows, q.after, func(r *listRow, id string) int { return strings.Compare(r.id, id) })
	for _, r := range rows[start:] {
		if q.after != "" && r.id <= q.after || !q.f.keep(r) {
			continue
		}
		if q.limit > 0 && len(picked) == q.limit {
			break
		}
		picked = append(picked, r)
		size += len(r.body()) + 1
		next = r.id
	}
	var buf bytes.Buffer
	buf.Grow(size + len(next))
	fmt.Fprintf(&buf, `{"index":%d,"machines":[`, index)
	for i, r := range picked {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(r.body())
	}
	buf.WriteString("]")
	if q.limit > 0 && len(picked) == q.limit && next != "" && hasMore(rows, next, q.f) {
		fmt.Fprintf(&buf, `,"next":%q`, next)
	}
	buf.WriteString("}")
	return buf.Bytes()
}

// writeShared sends a shared answer, gzipped when the client accepts it.
func writeShared(c *gin.Context, a *sharedAnswer) {
	c.Header("Vary", "Accept-Encoding")
	if acceptsGzip(c.GetHeader("Accept-Encoding")) {
		c.Header("Content-Encoding", "gzip")
		c.Data(http.StatusOK, "application/json; charset=utf-8", a.gz())
		return
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", a.body)
}

func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
