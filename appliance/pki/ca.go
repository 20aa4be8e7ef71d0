package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

const (
	// caValidity is long because rotating a cluster CA means touching every
	// node; an appliance cluster is expected to live for years.
	caValidity = 10 * 365 * 24 * time.Hour

	// clockSkew back-dates certificates so a freshly issued one is already
	// valid on a peer whose clock runs a little behind ours.
	clockSkew = 5 * time.Minute

	pemCertificate = "CERTIFICATE"
	pemCSR         = "CERTIFICATE REQUEST"
	pemPrivateKey  = "PRIVATE KEY"
	pemECKey       = "EC PRIVATE KEY"
)

// CA is the cluster certificate authority: an ECDSA P-256 key and a
// self-signed certificate valid for ten years. MaxPathLen is 1 rather than 0
// so that one level of intermediates stays possible later without re-keying
// the cluster.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     *ecdsa.PrivateKey
}

// String describes the CA without its key, so a CA can be logged safely.
// It has a value receiver so that printing a CA value, not only a pointer,
// is covered too.
func (c CA) String() string {
	if c.Cert == nil {
		return "CA(<nil>)"
	}
	return fmt.Sprintf("CA(%q, sha256:%s)", c.Cert.Subject.CommonName, FingerprintHex(c.Cert))
}

// GoString is the same as String so %#v does not dump the private key.
func (c CA) GoString() string { return c.String() }

// NewCA creates a fresh cluster CA named commonName, valid from shortly
// before now for ten years.
func NewCA(commonName string, now time.Time) (*CA, error) {
	if strings.TrimSpace(commonName) == "" {
		return nil, errors.New("new ca: common name is empty")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new ca: generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("new ca: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("new ca: create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("new ca: parse created certificate: %w", err)
	}
	return &CA{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}),
		Key:     key,
	}, nil
}

// KeyPEM returns the CA private key as a PKCS#8 "PRIVATE KEY" PEM block.
func (c *CA) KeyPEM() ([]byte, error) {
	if c == nil || c.Key == nil {
		return nil, errors.New("encode ca key: no key")
	}
	return encodeKeyPEM(c.Key)
}

// ParseCA loads a CA from its certificate and key PEM. It refuses a key that
// does not belong to the certificate and a certificate that is not a CA, so a
// mixed-up file pair fails at load time rather than at the first signature.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("parse ca: %w", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("parse ca: certificate %q is not a ca", cert.Subject.CommonName)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("parse ca: certificate %q may not sign certificates", cert.Subject.CommonName)
	}
	signer, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse ca: %w", err)
	}
	key, ok := signer.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("parse ca: key is %T, want ecdsa", signer)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("parse ca: key does not match certificate")
	}
	return &CA{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: cert.Raw}),
		Key:     key,
	}, nil
}

// ParseCertPEM parses the first CERTIFICATE block in certPEM. Other block
// types before it (for example a key in a combined file) are skipped.
func ParseCertPEM(certPEM []byte) (*x509.Certificate, error) {
	rest := certPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("parse certificate: no CERTIFICATE pem block")
		}
		if block.Type != pemCertificate {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		return cert, nil
	}
}

// Fingerprint is the SHA-256 of the certificate's DER encoding. It is what a
// join code carries to pin the cluster CA.
func Fingerprint(cert *x509.Certificate) [32]byte {
	return sha256.Sum256(cert.Raw)
}

// FingerprintHex is Fingerprint as lowercase hex.
func FingerprintHex(cert *x509.Certificate) string {
	fp := Fingerprint(cert)
	return hex.EncodeToString(fp[:])
}

// NewKeyAndCSR makes an ECDSA P-256 key and a CSR for it with
// CN=commonName. Each host that parses as an IP literal becomes an IP SAN,
// anything else a DNS SAN.
func NewKeyAndCSR(commonName string, hosts []string) (keyPEM, csrPEM []byte, err error) {
	if strings.TrimSpace(commonName) == "" {
		return nil, nil, errors.New("new csr: common name is empty")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("new csr: generate key: %w", err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
			continue
		case net.ParseIP(h) != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(h))
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, nil, fmt.Errorf("new csr: create request: %w", err)
	}
	keyPEM, err = encodeKeyPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("new csr: %w", err)
	}
	return keyPEM, pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der}), nil
}

// SignNode signs a cluster node's CSR. The subject CN and the DNS/IP SANs
// come from the CSR; nothing else in it (other subject fields, URIs, emails,
// extensions) is copied, so a joining node cannot ask for more than a node
// certificate. The CN must equal name: the caller decides what the node is
// called, the CSR only proves possession of the key.
//
// The certificate is good for both server and client auth because every node
// is both in raft. Its validity is clipped to the CA's, since a certificate
// that outlives its issuer would not verify anyway.
func (c *CA) SignNode(csrPEM []byte, name string, now time.Time, ttl time.Duration) (certPEM []byte, err error) {
	if c == nil || c.Cert == nil || c.Key == nil {
		return nil, errors.New("sign node certificate: ca has no certificate or key")
	}
	if name == "" {
		return nil, errors.New("sign node certificate: expected node name is empty")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("sign node certificate: ttl %s is not positive", ttl)
	}
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != pemCSR {
		return nil, errors.New("sign node certificate: no CERTIFICATE REQUEST pem block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("sign node certificate: parse csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("sign node certificate: csr signature: %w", err)
	}
	if csr.Subject.CommonName != name {
		return nil, fmt.Errorf("sign node certificate: csr common name %q does not match expected node name %q", csr.Subject.CommonName, name)
	}
	if err := checkNodeKey(csr.PublicKey); err != nil {
		return nil, fmt.Errorf("sign node certificate: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("sign node certificate: %w", err)
	}
	notAfter := now.Add(ttl)
	if notAfter.After(c.Cert.NotAfter) {
		notAfter = c.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: csr.Subject.CommonName},
		DNSNames:              csr.DNSNames,
		IPAddresses:           csr.IPAddresses,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, csr.PublicKey, c.Key)
	if err != nil {
		return nil, fmt.Errorf("sign node certificate: create certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), nil
}

// IssueNode makes a key, a CSR and a signed certificate in one step. The
// bootstrap node uses it for its own certificate, since there is no one to
// send a CSR to.
func (c *CA) IssueNode(name string, hosts []string, now time.Time, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	keyPEM, csrPEM, err := NewKeyAndCSR(name, hosts)
	if err != nil {
		return nil, nil, fmt.Errorf("issue node certificate: %w", err)
	}
	certPEM, err = c.SignNode(csrPEM, name, now, ttl)
	if err != nil {
		return nil, nil, fmt.Errorf("issue node certificate: %w", err)
	}
	return certPEM, keyPEM, nil
}

// checkNodeKey accepts only modern key types; the cluster never makes RSA
// keys, so an RSA CSR means something other than a rollcall node made it.
func checkNodeKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return nil
		}
		return errors.New("csr key: unsupported ecdsa curve")
	case ed25519.PublicKey:
		return nil
	default:
		return fmt.Errorf("csr key: unsupported key type %T", pub)
	}
}

// randomSerial returns a random, non-zero 128-bit serial number.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generate serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func encodeKeyPEM(key crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// parseKeyPEM reads a PKCS#8 key, or a SEC 1 EC key as older tools write
// them. Parse errors from crypto/x509 describe structure, never key bytes.
func parseKeyPEM(keyPEM []byte) (crypto.Signer, error) {
	rest := keyPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("parse private key: no PRIVATE KEY pem block")
		}
		switch block.Type {
		case pemPrivateKey:
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse private key: %w", err)
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("parse private key: %T cannot sign", k)
			}
			return s, nil
		case pemECKey:
			k, err := x509.ParseECPrivateKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse private key: %w", err)
			}
			return k, nil
		}
	}
}
