package appliance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The HTTPS API: a certificate from the cluster CA for the node's names and
// addresses, checked by a client that trusts only that CA; /ca.pem over
// plain HTTP; reissue when names change or a month before expiry. (The CLI
// over https with ROLLCALL_CA is appliance/cli's test.)
func TestHTTPS(t *testing.T) {
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "rollcall.json"), []byte(`{"tls_names":["rollcall.example.test"],"admin_http":"loopback"}`), 0o600)
	n, err := Start(context.Background(), Options{DataDir: data, Name: "h1", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitFor(t, "the https certificate", func() bool { return n.httpsCert.Load() != nil })

	resp, err := http.Get("http://" + n.HTTPAddr() + "/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("/ca.pem is not a PEM certificate: %q", caPEM)
	}
	_, port, _ := strings.Cut(n.HTTPSAddr(), ":")
	for _, host := range []string{"127.0.0.1", "localhost", "h1", "rollcall.example.test"} {
		client := &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host},
		}}
		r, err := client.Get("https://127.0.0.1:" + port + "/api/v1/health")
		if err != nil {
			t.Fatalf("https as %s: %v", host, err)
		}
		r.Body.Close()
	}
	// A client trusting the system roots only is refused.
	if _, err := http.Get("https://" + n.HTTPSAddr() + "/api/v1/health"); err == nil {
		t.Fatal("a client without the cluster CA accepted the certificate")
	}

	// Renewal: nothing while fresh; a new one when names change or within a
	// month of expiry.
	first := n.httpsCert.Load()
	if err := n.renewHTTPSCert(time.Now()); err != nil || n.httpsCert.Load() != first {
		t.Fatalf("renewed a fresh certificate: %v", err)
	}
	if err := n.renewHTTPSCert(first.leaf.NotAfter.Add(-29 * 24 * time.Hour)); err != nil || n.httpsCert.Load() == first {
		t.Fatalf("not renewed a month before expiry: %v", err)
	}
	second := n.httpsCert.Load()
	n.conf.TLSNames = append(n.conf.TLSNames, "other.example.test")
	if err := n.renewHTTPSCert(time.Now()); err != nil || n.httpsCert.Load() == second {
		t.Fatalf("not renewed after a name change: %v", err)
	}
	if !strings.Contains(strings.Join(n.httpsCert.Load().leaf.DNSNames, ","), "other.example.test") {
		t.Fatalf("new name missing: %v", n.httpsCert.Load().leaf.DNSNames)
	}
}
