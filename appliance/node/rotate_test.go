package node_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
)

// TestCARotation: `ca rotate` on a three-node cluster under writes through
// every node. Every node re-issues its node and HTTPS certificates under
// the new root without a restart; a client that still holds only the old
// root keeps verifying every node (cross certificate); a peer certificate
// from before the rotation is still accepted during the transition; the
// files a restart reads hold together; no acknowledged write is lost.
func TestCARotation(t *testing.T) {
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{
		RaftTune: func(c *cluster.Config) { c.VersionReportEvery = 2 * time.Second },
		Node:     func(o *node.Options) { o.HTTPSAddr = "127.0.0.1:0" },
	})
	first := nodes[0]
	oldRoot := readRoot(t, first.Dir)
	oldPeer := peerConfig(t, nodes[2].Dir) // node3's certificate before the rotation

	// A refused rotation changes nothing.
	r := first.Do(t, http.MethodPost, "/api/v1/ca/rotate", wire.CARotateRequest{}, nodetest.Bearer(first.Admin)...)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("rotate without yes: %s", r)
	}
	r = first.Do(t, http.MethodPost, "/api/v1/ca/rotate", wire.CARotateRequest{Yes: true, Transition: "5m"}, nodetest.Bearer(first.Admin)...)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("rotate with a 5m transition: %s", r)
	}

	// Writers through every node, before, during and after the rotation.
	stop := make(chan struct{})
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				resp, err := n.Send(t.Context(), http.MethodPost, "/api/v1/tags", wire.TagRequest{Name: name}, nodetest.Bearer(n.Admin)...)
				if err == nil && resp.Status == http.StatusCreated {
					mu.Lock()
					acked = append(acked, name)
					mu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})

	// The command type opens through the version gate; until then the
	// rotation is refused and changes nothing.
	var st wire.CAState
	waitLong(t, "the rotation to be accepted", func() bool {
		r := nodes[1].Do(t, http.MethodPost, "/api/v1/ca/rotate", wire.CARotateRequest{Yes: true}, nodetest.Bearer(first.Admin)...)
		if r.Status != http.StatusCreated {
			if r.Status != http.StatusServiceUnavailable {
				t.Fatalf("rotate: %s", r)
			}
			if readRoot(t, first.Dir).Equal(oldRoot) == false {
				t.Fatal("a refused rotation changed the root")
			}
			return false
		}
		r.Decode(t, &st)
		return true
	})
	if st.Fingerprint == pki.FingerprintHex(oldRoot) || len(st.Previous) != 1 || st.Previous[0].Fingerprint != pki.FingerprintHex(oldRoot) ||
		time.Until(st.Previous[0].TrustedUntil) < 29*24*time.Hour || st.RotatedBy != "token" {
		t.Fatalf("rotation answer: fingerprint %s, previous %+v, by %q", st.Fingerprint, st.Previous, st.RotatedBy)
	}
	newRoot, err := pki.ParseCertPEM([]byte(st.PEM))
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range nodes {
		waitLong(t, n.Name()+" to re-issue its certificates under the new root", func() bool {
			leaf, err := readCert(filepath.Join(n.Dir, "tls", "node.pem"))
			if err != nil || leaf.CheckSignatureFrom(newRoot) != nil {
				return false
			}
			hs, err := readCert(filepath.Join(n.Dir, "tls", "https.pem"))
			return err == nil && hs.CheckSignatureFrom(newRoot) == nil
		})
		// What a restart reads: the bundle (new root first, old one
		// kept), the cross certificates, and a certificate they cover.
		dir := filepath.Join(n.Dir, "tls")
		bundle, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
		cross, _ := os.ReadFile(filepath.Join(dir, "ca-cross.pem"))
		trust, err := pki.ParseTrust(bundle, cross)
		if err != nil {
			t.Fatalf("%s: %v", n.Name(), err)
		}
		if !trust.Current.Equal(newRoot) || len(trust.Previous) != 1 || !trust.Previous[0].Equal(oldRoot) || len(trust.Cross) != 1 {
			t.Fatalf("%s: roots on disk: current %s, %d previous, %d cross", n.Name(), trust.Current.Subject, len(trust.Previous), len(trust.Cross))
		}
		certPEM, _ := os.ReadFile(filepath.Join(dir, "node.pem"))
		keyPEM, _ := os.ReadFile(filepath.Join(dir, "node-key.pem"))
		if _, err := pki.NewPeerCert(trust, certPEM, keyPEM); err != nil {
			t.Fatalf("%s: a restart would not load its certificate: %v", n.Name(), err)
		}
		// Clients holding only the old root, or only the new one, verify
		// the node's HTTPS API.
		for what, root := range map[string]*x509.Certificate{"old": oldRoot, "new": newRoot} {
			pool := x509.NewCertPool()
			pool.AddCert(root)
			c, err := tls.Dial("tcp", n.HTTPSAddr(), &tls.Config{RootCAs: pool, ServerName: "localhost"})
			if err != nil {
				t.Fatalf("%s: a client holding only the %s root does not verify the HTTPS API: %v", n.Name(), what, err)
			}
			c.Close()
		}
		// node3's certificate from before the rotation is still a node's.
		if n != nodes[2] {
			if err := clusterStatus(n.Cluster().Advertise(), oldPeer); err != nil {
				t.Fatalf("%s refused a pre-rotation node certificate during the transition: %v", n.Name(), err)
			}
		}
	}
	// /ca.pem serves the bundle, the new root first.
	r = first.Do(t, http.MethodGet, "/ca.pem", nil)
	if got, err := pki.ParseTrust(r.Body, nil); err != nil || !got.Current.Equal(newRoot) || len(got.Previous) != 1 {
		t.Fatalf("/ca.pem after the rotation: %v", err)
	}
	// New certificates come from the new root, and the cluster still
	// commits: writes after the rotation.
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 30 {
		t.Fatalf("only %d writes acknowledged across the rotation", len(acked))
	}
	leader := first
	for _, n := range nodes {
		if n.Cluster().IsLeader() {
			leader = n
		}
	}
	for _, n := range nodes {
		nodetest.WaitFor(t, n.Name()+" to catch up", func() bool {
			return n.Cluster().FSM().AppliedIndex() >= leader.Cluster().FSM().AppliedIndex()
		})
		have := map[string]bool{}
		n.Store().View(func(tx *store.Tx) error {
			tags, err := tx.Tags()
			for _, tg := range tags {
				have[tg.Name] = true
			}
			return err
		})
		for _, name := range acked {
			if !have[name] {
				t.Fatalf("%s lost the acknowledged write %s (of %d)", n.Name(), name, len(acked))
			}
		}
	}
	t.Logf("%d writes acknowledged across the rotation, all on every node", len(acked))
}

func readRoot(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	c, err := readCert(filepath.Join(dir, "tls", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return pki.ParseCertPEM(bytes.TrimSpace(b))
}
