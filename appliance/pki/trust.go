package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"
)

// CAKeyAAD is the additional data the cluster CA key is sealed with under
// the master key (store.ClusterIdentity.SealedCAKey and every previous
// root's key).
const CAKeyAAD = "cluster/ca-key"

// Rotating the cluster CA (rollcall ca rotate) makes a new root while the
// old one stays trusted for a transition period. Nodes that learn of the new
// root at different moments must keep talking to each other throughout, so
// the new root's key is also certified by the old root: a cross certificate,
// with the new root's subject and key, signed by the old one. A certificate
// issued under the new root then verifies for a peer or client that knows
// only the old root (leaf → cross → old root) as well as for one that knows
// the new one (leaf → new root). When the transition ends the old root and
// its cross certificate are dropped.
//
// A Trust is that set as one node holds it at one moment.
type Trust struct {
	// Current signs everything issued from now on.
	Current *x509.Certificate
	// Previous roots stay trusted until the transition ends.
	Previous []*x509.Certificate
	// Cross certifies Current's key under a Previous root.
	Cross []*x509.Certificate
	pool  *x509.CertPool
}

// NewTrust holds current, the previous roots still in their transition and
// the cross certificates.
func NewTrust(current *x509.Certificate, previous, cross []*x509.Certificate) *Trust {
	t := &Trust{Current: current, Previous: previous, Cross: cross, pool: x509.NewCertPool()}
	for _, r := range t.Roots() {
		t.pool.AddCert(r)
	}
	return t
}

// ParseTrust reads a CA bundle (the current root first, then previous ones,
// as BundlePEM writes it) and the cross certificates (may be empty).
func ParseTrust(bundlePEM, crossPEM []byte) (*Trust, error) {
	roots, err := parseCertsPEM(bundlePEM)
	if err != nil {
		return nil, fmt.Errorf("ca bundle: %w", err)
	}
	if len(roots) == 0 {
		return nil, errors.New("ca bundle: no certificate")
	}
	var cross []*x509.Certificate
	if len(bytes.TrimSpace(crossPEM)) > 0 {
		if cross, err = parseCertsPEM(crossPEM); err != nil {
			return nil, fmt.Errorf("cross certificates: %w", err)
		}
	}
	for _, c := range roots {
		if !c.IsCA {
			return nil, fmt.Errorf("ca bundle: %q is not a CA certificate", c.Subject.CommonName)
		}
	}
	return NewTrust(roots[0], roots[1:], cross), nil
}

// Roots lists the trusted roots, the current one first.
func (t *Trust) Roots() []*x509.Certificate {
	return append([]*x509.Certificate{t.Current}, t.Previous...)
}

// Pool is the trusted roots as a pool.
func (t *Trust) Pool() *x509.CertPool { return t.pool }

// BundlePEM is the trusted roots in PEM, the current one first: what
// clients keep as the cluster's CA file during a transition.
func (t *Trust) BundlePEM() []byte { return encodeCertsPEM(t.Roots()) }

// CurrentPEM is the current root in PEM.
func (t *Trust) CurrentPEM() []byte { return encodeCertsPEM([]*x509.Certificate{t.Current}) }

// CrossPEM is the cross certificates in PEM (empty outside a transition).
func (t *Trust) CrossPEM() []byte { return encodeCertsPEM(t.Cross) }

// Extra lists, in DER, what a certificate holder presents after its leaf:
// the cross certificates, then the roots, so that a peer pinning any of the
// roots by fingerprint finds it (PinnedTLS) and one trusting only a previous
// root can verify a leaf under the current one.
func (t *Trust) Extra() [][]byte {
	var out [][]byte
	for _, c := range append(slices.Clone(t.Cross), t.Roots()...) {
		out = append(out, c.Raw)
	}
	return out
}

// Signed reports whether leaf is signed by one of the trusted roots
// (checking the signature only, not dates).
func (t *Trust) Signed(leaf *x509.Certificate) bool {
	for _, r := range t.Roots() {
		if leaf.CheckSignatureFrom(r) == nil {
			return true
		}
	}
	return false
}

// Verify verifies chain[0] (with the rest of chain as intermediates) for
// usage and requires it to be issued by a root itself, directly or through
// a cross certificate: below an intermediate (rollcall ca intermediate) a
// certificate could carry any common name, since name constraints do not
// cover common names, and node and administrator rights are granted by
// common name.
func (t *Trust) Verify(chain []*x509.Certificate, usage x509.ExtKeyUsage, now time.Time) error {
	if len(chain) == 0 {
		return errors.New("no certificate presented")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	chains, err := chain[0].Verify(x509.VerifyOptions{Roots: t.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now})
	if err != nil {
		return err
	}
	for _, c := range chains {
		if len(c) == 2 || len(c) == 3 && IsCross(c[1]) {
			return nil
		}
	}
	return ErrBelowIntermediate
}

// ErrBelowIntermediate refuses a certificate that verifies only through an
// intermediate CA.
var ErrBelowIntermediate = errors.New("it is not signed by the cluster CA itself (an intermediate's certificate is no node's or administrator's)")

// IsCross reports whether c has the shape of a cross certificate: a CA
// that may sign only leaves and carries no name constraints. The cluster
// issues no other such CA certificate: every intermediate it signs is
// name-constrained (SignIntermediate refuses an empty permit list).
func IsCross(c *x509.Certificate) bool {
	return c.IsCA && c.MaxPathLenZero && !hasNameConstraints(c)
}

// CrossSign certifies next's subject and key under c, as a CA that may sign
// leaves only, until until (capped at c's own end).
func (c *CA) CrossSign(next *x509.Certificate, now, until time.Time) ([]byte, error) {
	const op = "cross-sign ca"
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if until.After(c.Cert.NotAfter) {
		until = c.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               next.Subject,
		SubjectKeyId:          next.SubjectKeyId,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              until,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, next.PublicKey, c.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), nil
}

func encodeCertsPEM(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		pem.Encode(&b, &pem.Block{Type: pemCertificate, Bytes: c.Raw})
	}
	return b.Bytes()
}
