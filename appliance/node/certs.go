package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Node certificates are renewed by the node itself a month before they end:
// every node holds the master key, so it can unseal the cluster CA key from
// the replicated store and sign a CSR for a key it made here (the key never
// leaves this node). The new certificate is written to the data directory
// and swapped into the peer TLS configuration (pki.PeerCert), so the next
// handshake, as client or server, presents it; no restart.
//
// The files are replaced in two steps so a crash in between never leaves a
// certificate next to a key it does not belong to (finishCertSwap).
const (
	nodeCertRenewAhead = 30 * 24 * time.Hour
	nodeCertCheckEvery = time.Hour
	fileNextCert       = "node-next.pem"
	fileNextKey        = "node-next-key.pem"
)

func (n *Node) nodeCertTTL() time.Duration {
	if n.opts.NodeCertTTL > 0 {
		return n.opts.NodeCertTTL
	}
	return nodeCertTTL
}

func (n *Node) nodeCertRenewAhead() time.Duration {
	if n.opts.NodeCertRenewAhead > 0 {
		return n.opts.NodeCertRenewAhead
	}
	return nodeCertRenewAhead
}

// keepNodeCert checks the node certificate every nodeCertCheckEvery (or
// the option's) and renews it when it ends within the renewal window.
func (n *Node) keepNodeCert(ctx context.Context, log *slog.Logger) error {
	every := nodeCertCheckEvery
	if n.opts.NodeCertCheckEvery > 0 {
		every = n.opts.NodeCertCheckEvery
	}
	for {
		if err := n.renewNodeCert(time.Now()); err != nil {
			log.Warn("node certificate not renewed", "err", err)
		}
		select {
		case <-ctx.Done(): // the node's background: it ends when the node closes
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// renewNodeCert issues a new node certificate when the current one ends
// within the renewal window; otherwise it does nothing.
func (n *Node) renewNodeCert(now time.Time) error {
	n.certMu.Lock() // one renewal at a time: they share the next files
	defer n.certMu.Unlock()
	cur := n.peerCert.Leaf()
	if now.Add(n.nodeCertRenewAhead()).Before(cur.NotAfter) {
		return nil
	}
	ca, _, err := n.openSecrets()
	if err != nil {
		return fmt.Errorf("open the cluster ca: %w", err)
	}
	certPEM, keyPEM, err := ca.IssueNode(n.opts.Name, n.hosts(), now, n.nodeCertTTL())
	if err != nil {
		return err
	}
	if err := n.peerCert.Set(certPEM, keyPEM); err != nil {
		return err
	}
	if err := n.saveNodeCert(certPEM, keyPEM); err != nil {
		// The running node already uses the new certificate; the old
		// one on disk is still valid for a restart until it ends.
		return fmt.Errorf("node certificate renewed but not saved: %w", err)
	}
	leaf := n.peerCert.Leaf()
	n.log.Info("node certificate renewed", "serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339), "previous_not_after", cur.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// saveNodeCert writes the next pair beside the current one, then moves the
// key and then the certificate into place.
func (n *Node) saveNodeCert(certPEM, keyPEM []byte) error {
	if err := writeFileAtomic(n.path(dirTLS, fileNextCert), certPEM, 0o644); err != nil {
		return err
	}
	if err := writeFileAtomic(n.path(dirTLS, fileNextKey), keyPEM, 0o600); err != nil {
		return err
	}
	return n.finishCertSwap()
}

// finishCertSwap completes a saveNodeCert a crash interrupted. With both
// next files present (the pair was written whole) they move into place;
// with only the next certificate left, it moves only if it belongs to the
// key in place (the key had moved already), and is dropped otherwise (the
// crash came before its key was written).
func (n *Node) finishCertSwap() error {
	nextCert, nextKey := n.path(dirTLS, fileNextCert), n.path(dirTLS, fileNextKey)
	certPEM, err := os.ReadFile(nextCert)
	if errors.Is(err, os.ErrNotExist) {
		os.Remove(nextKey) // a key without its certificate cannot be used
		return nil
	}
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(nextKey)
	switch {
	case err == nil:
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			os.Remove(nextKey)
			return os.Remove(nextCert)
		}
		if err := os.Rename(nextKey, n.path(dirTLS, fileKey)); err != nil {
			return err
		}
	case errors.Is(err, os.ErrNotExist):
		keyPEM, err = os.ReadFile(n.path(dirTLS, fileKey))
		if err != nil {
			return err
		}
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return os.Remove(nextCert)
		}
	default:
		return err
	}
	return os.Rename(nextCert, n.path(dirTLS, fileCert))
}

// loadPeerCert reads the node certificate and key (finishing an interrupted
// renewal first) into n.peerCert.
func (n *Node) loadPeerCert() (*pki.PeerCert, error) {
	if err := n.finishCertSwap(); err != nil {
		return nil, fmt.Errorf("finish the node certificate's renewal: %w", err)
	}
	cert, err := os.ReadFile(n.path(dirTLS, fileCert))
	if err != nil {
		return nil, fmt.Errorf("load node certificate: %w", err)
	}
	key, err := os.ReadFile(n.path(dirTLS, fileKey))
	if err != nil {
		return nil, fmt.Errorf("load node key: %w", err)
	}
	return pki.NewPeerCert(n.trust.Load(), cert, key)
}

// Every certificate this node holds (its node certificate and its HTTPS
// one) is recorded in the cluster by serial, so that `cluster remove`
// revokes them by serial on every node. A node records its own: after
// start, after a renewal, and again until the record is in (the command
// type waits for the version gate on a cluster being upgraded).
const (
	certRecordRetry = 100 * time.Millisecond
	certRecordEvery = time.Minute
)

func (n *Node) keepCertRecords(ctx context.Context, log *slog.Logger) error {
	start := time.Now()
	for {
		wait := certRecordEvery
		if err := n.recordOwnCerts(ctx); err != nil {
			log.Debug("node certificates not recorded yet", "err", err)
			wait = certRecordRetry
			if time.Since(start) > time.Minute {
				wait = 10 * time.Second // a long rolling upgrade: ask less often
			}
		} else if n.httpsLn != nil && n.httpsCert.Load() == nil {
			wait = certRecordRetry // the HTTPS certificate is on its way
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// recordOwnCerts records the certificates this node holds that the store
// does not know yet.
func (n *Node) recordOwnCerts(ctx context.Context) error {
	var leaves []*x509.Certificate
	if n.peerCert != nil {
		leaves = append(leaves, n.peerCert.Leaf())
	}
	if c := n.httpsCert.Load(); c != nil {
		leaves = append(leaves, c.leaf)
	}
	for _, leaf := range leaves {
		serial := pki.SerialHex(leaf)
		known := false
		n.db.View(func(tx *store.Tx) error { _, known = tx.Cert(serial); return nil })
		if known {
			continue
		}
		rec := store.CertRecord{Serial: serial, Kind: store.CertNode, Name: n.opts.Name, NotAfter: leaf.NotAfter.UTC(),
			Fingerprint: pki.FingerprintHex(leaf), Hosts: certHosts(leaf), Issued: leaf.NotBefore.UTC(), IssuedBy: n.opts.Name}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := n.cluster.Apply(actx, &raftfsm.CertPut{Cert: raftfsm.CertBody(rec), Now: time.Now().UTC()})
		cancel()
		if err != nil {
			return fmt.Errorf("record certificate %s: %w", serial, err)
		}
		n.log.Info("node certificate recorded", "serial", serial, "not_after", rec.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// certHosts lists a certificate's DNS names and addresses.
func certHosts(c *x509.Certificate) []string {
	out := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}
