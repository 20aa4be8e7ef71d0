package power

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// HTTPS BMCs (Redfish, Proxmox) are trusted by their certificate, as the
// reference says: before credentials first go to a BMC its certificate is
// read with a handshake that sends nothing; its SHA-256 is pinned; a later
// connection showing another certificate sends no credentials and fails with
// ErrCertificateChanged.

// FetchCertificate reads the certificate an HTTPS BMC shows and returns the
// SHA-256 of its leaf (lowercase hex). It completes a TLS handshake and
// closes the connection: no HTTP request, no credentials.
func FetchCertificate(ctx context.Context, address string) (string, error) {
	hostport, serverName, err := HTTPSHostPort(address)
	if err != nil {
		return "", err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
	}
	d := tls.Dialer{
		NetDialer: &net.Dialer{Timeout: 10 * time.Second},
		Config: &tls.Config{
			// Nothing is trusted yet: this handshake only reads what the BMC
			// shows. Nothing is sent over the connection afterwards.
			InsecureSkipVerify: true, //nolint:gosec // reading the certificate to pin it
			ServerName:         serverName,
			MinVersion:         tls.VersionTLS12,
		},
	}
	conn, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return "", fmt.Errorf("read certificate of %s: %w: %w", hostport, ErrUnreachable, err)
	}
	defer conn.Close()
	state := conn.(*tls.Conn).ConnectionState()
	if len(state.PeerCertificates) == 0 {
		return "", fmt.Errorf("read certificate of %s: %w: no certificate", hostport, ErrBadAnswer)
	}
	return CertSHA256(state.PeerCertificates[0]), nil
}

// CertSHA256 is the fingerprint format used for pins: SHA-256 of the DER
// certificate, lowercase hex without separators.
func CertSHA256(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// NormalizeFingerprint accepts "AB:CD:…", "abcd…" or "sha256:abcd…" and
// returns lowercase hex; an invalid one fails.
func NormalizeFingerprint(s string) (string, error) {
	s = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "sha256:")
	s = strings.NewReplacer(":", "", " ", "", "-", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("tls fingerprint %q: %w; want 64 hex digits (SHA-256)", s, ErrInvalid)
	}
	return s, nil
}

// TLSConfig returns the client TLS configuration for an HTTPS BMC. With
// verify set it checks the certificate against the system's CAs
// (verify_tls=true). Otherwise pin must be set: the handshake accepts only a
// leaf whose SHA-256 equals pin and fails with ErrCertificateChanged before
// any request (and so any credential) is written.
func TLSConfig(pin string, verify bool, serverName string) (*tls.Config, error) {
	if verify {
		return &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
	}
	want, err := NormalizeFingerprint(pin)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		ServerName:         serverName,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // replaced by the pin check below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrCertificateChanged{Old: want, New: "none"}
			}
			if got := CertSHA256(cs.PeerCertificates[0]); got != want {
				return ErrCertificateChanged{Old: want, New: got}
			}
			return nil
		},
	}, nil
}

// HTTPSHostPort turns a BMC address (host, host:port, [v6]:port or an
// https:// URL) into host:port (default 443) and the TLS server name.
func HTTPSHostPort(address string) (hostport, serverName string, err error) {
	u, err := BaseURL(address, "https", "443")
	if err != nil {
		return "", "", err
	}
	return u.Host, u.Hostname(), nil
}

// BaseURL parses a BMC address into scheme://host:port with no path. A bare
// host gets scheme and port defPort.
func BaseURL(address, scheme, defPort string) (*url.URL, error) {
	a := strings.TrimSpace(address)
	if a == "" {
		return nil, fmt.Errorf("bmc address: %w: empty", ErrInvalid)
	}
	if !strings.Contains(a, "://") {
		a = scheme + "://" + a
	}
	u, err := url.Parse(a)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("bmc address %q: %w: not a host, host:port or URL", address, ErrInvalid)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("bmc address %q: %w: scheme must be https (or http)", address, ErrInvalid)
	}
	if u.Port() == "" {
		p := defPort
		if u.Scheme == "http" && scheme == "https" {
			p = "80"
		}
		u.Host = net.JoinHostPort(u.Hostname(), p)
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host}, nil
}
