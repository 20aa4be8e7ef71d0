package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
)

// PeerTLS returns the tls.Config a node uses for node-to-node traffic, both
// when it listens and when it dials, holding certPEM for good. A node whose
// certificate is renewed while it runs uses NewPeerCert and its Config.
func PeerTLS(caCertPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	p, err := NewPeerCert(caCertPEM, certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return p.Config(), nil
}

// PeerCert is a node's current certificate under the cluster CA. The
// configs Config returns read it at every handshake, so Set takes effect
// on the next connection without a restart; open connections keep the
// certificate they were made with.
type PeerCert struct {
	ca     *x509.Certificate
	pool   *x509.CertPool
	cur    atomic.Pointer[tls.Certificate]
	refuse atomic.Pointer[func(*x509.Certificate) error]
}

// RefuseWith installs a check every handshake runs on the peer's verified
// certificate, as server and as client: a non-nil error refuses the peer
// (a revoked serial, a certificate that is not a node's). It takes effect
// on the next handshake.
func (p *PeerCert) RefuseWith(f func(leaf *x509.Certificate) error) { p.refuse.Store(&f) }

// NewPeerCert checks certPEM and keyPEM against the CA (see Set) and holds
// them.
func NewPeerCert(caCertPEM, certPEM, keyPEM []byte) (*PeerCert, error) {
	caCert, err := ParseCertPEM(caCertPEM)
	if err != nil {
		return nil, fmt.Errorf("peer tls: ca: %w", err)
	}
	p := &PeerCert{ca: caCert, pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	if err := p.Set(certPEM, keyPEM); err != nil {
		return nil, err
	}
	return p, nil
}

// Set replaces the certificate. It refuses a pair whose key does not match
// and a certificate the cluster CA did not sign, leaving the old one in
// place. Only the signature is checked, not validity dates: a node whose
// clock is off should still start and report handshake errors, but a
// certificate from another cluster is a configuration mistake.
func (p *PeerCert) Set(certPEM, keyPEM []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("peer tls: node certificate and key: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("peer tls: node certificate: %w", err)
	}
	if err := leaf.CheckSignatureFrom(p.ca); err != nil {
		return fmt.Errorf("peer tls: node certificate is not signed by the cluster ca: %w", err)
	}
	pair.Leaf = leaf
	// The chain carries the CA certificate after the leaf, so a joining
	// node that pins the CA fingerprint (PinnedTLS) can find it.
	if !slices.ContainsFunc(pair.Certificate[1:], func(der []byte) bool { return bytes.Equal(der, p.ca.Raw) }) {
		pair.Certificate = append(pair.Certificate, p.ca.Raw)
	}
	p.cur.Store(&pair)
	return nil
}

// Leaf is the certificate held now.
func (p *PeerCert) Leaf() *x509.Certificate { return p.cur.Load().Leaf }

// Config is the node-to-node tls.Config on the held certificate.
//
// As a server it asks for, but does not require, a client certificate signed
// by the CA: a node that is joining has no certificate yet and must still be
// able to reach the join endpoint. Protocols that need an authenticated peer
// check PeerVerified on the connection.
//
// As a client it verifies the server's chain against the CA itself in
// VerifyConnection (InsecureSkipVerify only turns off the standard check,
// which would insist on a hostname): peers are addressed by IP:port and
// their certificates need not name that address. Any extended key usage is
// accepted there because trust comes from the CA, not the EKU.
//
// NextProtos is left empty for the caller to set.
func (p *PeerCert) Config() *tls.Config {
	current := func() *tls.Certificate { return p.cur.Load() }
	return &tls.Config{
		GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current(), nil },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return current(), nil },
		ClientCAs:            p.pool,
		ClientAuth:           tls.VerifyClientCertIfGiven,
		InsecureSkipVerify:   true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			// VerifyConnection runs on both sides. A server sees no peer
			// certificates when a joining node connects without one, which
			// is allowed. A TLS 1.3 client never gets here without server
			// certificates: crypto/tls rejects an empty Certificate message
			// before calling us.
			if len(cs.PeerCertificates) == 0 {
				return nil
			}
			if _, err := verifyChain(cs.PeerCertificates, p.pool); err != nil {
				return fmt.Errorf("peer tls: peer certificate: %w", err)
			}
			// A node's certificate is signed by the cluster CA itself: one
			// signed below an intermediate (rollcall ca intermediate) could
			// carry any common name, since name constraints do not cover it.
			if err := cs.PeerCertificates[0].CheckSignatureFrom(p.ca); err != nil {
				return errors.New("peer tls: peer certificate is not signed by the cluster ca itself (an intermediate's certificate is no node's)")
			}
			if f := p.refuse.Load(); f != nil {
				if err := (*f)(cs.PeerCertificates[0]); err != nil {
					return fmt.Errorf("peer tls: peer certificate refused: %w", err)
				}
			}
			return nil
		},
		MinVersion: tls.VersionTLS13,
	}
}

// PeerVerified reports whether a completed server-side connection carries a
// client certificate that verified against the cluster CA, and the peer's
// common name (its node name). A certificate without a common name is not a
// node certificate and is not reported as verified.
func PeerVerified(cs tls.ConnectionState) (cn string, ok bool) {
	if !cs.HandshakeComplete || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", false
	}
	cn = cs.VerifiedChains[0][0].Subject.CommonName
	if cn == "" {
		return "", false
	}
	return cn, true
}

// PinnedTLS returns a client tls.Config for a node that knows the cluster
// only by its CA fingerprint from a join code. The server is trusted if some
// certificate in the chain it presents has SHA-256 fp and the leaf verifies
// up to that certificate. A chain that merely includes the right CA next to
// an unrelated leaf is rejected. No hostname is checked.
func PinnedTLS(fp [32]byte) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			var pinned *x509.Certificate
			for _, c := range cs.PeerCertificates {
				if Fingerprint(c) == fp {
					pinned = c
					break
				}
			}
			if pinned == nil {
				return errors.New("pinned tls: server did not present the pinned ca certificate")
			}
			pool := x509.NewCertPool()
			pool.AddCert(pinned)
			if _, err := verifyChain(cs.PeerCertificates, pool); err != nil {
				return fmt.Errorf("pinned tls: server certificate: %w", err)
			}
			return nil
		},
		MinVersion: tls.VersionTLS13,
	}
}

// verifyChain verifies chain[0] against roots, using the rest of chain as
// intermediates.
func verifyChain(chain []*x509.Certificate, roots *x509.CertPool) ([][]*x509.Certificate, error) {
	if len(chain) == 0 {
		return nil, errors.New("no certificate presented")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	return chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
}
