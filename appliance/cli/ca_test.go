package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
)

// rollcall ca show: the fingerprint it prints is the PEM's it prints, and
// the one cluster status reports; the root allows one intermediate level.
func TestCAShow(t *testing.T) {
	startCluster(t, 1, nodeOptions{})

	var cv wire.ClusterView
	if err := json.Unmarshal([]byte(mustRun(t, "cluster", "status", "-json")), &cv); err != nil || len(cv.CAFingerprint) != 64 {
		t.Fatalf("cluster status -json: %+v, %v", cv, err)
	}
	var v wire.CAView
	if err := json.Unmarshal([]byte(mustRun(t, "ca", "show", "-json")), &v); err != nil {
		t.Fatalf("ca show -json: %v", err)
	}
	cert, err := pki.ParseCertPEM([]byte(v.PEM))
	if err != nil {
		t.Fatalf("ca show -json: its pem: %v", err)
	}
	if fp := pki.FingerprintHex(cert); fp != v.Fingerprint || fp != cv.CAFingerprint {
		t.Errorf("fingerprints: the PEM's %s, ca show's %s, cluster status's %s", fp, v.Fingerprint, cv.CAFingerprint)
	}
	if !cert.IsCA || v.MaxPathLen != 1 || v.Subject != cert.Subject.String() || !v.NotAfter.Equal(cert.NotAfter) {
		t.Errorf("ca show -json: %+v (certificate: CA %v, path length %d)", v, cert.IsCA, cert.MaxPathLen)
	}
	if strings.Contains(v.PEM, "PRIVATE") {
		t.Error("ca show carries a private key")
	}

	out := mustRun(t, "ca", "show")
	for _, want := range []string{"fingerprint  SHA256:" + v.Fingerprint + "\n", "subject      " + v.Subject + "\n", "path length  1 (", "\n\n" + v.PEM} {
		if !strings.Contains(out, want) {
			t.Errorf("ca show lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"ca"}, {"ca", "frob"}, {"ca", "show", "extra"}} {
		if code, _, errs := run(args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}
