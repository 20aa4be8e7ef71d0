package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// PeerTLS returns the tls.Config a node uses for node-to-node traffic, both
// when it listens and when it dials.
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
// The server's chain carries the CA certificate after the leaf, so a joining
// node that pins the CA fingerprint (PinnedTLS) can find it. NextProtos is
// left empty for the caller to set.
func PeerTLS(caCertPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	caCert, err := ParseCertPEM(caCertPEM)
	if err != nil {
		return nil, fmt.Errorf("peer tls: ca: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("peer tls: node certificate and key: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("peer tls: node certificate: %w", err)
	}
	// Only the signature is checked here, not validity dates: a node whose
	// clock is off should still start and report handshake errors, but a
	// certificate from another cluster is a configuration mistake.
	if err := leaf.CheckSignatureFrom(caCert); err != nil {
		return nil, fmt.Errorf("peer tls: node certificate is not signed by the cluster ca: %w", err)
	}
	pair.Leaf = leaf
	hasCA := false
	for _, der := range pair.Certificate[1:] {
		if bytes.Equal(der, caCert.Raw) {
			hasCA = true
		}
	}
	if !hasCA {
		pair.Certificate = append(pair.Certificate, caCert.Raw)
	}

	pool := x509.NewCertPool()
	pool.AddCert(caCert)

	return &tls.Config{
		Certificates:       []tls.Certificate{pair},
		ClientCAs:          pool,
		ClientAuth:         tls.VerifyClientCertIfGiven,
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			// VerifyConnection runs on both sides. A server sees no peer
			// certificates when a joining node connects without one, which
			// is allowed. A TLS 1.3 client never gets here without server
			// certificates: crypto/tls rejects an empty Certificate message
			// before calling us.
			if len(cs.PeerCertificates) == 0 {
				return nil
			}
			if _, err := verifyChain(cs.PeerCertificates, pool); err != nil {
				return fmt.Errorf("peer tls: peer certificate: %w", err)
			}
			return nil
		},
		MinVersion: tls.VersionTLS13,
	}, nil
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
