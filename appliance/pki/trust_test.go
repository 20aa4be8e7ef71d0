package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"
)

// TestRotationHandshakes: after a rotation, peers that know only the old
// root, both roots, or only the new one, each with a certificate under the
// root it knows, talk to each other exactly as the transition allows.
func TestRotationHandshakes(t *testing.T) {
	now := time.Now()
	old, next := mustCA(t, "old root"), mustCA(t, "new root")
	crossPEM, err := old.CrossSign(next.Cert, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cross, err := ParseCertPEM(crossPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !IsCross(cross) || cross.Subject.String() != next.Cert.Subject.String() || cross.CheckSignatureFrom(old.Cert) != nil {
		t.Fatalf("cross certificate: shape %v, subject %s", IsCross(cross), cross.Subject)
	}
	onlyOld := NewTrust(old.Cert, nil, nil)
	both := NewTrust(next.Cert, []*x509.Certificate{old.Cert}, []*x509.Certificate{cross})
	onlyNew := NewTrust(next.Cert, nil, nil)

	peer := func(trust *Trust, ca *CA, name string) *tls.Config {
		t.Helper()
		n := mustNode(t, ca, name)
		p, err := NewPeerCert(trust, n.certPEM, n.keyPEM)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return p.Config()
	}
	lagging := peer(onlyOld, old, "lagging")         // has not applied the rotation
	moved := peer(both, next, "moved")               // re-issued under the new root
	stale := peer(both, old, "stale")                // applied it, not re-issued yet
	after := peer(onlyNew, next, "after-transition") // the transition ended

	for _, c := range []struct {
		name           string
		server, client *tls.Config
		ok             bool
	}{
		{"moved to lagging", lagging, moved, true},
		{"lagging to moved", moved, lagging, true},
		{"stale to moved", moved, stale, true},
		{"moved to stale", stale, moved, true},
		{"after to moved", moved, after, true},
		{"lagging to after the transition", after, lagging, false},
		{"after the transition to lagging", lagging, after, false},
	} {
		_, serr, cerr := handshake(t, c.server, c.client)
		if ok := serr == nil && cerr == nil; ok != c.ok {
			t.Errorf("%s: handshake ok=%v, want %v (server %v, client %v)", c.name, ok, c.ok, serr, cerr)
		}
	}

	// A certificate from the new root is no node's for a peer that knows
	// only the old root unless the cross certificate comes with it.
	bare := NewTrust(next.Cert, []*x509.Certificate{old.Cert}, nil)
	_, serr, cerr := handshake(t, lagging, peer(bare, next, "no-cross"))
	if serr == nil && cerr == nil {
		t.Error("a new-root certificate without the cross certificate verified for an old-root peer")
	}

	// A cross certificate does not let a leaf below an intermediate
	// pass: an intermediate is name-constrained, so it is no cross.
	root := issCA(t) // valid at testNow, as the intermediate helpers are
	inter := issIntermediate(t, root, "lab", []string{"lab.example"})
	if IsCross(inter.cert) {
		t.Fatal("a name-constrained intermediate looks like a cross certificate")
	}
	leafTmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "node-z"}, NotBefore: testNow.Add(-time.Minute), NotAfter: testNow.Add(time.Hour), DNSNames: []string{"z.lab.example"}}
	leaf, _ := issCreate(t, leafTmpl, inter.cert, inter.key)
	for _, trust := range []*Trust{NewTrust(root.Cert, nil, nil), NewTrust(root.Cert, []*x509.Certificate{old.Cert}, []*x509.Certificate{cross})} {
		err := trust.Verify([]*x509.Certificate{leaf, inter.cert}, x509.ExtKeyUsageAny, testNow)
		if err == nil || !strings.Contains(err.Error(), "not signed by the cluster CA itself") {
			t.Errorf("a leaf below an intermediate: %v", err)
		}
	}

	// The bundle round-trips, the current root first.
	got, err := ParseTrust(both.BundlePEM(), both.CrossPEM())
	if err != nil || !got.Current.Equal(next.Cert) || len(got.Previous) != 1 || len(got.Cross) != 1 {
		t.Fatalf("ParseTrust(bundle): %v", err)
	}
	if _, err := ParseTrust([]byte("not pem"), nil); err == nil {
		t.Error("ParseTrust accepted a bundle without a certificate")
	}
}
