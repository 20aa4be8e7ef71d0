package cli

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/console"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
)

// TestCARotate: rollcall ca rotate -yes makes a new root, writes the new
// bundle into the client's saved CA file, ca show lists the old root as
// still trusted, a client that holds only the old root still verifies the
// node, and the rotation is in the audit log.
func TestCARotate(t *testing.T) {
	n := startNode(t, nodeOptions{https: true})
	base := "https://" + n.HTTPSAddr()
	nodeCA := filepath.Join(n.Dir, "tls", "ca.pem")
	oldPEM := mustRead(t, nodeCA)
	oldRoot, err := pki.ParseCertPEM(oldPEM)
	if err != nil {
		t.Fatal(err)
	}
	// A remote client: its own copy of the CA, saved in client.json.
	conf := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", conf)
	saved := filepath.Join(conf, "cluster-ca.pem")
	if err := os.WriteFile(saved, oldPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath, err := console.DefaultConfigPath()
	if err != nil {
		t.Fatal(err)
	}
	if err := console.SaveClientConfig(cfgPath, console.ClientConfig{URL: base, Token: n.Admin, CAFile: saved}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the https listener", func() bool {
		code, _, _ := run("ca", "show")
		return code == 0
	})

	before := n.Cluster().FSM().AppliedIndex()
	if code, _, errs := run("ca", "rotate"); code == 0 || !strings.Contains(errs, "-yes") {
		t.Fatalf("ca rotate without -yes: exit %d: %s", code, errs)
	}
	if code, _, errs := run("ca", "rotate", "-yes", "-transition", "10m"); code == 0 || !strings.Contains(errs, "between 1h and 8760h") {
		t.Fatalf("ca rotate -transition 10m: exit %d: %s", code, errs)
	}
	if after := n.Cluster().FSM().AppliedIndex(); after != before {
		t.Fatalf("refused rotations moved the applied index from %d to %d", before, after)
	}

	var out string
	waitFor(t, "ca rotate -yes (the gate opens the command)", func() bool {
		var code int
		code, out, _ = run("ca", "rotate", "-yes", "-transition", "48h")
		return code == 0
	})
	if !strings.Contains(out, "previous root SHA256:"+pki.FingerprintHex(oldRoot)+" stays trusted until") {
		t.Fatalf("ca rotate output:\n%s", out)
	}
	if !strings.Contains(out, "this client's CA file "+saved) {
		t.Fatalf("ca rotate did not say it updated the client's CA file:\n%s", out)
	}
	var st wire.CAState
	if err := json.Unmarshal([]byte(mustRun(t, "ca", "show", "-json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Fingerprint == pki.FingerprintHex(oldRoot) || len(st.Previous) != 1 || st.Previous[0].Fingerprint != pki.FingerprintHex(oldRoot) || st.RotatedBy != "token" {
		t.Fatalf("ca show -json after the rotation: %+v", st)
	}
	if !strings.Contains(out, "SHA256:"+st.Fingerprint) {
		t.Fatalf("ca rotate did not print the new fingerprint %s:\n%s", st.Fingerprint, out)
	}
	if show := mustRun(t, "ca", "show"); !strings.Contains(show, "previous     SHA256:"+pki.FingerprintHex(oldRoot)) || !strings.Contains(show, "rotated ") {
		t.Fatalf("ca show after the rotation:\n%s", show)
	}
	trust, err := pki.ParseTrust(mustRead(t, saved), nil)
	if err != nil || pki.FingerprintHex(trust.Current) != st.Fingerprint || len(trust.Previous) != 1 {
		t.Fatalf("the client's CA file after the rotation: %v", err)
	}

	// The node re-issues its HTTPS certificate under the new root; a
	// client holding only the old root still verifies it.
	waitFor(t, "the HTTPS certificate under the new root", func() bool {
		pool := x509.NewCertPool()
		pool.AddCert(trust.Current)
		c, err := tls.Dial("tcp", n.HTTPSAddr(), &tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err == nil {
			c.Close()
		}
		return err == nil && len(c.ConnectionState().VerifiedChains[0]) == 2
	})
	oldFile := filepath.Join(t.TempDir(), "old.pem")
	os.WriteFile(oldFile, oldPEM, 0o644)
	if code, _ := httpsGet(t, base, oldFile, "", "", "/api/v1/health"); code != http.StatusOK {
		t.Fatalf("a client with only the old root: %d", code)
	}
	var log wire.AuditLog
	if err := json.Unmarshal([]byte(mustRun(t, "audit", "-json")), &log); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range log.Events {
		found = found || e.Action == "POST /api/v1/ca/rotate" && e.Actor == "token" && e.Outcome == "ok" && e.Command == "ca-rotate"
	}
	if !found {
		t.Errorf("audit log lacks the rotation: %+v", log.Events)
	}
	if strings.Contains(n.log(t), n.Admin) {
		t.Fatal("the node's log holds the admin token")
	}
}
