package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func mustCA(t *testing.T, name string) *CA {
	t.Helper()
	ca, err := NewCA(name, time.Now())
	if err != nil {
		t.Fatalf("NewCA(%q): %v", name, err)
	}
	return ca
}

type nodeCreds struct {
	certPEM, keyPEM []byte
}

func mustNode(t *testing.T, ca *CA, name string) nodeCreds {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueNode(name, []string{"127.0.0.1", name + ".local"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatalf("IssueNode(%q): %v", name, err)
	}
	return nodeCreds{certPEM, keyPEM}
}

func TestCARoundTrip(t *testing.T) {
	ca, err := NewCA("rollcall test ca", testNow)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatalf("KeyPEM: %v", err)
	}
	if block, _ := pem.Decode(keyPEM); block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("KeyPEM block type: got %v, want PRIVATE KEY", block)
	}
	got, err := ParseCA(ca.CertPEM, keyPEM)
	if err != nil {
		t.Fatalf("ParseCA: %v", err)
	}
	if !bytes.Equal(got.Cert.Raw, ca.Cert.Raw) {
		t.Error("parsed certificate differs from the original")
	}
	if !got.Key.Equal(ca.Key) {
		t.Error("parsed key differs from the original")
	}
	if Fingerprint(got.Cert) != Fingerprint(ca.Cert) {
		t.Error("fingerprint changed across round trip")
	}
	if want := sha256.Sum256(ca.Cert.Raw); Fingerprint(ca.Cert) != want {
		t.Error("Fingerprint is not SHA-256 of the DER")
	}
	if fh := FingerprintHex(ca.Cert); len(fh) != 64 || strings.ToLower(fh) != fh {
		t.Errorf("FingerprintHex = %q, want 64 lowercase hex characters", fh)
	}

	c := got.Cert
	checks := []struct {
		name string
		ok   bool
	}{
		{"is ca", c.IsCA && c.BasicConstraintsValid},
		{"max path len 1", c.MaxPathLen == 1 && !c.MaxPathLenZero},
		{"can sign certificates", c.KeyUsage&x509.KeyUsageCertSign != 0},
		{"common name", c.Subject.CommonName == "rollcall test ca"},
		{"p-256", c.PublicKeyAlgorithm == x509.ECDSA && ca.Key.Curve == elliptic.P256()},
		{"valid now", !testNow.Before(c.NotBefore) && testNow.Before(c.NotAfter)},
		{"ten years", c.NotAfter.Sub(testNow) >= 10*365*24*time.Hour-time.Second},
		{"self-signed", c.CheckSignatureFrom(c) == nil},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("ca certificate: %s: check failed", ch.name)
		}
	}

	d := hex.EncodeToString(ca.Key.D.Bytes())
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", ca, ca, ca, ca), fmt.Sprintf("%v %+v %#v", *ca, *ca, *ca)} {
		if strings.Contains(s, d) || strings.Contains(s, ca.Key.D.String()) {
			t.Errorf("formatted CA contains the private key: %s", s)
		}
	}
}

func TestParseCARejects(t *testing.T) {
	ca := mustCA(t, "ca one")
	other := mustCA(t, "ca two")
	otherKey, err := other.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	node := mustNode(t, ca, "node-1")

	tests := []struct {
		name    string
		certPEM []byte
		keyPEM  []byte
		wantErr string
	}{
		{"mismatched key", ca.CertPEM, otherKey, "key does not match"},
		{"non-ca certificate", node.certPEM, node.keyPEM, "not a ca"},
		{"garbage certificate", []byte("not pem"), otherKey, "no CERTIFICATE"},
		{"missing key", ca.CertPEM, nil, "no PRIVATE KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCA(tt.certPEM, tt.keyPEM)
			if err == nil {
				t.Fatal("ParseCA succeeded, want error")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCA error = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestSignNode(t *testing.T) {
	ca, err := NewCA("cluster ca", testNow)
	if err != nil {
		t.Fatal(err)
	}
	_, csrPEM, err := NewKeyAndCSR("node-1", []string{"10.0.0.1", "fd00::1", "node-1.example.com"})
	if err != nil {
		t.Fatalf("NewKeyAndCSR: %v", err)
	}

	block, _ := pem.Decode(csrPEM)
	badSig := slices.Clone(block.Bytes)
	badSig[len(badSig)-1] ^= 0x01
	badSigPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: badSig})

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "node-1"}}, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: rsaDER})

	tests := []struct {
		name    string
		csr     []byte
		expect  string
		ttl     time.Duration
		wantErr string
	}{
		{"valid", csrPEM, "node-1", time.Hour, ""},
		{"wrong common name", csrPEM, "node-2", time.Hour, `csr common name "node-1" does not match expected node name "node-2"`},
		{"not pem", []byte("hello"), "node-1", time.Hour, "no CERTIFICATE REQUEST"},
		{"certificate instead of csr", ca.CertPEM, "node-1", time.Hour, "no CERTIFICATE REQUEST"},
		{"bad signature", badSigPEM, "node-1", time.Hour, "csr signature"},
		{"rsa key", rsaPEM, "node-1", time.Hour, "unsupported key type"},
		{"zero ttl", csrPEM, "node-1", 0, "not positive"},
		{"empty expected name", csrPEM, "", time.Hour, "expected node name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, err := ca.SignNode(tt.csr, tt.expect, testNow, tt.ttl)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatal("SignNode succeeded, want error")
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SignNode error = %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SignNode: %v", err)
			}
			cert, err := ParseCertPEM(certPEM)
			if err != nil {
				t.Fatalf("ParseCertPEM: %v", err)
			}
			if cert.Subject.CommonName != "node-1" {
				t.Errorf("CN = %q, want node-1", cert.Subject.CommonName)
			}
			if !slices.Equal(cert.DNSNames, []string{"node-1.example.com"}) {
				t.Errorf("DNSNames = %v", cert.DNSNames)
			}
			if len(cert.IPAddresses) != 2 || !cert.IPAddresses[0].Equal(net.ParseIP("10.0.0.1")) || !cert.IPAddresses[1].Equal(net.ParseIP("fd00::1")) {
				t.Errorf("IPAddresses = %v", cert.IPAddresses)
			}
			if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
				t.Errorf("ExtKeyUsage = %v", cert.ExtKeyUsage)
			}
			if cert.KeyUsage != x509.KeyUsageDigitalSignature {
				t.Errorf("KeyUsage = %v, want digitalSignature only", cert.KeyUsage)
			}
			if cert.IsCA {
				t.Error("node certificate is a CA")
			}
			if !cert.NotBefore.Equal(testNow.Add(-5*time.Minute)) || !cert.NotAfter.Equal(testNow.Add(time.Hour)) {
				t.Errorf("validity %v .. %v, want now-5m .. now+1h", cert.NotBefore, cert.NotAfter)
			}
			if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 {
				t.Errorf("serial %v is not a positive 128-bit number", cert.SerialNumber)
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("node certificate does not verify against the CA: %v", err)
			}
		})
	}
}

func TestPeerTLSRejectsBadInput(t *testing.T) {
	ca := mustCA(t, "ca")
	other := mustCA(t, "other")
	node := mustNode(t, ca, "node-1")
	foreign := mustNode(t, other, "node-1")

	tests := []struct {
		name            string
		ca, cert, key   []byte
		wantErrContains string
	}{
		{"ca not pem", []byte("x"), node.certPEM, node.keyPEM, "peer tls: ca"},
		{"key of another node", ca.CertPEM, node.certPEM, foreign.keyPEM, "peer tls: node certificate and key"},
		{"certificate from another ca", ca.CertPEM, foreign.certPEM, foreign.keyPEM, "not signed by the cluster ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PeerTLS(tt.ca, tt.cert, tt.key)
			if err == nil || !strings.Contains(err.Error(), tt.wantErrContains) {
				t.Fatalf("PeerTLS error = %v, want it to contain %q", err, tt.wantErrContains)
			}
		})
	}
}

// handshake runs a TLS handshake over loopback TCP and then has the server
// send one byte, so that a client whose certificate the server rejects sees
// the failure too (in TLS 1.3 the client finishes before the server checks).
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (server tls.ConnectionState, serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()

	type result struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		conn := tls.Server(raw, serverCfg)
		err = conn.Handshake()
		if err == nil {
			_, err = conn.Write([]byte{1})
		}
		done <- result{conn.ConnectionState(), err}
	}()

	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	conn := tls.Client(raw, clientCfg)
	clientErr = conn.Handshake()
	if clientErr == nil {
		_, clientErr = io.ReadFull(conn, make([]byte, 1))
	}
	_ = conn.Close()
	r := <-done
	return r.state, r.err, clientErr
}

func TestHandshakes(t *testing.T) {
	ca := mustCA(t, "cluster")
	other := mustCA(t, "impostor")
	nodeA := mustNode(t, ca, "node-a")
	nodeB := mustNode(t, ca, "node-b")
	foreign := mustNode(t, other, "node-x")
	caFP := Fingerprint(ca.Cert)

	peer := func(ca *CA, n nodeCreds) *tls.Config {
		t.Helper()
		cfg, err := PeerTLS(ca.CertPEM, n.certPEM, n.keyPEM)
		if err != nil {
			t.Fatalf("PeerTLS: %v", err)
		}
		return cfg
	}
	pair := func(n nodeCreds) tls.Certificate {
		t.Helper()
		p, err := tls.X509KeyPair(n.certPEM, n.keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A client that trusts the real cluster but insists on presenting a
	// foreign cert. (With plain Certificates crypto/tls would send nothing,
	// because the cert does not match the server's acceptable CAs.)
	pinnedWithForeignCert := PinnedTLS(caFP)
	foreignPair := pair(foreign)
	pinnedWithForeignCert.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &foreignPair, nil
	}
	// A server that presents the real CA after a leaf the CA never signed,
	// hoping a pinning client only looks for the fingerprint.
	spliced := pair(foreign)
	spliced.Certificate = append(spliced.Certificate, ca.Cert.Raw)
	splicedServer := &tls.Config{Certificates: []tls.Certificate{spliced}, MinVersion: tls.VersionTLS13}

	tests := []struct {
		name         string
		server       *tls.Config
		client       *tls.Config
		wantServerOK bool
		wantClientOK bool
		wantCN       string // "" means PeerVerified must report false
	}{
		{"two nodes under the same ca", peer(ca, nodeA), peer(ca, nodeB), true, true, "node-b"},
		{"client cert from another ca", peer(ca, nodeA), pinnedWithForeignCert, false, false, ""},
		{"server cert from another ca", peer(other, foreign), peer(ca, nodeB), false, false, ""},
		{"joining client without cert, pinned", peer(ca, nodeA), PinnedTLS(caFP), true, true, ""},
		{"pinned with wrong fingerprint", peer(ca, nodeA), PinnedTLS(Fingerprint(other.Cert)), false, false, ""},
		{"pinned ca spliced after foreign leaf", splicedServer, PinnedTLS(caFP), false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, serverErr, clientErr := handshake(t, tt.server, tt.client)
			if (serverErr == nil) != tt.wantServerOK {
				t.Errorf("server error = %v, want ok=%v", serverErr, tt.wantServerOK)
			}
			if (clientErr == nil) != tt.wantClientOK {
				t.Errorf("client error = %v, want ok=%v", clientErr, tt.wantClientOK)
			}
			if serverErr != nil {
				return
			}
			if state.Version != tls.VersionTLS13 {
				t.Errorf("negotiated version %x, want TLS 1.3", state.Version)
			}
			cn, ok := PeerVerified(state)
			if ok != (tt.wantCN != "") || cn != tt.wantCN {
				t.Errorf("PeerVerified = (%q, %v), want (%q, %v)", cn, ok, tt.wantCN, tt.wantCN != "")
			}
		})
	}
}

func TestPeerVerifiedIncompleteHandshake(t *testing.T) {
	ca := mustCA(t, "cluster")
	n := mustNode(t, ca, "node-a")
	cert, err := ParseCertPEM(n.certPEM)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cs   tls.ConnectionState
	}{
		{"zero state", tls.ConnectionState{}},
		{"not complete", tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert, ca.Cert}}}},
		{"complete, unverified", tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{cert}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if cn, ok := PeerVerified(tt.cs); ok || cn != "" {
				t.Errorf("PeerVerified = (%q, %v), want (\"\", false)", cn, ok)
			}
		})
	}
}

const (
	// goldenJoinCode was produced by an independent Python encoder (base64,
	// zlib.crc32) from goldenJoin below; it pins the wire format.
	goldenJoinCode = "rcj1-aeaqeayeaudaocajbifqydiob4ibceqtcqkrmfyydenbwha5dypsbjnfuws2ljnfuws2ljnfuws2ljnfuws2ljnfuws2ljnfuws2ljnfaaaaaadjkw4qadjrgaxdalrqfyytunzzgq3kdm3yl4"
)

func goldenJoin() JoinCode {
	var j JoinCode
	for i := range j.CAFingerprint {
		j.CAFingerprint[i] = byte(i + 1)
	}
	for i := range j.Secret {
		j.Secret[i] = 0xa5
	}
	j.Addr = "10.0.0.1:7946"
	j.Expires = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return j
}

func joinEqual(a, b JoinCode) bool {
	return a.Addr == b.Addr && a.CAFingerprint == b.CAFingerprint && a.Secret == b.Secret && a.Expires.Equal(b.Expires)
}

func TestJoinCodeGolden(t *testing.T) {
	want := goldenJoin()
	if got := want.String(); got != goldenJoinCode {
		t.Errorf("String() = %q, want %q", got, goldenJoinCode)
	}
	got, err := ParseJoinCode(goldenJoinCode)
	if err != nil {
		t.Fatalf("ParseJoinCode: %v", err)
	}
	if !joinEqual(got, want) {
		t.Errorf("ParseJoinCode = %#v, want %#v", got, want)
	}
}

func TestJoinCodeRoundTrip(t *testing.T) {
	var fp [32]byte
	copy(fp[:], bytes.Repeat([]byte{0x42}, 32))
	expires := time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.FixedZone("x", 3600))

	tests := []struct {
		name  string
		addr  string
		munge func(string) string
	}{
		{"ipv4", "10.0.0.1:7946", nil},
		{"ipv6", "[fd00::1]:7946", nil},
		{"dns name", "rollcall-1.lab.example.com:7946", nil},
		{"surrounding whitespace", "10.0.0.1:7946", func(s string) string { return "  \t" + s + "\n" }},
		{"upper case", "10.0.0.1:7946", strings.ToUpper},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := NewJoinCode(tt.addr, fp, expires)
			if err != nil {
				t.Fatalf("NewJoinCode: %v", err)
			}
			if j.Secret == ([32]byte{}) {
				t.Fatal("secret is all zero")
			}
			if !j.Expires.Equal(expires.Truncate(time.Second)) {
				t.Errorf("Expires = %v, want %v", j.Expires, expires.Truncate(time.Second))
			}
			s := j.String()
			if !strings.HasPrefix(s, "rcj1-") || strings.ContainsAny(s, "=ABCDEFGHIJKLMNOPQRSTUVWXYZ \n") {
				t.Errorf("String() = %q: want rcj1- prefix, lowercase, no padding, one word", s)
			}
			if tt.munge != nil {
				s = tt.munge(s)
			}
			got, err := ParseJoinCode(s)
			if err != nil {
				t.Fatalf("ParseJoinCode: %v", err)
			}
			if !joinEqual(got, j) {
				t.Errorf("round trip: got %#v, want %#v", got, j)
			}
			if got.SecretHash() != sha256.Sum256(j.Secret[:]) {
				t.Error("SecretHash is not SHA-256 of the secret")
			}
			if !got.MatchesHash(j.SecretHash()) {
				t.Error("MatchesHash(own hash) = false")
			}
			if got.MatchesHash(sha256.Sum256([]byte("other"))) {
				t.Error("MatchesHash(other hash) = true")
			}
			if gs := fmt.Sprintf("%#v", got); strings.Contains(gs, hex.EncodeToString(j.Secret[:])) {
				t.Errorf("%%#v shows the secret: %s", gs)
			}
		})
	}

	a, _ := NewJoinCode("10.0.0.1:1", fp, expires)
	b, _ := NewJoinCode("10.0.0.1:1", fp, expires)
	if a.Secret == b.Secret {
		t.Error("two join codes share a secret")
	}
}

func TestNewJoinCodeValidates(t *testing.T) {
	fp := [32]byte{1}
	tests := []struct {
		name    string
		addr    string
		fp      [32]byte
		expires time.Time
		wantErr string
	}{
		{"empty address", "", fp, testNow, "address empty"},
		{"no port", "10.0.0.1", fp, testNow, "not host:port"},
		{"empty host", ":7946", fp, testNow, "not host:port"},
		{"too long", strings.Repeat("a", 300) + ":1", fp, testNow, "longer than"},
		{"zero fingerprint", "10.0.0.1:1", [32]byte{}, testNow, "fingerprint is empty"},
		{"zero expiry", "10.0.0.1:1", fp, time.Time{}, "expiry is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewJoinCode(tt.addr, tt.fp, tt.expires)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewJoinCode error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// encodeRawJoin builds a code from arbitrary payload bytes with a valid CRC,
// to reach the checks that come after the checksum.
func encodeRawJoin(payload []byte) string {
	buf := binary.BigEndian.AppendUint32(slices.Clone(payload), crc32.ChecksumIEEE(payload))
	return joinCodePrefix + joinEncoding.EncodeToString(buf)
}

func TestParseJoinCodeErrors(t *testing.T) {
	good := goldenJoin()
	code := good.String()
	secretHex := hex.EncodeToString(good.Secret[:])

	v2 := []byte(strings.Clone(string(mustDecodeJoin(t, code))))
	v2[0] = 2
	longLen := mustDecodeJoin(t, code)
	longLen[joinHeaderLen]++ // declares one more address byte than present

	noAddr := good
	noAddr.Addr = ""
	badAddr := good
	badAddr.Addr = "no-port"

	tests := []struct {
		name    string
		in      string
		want    string // exact message
		wantIs  error
		wantSub string // substring, when the message has variable parts
	}{
		{"empty", "", ErrNotJoinCode.Error(), ErrNotJoinCode, ""},
		{"wrong prefix", "rcx1-" + code[5:], "join code: not a rollcall join code", ErrNotJoinCode, ""},
		{"other word", "hello", "join code: not a rollcall join code", ErrNotJoinCode, ""},
		{"prefix only", "rcj1-", "join code: truncated", ErrJoinCodeTruncated, ""},
		{"cut in half", code[:len(code)/2], "join code: truncated", ErrJoinCodeTruncated, ""},
		{"last character missing", code[:len(code)-1], "join code: truncated", ErrJoinCodeTruncated, ""},
		{"last eight characters missing", code[:len(code)-8], "join code: truncated", ErrJoinCodeTruncated, ""},
		{"one character changed", code[:40] + flipChar(code[40]) + code[41:], "join code: damaged (checksum mismatch)", ErrJoinCodeDamaged, ""},
		{"declared address too long", encodeRawJoin(longLen[:len(longLen)-4]), "", nil, "malformed address length"},
		{"extra characters", code + "aaaaaaaa", "join code: damaged (checksum mismatch)", ErrJoinCodeDamaged, ""},
		{"invalid character", code[:20] + "0" + code[21:], "join code: damaged (invalid character at position 21)", nil, ""},
		{"unsupported version", encodeRawJoin(v2[:len(v2)-4]), "join code: unsupported version 2", nil, ""},
		{"address empty", noAddr.String(), "join code: address empty", nil, ""},
		{"address without port", badAddr.String(), "", nil, "not host:port"},
		{"too long", "rcj1-" + strings.Repeat("a", 1000), "join code: too long", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseJoinCode(tt.in)
			if err == nil {
				t.Fatal("ParseJoinCode succeeded, want error")
			}
			if tt.want != "" && err.Error() != tt.want {
				t.Errorf("error = %q, want %q", err, tt.want)
			}
			if tt.wantSub != "" && !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantSub)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
			if strings.Contains(err.Error(), secretHex) || strings.Contains(err.Error(), code[5:]) {
				t.Errorf("error leaks the secret or the code: %q", err)
			}
		})
	}
}

func mustDecodeJoin(t *testing.T, code string) []byte {
	t.Helper()
	b, err := joinEncoding.DecodeString(strings.TrimPrefix(code, joinCodePrefix))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flipChar(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

// TestJoinCodeDetectsEveryTypo tries every substitution at every position,
// every single deletion, and every adjacent transposition: none may parse.
func TestJoinCodeDetectsEveryTypo(t *testing.T) {
	var fp [32]byte
	fp[0] = 9
	for _, addr := range []string{"10.0.0.1:7946", "[fd00::1]:7946", "node.example.com:7946"} {
		j, err := NewJoinCode(addr, fp, testNow)
		if err != nil {
			t.Fatal(err)
		}
		code := j.String()
		secretHex := hex.EncodeToString(j.Secret[:])
		check := func(kind string, pos int, bad string) {
			t.Helper()
			got, err := ParseJoinCode(bad)
			if err == nil {
				if joinEqual(got, j) {
					t.Errorf("%s at %d: %q was accepted as the original", kind, pos, bad)
				} else {
					t.Errorf("%s at %d: %q was accepted as a different code", kind, pos, bad)
				}
				return
			}
			if strings.Contains(err.Error(), secretHex) {
				t.Errorf("%s at %d: error leaks the secret: %q", kind, pos, err)
			}
		}
		const alphabet = "abcdefghijklmnopqrstuvwxyz2345670189-"
		tried := 0
		for i := 0; i < len(code); i++ {
			for _, c := range []byte(alphabet) {
				if c == code[i] {
					continue
				}
				check("substitution", i, code[:i]+string(c)+code[i+1:])
				tried++
			}
			check("deletion", i, code[:i]+code[i+1:])
			if i+1 < len(code) && code[i] != code[i+1] {
				check("transposition", i, code[:i]+string(code[i+1])+string(code[i])+code[i+2:])
			}
		}
		if tried < len(code)*30 {
			t.Errorf("only %d substitutions tried for a %d-character code", tried, len(code))
		}
	}
}

func FuzzParseJoinCode(f *testing.F) {
	f.Add(goldenJoinCode)
	f.Add("  " + strings.ToUpper(goldenJoinCode) + "\n")
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJoinCode(s)
		if err != nil {
			return
		}
		enc := j.String()
		if norm := strings.ToLower(strings.TrimSpace(s)); enc != norm {
			t.Errorf("accepted %q but it re-encodes as %q", norm, enc)
		}
		j2, err := ParseJoinCode(enc)
		if err != nil {
			t.Fatalf("String() of an accepted code does not parse: %v", err)
		}
		if !joinEqual(j, j2) {
			t.Fatalf("round trip changed the code: %#v -> %#v", j, j2)
		}
	})
}

func mustMasterKey(t *testing.T) MasterKey {
	t.Helper()
	k, err := NewMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	key := mustMasterKey(t)
	other := mustMasterKey(t)
	aad := []byte("machine/m-abc/bmc")
	plain := []byte("hunter2")
	sealed, err := key.Seal(plain, aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	again, err := key.Seal(plain, aad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(sealed[:12], again[:12]) {
		t.Error("two seals reused a nonce")
	}
	if bytes.Contains(sealed, plain) {
		t.Error("sealed value contains the plaintext")
	}
	flip := func(i int) []byte {
		b := slices.Clone(sealed)
		b[i] ^= 0x80
		return b
	}

	const authFailed = "open sealed secret: authentication failed"
	tests := []struct {
		name    string
		key     MasterKey
		sealed  []byte
		aad     []byte
		want    []byte
		wantErr string
	}{
		{"round trip", key, sealed, aad, plain, ""},
		{"tampered nonce", key, flip(0), aad, nil, authFailed},
		{"tampered ciphertext", key, flip(12), aad, nil, authFailed},
		{"tampered tag", key, flip(len(sealed) - 1), aad, nil, authFailed},
		{"wrong aad", key, sealed, []byte("machine/m-xyz/bmc"), nil, authFailed},
		{"missing aad", key, sealed, nil, nil, authFailed},
		{"wrong key", other, sealed, aad, nil, authFailed},
		{"too short", key, sealed[:27], aad, nil, "open sealed secret: too short"},
		{"empty", key, nil, aad, nil, "open sealed secret: too short"},
		{"zero key", MasterKey{}, sealed, aad, nil, "open sealed secret: master key is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.key.Open(tt.sealed, tt.aad)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Open error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("Open = %q, want %q", got, tt.want)
			}
		})
	}

	empty, err := key.Seal(nil, aad)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := key.Open(empty, aad); err != nil || len(got) != 0 {
		t.Errorf("empty plaintext round trip = (%q, %v)", got, err)
	}
	if _, err := (MasterKey{}).Seal(plain, aad); err == nil {
		t.Error("Seal with a zero key succeeded")
	}
}

func TestMasterKeySaveLoad(t *testing.T) {
	key := mustMasterKey(t)
	keyHex := hex.EncodeToString(key[:])
	dir := t.TempDir()

	path := filepath.Join(dir, "master.key")
	if err := key.Save(path); err != nil {
		t.Fatalf("Save: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("saved mode %04o, want 0600", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries after Save, want 1 (temp file left behind?)", len(entries))
	}
	got, err := LoadMasterKey(path)
	if err != nil {
		t.Fatalf("LoadMasterKey: %v", err)
	}
	if got != key {
		t.Error("loaded key differs from saved key")
	}

	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		wantErr string // "" means the load must succeed and equal key
	}{
		{"no newline", keyHex, 0o600, ""},
		{"crlf", keyHex + "\r\n", 0o600, ""},
		{"owner read only", keyHex + "\n", 0o400, ""},
		{"world readable", keyHex + "\n", 0o644, "allowing group/other access"},
		{"group readable", keyHex + "\n", 0o640, "allowing group/other access"},
		{"other writable", keyHex + "\n", 0o602, "allowing group/other access"},
		{"short", keyHex[:62] + "\n", 0o600, "does not hold 64 hex characters"},
		{"long", keyHex + "00\n", 0o600, "does not hold 64 hex characters"},
		{"not hex", "zz" + keyHex[2:], 0o600, "not valid hex"},
		{"zero key", strings.Repeat("0", 64), 0o600, "all-zero key"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, fmt.Sprintf("k%d", i))
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			// Chmod after writing: WriteFile's mode is filtered by umask.
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			got, err := LoadMasterKey(p)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("LoadMasterKey: %v", err)
				}
				if got != key {
					t.Error("loaded key differs")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("LoadMasterKey error = %v, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), keyHex[2:20]) {
				t.Errorf("error contains key material: %q", err)
			}
		})
	}

	if _, err := LoadMasterKey(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadMasterKey of a missing file succeeded")
	}
	if err := (MasterKey{}).Save(filepath.Join(dir, "zero")); err == nil {
		t.Error("Save of a zero key succeeded")
	}
}

func TestMasterKeyNeverPrints(t *testing.T) {
	key := mustMasterKey(t)
	raw := [32]byte(key)
	forbidden := []string{
		hex.EncodeToString(key[:]),
		strings.ToUpper(hex.EncodeToString(key[:])),
		fmt.Sprint(raw),
		fmt.Sprintf("%v", key[:]),
	}
	type holder struct{ Key MasterKey }
	formats := []struct {
		name string
		out  string
	}{
		{"v +v #v", fmt.Sprintf("%v %+v %#v", key, key, key)},
		{"s q", fmt.Sprintf("%s %q", key, key)},
		{"x X", fmt.Sprintf("%x %X", key, key)},
		{"d", fmt.Sprintf("%d", key)},
		{"pointer", fmt.Sprintf("%v %+v %#v %x", &key, &key, &key, &key)},
		{"in struct", fmt.Sprintf("%v %+v %#v", holder{key}, holder{key}, holder{key})},
		{"Sprint", fmt.Sprint(key)},
		{"in error", fmt.Errorf("using %v", key).Error()},
	}
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			if !strings.Contains(f.out, "MasterKey(redacted)") {
				t.Errorf("output %q does not say redacted", f.out)
			}
			for _, bad := range forbidden {
				if strings.Contains(f.out, bad) {
					t.Errorf("output %q contains key material", f.out)
				}
			}
		})
	}
	if key.String() != "MasterKey(redacted)" || key.GoString() != "MasterKey(redacted)" {
		t.Errorf("String/GoString = %q/%q", key.String(), key.GoString())
	}
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 8 {
		tok, err := NewToken()
		if err != nil {
			t.Fatalf("NewToken: %v", err)
		}
		rest, ok := strings.CutPrefix(tok, "rc_")
		if !ok {
			t.Fatalf("token %q lacks rc_ prefix", tok)
		}
		b, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil || len(b) != 32 {
			t.Fatalf("token body decodes to %d bytes, err %v; want 32", len(b), err)
		}
		if seen[tok] {
			t.Fatal("duplicate token")
		}
		seen[tok] = true
	}
}

func TestNewKeyAndCSR(t *testing.T) {
	keyPEM, csrPEM, err := NewKeyAndCSR("node-9", []string{"192.0.2.7", " node-9.lab ", "", "::1"})
	if err != nil {
		t.Fatalf("NewKeyAndCSR: %v", err)
	}
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		t.Fatal("csr is not a CERTIFICATE REQUEST pem block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if csr.Subject.CommonName != "node-9" || !slices.Equal(csr.DNSNames, []string{"node-9.lab"}) || len(csr.IPAddresses) != 2 {
		t.Errorf("csr subject %q dns %v ips %v", csr.Subject.CommonName, csr.DNSNames, csr.IPAddresses)
	}
	signer, err := parseKeyPEM(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := signer.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() || !k.PublicKey.Equal(csr.PublicKey) {
		t.Error("key is not the P-256 key of the csr")
	}
	if _, _, err := NewKeyAndCSR(" ", nil); err == nil {
		t.Error("NewKeyAndCSR with an empty name succeeded")
	}
}

// TestJoinCodeExpiryRange checks that every 8-byte expiry survives a round
// trip, since ParseJoinCode accepts whatever a code carries.
func TestJoinCodeExpiryRange(t *testing.T) {
	for _, sec := range []int64{math.MinInt64, -1, 0, 1, 1 << 40, math.MaxInt64} {
		j := goldenJoin()
		j.Expires = time.Unix(sec, 0).UTC()
		got, err := ParseJoinCode(j.String())
		if err != nil {
			t.Fatalf("expiry %d: ParseJoinCode: %v", sec, err)
		}
		if got.Expires.Unix() != sec || got.String() != j.String() {
			t.Errorf("expiry %d: round trip gave %d", sec, got.Expires.Unix())
		}
	}
}
