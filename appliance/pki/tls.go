package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// PeerTLS returns the tls.Config a node uses for node-to-node traffic, both
// when it listens and when it dials, holding certPEM for good under the one
// CA in caCertPEM. A node whose certificate is renewed while it runs uses
// NewPeerCert and its Config.
func PeerTLS(caCertPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	trust, err := ParseTrust(caCertPEM, nil)
	if err != nil {
		return nil, fmt.Errorf("peer tls: %w", err)
	}
	p, err := NewPeerCert(trust, certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return p.Config(), nil
}

// PeerCert is a node's current certificate under the cluster CA, and the
// roots it trusts (a Trust: more than one during a CA rotation). The configs
// Config returns read both at every handshake, so Set and SetTrust take
// effect on the next connection without a restart; open connections keep
// what they were made with.
type PeerCert struct {
	trust  atomic.Pointer[Trust]
	cur    atomic.Pointer[tls.Certificate]
	refuse atomic.Pointer[func(*x509.Certificate) error]
}

// RefuseWith installs a check every handshake runs on the peer's verified
// certificate, as server and as client: a non-nil error refuses the peer
// (a revoked serial, a certificate that is not a node's). It takes effect
// on the next handshake.
func (p *PeerCert) RefuseWith(f func(leaf *x509.Certificate) error) { p.refuse.Store(&f) }

// NewPeerCert checks certPEM and keyPEM against the trusted roots (see Set)
// and holds them.
func NewPeerCert(trust *Trust, certPEM, keyPEM []byte) (*PeerCert, error) {
	p := &PeerCert{}
	p.trust.Store(trust)
	if err := p.Set(certPEM, keyPEM); err != nil {
		return nil, err
	}
	return p, nil
}

// Trust is the set of roots held now.
func (p *PeerCert) Trust() *Trust { return p.trust.Load() }

// SetTrust replaces the trusted roots (the end of a rotation's
// transition) and re-forms the held certificate's chain to match. It
// refuses a set under which the held certificate would not verify: Replace
// changes both at once.
func (p *PeerCert) SetTrust(t *Trust) error {
	cur := p.cur.Load()
	if !t.Signed(cur.Leaf) {
		return errors.New("peer tls: the node certificate is not signed by any root of the new set")
	}
	next := *cur
	next.Certificate = append([][]byte{cur.Certificate[0]}, t.Extra()...)
	p.trust.Store(t)
	p.cur.Store(&next)
	return nil
}

// Set replaces the certificate under the roots held now (see Replace).
func (p *PeerCert) Set(certPEM, keyPEM []byte) error {
	return p.Replace(p.trust.Load(), certPEM, keyPEM)
}

// Replace holds the roots t and the certificate. It refuses a pair whose
// key does not match and a certificate no root of t signed, leaving the
// old ones in place. Only the signature is checked, not validity dates: a
// node whose clock is off should still start and report handshake errors,
// but a certificate from another cluster is a configuration mistake.
func (p *PeerCert) Replace(t *Trust, certPEM, keyPEM []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("peer tls: node certificate and key: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("peer tls: node certificate: %w", err)
	}
	if !t.Signed(leaf) {
		return errors.New("peer tls: node certificate is not signed by the cluster ca")
	}
	pair.Leaf = leaf
	// The chain carries the CA certificates after the leaf (Trust.Extra),
	// so a joining node that pins the CA fingerprint (PinnedTLS) can find
	// it, and during a rotation a peer that knows only the old root can
	// verify a leaf under the new one.
	pair.Certificate = append(pair.Certificate[:1], t.Extra()...)
	p.trust.Store(t)
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
// check PeerVerified on the connection. The roots it verifies a client
// against are the ones held at the handshake (GetConfigForClient).
//
// As a client it verifies the server's chain against the roots itself in
// VerifyConnection (InsecureSkipVerify only turns off the standard check,
// which would insist on a hostname): peers are addressed by IP:port and
// their certificates need not name that address. Any extended key usage is
// accepted there because trust comes from the CA, not the EKU.
//
// NextProtos is left empty for the caller to set.
func (p *PeerCert) Config() *tls.Config {
	current := func() *tls.Certificate { return p.cur.Load() }
	cfg := &tls.Config{
		GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current(), nil },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return current(), nil },
		ClientCAs:            p.trust.Load().Pool(),
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
			if err := p.trust.Load().Verify(cs.PeerCertificates, x509.ExtKeyUsageAny, time.Now()); err != nil {
				return fmt.Errorf("peer tls: peer certificate: %w", err)
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
	// The server's client-certificate check reads the roots held at each
	// handshake, not the ones held when Config was called.
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := cfg.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = p.trust.Load().Pool()
		return c, nil
	}
	return cfg
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
