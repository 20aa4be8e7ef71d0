package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCertRecords: records by serial, refused when malformed or clashing,
// revoked by kind and name (or one serial), refused as peers when revoked
// or recorded for someone else, and pruned a month after they end.
func TestCertRecords(t *testing.T) {
	db := openNetDB(t)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	put := func(c CertRecord) error {
		return db.Update(func(tx *Tx) error { tx.Index++; return tx.PutCert(c, now) })
	}
	odd := CertRecord{Serial: "604eb65527b0d1320b5c7551ef0d234", Kind: CertAdmin, Name: "odd", NotAfter: now.Add(time.Hour), Issued: now}
	if err := put(odd); err != nil {
		t.Fatalf("a serial with an odd number of digits (big.Int.Text(16) has no leading zero): %v", err)
	}
	n3a := CertRecord{Serial: "0a01", Kind: CertNode, Name: "node3", NotAfter: now.Add(365 * 24 * time.Hour), Issued: now}
	n3b := CertRecord{Serial: "0a02", Kind: CertNode, Name: "node3", NotAfter: now.Add(365 * 24 * time.Hour), Issued: now}
	ada := CertRecord{Serial: "0b01", Kind: CertAdmin, Name: "ada", NotAfter: now.Add(365 * 24 * time.Hour), Issued: now}
	old := CertRecord{Serial: "0c01", Kind: CertService, Name: "svc", NotAfter: now.Add(-31 * 24 * time.Hour), Issued: now.Add(-400 * 24 * time.Hour)}
	for _, c := range []CertRecord{old, n3a, n3b, ada} { // old first: the next records prune it
		if err := put(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := put(n3a); err != nil {
		t.Fatalf("the same record again: %v", err)
	}
	for name, bad := range map[string]CertRecord{
		"upper-case serial":      {Serial: "0A03", Kind: CertNode, Name: "x"},
		"not hex":                {Serial: "zz", Kind: CertNode, Name: "x"},
		"empty serial":           {Serial: "", Kind: CertNode, Name: "x"},
		"too long":               {Serial: strings.Repeat("ab", 21), Kind: CertNode, Name: "x"},
		"unknown kind":           {Serial: "0d01", Kind: "root", Name: "x"},
		"no name":                {Serial: "0d02", Kind: CertNode},
		"serial of someone else": {Serial: "0b01", Kind: CertNode, Name: "node3"},
	} {
		if err := put(bad); err == nil {
			t.Errorf("%s: recorded", name)
		}
	}
	db.View(func(tx *Tx) error {
		if _, ok := tx.Cert(old.Serial); ok {
			t.Error("a record ended a month ago was not pruned")
		}
		if r := tx.CertRefusal(n3a.Serial, CertNode, "node3"); r != "" {
			t.Errorf("a valid node certificate refused: %s", r)
		}
		if r := tx.CertRefusal(ada.Serial, CertNode, "ada"); !strings.Contains(r, "issued to admin ada") {
			t.Errorf("an admin's serial presented as a node's: %q", r)
		}
		if r := tx.CertRefusal("ffff", CertNode, "node9"); r != "" {
			t.Errorf("an unrecorded serial refused: %q", r)
		}
		return nil
	})
	var revoked int
	if err := db.Update(func(tx *Tx) error {
		tx.Index++
		var err error
		revoked, err = tx.RevokeCerts(CertNode, "node3", "", "token", now)
		return err
	}); err != nil || revoked != 2 {
		t.Fatalf("revoke node3: %d, %v", revoked, err)
	}
	db.View(func(tx *Tx) error {
		if r := tx.CertRefusal(n3b.Serial, CertNode, "node3"); !strings.Contains(r, "revoked") {
			t.Errorf("a revoked serial: %q", r)
		}
		if r := tx.CertRefusal(ada.Serial, CertAdmin, "ada"); r != "" {
			t.Errorf("another's certificate revoked too: %q", r)
		}
		certs, _ := tx.Certs(CertNode)
		if len(certs) != 2 || !certs[0].IsRevoked() || certs[0].RevokedBy != "token" {
			t.Errorf("node records %+v", certs)
		}
		return nil
	})
	db.Update(func(tx *Tx) error {
		tx.Index++
		n, err := tx.RevokeCerts(CertNode, "node3", "", "token", now)
		if n != 0 || err != nil {
			t.Errorf("revoking again: %d, %v", n, err)
		}
		return nil
	})
	if !errors.Is(put(CertRecord{Serial: "0e01", Kind: CertAdmin, Name: strings.Repeat("a", 254)}), ErrInvalid) {
		t.Error("a 254-byte name was recorded")
	}
}

// TestAuditLog: events are numbered, read newest first in pages, and the
// oldest go past the bound.
func TestAuditLog(t *testing.T) {
	db := openNetDB(t)
	for i := range 25 {
		if err := db.Update(func(tx *Tx) error {
			tx.Index = uint64(100 + i)
			return tx.AddAudit(AuditEvent{Actor: "token", Action: "POST /api/v1/tags", Command: "tag-put", Outcome: "ok"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	db.View(func(tx *Tx) error {
		first, _ := tx.Audit(0, 10)
		if len(first) != 10 || first[0].Seq != 25 || first[9].Seq != 16 || first[0].Index != 124 {
			t.Fatalf("newest page: %+v", first)
		}
		next, _ := tx.Audit(first[9].Seq, 100)
		if len(next) != 15 || next[0].Seq != 15 || next[14].Seq != 1 {
			t.Fatalf("second page: %d events from %d", len(next), next[0].Seq)
		}
		if e, ok := tx.AuditEventBySeq(7); !ok || e.Seq != 7 {
			t.Errorf("event 7: %+v %v", e, ok)
		}
		return nil
	})
}
