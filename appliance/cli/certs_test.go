package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/console"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
)

// httpsGet calls the HTTPS API with a client certificate (none when
// certFile is "") and no token.
func httpsGet(t *testing.T, base, caFile, certFile, keyFile, path string) (int, string) {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// TestAdminCertificates: an administrator's certificate from `admin-cert
// request` (key made by the CLI, only a CSR sent) signs the CLI in over
// HTTPS without a token; revoked, it is refused on the next request with
// the reason. A certificate from another CA, a service certificate and a
// CSR asking for names are refused; `ca issue` and `ca intermediate` give
// certificates Go's verifier checks against the cluster CA and its name
// constraints.
func TestAdminCertificates(t *testing.T) {
	n := startNode(t, nodeOptions{https: true})
	caFile := filepath.Join(n.Dir, "tls", "ca.pem")
	base := "https://" + n.HTTPSAddr()
	waitFor(t, "the https listener", func() bool {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		r, err := c.Get(base + "/api/v1/health")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
	conf := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", conf)
	t.Setenv("ROLLCALL_URL", base)
	t.Setenv("ROLLCALL_TOKEN", n.Admin)
	t.Setenv("ROLLCALL_CA", caFile)

	// A CSR that asks for a name is refused and takes no entry.
	_, badCSR, err := pki.NewKeyAndCSR("admin:ada", []string{"evil.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	before := n.Cluster().FSM().AppliedIndex()
	body, _ := json.Marshal(wire.AdminCertRequest{Name: "ada", CSR: string(badCSR)})
	code, answer := n.call(t, http.MethodPost, "/api/v1/admin-certs", strings.NewReader(string(body)))
	if code != http.StatusBadRequest || !strings.Contains(string(answer), "may not have") {
		t.Fatalf("a CSR with a DNS name: %d %s", code, answer)
	}
	if after := n.Cluster().FSM().AppliedIndex(); after != before {
		t.Fatalf("a refused CSR moved the applied index from %d to %d", before, after)
	}

	// The request (retried while a fresh cluster's gate opens the type).
	var out string
	waitFor(t, "admin-cert request", func() bool {
		var c int
		c, out, _ = run("admin-cert", "request", "ada")
		return c == 0
	})
	dir := filepath.Join(conf, "rollcall")
	certFile, keyFile := filepath.Join(dir, "admin-ada.pem"), filepath.Join(dir, "admin-ada-key.pem")
	for _, f := range []string{certFile, keyFile, filepath.Join(dir, "admin-ada.p12"), filepath.Join(dir, "admin-ada.p12.password")} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatalf("admin-cert request wrote no %s: %v\n%s", f, err, out)
		}
		if strings.Contains(f, "key") || strings.HasSuffix(f, ".p12") || strings.HasSuffix(f, ".password") {
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %04o, want 0600", f, st.Mode().Perm())
			}
		}
	}
	cfg, err := console.LoadClientConfig(filepath.Join(dir, "client.json"))
	if err != nil || cfg.CertFile != certFile || cfg.KeyFile != keyFile || cfg.URL != base || cfg.Token != "" {
		t.Fatalf("client config %+v: %v", cfg, err)
	}
	leaf, err := pki.ParseCertPEM(mustRead(t, certFile))
	if err != nil || leaf.Subject.CommonName != "admin:ada" {
		t.Fatalf("certificate: %v %v", leaf, err)
	}

	// Signed in by the certificate: no token anywhere.
	t.Setenv("ROLLCALL_URL", "")
	t.Setenv("ROLLCALL_TOKEN", "")
	t.Setenv("ROLLCALL_CA", "")
	code, who := httpsGet(t, base, caFile, certFile, keyFile, "/api/v1/whoami")
	if code != http.StatusOK || !strings.Contains(who, `"actor":"admin:ada"`) || !strings.Contains(who, `"via":"certificate"`) {
		t.Fatalf("whoami with the certificate: %d %s", code, who)
	}
	list := mustRun(t, "admin-cert", "list")
	if !strings.Contains(list, "ada") || !strings.Contains(list, "valid") || !strings.Contains(list, pki.SerialHex(leaf)) {
		t.Fatalf("admin-cert list:\n%s", list)
	}
	mustRun(t, "tags", "add", "audited") // a write as admin:ada, for the audit log
	if code, _ := httpsGet(t, base, caFile, "", "", "/api/v1/machines"); code != http.StatusUnauthorized {
		t.Fatalf("no certificate, no token: %d", code)
	}

	// A certificate of the same name from another CA is refused, saying why.
	other := otherCA(t, dir)
	if code, msg := httpsGet(t, base, caFile, other+".pem", other+"-key.pem", "/api/v1/machines"); code != http.StatusUnauthorized || !strings.Contains(msg, "does not verify against the cluster CA") {
		t.Fatalf("a certificate from another CA: %d %s", code, msg)
	}

	// ca issue: a service certificate (with client auth) is no admin's.
	t.Setenv("ROLLCALL_URL", base)
	t.Setenv("ROLLCALL_TOKEN", n.Admin)
	t.Setenv("ROLLCALL_CA", caFile)
	svcDir := t.TempDir()
	mustRun(t, "ca", "issue", "metrics", "-host", "metrics.lab,10.1.2.3", "-client", "-dir", svcDir)
	svc, err := pki.ParseCertPEM(mustRead(t, filepath.Join(svcDir, "metrics.pem")))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(mustRead(t, caFile))
	if _, err := svc.Verify(x509.VerifyOptions{Roots: roots, DNSName: "metrics.lab"}); err != nil {
		t.Fatalf("service certificate does not verify for its host: %v", err)
	}
	if code, msg := httpsGet(t, base, caFile, filepath.Join(svcDir, "metrics.pem"), filepath.Join(svcDir, "metrics-key.pem"), "/api/v1/machines"); code != http.StatusUnauthorized || !strings.Contains(msg, "not an administrator") {
		t.Fatalf("a service certificate as an admin's: %d %s", code, msg)
	}
	if code, _, errs := run("ca", "issue", n.Name(), "-host", "x.lab"); code == 0 || !strings.Contains(errs, "node") {
		t.Fatalf("a service certificate named as a node: exit %d: %s", code, errs)
	}

	// ca intermediate: one level, name-constrained.
	interKey, interCSR, err := pki.NewKeyAndCSR("lab-int", nil)
	if err != nil {
		t.Fatal(err)
	}
	csrFile := filepath.Join(svcDir, "lab-int.csr")
	os.WriteFile(csrFile, interCSR, 0o600)
	mustRun(t, "ca", "intermediate", "lab-int", "-permit", "lab.example.com,10.0.0.0/8", "-csr", csrFile, "-dir", svcDir)
	inter, err := pki.ParseCertPEM(mustRead(t, filepath.Join(svcDir, "lab-int.pem")))
	if err != nil {
		t.Fatal(err)
	}
	interPool := x509.NewCertPool()
	interPool.AddCert(inter)
	for _, tc := range []struct {
		host string
		ok   bool
	}{{"a.lab.example.com", true}, {"a.other.example.com", false}} {
		l := signLeaf(t, inter, interKey, tc.host)
		_, err := l.Verify(x509.VerifyOptions{Roots: roots, Intermediates: interPool, DNSName: tc.host})
		if (err == nil) != tc.ok {
			t.Errorf("leaf for %s under the intermediate: verify error %v, want ok=%v", tc.host, err, tc.ok)
		}
	}
	// The node records its own certificates, once the gate lets it.
	waitFor(t, "the node's certificates in ca certs", func() bool { return strings.Contains(mustRun(t, "ca", "certs", "-kind", "node"), n.Name()) })
	certs := mustRun(t, "ca", "certs", "-json")
	for _, want := range []string{`"kind": "admin"`, `"kind": "service"`, `"kind": "intermediate"`, `"kind": "node"`, "10.0.0.0/8"} {
		if !strings.Contains(certs, want) {
			t.Errorf("ca certs -json lacks %s", want)
		}
	}

	// Revoked: refused from the next request on, with the reason.
	revoked := mustRun(t, "admin-cert", "revoke", "ada")
	if !strings.Contains(revoked, "revoked 1 certificate") {
		t.Fatalf("admin-cert revoke: %s", revoked)
	}
	if code, msg := httpsGet(t, base, caFile, certFile, keyFile, "/api/v1/machines"); code != http.StatusUnauthorized || !strings.Contains(msg, "revoked") {
		t.Fatalf("a revoked certificate: %d %s", code, msg)
	}
	if code, _, errs := run("admin-cert", "revoke", "ada"); code == 0 || !strings.Contains(errs, "no unrevoked") {
		t.Fatalf("revoking again: exit %d: %s", code, errs)
	}
	// The audit log: who did what, through which route, with what outcome.
	var log wire.AuditLog
	if err := json.Unmarshal([]byte(mustRun(t, "audit", "-json")), &log); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, e := range log.Events {
		if e.Outcome == "ok" && e.Node == n.Name() && e.From == "127.0.0.1" {
			found[e.Actor+" "+e.Action] = true
		}
	}
	for _, want := range []string{"token POST /api/v1/admin-certs", "admin:ada POST /api/v1/tags", "token POST /api/v1/ca/issue",
		"token POST /api/v1/ca/intermediates", "token DELETE /api/v1/admin-certs/:name"} {
		if !found[want] {
			t.Errorf("audit log lacks %q: %+v", want, log.Events)
		}
	}
	if found["token POST /api/v1/ca/issue"] && len(log.Events) > 0 && log.Events[0].Action != "DELETE /api/v1/admin-certs/:name" {
		t.Errorf("audit log not newest first: %+v", log.Events[0])
	}
	if !strings.Contains(mustRun(t, "audit"), "admin:ada") {
		t.Error("audit table lacks the administrator")
	}
	for _, secret := range []string{n.Admin, string(mustRead(t, keyFile))} {
		if strings.Contains(n.log(t), strings.TrimSpace(secret)) {
			t.Fatal("the node's log holds a secret of this test")
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// otherCA writes an admin:ada certificate and key under a CA of its own
// and returns the path without its suffix.
func otherCA(t *testing.T, dir string) string {
	t.Helper()
	ca, err := pki.NewCA("another cluster", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, csrPEM, err := pki.NewKeyAndCSR("admin:ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignAdmin(csrPEM, "ada", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "other-ada")
	os.WriteFile(p+".pem", certPEM, 0o600)
	os.WriteFile(p+"-key.pem", keyPEM, 0o600)
	return p
}

// signLeaf signs a server certificate for host with an intermediate's key.
func signLeaf(t *testing.T, parent *x509.Certificate, parentKeyPEM []byte, host string) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(parentKeyPEM)
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		ek, err2 := x509.ParseECPrivateKey(blk.Bytes)
		if err2 != nil {
			t.Fatal(err, err2)
		}
		k = ek
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &leafKey.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}
