package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"software.sslmate.com/src/go-pkcs12"
)

// issCA is a cluster CA made at testNow, so every certificate in these
// tests has a validity known in advance.
func issCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("issue test ca", testNow)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

// issCSR makes a P-256 key and a CSR from tmpl, for the CSRs NewKeyAndCSR
// cannot make (email and URI SANs, raw extensions).
func issCSR(t *testing.T, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatalf("CreateCertificateRequest: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der})
}

// issKeyAndCSR is NewKeyAndCSR returning the parsed key too.
func issKeyAndCSR(t *testing.T, cn string, hosts []string) (*ecdsa.PrivateKey, []byte, []byte) {
	t.Helper()
	keyPEM, csrPEM, err := NewKeyAndCSR(cn, hosts)
	if err != nil {
		t.Fatalf("NewKeyAndCSR: %v", err)
	}
	signer, err := parseKeyPEM(keyPEM)
	if err != nil {
		t.Fatalf("parseKeyPEM: %v", err)
	}
	return signer.(*ecdsa.PrivateKey), keyPEM, csrPEM
}

func issCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		t.Fatalf("ParseCertPEM: %v", err)
	}
	return cert
}

// issWantErr fails unless err is non-nil and contains want.
func issWantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded, want an error containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %q, want it to contain %q", err, want)
	}
}

// issOpenSSL finds openssl, skipping the test without it except in CI,
// where a missing peer must not turn a test silently green.
func issOpenSSL(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("openssl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("openssl is required in CI: %v", err)
		}
		t.Skipf("openssl not found, skipping the cross-check with another verifier: %v", err)
	}
	return path
}

func issWriteFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// issBadSig returns csrPEM with the last byte of its signature flipped.
func issBadSig(t *testing.T, csrPEM []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(csrPEM)
	der := slices.Clone(block.Bytes)
	der[len(der)-1] ^= 0x01
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der})
}

// issRegisteredIDSAN is a SAN extension holding only a registeredID, a
// GeneralName type crypto/x509 does not model.
func issRegisteredIDSAN(t *testing.T) pkix.Extension {
	t.Helper()
	oid, err := asn1.Marshal(asn1.ObjectIdentifier{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	// Drop the OBJECT IDENTIFIER tag and length: [8] is IMPLICIT.
	val, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 8, Bytes: oid[2:]}})
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: oidExtSubjectAltName, Value: val}
}

func issRSACSR(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der})
}

func issMustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func issPool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

func issInvalidReason(err error) (x509.InvalidReason, bool) {
	var ie x509.CertificateInvalidError
	if errors.As(err, &ie) {
		return ie.Reason, true
	}
	return 0, false
}

func TestValidCertName(t *testing.T) {
	tests := map[string]struct {
		name    string
		wantErr string
	}{
		"simple":          {"alice", ""},
		"all characters":  {"a0.b_c-d", ""},
		"starts digit":    {"9lives", ""},
		"63 characters":   {strings.Repeat("a", 63), ""},
		"empty":           {"", "empty"},
		"64 characters":   {strings.Repeat("a", 64), "64 characters, at most 63"},
		"upper case":      {"Alice", "'A' at position 1 is not allowed"},
		"colon":           {"admin:x", "':' at position 6 is not allowed"},
		"space":           {"a b", "' ' at position 2"},
		"slash":           {"../etc", "must start with a letter or a digit"},
		"leading dash":    {"-x", "must start with a letter or a digit"},
		"leading dot":     {".x", "must start with a letter or a digit"},
		"leading under":   {"_x", "must start with a letter or a digit"},
		"non-ascii":       {"ålice", "is not allowed"},
		"newline":         {"a\nb", `'\n' at position 2`},
		"inner slash":     {"a/b", "'/' at position 2"},
		"inner at sign":   {"a@b", "'@' at position 2"},
		"trailing dash":   {"x-", ""},
		"only digits":     {"123", ""},
		"dots and digits": {"1.2.3.4", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := ValidCertName(tt.name)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidCertName(%q) = %v, want nil", tt.name, err)
				}
				return
			}
			issWantErr(t, err, tt.wantErr)
		})
	}
}

func TestSerialHex(t *testing.T) {
	tests := map[string]struct {
		cert *x509.Certificate
		want string
	}{
		"lower case":     {&x509.Certificate{SerialNumber: big.NewInt(0xABCDEF)}, "abcdef"},
		"no zero padded": {&x509.Certificate{SerialNumber: big.NewInt(0x0F)}, "f"},
		"nil serial":     {&x509.Certificate{}, ""},
		"nil cert":       {nil, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SerialHex(tt.cert); got != tt.want {
				t.Errorf("SerialHex = %q, want %q", got, tt.want)
			}
		})
	}

	// A signed certificate's serial round-trips through the hex.
	ca := issCA(t)
	_, _, csrPEM := issKeyAndCSR(t, "admin:alice", nil)
	cert := issCert(t, mustSign(t, func() ([]byte, error) { return ca.SignAdmin(csrPEM, "alice", testNow, time.Hour) }))
	n, ok := new(big.Int).SetString(SerialHex(cert), 16)
	if !ok || n.Cmp(cert.SerialNumber) != 0 || SerialHex(cert) != strings.ToLower(SerialHex(cert)) {
		t.Errorf("SerialHex = %q does not round-trip serial %v", SerialHex(cert), cert.SerialNumber)
	}
}

func mustSign(t *testing.T, f func() ([]byte, error)) []byte {
	t.Helper()
	b, err := f()
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return b
}

func TestSignAdmin(t *testing.T) {
	ca := issCA(t)
	emptyCN := issCSR(t, &x509.CertificateRequest{}) // NewKeyAndCSR refuses an empty CN
	key, _, prefixed := issKeyAndCSR(t, "admin:alice", nil)

	good := map[string]struct {
		csr []byte
	}{
		"empty common name":    {emptyCN},
		"matching common name": {prefixed},
	}
	for name, tt := range good {
		t.Run(name, func(t *testing.T) {
			certPEM, err := ca.SignAdmin(tt.csr, "alice", testNow, 24*time.Hour)
			if err != nil {
				t.Fatalf("SignAdmin: %v", err)
			}
			cert := issCert(t, certPEM)
			if cert.Subject.CommonName != "admin:alice" {
				t.Errorf("CN = %q, want admin:alice", cert.Subject.CommonName)
			}
			if diff := cmp.Diff([]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cert.ExtKeyUsage); diff != "" {
				t.Errorf("ExtKeyUsage (-want +got):\n%s", diff)
			}
			if len(cert.UnknownExtKeyUsage) != 0 {
				t.Errorf("UnknownExtKeyUsage = %v", cert.UnknownExtKeyUsage)
			}
			if n := len(cert.DNSNames) + len(cert.IPAddresses) + len(cert.EmailAddresses) + len(cert.URIs); n != 0 {
				t.Errorf("certificate has %d SANs, want none", n)
			}
			if cert.KeyUsage != x509.KeyUsageDigitalSignature {
				t.Errorf("KeyUsage = %v, want digitalSignature only", cert.KeyUsage)
			}
			if !cert.BasicConstraintsValid || cert.IsCA {
				t.Errorf("BasicConstraintsValid=%v IsCA=%v, want a non-CA", cert.BasicConstraintsValid, cert.IsCA)
			}
			if !cert.NotBefore.Equal(testNow.Add(-clockSkew)) || !cert.NotAfter.Equal(testNow.Add(24*time.Hour)) {
				t.Errorf("validity %v .. %v, want now-skew .. now+24h", cert.NotBefore, cert.NotAfter)
			}
			if SerialHex(cert) == SerialHex(ca.Cert) || cert.SerialNumber.Sign() <= 0 {
				t.Errorf("serial %s is not a fresh positive serial", SerialHex(cert))
			}
			if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
				t.Errorf("not signed by the CA: %v", err)
			}
			if name == "matching common name" && !key.PublicKey.Equal(cert.PublicKey) {
				t.Error("certificate is not for the CSR's key")
			}

			opts := x509.VerifyOptions{Roots: issPool(ca.Cert), CurrentTime: testNow}
			opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
			if _, err := cert.Verify(opts); err != nil {
				t.Errorf("does not verify for client auth: %v", err)
			}
			opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			_, err = cert.Verify(opts)
			if r, ok := issInvalidReason(err); !ok || r != x509.IncompatibleUsage {
				t.Errorf("verify for server auth = %v, want an incompatible usage error", err)
			}
		})
	}

	t.Run("two certificates get different serials", func(t *testing.T) {
		a := issCert(t, mustSign(t, func() ([]byte, error) { return ca.SignAdmin(prefixed, "alice", testNow, time.Hour) }))
		b := issCert(t, mustSign(t, func() ([]byte, error) { return ca.SignAdmin(prefixed, "alice", testNow, time.Hour) }))
		if SerialHex(a) == SerialHex(b) {
			t.Errorf("both serials are %s", SerialHex(a))
		}
	})

	t.Run("validity clipped to the ca", func(t *testing.T) {
		cert := issCert(t, mustSign(t, func() ([]byte, error) { return ca.SignAdmin(prefixed, "alice", testNow, 2*caValidity) }))
		if !cert.NotAfter.Equal(ca.Cert.NotAfter) {
			t.Errorf("NotAfter = %v, want the CA's %v", cert.NotAfter, ca.Cert.NotAfter)
		}
	})

	long := strings.Repeat("a", maxCommonName-len(AdminPrefix))
	_, _, longCSR := issKeyAndCSR(t, AdminPrefix+long, nil)
	// Valid but padded: without the size limit it would be signed.
	oversized := append(slices.Clone(prefixed), bytes.Repeat([]byte("\n"), maxCSRPEM)...)

	h := time.Hour
	bad := map[string]struct {
		csr     []byte
		name    string
		ttl     time.Duration
		ca      *CA
		wantErr string
	}{
		"dns san": {
			issCSR(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "admin:alice"}, DNSNames: []string{"evil.example.com"}}),
			"alice", h, ca, `the CSR asks for names it may not have: dns "evil.example.com"`,
		},
		"ip san": {
			issCSR(t, &x509.CertificateRequest{IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}),
			"alice", h, ca, "the CSR asks for names it may not have: ip 10.0.0.1",
		},
		"email san": {
			issCSR(t, &x509.CertificateRequest{EmailAddresses: []string{"alice@example.com"}}),
			"alice", h, ca, `names it may not have: email "alice@example.com"`,
		},
		"uri san": {
			issCSR(t, &x509.CertificateRequest{URIs: []*url.URL{issMustURL(t, "spiffe://cluster/node")}}),
			"alice", h, ca, `names it may not have: uri "spiffe://cluster/node"`,
		},
		"san type x509 does not parse": {
			issCSR(t, &x509.CertificateRequest{ExtraExtensions: []pkix.Extension{issRegisteredIDSAN(t)}}),
			"alice", h, ca, "names it may not have: a name of type registeredID",
		},
		"every offending name listed": {
			issCSR(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "root"}, DNSNames: []string{"a.example"}, IPAddresses: []net.IP{net.ParseIP("fd00::1")}}),
			"alice", h, ca, `names it may not have: common name "root", dns "a.example", ip fd00::1`,
		},
		"wrong common name": {
			issCSR(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "admin:root"}}),
			"alice", h, ca, `names it may not have: common name "admin:root"`,
		},
		"common name without prefix": {
			issCSR(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}),
			"alice", h, ca, `names it may not have: common name "alice"`,
		},
		"bad name":           {prefixed, "Alice", h, ca, "'A' at position 1 is not allowed"},
		"empty name":         {emptyCN, "", h, ca, "certificate name is empty"},
		"name too long":      {longCSR, long + "a", h, ca, "at most 58 are allowed"},
		"garbage":            {[]byte("hello"), "alice", h, ca, "no CERTIFICATE REQUEST pem block"},
		"certificate as csr": {ca.CertPEM, "alice", h, ca, "no CERTIFICATE REQUEST pem block"},
		"oversized":          {oversized, "alice", h, ca, fmt.Sprintf("csr is %d bytes, at most 16384", len(oversized))},
		"bad signature":      {issBadSig(t, prefixed), "alice", h, ca, "csr signature"},
		"rsa 1024 key":       {issRSACSR(t, "admin:alice"), "alice", h, ca, "unsupported key type *rsa.PublicKey"},
		"zero ttl":           {prefixed, "alice", 0, ca, "ttl 0s is not positive"},
		"negative ttl":       {prefixed, "alice", -h, ca, "ttl -1h0m0s is not positive"},
		"no ca key":          {prefixed, "alice", h, &CA{Cert: ca.Cert}, "ca has no certificate or key"},
		"nil ca":             {prefixed, "alice", h, nil, "ca has no certificate or key"},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			certPEM, err := tt.ca.SignAdmin(tt.csr, tt.name, testNow, tt.ttl)
			if certPEM != nil {
				t.Errorf("SignAdmin returned a certificate with its error")
			}
			issWantErr(t, err, tt.wantErr)
			if !strings.HasPrefix(err.Error(), "sign admin certificate: ") {
				t.Errorf("error %q does not name the operation", err)
			}
		})
	}
}

func TestSignService(t *testing.T) {
	ca := issCA(t)
	key, _, csrBare := issKeyAndCSR(t, "registry", nil)
	hosts := []string{"Registry.Lab.example.com", "10.0.0.5", "*.apps.lab.example.com", "fd00::5", "::ffff:10.0.0.6"}
	wantDNS := []string{"registry.lab.example.com", "*.apps.lab.example.com"}
	wantIPs := []string{"10.0.0.5", "fd00::5", "10.0.0.6"}

	good := map[string]struct {
		csr     []byte
		client  bool
		wantEKU []x509.ExtKeyUsage
	}{
		"server only":       {csrBare, false, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		"server and client": {csrBare, true, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		"csr names a subset of hosts": {
			issCSR(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "registry.lab.example.com"}, DNSNames: []string{"REGISTRY.lab.example.com"}, IPAddresses: []net.IP{net.ParseIP("::ffff:10.0.0.5"), net.ParseIP("fd00::5")}}),
			false, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
		"csr without common name": {issCSR(t, &x509.CertificateRequest{}), false, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
	}
	for name, tt := range good {
		t.Run(name, func(t *testing.T) {
			certPEM, err := ca.SignService(tt.csr, "registry", hosts, tt.client, testNow, time.Hour)
			if err != nil {
				t.Fatalf("SignService: %v", err)
			}
			cert := issCert(t, certPEM)
			if cert.Subject.CommonName != "registry" {
				t.Errorf("CN = %q, want registry", cert.Subject.CommonName)
			}
			if diff := cmp.Diff(wantDNS, cert.DNSNames); diff != "" {
				t.Errorf("DNSNames (-want +got):\n%s", diff)
			}
			var ips []string
			for _, ip := range cert.IPAddresses {
				ips = append(ips, ip.String())
			}
			if diff := cmp.Diff(wantIPs, ips); diff != "" {
				t.Errorf("IPAddresses (-want +got):\n%s", diff)
			}
			if len(cert.EmailAddresses)+len(cert.URIs) != 0 {
				t.Errorf("unexpected email or URI SANs: %v %v", cert.EmailAddresses, cert.URIs)
			}
			if diff := cmp.Diff(tt.wantEKU, cert.ExtKeyUsage); diff != "" {
				t.Errorf("ExtKeyUsage (-want +got):\n%s", diff)
			}
			if cert.KeyUsage != x509.KeyUsageDigitalSignature {
				t.Errorf("KeyUsage = %v, want digitalSignature only", cert.KeyUsage)
			}
			if !cert.BasicConstraintsValid || cert.IsCA {
				t.Errorf("BasicConstraintsValid=%v IsCA=%v, want a non-CA", cert.BasicConstraintsValid, cert.IsCA)
			}
			if !cert.NotBefore.Equal(testNow.Add(-clockSkew)) || !cert.NotAfter.Equal(testNow.Add(time.Hour)) {
				t.Errorf("validity %v .. %v, want now-skew .. now+1h", cert.NotBefore, cert.NotAfter)
			}
			if name != "csr names a subset of hosts" && name != "csr without common name" && !key.PublicKey.Equal(cert.PublicKey) {
				t.Error("certificate is not for the CSR's key")
			}

			roots := issPool(ca.Cert)
			for _, host := range []string{"registry.lab.example.com", "x.apps.lab.example.com", "10.0.0.5", "fd00::5", "10.0.0.6"} {
				opts := x509.VerifyOptions{Roots: roots, CurrentTime: testNow, DNSName: host}
				if _, err := cert.Verify(opts); err != nil {
					t.Errorf("verify as server %s: %v", host, err)
				}
			}
			for _, host := range []string{"lab.example.com", "a.b.apps.lab.example.com", "10.0.0.7"} {
				opts := x509.VerifyOptions{Roots: roots, CurrentTime: testNow, DNSName: host}
				if _, err := cert.Verify(opts); err == nil {
					t.Errorf("verifies as server %s, which is not among its hosts", host)
				}
			}
			_, err = cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			if tt.client && err != nil {
				t.Errorf("verify for client auth: %v", err)
			}
			if r, ok := issInvalidReason(err); !tt.client && (!ok || r != x509.IncompatibleUsage) {
				t.Errorf("verify for client auth without -client = %v, want an incompatible usage error", err)
			}
		})
	}

	tooMany := make([]string, maxHosts+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("h%d.example.com", i)
	}
	manyBad := make([]string, maxListed+2)
	for i := range manyBad {
		manyBad[i] = fmt.Sprintf("bad%d_", i)
	}
	bad := map[string]struct {
		csr     []byte
		name    string
		hosts   []string
		wantErr string
	}{
		"admin name":        {csrBare, "admin:alice", []string{"a.example.com"}, `name "admin:alice" starts with "admin:", which is reserved for administrator certificates`},
		"bad name":          {csrBare, "Registry", []string{"a.example.com"}, "'R' at position 1 is not allowed"},
		"no hosts":          {csrBare, "registry", nil, "no hosts: a service certificate needs at least one DNS name or IP address"},
		"too many hosts":    {csrBare, "registry", tooMany, "65 hosts, at most 64 are allowed"},
		"empty host":        {csrBare, "registry", []string{""}, `bad hosts (want IP addresses or DNS names): "" (empty name)`},
		"space":             {csrBare, "registry", []string{"exa mple.com"}, `"exa mple.com" (character ' ' is not allowed)`},
		"leading hyphen":    {csrBare, "registry", []string{"-a.example.com"}, `"-a.example.com" (label "-a" starts or ends with '-')`},
		"trailing hyphen":   {csrBare, "registry", []string{"a-.example.com"}, `label "a-" starts or ends with '-'`},
		"empty label":       {csrBare, "registry", []string{"a..example.com"}, `"a..example.com" (empty label)`},
		"trailing dot":      {csrBare, "registry", []string{"example.com."}, `"example.com." (empty label)`},
		"bare wildcard":     {csrBare, "registry", []string{"*"}, `"*" (character '*' is not allowed)`},
		"empty wildcard":    {csrBare, "registry", []string{"*."}, `"*." (empty name)`},
		"inner wildcard":    {csrBare, "registry", []string{"a.*.example.com"}, `"a.*.example.com" (character '*' is not allowed)`},
		"double wildcard":   {csrBare, "registry", []string{"*.*.example.com"}, `character '*' is not allowed`},
		"underscore":        {csrBare, "registry", []string{"_srv.example.com"}, `character '_' is not allowed`},
		"long label":        {csrBare, "registry", []string{strings.Repeat("a", 64) + ".com"}, "label of 64 characters, at most 63"},
		"long name":         {csrBare, "registry", []string{strings.Repeat("abcdefghi.", 26) + "com"}, "263 characters, at most 253"},
		"bad ip":            {csrBare, "registry", []string{"10.0.0.256"}, `"10.0.0.256" (all-numeric last label, but not an IP address)`},
		"unspecified ip":    {csrBare, "registry", []string{"0.0.0.0"}, "0.0.0.0 (the unspecified address)"},
		"ipv6 zone":         {csrBare, "registry", []string{"fe80::1%eth0"}, `"fe80::1%eth0" (character ':' is not allowed)`},
		"duplicate dns":     {csrBare, "registry", []string{"a.example.com", "A.example.com"}, `"A.example.com" (duplicate)`},
		"duplicate ip":      {csrBare, "registry", []string{"fd00::1", "fd00:0::1"}, "fd00:0::1 (duplicate)"},
		"duplicate mapped":  {csrBare, "registry", []string{"10.0.0.1", "::ffff:10.0.0.1"}, "::ffff:10.0.0.1 (duplicate)"},
		"all bad listed":    {csrBare, "registry", []string{"ok.example.com", "a b", "c..d"}, `"a b" (character ' ' is not allowed), "c..d" (empty label)`},
		"long list cut":     {csrBare, "registry", manyBad, "and 2 more"},
		"extra dns in csr":  {issCSR(t, &x509.CertificateRequest{DNSNames: []string{"a.example.com", "evil.example.com"}}), "registry", []string{"a.example.com"}, `the CSR asks for names it may not have: dns "evil.example.com"`},
		"extra ip in csr":   {issCSR(t, &x509.CertificateRequest{IPAddresses: []net.IP{net.ParseIP("10.0.0.9")}}), "registry", []string{"10.0.0.1"}, "names it may not have: ip 10.0.0.9"},
		"wildcard not host": {issCSR(t, &x509.CertificateRequest{DNSNames: []string{"a.example.com"}}), "registry", []string{"*.example.com"}, `names it may not have: dns "a.example.com"`},
		"email in csr":      {issCSR(t, &x509.CertificateRequest{EmailAddresses: []string{"a@a.example.com"}}), "registry", []string{"a.example.com"}, `names it may not have: email "a@a.example.com"`},
		"other cn in csr":   {issCSR(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "other"}}), "registry", []string{"a.example.com"}, `names it may not have: common name "other"`},
		"unparsed san":      {issCSR(t, &x509.CertificateRequest{ExtraExtensions: []pkix.Extension{issRegisteredIDSAN(t)}}), "registry", []string{"a.example.com"}, "a name of type registeredID"},
		"rsa key":           {issRSACSR(t, "registry"), "registry", []string{"a.example.com"}, "unsupported key type"},
		"bad signature":     {issBadSig(t, csrBare), "registry", []string{"a.example.com"}, "csr signature"},
		"garbage":           {[]byte("-----BEGIN NONSENSE-----"), "registry", []string{"a.example.com"}, "no CERTIFICATE REQUEST pem block"},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			certPEM, err := ca.SignService(tt.csr, tt.name, tt.hosts, true, testNow, time.Hour)
			if certPEM != nil {
				t.Errorf("SignService returned a certificate with its error")
			}
			issWantErr(t, err, tt.wantErr)
			if !strings.HasPrefix(err.Error(), "sign service certificate: ") {
				t.Errorf("error %q does not name the operation", err)
			}
		})
	}

	t.Run("zero ttl", func(t *testing.T) {
		_, err := ca.SignService(csrBare, "registry", []string{"a.example.com"}, false, testNow, 0)
		issWantErr(t, err, "ttl 0s is not positive")
	})
	t.Run("64 hosts accepted", func(t *testing.T) {
		certPEM, err := ca.SignService(csrBare, "registry", tooMany[:maxHosts], false, testNow, time.Hour)
		if err != nil {
			t.Fatalf("SignService: %v", err)
		}
		if n := len(issCert(t, certPEM).DNSNames); n != maxHosts {
			t.Errorf("%d DNS names, want %d", n, maxHosts)
		}
	})
}

// issChain is an intermediate made by SignIntermediate, with its key.
type issChain struct {
	cert *x509.Certificate
	pem  []byte
	key  *ecdsa.PrivateKey
}

func issIntermediate(t *testing.T, ca *CA, name string, permit []string) issChain {
	t.Helper()
	key, _, csrPEM := issKeyAndCSR(t, name, nil)
	certPEM, err := ca.SignIntermediate(csrPEM, name, permit, testNow, 365*24*time.Hour)
	if err != nil {
		t.Fatalf("SignIntermediate(%v): %v", permit, err)
	}
	return issChain{issCert(t, certPEM), certPEM, key}
}

// issCreate signs tmpl with the parent's key, the way a lab operator's own
// tooling would sign below the intermediate.
func issCreate(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := randomSerial()
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = testNow.Add(-time.Hour)
	tmpl.NotAfter = testNow.Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("CreateCertificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func issPEM(certs ...*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: c.Raw})...)
	}
	return b
}

func TestSignIntermediateFields(t *testing.T) {
	ca := issCA(t)
	ipStrings := func(ns []*net.IPNet) []string {
		var s []string
		for _, n := range ns {
			s = append(s, n.String())
		}
		return s
	}
	tests := map[string]struct {
		permit                      []string
		wantDNS, wantIP             []string
		wantExcludedDNS, wantExclIP []string
	}{
		"dns and ranges": {
			permit:  []string{"Lab.Example.com", ".example.net", "10.0.0.0/8", "fd00::/8"},
			wantDNS: []string{"lab.example.com", ".example.net"},
			wantIP:  []string{"10.0.0.0/8", "fd00::/8"},
		},
		"dns only excludes every ip": {
			permit:     []string{"lab.example.com"},
			wantDNS:    []string{"lab.example.com"},
			wantExclIP: []string{"0.0.0.0/0", "::/0"},
		},
		"ranges only excludes every dns name": {
			permit:          []string{"192.168.7.0/24"},
			wantIP:          []string{"192.168.7.0/24"},
			wantExcludedDNS: []string{""},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			inter := issIntermediate(t, ca, "lab", tt.permit).cert
			if inter.Subject.CommonName != "lab" {
				t.Errorf("CN = %q, want lab", inter.Subject.CommonName)
			}
			if !inter.BasicConstraintsValid || !inter.IsCA {
				t.Errorf("BasicConstraintsValid=%v IsCA=%v, want a CA", inter.BasicConstraintsValid, inter.IsCA)
			}
			if inter.MaxPathLen != 0 || !inter.MaxPathLenZero {
				t.Errorf("MaxPathLen=%d MaxPathLenZero=%v, want path length 0", inter.MaxPathLen, inter.MaxPathLenZero)
			}
			if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature; inter.KeyUsage != want {
				t.Errorf("KeyUsage = %v, want %v", inter.KeyUsage, want)
			}
			if !inter.PermittedDNSDomainsCritical {
				t.Error("name constraints are not critical")
			}
			if diff := cmp.Diff(tt.wantDNS, inter.PermittedDNSDomains); diff != "" {
				t.Errorf("PermittedDNSDomains (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantIP, ipStrings(inter.PermittedIPRanges)); diff != "" {
				t.Errorf("PermittedIPRanges (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantExcludedDNS, inter.ExcludedDNSDomains); diff != "" {
				t.Errorf("ExcludedDNSDomains (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantExclIP, ipStrings(inter.ExcludedIPRanges)); diff != "" {
				t.Errorf("ExcludedIPRanges (-want +got):\n%s", diff)
			}
			if len(inter.DNSNames)+len(inter.IPAddresses)+len(inter.ExtKeyUsage) != 0 {
				t.Errorf("intermediate has SANs %v %v or EKUs %v", inter.DNSNames, inter.IPAddresses, inter.ExtKeyUsage)
			}
			if err := inter.CheckSignatureFrom(ca.Cert); err != nil {
				t.Errorf("not signed by the CA: %v", err)
			}
			if !inter.NotBefore.Equal(testNow.Add(-clockSkew)) || !inter.NotAfter.Equal(testNow.Add(365*24*time.Hour)) {
				t.Errorf("validity %v .. %v, want now-skew .. now+1y", inter.NotBefore, inter.NotAfter)
			}
		})
	}

	t.Run("validity capped at the root", func(t *testing.T) {
		_, _, csrPEM := issKeyAndCSR(t, "lab", nil)
		certPEM, err := ca.SignIntermediate(csrPEM, "lab", []string{"lab.example.com"}, testNow, 2*caValidity)
		if err != nil {
			t.Fatal(err)
		}
		if got := issCert(t, certPEM).NotAfter; !got.Equal(ca.Cert.NotAfter) {
			t.Errorf("NotAfter = %v, want the root's %v", got, ca.Cert.NotAfter)
		}
	})
}

func TestSignIntermediateRefuses(t *testing.T) {
	ca := issCA(t)
	_, _, csrPEM := issKeyAndCSR(t, "lab", nil)
	inter := issIntermediate(t, ca, "lab", []string{"lab.example.com"})
	belowInter := &CA{Cert: inter.cert, CertPEM: inter.pem, Key: inter.key}

	// A root that is itself name-constrained, as someone else's CA might be.
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	selfTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "constrained root"}, IsCA: true, BasicConstraintsValid: true, MaxPathLen: 1,
		KeyUsage: x509.KeyUsageCertSign, PermittedDNSDomains: []string{"example.com"},
		NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, selfTmpl, selfTmpl, &rootKey.PublicKey, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	constrainedRoot, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	constrainedCA := &CA{Cert: constrainedRoot, Key: rootKey}

	ok := []string{"lab.example.com"}
	tests := map[string]struct {
		ca      *CA
		csr     []byte
		name    string
		permit  []string
		ttl     time.Duration
		wantErr string
	}{
		"no permit":          {ca, csrPEM, "lab", nil, time.Hour, "no permitted names: an intermediate needs at least one DNS domain or CIDR range"},
		"empty entry":        {ca, csrPEM, "lab", []string{""}, time.Hour, `bad permitted names (want DNS domains or CIDR ranges): "" (empty name)`},
		"wildcard":           {ca, csrPEM, "lab", []string{"*.example.com"}, time.Hour, `"*.example.com" (character '*' is not allowed)`},
		"bare address":       {ca, csrPEM, "lab", []string{"10.0.0.1"}, time.Hour, `"10.0.0.1" (an address, not a range; add a prefix length such as /32 or /128)`},
		"host bits":          {ca, csrPEM, "lab", []string{"10.0.0.1/8"}, time.Hour, `"10.0.0.1/8" (has host bits set; the range is 10.0.0.0/8)`},
		"bad prefix length":  {ca, csrPEM, "lab", []string{"10.0.0.0/33"}, time.Hour, `"10.0.0.0/33" (not a CIDR range)`},
		"bad ipv6 range":     {ca, csrPEM, "lab", []string{"fd00::/129"}, time.Hour, `"fd00::/129" (not a CIDR range)`},
		"space":              {ca, csrPEM, "lab", []string{"exa mple.com"}, time.Hour, `"exa mple.com" (character ' ' is not allowed)`},
		"two leading dots":   {ca, csrPEM, "lab", []string{"..example.com"}, time.Hour, `"..example.com" (empty label)`},
		"numeric last label": {ca, csrPEM, "lab", []string{"1.2.3"}, time.Hour, `"1.2.3" (all-numeric last label`},
		"duplicate domain":   {ca, csrPEM, "lab", []string{"lab.example.com", "LAB.example.com"}, time.Hour, `"LAB.example.com" (duplicate)`},
		"duplicate range":    {ca, csrPEM, "lab", []string{"fd00::/8", "fd00:0::/8"}, time.Hour, `"fd00:0::/8" (duplicate)`},
		"all bad listed":     {ca, csrPEM, "lab", []string{"ok.example.com", "a b", "10.0.0.1"}, time.Hour, `"a b" (character ' ' is not allowed), "10.0.0.1" (an address`},
		"csr with dns san":   {ca, issCSR(t, &x509.CertificateRequest{DNSNames: []string{"lab.example.com"}}), "lab", ok, time.Hour, `the CSR asks for names it may not have: dns "lab.example.com"`},
		"csr with ip san":    {ca, issCSR(t, &x509.CertificateRequest{IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}), "lab", ok, time.Hour, "names it may not have: ip 10.0.0.1"},
		"csr wrong cn":       {ca, csrPEM, "other", ok, time.Hour, `names it may not have: common name "lab"`},
		"bad name":           {ca, csrPEM, "Lab", ok, time.Hour, "'L' at position 1 is not allowed"},
		"zero ttl":           {ca, csrPEM, "lab", ok, 0, "ttl 0s is not positive"},
		"rsa key":            {ca, issRSACSR(t, "lab"), "lab", ok, time.Hour, "unsupported key type"},
		"bad signature":      {ca, issBadSig(t, csrPEM), "lab", ok, time.Hour, "csr signature"},
		"below intermediate": {belowInter, csrPEM, "lab", ok, time.Hour, `ca "lab" has path length 0 and may not have an intermediate below it`},
		"constrained ca":     {constrainedCA, csrPEM, "lab", ok, time.Hour, `ca "constrained root" is itself name-constrained`},
		"not a ca":           {&CA{Cert: &x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}}, Key: rootKey}, csrPEM, "lab", ok, time.Hour, `ca certificate "leaf" is not a ca`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			certPEM, err := tt.ca.SignIntermediate(tt.csr, tt.name, tt.permit, testNow, tt.ttl)
			if certPEM != nil {
				t.Errorf("SignIntermediate returned a certificate with its error")
			}
			issWantErr(t, err, tt.wantErr)
			if !strings.HasPrefix(err.Error(), "sign intermediate ca: ") {
				t.Errorf("error %q does not name the operation", err)
			}
		})
	}
}

// TestIntermediateConstraints checks that what SignIntermediate issues
// constrains what is signed below it, with Go's verifier and with
// OpenSSL's.
func TestIntermediateConstraints(t *testing.T) {
	ca := issCA(t)
	inters := map[string]issChain{
		"mixed":  issIntermediate(t, ca, "mixed", []string{"lab.example.com", "10.0.0.0/8", "fd00::/8"}),
		"dns":    issIntermediate(t, ca, "dns", []string{"lab.example.com"}),
		"ranges": issIntermediate(t, ca, "ranges", []string{"192.168.7.0/24"}),
		"dot":    issIntermediate(t, ca, "dot", []string{".example.net"}),
		"v4":     issIntermediate(t, ca, "v4", []string{"10.0.0.0/8", "lab.example.com"}),
	}
	ips := func(s ...string) []net.IP {
		var out []net.IP
		for _, v := range s {
			out = append(out, net.ParseIP(v))
		}
		return out
	}

	// want is "" for a chain that verifies, else what each verifier says.
	const (
		notPermitted = "permitted subtree violation"
		excluded     = "excluded subtree violation"
		pathLen      = "path length constraint exceeded"
	)
	tests := map[string]struct {
		inter string
		dns   []string
		ips   []net.IP
		// second puts a second-level intermediate (permitted the same
		// names) between the intermediate and the leaf.
		second bool
		want   string
	}{
		"name below domain":      {inter: "mixed", dns: []string{"node1.lab.example.com"}},
		"domain itself":          {inter: "mixed", dns: []string{"lab.example.com"}},
		"wildcard below domain":  {inter: "mixed", dns: []string{"*.lab.example.com"}},
		"ipv4 in range":          {inter: "mixed", ips: ips("10.9.8.7")},
		"ipv6 in range":          {inter: "mixed", ips: ips("fd00::7")},
		"names and ips":          {inter: "mixed", dns: []string{"a.lab.example.com"}, ips: ips("10.1.1.1", "fd00::1")},
		"name outside":           {inter: "mixed", dns: []string{"www.example.com"}, want: notPermitted},
		"suffix without dot":     {inter: "mixed", dns: []string{"evillab.example.com"}, want: notPermitted},
		"one name outside":       {inter: "mixed", dns: []string{"a.lab.example.com", "example.com"}, want: notPermitted},
		"ipv4 outside":           {inter: "mixed", ips: ips("192.168.1.1"), want: notPermitted},
		"ipv6 outside":           {inter: "mixed", ips: ips("2001:db8::1"), want: notPermitted},
		"ipv6 when only ipv4":    {inter: "v4", ips: ips("fd00::1"), want: notPermitted},
		"second intermediate":    {inter: "mixed", dns: []string{"node1.lab.example.com"}, second: true, want: pathLen},
		"dns only: name":         {inter: "dns", dns: []string{"x.lab.example.com"}},
		"dns only: any ip":       {inter: "dns", ips: ips("10.0.0.1"), want: excluded},
		"dns only: any ipv6":     {inter: "dns", ips: ips("fd00::1"), want: excluded},
		"ranges only: ip":        {inter: "ranges", ips: ips("192.168.7.9")},
		"ranges only: any name":  {inter: "ranges", dns: []string{"host.example.com"}, want: excluded},
		"leading dot: subdomain": {inter: "dot", dns: []string{"a.example.net"}},
		"leading dot: itself":    {inter: "dot", dns: []string{"example.net"}, want: notPermitted},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			inter := inters[tt.inter]
			issuer, issuerKey := inter.cert, inter.key
			untrusted := []*x509.Certificate{inter.cert}
			if tt.second {
				second, secondKey := issCreate(t, &x509.Certificate{
					Subject: pkix.Name{CommonName: "second"}, IsCA: true, BasicConstraintsValid: true,
					MaxPathLen: 0, MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
					PermittedDNSDomains: inter.cert.PermittedDNSDomains, PermittedIPRanges: inter.cert.PermittedIPRanges,
				}, inter.cert, inter.key)
				issuer, issuerKey = second, secondKey
				untrusted = append(untrusted, second)
			}
			leaf, _ := issCreate(t, &x509.Certificate{
				Subject:     pkix.Name{CommonName: "leaf"},
				DNSNames:    tt.dns,
				IPAddresses: tt.ips,
				KeyUsage:    x509.KeyUsageDigitalSignature,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}, issuer, issuerKey)

			t.Run("go", func(t *testing.T) {
				_, err := leaf.Verify(x509.VerifyOptions{
					Roots:         issPool(ca.Cert),
					Intermediates: issPool(untrusted...),
					CurrentTime:   testNow,
					KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				})
				reason, isInvalid := issInvalidReason(err)
				switch tt.want {
				case "":
					if err != nil {
						t.Fatalf("Verify: %v", err)
					}
				case pathLen:
					if !isInvalid || reason != x509.TooManyIntermediates {
						t.Fatalf("Verify = %v, want too many intermediates", err)
					}
				default:
					if !isInvalid || reason != x509.CANotAuthorizedForThisName {
						t.Fatalf("Verify = %v, want a name constraint violation", err)
					}
				}
			})

			t.Run("openssl", func(t *testing.T) {
				openssl := issOpenSSL(t)
				dir := t.TempDir()
				args := []string{"verify", "-x509_strict", "-attime", strconv.FormatInt(testNow.Unix(), 10),
					"-CAfile", issWriteFile(t, dir, "root.pem", ca.CertPEM),
					"-untrusted", issWriteFile(t, dir, "inter.pem", issPEM(untrusted...)),
					issWriteFile(t, dir, "leaf.pem", issPEM(leaf)),
				}
				out, err := exec.Command(openssl, args...).CombinedOutput()
				if tt.want == "" {
					if err != nil || !strings.Contains(string(out), "leaf.pem: OK") {
						t.Fatalf("openssl verify: %v\n%s", err, out)
					}
					return
				}
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() == 0 {
					t.Fatalf("openssl verify = %v, want a non-zero exit\n%s", err, out)
				}
				if !strings.Contains(string(out), tt.want) {
					t.Fatalf("openssl verify output does not say %q:\n%s", tt.want, out)
				}
			})
		})
	}
}

func TestEncodePKCS12(t *testing.T) {
	ca := issCA(t)
	key, keyPEM, csrPEM := issKeyAndCSR(t, "admin:alice", nil)
	certPEM := mustSign(t, func() ([]byte, error) { return ca.SignAdmin(csrPEM, "alice", testNow, time.Hour) })
	cert := issCert(t, certPEM)
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sec1PEM := pem.EncodeToMemory(&pem.Block{Type: pemECKey, Bytes: sec1})
	_, otherKeyPEM, _ := issKeyAndCSR(t, "other", nil)
	otherCA := issCA(t)
	const password = "correct horse battery staple"

	good := map[string]struct {
		keyPEM, caPEM []byte
		wantCAs       int
	}{
		"pkcs8 key":             {keyPEM, ca.CertPEM, 1},
		"sec1 key":              {sec1PEM, ca.CertPEM, 1},
		"ca bundle of two":      {keyPEM, append(slices.Clone(otherCA.CertPEM), ca.CertPEM...), 2},
		"key after certificate": {append(slices.Clone(certPEM), keyPEM...), ca.CertPEM, 1},
	}
	for name, tt := range good {
		t.Run(name, func(t *testing.T) {
			p12, err := EncodePKCS12(certPEM, tt.keyPEM, tt.caPEM, password)
			if err != nil {
				t.Fatalf("EncodePKCS12: %v", err)
			}
			gotKey, gotLeaf, gotCAs, err := pkcs12.DecodeChain(p12, password)
			if err != nil {
				t.Fatalf("DecodeChain: %v", err)
			}
			if k, ok := gotKey.(*ecdsa.PrivateKey); !ok || !k.Equal(key) {
				t.Errorf("decoded key is %T and not the original", gotKey)
			}
			if !bytes.Equal(gotLeaf.Raw, cert.Raw) {
				t.Errorf("decoded leaf is %q, not the certificate", gotLeaf.Subject.CommonName)
			}
			if len(gotCAs) != tt.wantCAs || !bytes.Equal(gotCAs[len(gotCAs)-1].Raw, ca.Cert.Raw) {
				t.Errorf("decoded %d CA certificates, want %d ending with the cluster CA", len(gotCAs), tt.wantCAs)
			}
			if _, _, _, err := pkcs12.DecodeChain(p12, "wrong"); !errors.Is(err, pkcs12.ErrIncorrectPassword) {
				t.Errorf("DecodeChain with the wrong password = %v, want ErrIncorrectPassword", err)
			}
		})
	}

	bad := map[string]struct {
		certPEM, keyPEM, caPEM []byte
		password               string
		wantErr                string
	}{
		"mismatched key": {certPEM, otherKeyPEM, ca.CertPEM, password, `key does not match certificate "admin:alice"`},
		"other ca":       {certPEM, keyPEM, otherCA.CertPEM, password, `certificate "admin:alice" was not issued by the ca certificates given`},
		"no ca":          {certPEM, keyPEM, nil, password, "ca: no CERTIFICATE pem block"},
		"empty password": {certPEM, keyPEM, ca.CertPEM, "", "password is empty"},
		"no certificate": {keyPEM, keyPEM, ca.CertPEM, password, "no CERTIFICATE pem block"},
		"no key":         {certPEM, certPEM, ca.CertPEM, password, "no PRIVATE KEY pem block"},
		"corrupt ca":     {certPEM, keyPEM, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: []byte("junk")}), password, "ca: parse certificate 1"},
		"corrupt key":    {certPEM, pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: []byte("junk")}), ca.CertPEM, password, "parse private key"},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			p12, err := EncodePKCS12(tt.certPEM, tt.keyPEM, tt.caPEM, tt.password)
			if p12 != nil {
				t.Errorf("EncodePKCS12 returned a file with its error")
			}
			issWantErr(t, err, tt.wantErr)
			if !strings.HasPrefix(err.Error(), "encode pkcs12: ") {
				t.Errorf("error %q does not name the operation", err)
			}
		})
	}

	t.Run("openssl reads it", func(t *testing.T) {
		openssl := issOpenSSL(t)
		p12, err := EncodePKCS12(certPEM, keyPEM, ca.CertPEM, password)
		if err != nil {
			t.Fatal(err)
		}
		f := issWriteFile(t, t.TempDir(), "alice.p12", p12)

		out, err := exec.Command(openssl, "pkcs12", "-in", f, "-passin", "pass:"+password, "-nokeys").Output()
		if err != nil {
			t.Fatalf("openssl pkcs12 -nokeys: %v", err)
		}
		certs, err := parseCertsPEM(out)
		if err != nil {
			t.Fatalf("openssl output: %v", err)
		}
		if len(certs) != 2 || !bytes.Equal(certs[0].Raw, cert.Raw) || !bytes.Equal(certs[1].Raw, ca.Cert.Raw) {
			t.Errorf("openssl found %d certificates, want the leaf then the CA", len(certs))
		}

		out, err = exec.Command(openssl, "pkcs12", "-in", f, "-passin", "pass:"+password, "-nocerts", "-nodes").Output()
		if err != nil {
			t.Fatalf("openssl pkcs12 -nocerts: %v", err)
		}
		got, err := parseKeyPEM(out)
		if err != nil {
			t.Fatalf("openssl output: %v", err)
		}
		if k, ok := got.(*ecdsa.PrivateKey); !ok || !k.Equal(key) {
			t.Error("openssl extracted a different key")
		}

		if err := exec.Command(openssl, "pkcs12", "-in", f, "-passin", "pass:wrong", "-nokeys").Run(); err == nil {
			t.Error("openssl read the file with the wrong password")
		}
	})
}

// FuzzSignCSR feeds any bytes as a CSR to every signer: none panics, and
// whatever is signed carries only what the signer grants (admin: the
// admin:NAME common name, no SANs, client auth only; service: only its
// hosts; intermediate: critical name constraints).
func FuzzSignCSR(f *testing.F) {
	for _, cn := range []string{"ada", "admin:ada", "svc", "int"} {
		_, csr, err := NewKeyAndCSR(cn, []string{"svc.lab", "10.0.0.1"})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(csr)
		_, csr, _ = NewKeyAndCSR(cn, nil)
		f.Add(csr)
	}
	ca, err := NewCA("fuzz", testNow)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, csr []byte) {
		if pemCert, err := ca.SignAdmin(csr, "ada", testNow, time.Hour); err == nil {
			c := issCert(t, pemCert)
			if c.Subject.CommonName != AdminPrefix+"ada" || len(c.DNSNames)+len(c.IPAddresses)+len(c.EmailAddresses)+len(c.URIs) != 0 ||
				!slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || c.IsCA {
				t.Fatalf("admin certificate carries more than it was granted: CN %q, SANs %v %v, EKU %v", c.Subject.CommonName, c.DNSNames, c.IPAddresses, c.ExtKeyUsage)
			}
		}
		hosts := []string{"svc.lab", "10.0.0.1"}
		if pemCert, err := ca.SignService(csr, "svc", hosts, false, testNow, time.Hour); err == nil {
			c := issCert(t, pemCert)
			for _, d := range c.DNSNames {
				if d != "svc.lab" {
					t.Fatalf("service certificate names %q", d)
				}
			}
			for _, ip := range c.IPAddresses {
				if ip.String() != "10.0.0.1" {
					t.Fatalf("service certificate names %s", ip)
				}
			}
			if c.IsCA || len(c.EmailAddresses)+len(c.URIs) != 0 {
				t.Fatal("service certificate is a CA or names more")
			}
		}
		if pemCert, err := ca.SignIntermediate(csr, "int", []string{"lab.example"}, testNow, time.Hour); err == nil {
			c := issCert(t, pemCert)
			if !c.IsCA || !c.PermittedDNSDomainsCritical || !hasNameConstraints(c) || IsCross(c) {
				t.Fatal("intermediate without critical name constraints")
			}
		}
	})
}
