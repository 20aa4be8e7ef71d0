package node

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/store"
)

// A CA rotation (rollcall ca rotate, CARotate in the log) replaces the
// cluster root in the replicated identity. Every node follows it here: it
// adds the new root to the roots it trusts, re-issues its node certificate
// (and, through renewHTTPSCert, its HTTPS one) under the new root, and
// drops a previous root when its transition ends. Until then peers that
// have not applied the rotation yet still verify the new certificates
// through the cross certificate each node presents (pki.Trust).
//
// The roots on disk (tls/ca.pem, the current one first, and
// tls/ca-cross.pem) always include the root of the node certificate on
// disk, so a crash at any step leaves a node that starts: roots are added
// before the certificate changes and dropped after.
const (
	fileCACross     = "ca-cross.pem"
	trustCheckEvery = time.Second
)

func (n *Node) caFingerprint() string { return pki.FingerprintHex(n.trust.Load().Current) }

// keepTrust follows the identity's roots.
func (n *Node) keepTrust(ctx context.Context, log *slog.Logger) error {
	for {
		if err := n.syncTrust(time.Now()); err != nil {
			log.Warn("cluster CA rotation not followed yet", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(trustCheckEvery):
		}
	}
}

// identityTrust is the roots the replicated identity says to trust at now:
// the current root, the previous ones whose transition has not ended, and
// their cross certificates.
func identityTrust(id store.ClusterIdentity, now time.Time) (*pki.Trust, error) {
	cur, err := pki.ParseCertPEM([]byte(id.CACertPEM))
	if err != nil {
		return nil, fmt.Errorf("current root: %w", err)
	}
	var prev, cross []*x509.Certificate
	for _, p := range id.PreviousCAs {
		if !now.Before(p.Until) {
			continue
		}
		c, err := pki.ParseCertPEM([]byte(p.CertPEM))
		if err != nil {
			return nil, fmt.Errorf("previous root: %w", err)
		}
		x, err := pki.ParseCertPEM([]byte(p.CrossPEM))
		if err != nil {
			return nil, fmt.Errorf("cross certificate: %w", err)
		}
		prev, cross = append(prev, c), append(cross, x)
	}
	return pki.NewTrust(cur, prev, cross), nil
}

// syncTrust brings the roots this node holds to what the identity says.
func (n *Node) syncTrust(now time.Time) error {
	var id store.ClusterIdentity
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		id, err = tx.Identity()
		return err
	}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil // before bootstrap
		}
		return err
	}
	want, err := identityTrust(id, now)
	if err != nil {
		return err
	}
	have := n.trust.Load()
	if bytes.Equal(want.BundlePEM(), have.BundlePEM()) && bytes.Equal(want.CrossPEM(), have.CrossPEM()) {
		return nil
	}
	n.certMu.Lock() // the node certificate's files are shared with renewals
	defer n.certMu.Unlock()
	held := n.peerCert.Leaf()
	if held.CheckSignatureFrom(want.Current) != nil {
		// Re-issue under the new root. The roots on disk first gain the
		// new one (keeping the held certificate's), then the certificate.
		union := pki.NewTrust(want.Current, unionRoots(want.Previous, have.Roots()), want.Cross)
		if err := n.saveTrust(union); err != nil {
			return err
		}
		ca, _, err := n.openSecrets()
		if err != nil {
			return fmt.Errorf("open the cluster ca: %w", err)
		}
		if !bytes.Equal(ca.Cert.Raw, want.Current.Raw) {
			return errors.New("the identity changed while following it")
		}
		certPEM, keyPEM, err := ca.IssueNode(n.opts.Name, n.hosts(), now, n.nodeCertTTL())
		if err != nil {
			return err
		}
		if err := n.saveNodeCert(certPEM, keyPEM); err != nil {
			return err
		}
		if err := n.peerCert.Replace(want, certPEM, keyPEM); err != nil {
			return err
		}
		n.trust.Store(want)
		leaf := n.peerCert.Leaf()
		n.log.Info("cluster CA rotated: node certificate re-issued under the new root", "fingerprint", pki.FingerprintHex(want.Current),
			"serial", pki.SerialHex(leaf), "previous_roots", len(want.Previous))
	} else {
		if err := n.peerCert.SetTrust(want); err != nil {
			return err
		}
		n.trust.Store(want)
		n.log.Info("cluster CA roots changed", "fingerprint", pki.FingerprintHex(want.Current), "previous_roots", len(want.Previous))
	}
	if err := n.saveTrust(want); err != nil {
		return err
	}
	if n.httpsLn != nil {
		if err := n.renewHTTPSCert(now); err != nil {
			return fmt.Errorf("https certificate under the new root: %w", err)
		}
	}
	return nil
}

// saveTrust writes the roots and cross certificates into tls/.
func (n *Node) saveTrust(t *pki.Trust) error {
	if err := writeFileAtomic(n.path(dirTLS, fileCA), t.BundlePEM(), 0o644); err != nil {
		return err
	}
	cross := t.CrossPEM()
	if len(cross) == 0 {
		if err := os.Remove(n.path(dirTLS, fileCACross)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeFileAtomic(n.path(dirTLS, fileCACross), cross, 0o644)
}

// unionRoots is a followed by the roots of b it lacks.
func unionRoots(a, b []*x509.Certificate) []*x509.Certificate {
	out := slices.Clone(a)
	for _, c := range b {
		if !slices.ContainsFunc(out, c.Equal) {
			out = append(out, c)
		}
	}
	return out
}
