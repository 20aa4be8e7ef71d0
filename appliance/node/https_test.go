package node_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/raftfsm/cluster"
)

// The HTTPS API: a certificate from the cluster CA for the node's names and
// addresses, checked by a client that trusts only that CA; /ca.pem over
// plain HTTP; reissue when names change or a month before expiry; and the
// CLI over https with ROLLCALL_CA.
func TestHTTPS(t *testing.T) {
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "rollcall.json"), []byte(`{"tls_names":["rollcall.example.test"],"admin_http":"loopback"}`), 0o600)
	n := nodetest.StartWith(t, nodetest.Options{Name: "h1", RaftTune: func(*cluster.Config) {}, Node: func(o *node.Options) {
		o.DataDir, o.HTTPSAddr = data, "127.0.0.1:0"
	}})
	nodetest.WaitFor(t, "the https certificate", func() bool { return n.HTTPSCert() != nil })

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
	first := n.HTTPSCert()
	if err := n.RenewHTTPSCert(time.Now()); err != nil || n.HTTPSCert() != first {
		t.Fatalf("renewed a fresh certificate: %v", err)
	}
	if err := n.RenewHTTPSCert(first.NotAfter.Add(-29 * 24 * time.Hour)); err != nil || n.HTTPSCert() == first {
		t.Fatalf("not renewed a month before expiry: %v", err)
	}
	second := n.HTTPSCert()
	n.FileConfig().TLSNames = append(n.FileConfig().TLSNames, "other.example.test")
	if err := n.RenewHTTPSCert(time.Now()); err != nil || n.HTTPSCert() == second {
		t.Fatalf("not renewed after a name change: %v", err)
	}
	if !strings.Contains(strings.Join(n.HTTPSCert().DNSNames, ","), "other.example.test") {
		t.Fatalf("new name missing: %v", n.HTTPSCert().DNSNames)
	}

}
