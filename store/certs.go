package store

import (
	"slices"
	"strings"
	"time"
)

// Certificates the cluster CA issued and recorded, by serial: node
// certificates (each node records its own, including its HTTPS one),
// administrators' client certificates, certificates for other services and
// intermediates. A record is what revocation acts on: `cluster remove`
// revokes every certificate of the node's name, `admin-cert revoke` every
// one of the administrator's. A revoked serial is refused at the TLS
// handshake on the cluster port and on every admin request.
//
// The records live in the cluster bucket (prefix cert/), so the bucket
// layout and the state hash of a store that never held one are unchanged.
type CertRecord struct {
	Serial   string    `json:"serial"` // lower-case hex
	Kind     string    `json:"kind"`   // CertNode, CertAdmin, CertService, CertIntermediate
	Name     string    `json:"name"`   // node name, administrator, service or intermediate name
	NotAfter time.Time `json:"not_after"`
	// Fingerprint is the SHA-256 of the certificate, hex.
	Fingerprint string    `json:"fingerprint,omitempty"`
	Hosts       []string  `json:"hosts,omitempty"`  // a service certificate's names
	Permit      []string  `json:"permit,omitempty"` // an intermediate's name constraints
	Issued      time.Time `json:"issued"`
	IssuedBy    string    `json:"issued_by,omitempty"` // who asked: a node, "token", "admin:NAME"
	Revoked     time.Time `json:"revoked,omitzero"`
	RevokedBy   string    `json:"revoked_by,omitempty"`
}

// Certificate kinds.
const (
	CertNode         = "node"
	CertAdmin        = "admin"
	CertService      = "service"
	CertIntermediate = "intermediate"
)

const (
	prefixCert = "cert/"
	// certLimit bounds the records: issuing refuses past it (expired ones
	// are pruned first, a month after they end).
	certLimit       = 10000
	certPruneMargin = 30 * 24 * time.Hour
)

// IsRevoked reports whether the record was revoked.
func (c CertRecord) IsRevoked() bool { return !c.Revoked.IsZero() }

func validCertKind(k string) bool {
	return k == CertNode || k == CertAdmin || k == CertService || k == CertIntermediate
}

// PutCert records an issued certificate. A serial is recorded once; the
// same record again (a node repeating its report) is a no-op. Records of
// certificates that ended a month before now are pruned here.
func (t *Tx) PutCert(c CertRecord, now time.Time) error {
	if !validSerial(c.Serial) {
		return Errorf(ErrInvalid, "certificate serial %q: want 1 to 40 lower-case hex digits", Clip(c.Serial))
	}
	if !validCertKind(c.Kind) {
		return Errorf(ErrInvalid, "certificate kind %q", c.Kind)
	}
	if c.Name == "" || len(c.Name) > 253 {
		return Errorf(ErrInvalid, "certificate needs a name of at most 253 bytes")
	}
	if old, ok := t.Cert(c.Serial); ok {
		if old.Kind == c.Kind && old.Name == c.Name {
			return nil
		}
		return Errorf(ErrConflict, "certificate serial %s is already recorded for %s %s", c.Serial, old.Kind, old.Name)
	}
	n, stale, err := liveAndStale(t, prefixCert, func(r *CertRecord) bool { return now.After(r.NotAfter.Add(certPruneMargin)) })
	if err != nil {
		return err
	}
	if n >= certLimit {
		return Errorf(ErrConflict, "too many recorded certificates (%d): revoke or let some expire", n)
	}
	for _, k := range stale {
		if err := t.del(bucketCluster, k); err != nil {
			return err
		}
		if err := t.logChange("certificates", strings.TrimPrefix(k, prefixCert), OpDelete); err != nil {
			return err
		}
	}
	c.Revoked, c.RevokedBy = time.Time{}, ""
	if err := t.putJSON(bucketCluster, prefixCert+c.Serial, c); err != nil {
		return err
	}
	if err := t.logChange("certificates", c.Serial, OpPut); err != nil {
		return err
	}
	return t.touch(tableCluster)
}

// validSerial: a serial as big.Int.Text(16) writes it (an odd number of
// digits is common: no leading zero), at most 20 bytes (RFC 5280).
func validSerial(s string) bool {
	if len(s) == 0 || len(s) > 40 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// Cert returns the record of a serial.
func (t *Tx) Cert(serial string) (CertRecord, bool) {
	var c CertRecord
	if err := t.getJSON(bucketCluster, prefixCert+serial, &c); err != nil {
		return c, false
	}
	return c, true
}

// Certs returns the records of one kind ("" for all), by kind, name and
// issue time.
func (t *Tx) Certs(kind string) ([]CertRecord, error) {
	var out []CertRecord
	err := forEachJSON(t, bucketCluster, prefixCert, func(_ string, c *CertRecord) error {
		if kind == "" || c.Kind == kind {
			out = append(out, *c)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b CertRecord) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := a.Issued.Compare(b.Issued); c != 0 {
			return c
		}
		return strings.Compare(a.Serial, b.Serial)
	})
	return out, err
}

// RevokeCerts revokes every recorded certificate of kind and name not
// revoked yet, and returns how many it revoked. serial, when set, limits
// it to that one certificate. Revoking nothing is not an error: the
// caller decides whether that is one.
func (t *Tx) RevokeCerts(kind, name, serial, by string, now time.Time) (int, error) {
	var hit []CertRecord
	err := forEachJSON(t, bucketCluster, prefixCert, func(_ string, c *CertRecord) error {
		if c.Kind == kind && c.Name == name && !c.IsRevoked() && (serial == "" || c.Serial == serial) {
			hit = append(hit, *c)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, c := range hit {
		c.Revoked, c.RevokedBy = now, by
		if err := t.putJSON(bucketCluster, prefixCert+c.Serial, c); err != nil {
			return 0, err
		}
		if err := t.logChange("certificates", c.Serial, OpPut); err != nil {
			return 0, err
		}
	}
	if len(hit) > 0 {
		if err := t.touch(tableCluster); err != nil {
			return 0, err
		}
	}
	return len(hit), nil
}

// CertRefusal says why a peer presenting the certificate with this serial,
// under name, is refused as kind, or "" when it is not: a revoked serial,
// or a serial recorded for another kind or another name. An unrecorded
// serial is not refused here (node certificates issued before records
// existed); callers that require a record (admin certificates) check Cert.
func (t *Tx) CertRefusal(serial, kind, name string) string {
	c, ok := t.Cert(serial)
	switch {
	case !ok:
		return ""
	case c.IsRevoked():
		return "certificate " + serial + " of " + c.Kind + " " + c.Name + " was revoked at " + c.Revoked.UTC().Format(time.RFC3339)
	case c.Kind != kind || c.Name != name:
		return "certificate " + serial + " was issued to " + c.Kind + " " + c.Name + ", not to " + kind + " " + name
	}
	return ""
}
