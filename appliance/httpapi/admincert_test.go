package httpapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/store"
)

// TestAdminCertActor: an administrator's certificate is admitted only when
// the cluster CA itself signed it, it is valid now, for client
// authentication, named admin:NAME, recorded for NAME and not revoked;
// every other certificate is refused with the reason.
func TestAdminCertActor(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("cluster", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	trust := pki.NewTrust(ca.Cert, nil, nil)
	s := &Server{cfg: Config{Trust: func() *pki.Trust { return trust }, DB: db}}
	record := func(c *x509.Certificate, kind, name string, revoked bool) {
		rec := store.CertRecord{Serial: pki.SerialHex(c), Kind: kind, Name: name, NotAfter: c.NotAfter, Issued: now}
		if err := db.Update(func(tx *store.Tx) error {
			tx.Index++
			if err := tx.PutCert(rec, now); err != nil {
				return err
			}
			if revoked {
				_, err := tx.RevokeCerts(kind, name, rec.Serial, "token", now)
				return err
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	admin := func(name string, at time.Time, ttl time.Duration) *x509.Certificate {
		_, csr, err := pki.NewKeyAndCSR(pki.AdminPrefix+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ca.SignAdmin(csr, name, at, ttl)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := pki.ParseCertPEM(p)
		return c
	}
	good := admin("ada", now, time.Hour)
	record(good, store.CertAdmin, "ada", false)
	expired := admin("ada", now.Add(-50*time.Minute), 10*time.Minute)
	record(expired, store.CertAdmin, "ada", false)
	revoked := admin("ada", now, time.Hour)
	record(revoked, store.CertAdmin, "ada", true)
	otherName := admin("bob", now, time.Hour)
	record(otherName, store.CertAdmin, "eve", false) // recorded for someone else
	unrecorded := admin("ada", now, time.Hour)

	// A server-only service certificate and a node certificate.
	_, svcCSR, _ := pki.NewKeyAndCSR("metrics", []string{"metrics.lab"})
	svcPEM, err := ca.SignService(svcCSR, "metrics", []string{"metrics.lab"}, false, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := pki.ParseCertPEM(svcPEM)
	nodePEM, _, err := ca.IssueNode("node1", []string{"node1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, _ := pki.ParseCertPEM(nodePEM)

	// admin:ada signed below an intermediate: name constraints do not
	// cover a common name, so the root's own signature is required.
	interKeyPEM, interCSR, _ := pki.NewKeyAndCSR("lab", nil)
	interPEM, err := ca.SignIntermediate(interCSR, "lab", []string{"lab.example.com"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	inter, _ := pki.ParseCertPEM(interPEM)
	blk, _ := pem.Decode(interKeyPEM)
	interKey, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(99), Subject: pkix.Name{CommonName: "admin:ada"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, inter, &leafKey.PublicKey, interKey)
	if err != nil {
		t.Fatal(err)
	}
	belowInter, _ := x509.ParseCertificate(der)
	record(belowInter, store.CertAdmin, "ada", false) // even recorded, it is no admin's

	if who, err := s.adminCertActor([]*x509.Certificate{good}); err != nil || who != "admin:ada" {
		t.Fatalf("a good certificate: %q, %v", who, err)
	}
	for name, tc := range map[string]struct {
		chain []*x509.Certificate
		says  string
	}{
		"expired":               {[]*x509.Certificate{expired}, "outside its validity"},
		"revoked":               {[]*x509.Certificate{revoked}, "revoked at"},
		"recorded for another":  {[]*x509.Certificate{otherName}, "issued to admin eve"},
		"unrecorded":            {[]*x509.Certificate{unrecorded}, "not a certificate this cluster recorded"},
		"server only":           {[]*x509.Certificate{svc}, "not for client authentication"},
		"a node's":              {[]*x509.Certificate{nodeCert}, "not an administrator's"},
		"below an intermediate": {[]*x509.Certificate{belowInter, inter}, "not signed by the cluster CA itself"},
	} {
		who, err := s.adminCertActor(tc.chain)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: admitted as %q or refused for another reason (%v), want %q", name, who, err, tc.says)
		}
	}
}
