package node_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm/cluster"
)

// clusterStatus calls GET /v1/status on a node's cluster port with the
// given node certificate, as another node would.
func clusterStatus(addr string, cfg *tls.Config) error {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"rollcall-rpc/1"}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := &tls.Dialer{Config: cfg}
			return d.DialContext(ctx, "tcp", addr)
		},
	}}
	resp, err := client.Get("https://" + addr + "/v1/status")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// TestRemovedNodeRevokedBySerial: every node records its certificates by
// serial; `cluster remove` revokes them, and the removed node's still valid
// certificate is then refused at the TLS handshake on every other node.
func TestRemovedNodeRevokedBySerial(t *testing.T) {
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{
		RaftTune: func(c *cluster.Config) { c.VersionReportEvery = 2 * time.Second },
		Node:     func(o *node.Options) { o.HTTPSAddr = "127.0.0.1:0" },
	})
	first, gone := nodes[0], nodes[2]
	// The records wait for the version gate to open the new command
	// types: under the load of a full test run that can take longer than
	// nodetest.WaitFor's 30 s.
	waitLong(t, "node3's certificates to be recorded", func() bool {
		var l wire.CertList
		if first.Call(t, first.Admin, http.MethodGet, "/api/v1/ca/certificates?kind=node", "", &l) != http.StatusOK {
			return false
		}
		n := 0
		for _, c := range l.Certificates {
			if c.Name == gone.Name() && c.State == "valid" {
				n++
			}
		}
		return n == 2 // the node certificate and the HTTPS one
	})
	cfg := peerConfig(t, gone.Dir)
	for _, n := range nodes[:2] {
		if err := clusterStatus(n.Cluster().Advertise(), cfg); err != nil {
			t.Fatalf("before the removal, %s refused node3's certificate: %v", n.Name(), err)
		}
	}

	var removed wire.Removed
	if code := first.Call(t, first.Admin, http.MethodDelete, "/api/v1/cluster/members/"+gone.Name(), "", &removed); code != http.StatusOK {
		t.Fatalf("remove: %d", code)
	}
	if removed.RevokedCertificates != 2 || removed.Note != "" {
		t.Fatalf("remove revoked %d certificates (note %q), want 2", removed.RevokedCertificates, removed.Note)
	}
	for _, n := range nodes[:2] {
		nodetest.WaitFor(t, n.Name()+" to refuse the removed node's certificate", func() bool { return clusterStatus(n.Cluster().Advertise(), cfg) != nil })
		// Refused at the handshake itself, not by a route: a raw TLS
		// connection fails on its first read.
		c, err := tls.Dial("tcp", n.Cluster().Advertise(), func() *tls.Config { c := cfg.Clone(); c.NextProtos = []string{"rollcall-raft/1"}; return c }())
		if err == nil {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("%s: the removed node's raft connection was not refused at the handshake: %v", n.Name(), err)
		}
	}
	var l wire.CertList
	first.Call(t, first.Admin, http.MethodGet, "/api/v1/ca/certificates?kind=node", "", &l)
	for _, c := range l.Certificates {
		if c.Name == gone.Name() && (c.State != "revoked" || c.RevokedBy != "token") {
			t.Errorf("certificate %s of the removed node: state %s, revoked by %q", c.Serial, c.State, c.RevokedBy)
		}
		if c.Name != gone.Name() && c.State != "valid" {
			t.Errorf("certificate %s of %s: state %s", c.Serial, c.Name, c.State)
		}
	}
	// The members left still speak to each other.
	if err := clusterStatus(nodes[1].Cluster().Advertise(), peerConfig(t, first.Dir)); err != nil {
		t.Fatalf("node1 refused by node2 after the removal: %v", err)
	}
}

// waitLong polls cond for up to two minutes.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestClusterPortRefusesOtherCertificates: certificates the cluster CA
// signed that are not a node's (an administrator's client certificate, a
// service certificate with client auth) and a node certificate from
// another CA are refused at the cluster port's handshake, each with its
// reason in the node's log; the secrets the test used appear in no log.
func TestClusterPortRefusesOtherCertificates(t *testing.T) {
	var logs nodetest.LogBuffer
	n := nodetest.StartWith(t, nodetest.Options{Log: &logs})
	sign := func(path, cn string, body func(csr string) any) *tls.Config {
		t.Helper()
		keyPEM, csrPEM, err := pki.NewKeyAndCSR(cn, nil)
		if err != nil {
			t.Fatal(err)
		}
		var issued wire.IssuedCert
		waitLong(t, "the certificate commands to open", func() bool {
			r := n.Do(t, http.MethodPost, path, body(string(csrPEM)), nodetest.Bearer(n.Admin)...)
			if r.Status == http.StatusCreated {
				r.Decode(t, &issued)
				return true
			}
			if r.Status != http.StatusServiceUnavailable {
				t.Fatalf("%s: %s", path, r)
			}
			return false
		})
		cfg, err := pki.PeerTLS([]byte(issued.CAPEM), []byte(issued.PEM), keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logs.String(), strings.TrimSpace(string(keyPEM))) {
			t.Fatal("a private key reached the node's log")
		}
		return cfg
	}
	admin := sign("/api/v1/admin-certs", "admin:x", func(csr string) any { return wire.AdminCertRequest{Name: "x", CSR: csr} })
	service := sign("/api/v1/ca/issue", "x", func(csr string) any {
		return wire.ServiceCertRequest{Name: "x", Hosts: []string{"svc.lab"}, Client: true, CSR: csr}
	})
	other, err := pki.NewCA("another cluster", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := other.IssueNode(n.Name(), []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := pki.PeerTLS(other.CertPEM, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for what, cfg := range map[string]*tls.Config{"an administrator's": admin, "a service's": service, "another CA's node": foreign} {
		if err := clusterStatus(n.Cluster().Advertise(), cfg); err == nil {
			t.Errorf("the cluster port accepted %s certificate", what)
		}
	}
	if err := clusterStatus(n.Cluster().Advertise(), peerConfig(t, n.Dir)); err != nil {
		t.Fatalf("the node's own certificate refused: %v", err)
	}
	log := logs.String()
	refused := grepLines(log, "certificate refused")
	for _, want := range []string{"is an administrator's certificate, not a node's", "was issued to service x, not to node x"} {
		if !strings.Contains(refused, want) {
			t.Errorf("the node's log does not say %q:\n%s", want, refused)
		}
	}
	if strings.Contains(log, n.Admin) || strings.Contains(log, strings.TrimSpace(string(keyPEM))) {
		t.Fatal("a secret of this test reached the node's log")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
