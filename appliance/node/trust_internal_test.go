package node

import (
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/store"
)

// TestIdentityTrustTransition: a previous root is trusted, with its cross
// certificate, until its transition ends, and not after (the clock is
// injected).
func TestIdentityTrustTransition(t *testing.T) {
	now := time.Now()
	old, err := pki.NewCA("old", now)
	if err != nil {
		t.Fatal(err)
	}
	next, err := pki.NewCA("new", now)
	if err != nil {
		t.Fatal(err)
	}
	cross, err := old.CrossSign(next.Cert, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	id := store.ClusterIdentity{CACertPEM: string(next.CertPEM), PreviousCAs: []store.PreviousCA{
		{CertPEM: string(old.CertPEM), CrossPEM: string(cross), Until: now.Add(time.Hour)},
	}}
	during, err := identityTrust(id, now.Add(59*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !during.Current.Equal(next.Cert) || len(during.Previous) != 1 || !during.Previous[0].Equal(old.Cert) || len(during.Cross) != 1 {
		t.Fatalf("during the transition: %d previous, %d cross", len(during.Previous), len(during.Cross))
	}
	after, err := identityTrust(id, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Previous) != 0 || len(after.Cross) != 0 || !after.Current.Equal(next.Cert) {
		t.Fatalf("after the transition: %d previous, %d cross", len(after.Previous), len(after.Cross))
	}
	id.PreviousCAs[0].CrossPEM = "garbage"
	if _, err := identityTrust(id, now); err == nil {
		t.Fatal("a previous root without a readable cross certificate was trusted")
	}
}
