package raftfsm

import (
	"errors"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Certificate records, the audit wrapper and CA rotation (50–59 are this
// family's). The numbers lack the ignorable bit (FlagIgnorable) on purpose:
// a build from before the gate skips an unknown ignorable type silently, so
// one put back on a node after the gate opened these would skip audited
// writes and drift; on a plain type it stops, saying it is older than the
// leader. (They were 160–163 in main between 210b373 and this change, never
// released.) All are new
// after the gate: the leader writes them only once every member reads them.
const (
	TypeCertPut    Type = 50
	TypeCertRevoke Type = 51
)

// Cert is store.CertRecord in a CertPut. The revocation fields are left
// out of the log: a record is written unrevoked, and only CertRevoke
// revokes.
type Cert struct {
	Serial      string    `json:"serial"`
	Kind        string    `json:"kind"`
	Name        string    `json:"name"`
	NotAfter    time.Time `json:"not_after"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	Hosts       []string  `json:"hosts,omitempty"`
	Permit      []string  `json:"permit,omitempty"`
	Issued      time.Time `json:"issued"`
	IssuedBy    string    `json:"issued_by,omitempty"`
}

// CertBody is the body of a certificate record.
func CertBody(c store.CertRecord) Cert {
	return Cert{Serial: c.Serial, Kind: c.Kind, Name: c.Name, NotAfter: c.NotAfter, Fingerprint: c.Fingerprint,
		Hosts: c.Hosts, Permit: c.Permit, Issued: c.Issued, IssuedBy: c.IssuedBy}
}

func (c Cert) record() store.CertRecord {
	return store.CertRecord{Serial: c.Serial, Kind: c.Kind, Name: c.Name, NotAfter: c.NotAfter, Fingerprint: c.Fingerprint,
		Hosts: c.Hosts, Permit: c.Permit, Issued: c.Issued, IssuedBy: c.IssuedBy}
}

// CertPut records a certificate the cluster CA issued.
type CertPut struct {
	Cert Cert      `json:"cert"`
	Now  time.Time `json:"now"`
}

// CertRevoke revokes every certificate recorded for a kind and name (or
// only Serial, when set). With Require, revoking nothing fails (an
// operator's revoke of an unknown name); without, it is a no-op (the
// revocation that goes with `cluster remove`).
type CertRevoke struct {
	Kind    string    `json:"kind"`
	Name    string    `json:"name"`
	Serial  string    `json:"serial,omitempty"`
	By      string    `json:"by,omitempty"`
	Require bool      `json:"require,omitempty"`
	Now     time.Time `json:"now"`
}

func (*CertPut) Type() Type        { return TypeCertPut }
func (*CertRevoke) Type() Type     { return TypeCertRevoke }
func (*CertPut) Version() uint8    { return 1 }
func (*CertRevoke) Version() uint8 { return 1 }

func (c *CertPut) apply(tx *store.Tx) error { return tx.PutCert(c.Cert.record(), c.Now) }

func (c *CertRevoke) apply(tx *store.Tx) error {
	n, err := tx.RevokeCerts(c.Kind, c.Name, c.Serial, c.By, c.Now)
	if err != nil {
		return err
	}
	if n == 0 && c.Require {
		if c.Serial != "" {
			return store.Errorf(store.ErrNotFound, "no unrevoked certificate %s of %s %q", c.Serial, c.Kind, c.Name)
		}
		return store.Errorf(store.ErrNotFound, "no unrevoked %s certificate of %q", c.Kind, c.Name)
	}
	return nil
}

func certCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeCertPut:    {"cert-put", 1, func() Command { return &CertPut{} }},
		TypeCertRevoke: {"cert-revoke", 1, func() Command { return &CertRevoke{} }},
		TypeAudited:    {"audited", 1, func() Command { return &Audited{} }},
		TypeCARotate:   {"ca-rotate", 1, func() Command { return &CARotate{} }},
	}
}

// TypeCARotate replaces the cluster root (rollcall ca rotate). New after
// the gate, like the rest of the family.
const TypeCARotate Type = 53

// CARotate makes CACertPEM (its key sealed in SealedCAKey) the cluster
// root in place of From, which the proposer read; Previous is the list of
// roots still trusted after it, newest first, each with the cross
// certificate that certifies the new root under it. The proposer makes the
// keys and certificates (they are random); applying only checks and
// records them.
type CARotate struct {
	From        string       `json:"from"`
	CACertPEM   string       `json:"ca_cert_pem"`
	SealedCAKey []byte       `json:"sealed_ca_key"`
	Previous    []PreviousCA `json:"previous"`
	By          string       `json:"by,omitempty"`
	Now         time.Time    `json:"now"`
}

// PreviousCA is store.PreviousCA in a CARotate.
type PreviousCA struct {
	CertPEM   string    `json:"cert_pem"`
	SealedKey []byte    `json:"sealed_key"`
	CrossPEM  string    `json:"cross_pem"`
	Until     time.Time `json:"until"`
}

// PreviousCABody is the body of a previous root.
func PreviousCABody(p store.PreviousCA) PreviousCA {
	return PreviousCA{CertPEM: p.CertPEM, SealedKey: p.SealedKey, CrossPEM: p.CrossPEM, Until: p.Until}
}

func (p PreviousCA) record() store.PreviousCA {
	return store.PreviousCA{CertPEM: p.CertPEM, SealedKey: p.SealedKey, CrossPEM: p.CrossPEM, Until: p.Until}
}

func (*CARotate) Type() Type     { return TypeCARotate }
func (*CARotate) Version() uint8 { return 1 }

func (c *CARotate) apply(tx *store.Tx) error {
	prev := make([]store.PreviousCA, len(c.Previous))
	for i, p := range c.Previous {
		prev[i] = p.record()
	}
	return tx.RotateCA(c.From, c.CACertPEM, c.SealedCAKey, prev, c.By, c.Now)
}

// TypeAudited wraps an administrator's command with who made it; applying
// it applies the command and appends an audit event with its outcome.
const TypeAudited Type = 52

// Audited is an administrator's command (Entry, an encoded command) with
// the audit facts the proposer knew: who, from where, through which node,
// which route. While the gate has not opened it, the proposer writes the
// bare command, unaudited (see auditing in package httpapi).
type Audited struct {
	Actor  string    `json:"actor"`
	From   string    `json:"from,omitempty"`
	Node   string    `json:"node,omitempty"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Now    time.Time `json:"now"`
	Entry  []byte    `json:"entry"`
}

func (*Audited) Type() Type     { return TypeAudited }
func (*Audited) Version() uint8 { return 1 }

// NewAudited wraps c.
func NewAudited(c Command, actor, from, node, action, target string, now time.Time) (*Audited, error) {
	if _, nested := c.(*Audited); nested {
		return nil, errors.New("encode audited: already audited")
	}
	e, err := Encode(c)
	if err != nil {
		return nil, err
	}
	return &Audited{Actor: actor, From: from, Node: node, Action: action, Target: target, Now: now, Entry: e}, nil
}

// apply is the dry run's (Precheck): the FSM applies the entry itself
// (applyEntry), through the gate.
func (a *Audited) apply(tx *store.Tx) error {
	c, err := Decode(a.Entry)
	if err != nil {
		return err
	}
	return c.apply(tx)
}

// record appends the event for an applied entry with its result.
func (a *Audited) record(tx *store.Tx, r *Result) error {
	outcome := "ok"
	if r.Err != nil {
		outcome = r.Err.Error()
	} else {
		for _, e := range r.Errs {
			if e != nil {
				outcome = e.Error()
				break
			}
		}
	}
	name := "unknown"
	if len(a.Entry) > 0 {
		name = commandName(Type(a.Entry[0]))
	}
	return tx.AddAudit(store.AuditEvent{Time: a.Now, Actor: clipField(a.Actor), From: clipField(a.From), Node: clipField(a.Node),
		Action: clipField(a.Action), Target: clipField(a.Target), Command: name, Outcome: clipField(outcome)})
}

// clipField bounds what an audit event keeps of a field.
func clipField(s string) string {
	const max = 512
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
