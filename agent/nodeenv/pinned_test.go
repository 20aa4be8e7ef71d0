package nodeenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

func rootPEM(t *testing.T, cn string) ([]byte, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), hex.EncodeToString(sum[:])
}

// TestPinnedCA: the pin may name any root of the bundle (a rotation's old
// one too); a pin that names none, or garbage, is refused.
func TestPinnedCA(t *testing.T) {
	cur, curFP := rootPEM(t, "current")
	old, oldFP := rootPEM(t, "previous")
	bundle := append(append([]byte{}, cur...), old...)
	for _, fp := range []string{curFP, oldFP, "sha256:" + strings.ToUpper(oldFP)} {
		c, err := PinnedCA(bundle, fp)
		if err != nil {
			t.Fatalf("pin %s: %v", fp, err)
		}
		if want := map[bool]string{true: "current", false: "previous"}[strings.EqualFold(strings.TrimPrefix(fp, "sha256:"), curFP)]; c.Subject.CommonName != want {
			t.Errorf("pin %s: got %s, want %s", fp, c.Subject.CommonName, want)
		}
	}
	if _, err := PinnedCA(cur, oldFP); !errors.Is(err, ErrCAMismatch) {
		t.Errorf("a pin the bundle lacks: %v", err)
	}
	if _, err := PinnedCA([]byte("garbage"), curFP); !errors.Is(err, ErrCAMismatch) {
		t.Errorf("no PEM: %v", err)
	}
	if _, err := PinnedCA(bundle, "abc"); err == nil || errors.Is(err, ErrCAMismatch) {
		t.Errorf("a pin that is no fingerprint: %v", err)
	}
}
