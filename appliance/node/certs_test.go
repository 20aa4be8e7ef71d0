package node_test

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/pki"
)

// Node certificate renewal: nothing while the certificate is far from its
// end; inside the renewal window (here wider than the validity, so any
// check renews) a new certificate from the cluster CA is saved and
// presented at the next handshake, without a restart, and the cluster
// goes on committing through the renewed node.
func TestNodeCertRenewal(t *testing.T) {
	logs := &nodetest.LogBuffer{}
	nodes := nodetest.StartCluster(t, 2, nodetest.Options{Name: "nc", Log: logs, Node: func(o *node.Options) {
		if o.Name == "nc2" {
			o.NodeCertRenewAhead = 400 * 24 * time.Hour
		}
	}})
	n1, n2 := nodes[0], nodes[1]

	before := n1.NodeCert()
	if err := n1.RenewNodeCert(time.Now()); err != nil || n1.NodeCert() != before {
		t.Fatalf("a certificate a year from its end was renewed (err %v)", err)
	}

	// n2's own check at start found its certificate inside the window.
	nodetest.WaitFor(t, "n2's renewal at start", func() bool { return strings.Contains(logs.String(), "node certificate renewed") })
	old := n2.NodeCert()
	if err := n2.RenewNodeCert(time.Now()); err != nil {
		t.Fatalf("renew: %v", err)
	}
	cur := n2.NodeCert()
	if cur.SerialNumber.Cmp(old.SerialNumber) == 0 {
		t.Fatal("renewal kept the serial")
	}
	if cur.Subject.CommonName != "nc2" || !cur.NotAfter.After(time.Now().Add(360*24*time.Hour)) {
		t.Errorf("renewed certificate: %s until %s", cur.Subject, cur.NotAfter)
	}

	// On disk: the new pair, whole, and nothing left of the swap.
	tlsDir := filepath.Join(n2.Dir, "tls")
	pair, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "node.pem"), filepath.Join(tlsDir, "node-key.pem"))
	if err != nil {
		t.Fatalf("the saved pair: %v", err)
	}
	if pair.Leaf.SerialNumber.Cmp(cur.SerialNumber) != 0 {
		t.Errorf("node.pem holds serial %x, the node presents %x", pair.Leaf.SerialNumber, cur.SerialNumber)
	}
	for _, f := range []string{"node-next.pem", "node-next-key.pem"} {
		if _, err := os.Stat(filepath.Join(tlsDir, f)); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", f, err)
		}
	}

	// A new connection from n1, on n1's own certificate, sees the new one.
	cfg := peerConfig(t, n1.Dir)
	conn, err := tls.Dial("tcp", n2.Cluster().Advertise(), cfg)
	if err != nil {
		t.Fatalf("handshake with the renewed node: %v", err)
	}
	got := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if got.SerialNumber.Cmp(cur.SerialNumber) != 0 {
		t.Errorf("n2 presents serial %x, want the renewed %x", got.SerialNumber, cur.SerialNumber)
	}

	// Writes through the renewed node still commit (forwarded to the
	// leader) and come back to it.
	if code := n2.Call(t, n2.Admin, http.MethodPost, "/api/v1/machines", `{"name":"after-renewal","macs":["52:54:00:00:0c:01"]}`, nil); code != http.StatusCreated {
		t.Fatalf("create through the renewed node: %d", code)
	}
	nodetest.WaitFor(t, "the machine on both nodes", func() bool {
		r := n1.Do(t, http.MethodGet, "/api/v1/machines?q=after-renewal", nil, nodetest.Bearer(n1.Admin)...)
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), `"after-renewal"`) &&
			n2.Cluster().FSM().AppliedIndex() >= n1.Cluster().FSM().AppliedIndex()
	})
}

// A renewal interrupted between its files: a whole next pair moves into
// place; a next certificate whose key never landed is dropped, leaving the
// current pair.
func TestNodeCertSwapRecovery(t *testing.T) {
	n := nodetest.StartWith(t, nodetest.Options{Name: "sw1"})
	tlsDir := filepath.Join(n.Dir, "tls")
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(tlsDir, f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	curCert, curKey := read("node.pem"), read("node-key.pem")

	// Another key and certificate (self-made: only the pairing matters
	// to the swap), written as a crash would leave them.
	other, err := pki.NewCA("not a node", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := other.KeyPEM()
	os.WriteFile(filepath.Join(tlsDir, "node-next.pem"), other.CertPEM, 0o644)
	if err := n.FinishCertSwap(); err != nil {
		t.Fatalf("finish with a lone next certificate: %v", err)
	}
	if string(read("node.pem")) != string(curCert) || string(read("node-key.pem")) != string(curKey) {
		t.Error("a next certificate without its key replaced the current pair")
	}
	if _, err := os.Stat(filepath.Join(tlsDir, "node-next.pem")); !os.IsNotExist(err) {
		t.Errorf("the lone next certificate was kept (%v)", err)
	}

	os.WriteFile(filepath.Join(tlsDir, "node-next.pem"), other.CertPEM, 0o644)
	os.WriteFile(filepath.Join(tlsDir, "node-next-key.pem"), otherKey, 0o600)
	if err := n.FinishCertSwap(); err != nil {
		t.Fatalf("finish with a whole next pair: %v", err)
	}
	if string(read("node.pem")) != string(other.CertPEM) || string(read("node-key.pem")) != string(otherKey) {
		t.Error("a whole next pair did not move into place")
	}

	os.WriteFile(filepath.Join(tlsDir, "node-next.pem"), curCert, 0o644)
	os.WriteFile(filepath.Join(tlsDir, "node-next-key.pem"), otherKey, 0o600) // not its key
	if err := n.FinishCertSwap(); err != nil {
		t.Fatalf("finish with a mismatched next pair: %v", err)
	}
	if string(read("node.pem")) != string(other.CertPEM) {
		t.Error("a mismatched next pair replaced the current certificate")
	}
	for _, f := range []string{"node-next.pem", "node-next-key.pem"} {
		if _, err := os.Stat(filepath.Join(tlsDir, f)); !os.IsNotExist(err) {
			t.Errorf("mismatched %s kept (%v)", f, err)
		}
	}
}

// peerConfig is the node-to-node TLS a node's data directory holds.
func peerConfig(t *testing.T, dir string) *tls.Config {
	t.Helper()
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, "tls", f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg, err := pki.PeerTLS(read("ca.pem"), read("node.pem"), read("node-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
