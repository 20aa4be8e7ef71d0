package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// AuditEvent is one administrator's action the cluster applied: who (the
// admin token, or an administrator's certificate admin:NAME), from where,
// through which node, what (the API route and the command), and the
// outcome (ok, or the error the command failed with). Events are written
// by the command that carries the action (raftfsm.Audited), in its own
// transaction, so the log and the change agree on every node.
type AuditEvent struct {
	Seq     uint64    `json:"seq"`
	Index   uint64    `json:"index"`
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"`
	From    string    `json:"from,omitempty"` // the client's address
	Node    string    `json:"node,omitempty"` // the node that took the request
	Action  string    `json:"action"`         // e.g. "DELETE /api/v1/cluster/members/:name"
	Target  string    `json:"target,omitempty"`
	Command string    `json:"command"`
	Outcome string    `json:"outcome"` // "ok" or the error
}

const (
	prefixAudit = "audit/"
	keyAuditSeq = "auditseq"
	// auditKeep bounds the log: the oldest events go first.
	auditKeep = 100000
)

func auditKey(seq uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return prefixAudit + string(b[:])
}

// AddAudit appends an event, numbering it, and drops the oldest beyond
// auditKeep. Like everything in the cluster bucket it is under the state
// hash; it is written only by a gated command.
func (t *Tx) AddAudit(e AuditEvent) error {
	b := t.tx.Bucket(bucketCluster)
	seq := uint64(0)
	if v := b.Get([]byte(keyAuditSeq)); v != nil {
		seq, _ = strconv.ParseUint(string(v), 10, 64)
	}
	seq++
	if err := b.Put([]byte(keyAuditSeq), []byte(strconv.FormatUint(seq, 10))); err != nil {
		return err
	}
	e.Seq, e.Index = seq, t.Index
	if err := t.putJSON(bucketCluster, auditKey(seq), e); err != nil {
		return err
	}
	if seq > auditKeep {
		if err := t.del(bucketCluster, auditKey(seq-auditKeep)); err != nil {
			return err
		}
		if err := t.logChange("audit", strconv.FormatUint(seq-auditKeep, 10), OpDelete); err != nil {
			return err
		}
	}
	if err := t.logChange("audit", strconv.FormatUint(seq, 10), OpPut); err != nil {
		return err
	}
	return t.touch(tableCluster)
}

// Audit returns up to limit events, newest first, with Seq below before
// (0: from the newest).
func (t *Tx) Audit(before uint64, limit int) ([]AuditEvent, error) {
	c := t.tx.Bucket(bucketCluster).Cursor()
	p := []byte(prefixAudit)
	// Seek just past the events wanted, then step back onto the first.
	from := []byte(prefixAudit + "\xff\xff\xff\xff\xff\xff\xff\xff\xff")
	if before != 0 {
		from = []byte(auditKey(before))
	}
	k, v := c.Seek(from)
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	var out []AuditEvent
	for ; k != nil && hasPrefix(k, p) && len(out) < limit; k, v = c.Prev() {
		var e AuditEvent
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("decode audit event: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// AuditEventBySeq returns one event (for the export mirror).
func (t *Tx) AuditEventBySeq(seq uint64) (AuditEvent, bool) {
	var e AuditEvent
	err := t.getJSON(bucketCluster, auditKey(seq), &e)
	return e, err == nil
}
