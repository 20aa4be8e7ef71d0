package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// This file holds the certificates the cluster CA issues to things other than
// nodes: administrators (client certificates, also packed as .p12 for a
// browser), other services (`rollcall ca issue`) and name-constrained
// intermediate CAs (`rollcall ca intermediate`). Like SignNode, every signer
// builds the certificate from what the caller decided, never from the CSR:
// the CSR only proves possession of a key, and any name it asks for that the
// caller did not grant is refused rather than silently dropped, so an
// operator learns that the request was not what they thought.

// AdminPrefix starts the common name of every administrator certificate.
// ValidCertName does not allow ':', so no service, node or intermediate name
// can collide with an administrator's.
const AdminPrefix = "admin:"

const (
	// maxCSRPEM bounds what is parsed at all; a real P-256 or P-521 CSR is
	// well under 2 KiB.
	maxCSRPEM = 16 << 10

	// maxCertName is the longest name ValidCertName accepts: one DNS label.
	maxCertName = 63

	// maxCommonName is ub-common-name from RFC 5280, appendix A.
	maxCommonName = 64

	// maxHosts bounds the SANs of one service certificate.
	maxHosts = 64

	// maxListed bounds how many offending names an error lists, so an error
	// about a hostile CSR stays one readable line.
	maxListed = 8
)

var oidExtSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// generalNameTypes names the GeneralName choices of RFC 5280, section
// 4.2.1.6, by context tag.
var generalNameTypes = [...]string{
	0: "otherName",
	1: "rfc822Name",
	2: "dNSName",
	3: "x400Address",
	4: "directoryName",
	5: "ediPartyName",
	6: "uniformResourceIdentifier",
	7: "iPAddress",
	8: "registeredID",
}

// ValidCertName reports whether name can name a certificate's subject: 1 to
// 63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or a
// digit. The set is small on purpose: the name ends up in common names, file
// names and log lines, and must not be confused with the AdminPrefix.
func ValidCertName(name string) error {
	if name == "" {
		return errors.New("certificate name is empty")
	}
	if len(name) > maxCertName {
		return fmt.Errorf("certificate name is %d characters, at most %d are allowed", len(name), maxCertName)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		switch {
		case 'a' <= ch && ch <= 'z', '0' <= ch && ch <= '9':
		case ch == '.' || ch == '_' || ch == '-':
			if i == 0 {
				return fmt.Errorf("certificate name %q must start with a letter or a digit", name)
			}
		default:
			return fmt.Errorf("certificate name %q: character %q at position %d is not allowed (use a-z, 0-9, '.', '_', '-')", name, ch, i+1)
		}
	}
	return nil
}

// SerialHex is the certificate's serial number as lower-case hex, the form
// a revocation list and `rollcall ca list` show. It is "" for a certificate
// without a serial.
func SerialHex(c *x509.Certificate) string {
	if c == nil || c.SerialNumber == nil {
		return ""
	}
	return c.SerialNumber.Text(16)
}

// SignAdmin signs an administrator's client certificate for name. The
// certificate says CN=AdminPrefix+name and nothing else: no SANs, client
// authentication only, so it can log in to the API and the web UI but can
// neither serve TLS nor sign anything.
//
// The CSR may leave its common name empty or set it to AdminPrefix+name; any
// other common name and any subject alternative name is refused, since the
// certificate would not carry it.
func (c *CA) SignAdmin(csrPEM []byte, name string, now time.Time, ttl time.Duration) (certPEM []byte, err error) {
	const op = "sign admin certificate"
	if err := ValidCertName(name); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	cn := AdminPrefix + name
	if len(cn) > maxCommonName {
		return nil, fmt.Errorf("%s: administrator name is %d characters, at most %d are allowed so the common name %q+name fits RFC 5280's %d", op, len(name), maxCommonName-len(AdminPrefix), AdminPrefix, maxCommonName)
	}
	notBefore, notAfter, err := c.validity(now, ttl)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	extra, err := csrExtraNames(csr, []string{"", cn}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(extra) > 0 {
		return nil, fmt.Errorf("%s: %w", op, namesRefused(extra))
	}
	return c.sign(op, &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}, csr.PublicKey)
}

// SignService signs a certificate for another service on the network (a BMC
// proxy, a registry, a monitoring endpoint): CN=name, a DNS or IP SAN for
// each of hosts, server authentication and, when client is set, client
// authentication too.
//
// name must pass ValidCertName and must not start with AdminPrefix. Each host
// is an IP address or a DNS name of RFC 1123 labels, optionally starting
// with "*." for a wildcard; at least one and at most 64, no duplicates. The
// CSR may leave out names, but every SAN it carries must be one of hosts, and
// its common name must be empty, name, or one of hosts.
func (c *CA) SignService(csrPEM []byte, name string, hosts []string, client bool, now time.Time, ttl time.Duration) (certPEM []byte, err error) {
	const op = "sign service certificate"
	if strings.HasPrefix(name, AdminPrefix) {
		return nil, fmt.Errorf("%s: name %q starts with %q, which is reserved for administrator certificates", op, name, AdminPrefix)
	}
	if err := ValidCertName(name); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	dnsNames, ips, err := parseHosts(hosts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	notBefore, notAfter, err := c.validity(now, ttl)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	okCN := append([]string{"", name}, dnsNames...)
	for _, ip := range ips {
		okCN = append(okCN, ip.String())
	}
	extra, err := csrExtraNames(csr, okCN, dnsNames, ips)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(extra) > 0 {
		return nil, fmt.Errorf("%s: %w", op, namesRefused(extra))
	}
	eku := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if client {
		eku = append(eku, x509.ExtKeyUsageClientAuth)
	}
	return c.sign(op, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		// ECDSA and Ed25519 keys never encipher, so KeyEncipherment is
		// left out.
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
	}, csr.PublicKey)
}

// SignIntermediate signs an intermediate CA, for example one a lab runs to
// issue its own certificates. It can sign leaves only (path length 0), and
// only for the names in permit: each entry is a DNS domain ("lab.example.com"
// permits that name and every name below it, ".example.com" only the names
// below) or an IP range in CIDR form ("10.0.0.0/8", "fd00::/8").
//
// A name type that permit does not mention is excluded entirely: an
// intermediate permitted only DNS domains may not sign for any IP address,
// and one permitted only ranges may not sign for any DNS name. (A name
// constraint covers only the types it lists, so without this an intermediate
// for "lab.example.com" could certify any IP address.) The constraints are
// marked critical.
//
// Name constraints do not cover common names. Whoever grants rights by
// common name (AdminPrefix, node names) must also require the certificate to
// be signed by the cluster CA itself, not by an intermediate.
//
// The CSR must carry no SANs and a common name that is empty or name. The
// CA must itself be allowed to have an intermediate below it and must not be
// name-constrained itself (nesting constraints is not supported).
func (c *CA) SignIntermediate(csrPEM []byte, name string, permit []string, now time.Time, ttl time.Duration) (certPEM []byte, err error) {
	const op = "sign intermediate ca"
	if err := ValidCertName(name); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	domains, ranges, err := parsePermit(permit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	notBefore, notAfter, err := c.validity(now, ttl)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	// A parsed certificate has MaxPathLenZero set exactly when its
	// pathLenConstraint is present and 0.
	if c.Cert.MaxPathLenZero {
		return nil, fmt.Errorf("%s: ca %q has path length 0 and may not have an intermediate below it", op, c.Cert.Subject.CommonName)
	}
	if hasNameConstraints(c.Cert) {
		return nil, fmt.Errorf("%s: ca %q is itself name-constrained; intermediates below it are not supported", op, c.Cert.Subject.CommonName)
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	extra, err := csrExtraNames(csr, []string{"", name}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(extra) > 0 {
		return nil, fmt.Errorf("%s: %w", op, namesRefused(extra))
	}
	tmpl := &x509.Certificate{
		Subject:                     pkix.Name{CommonName: name},
		NotBefore:                   notBefore,
		NotAfter:                    notAfter,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLen:                  0,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         domains,
		PermittedIPRanges:           ranges,
	}
	if len(domains) == 0 {
		// An empty dNSName constraint matches every name (RFC 5280,
		// section 4.2.1.10: any name built by adding labels on the left).
		tmpl.ExcludedDNSDomains = []string{""}
	}
	if len(ranges) == 0 {
		tmpl.ExcludedIPRanges = []*net.IPNet{
			{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		}
	}
	return c.sign(op, tmpl, csr.PublicKey)
}

// EncodePKCS12 packs a key, its certificate and the CA certificates in caPEM
// into a password-protected PKCS#12 (.p12) file, the form browsers and OS
// key stores import a client certificate in. keyPEM is PKCS#8 ("PRIVATE
// KEY") or SEC 1 ("EC PRIVATE KEY"). It refuses a key that does not belong
// to the certificate, a certificate none of the CA certificates issued, and
// an empty password, since the file holds a private key.
//
// The file is encrypted with PBES2 (PBKDF2-HMAC-SHA-256, AES-256-CBC) and
// authenticated with HMAC-SHA-256, as OpenSSL 3 writes by default; OpenSSL
// 1.1.1 and later, current browsers and Windows Server 2019 and later read
// it.
func EncodePKCS12(certPEM, keyPEM, caPEM []byte, password string) ([]byte, error) {
	const op = "encode pkcs12"
	if password == "" {
		return nil, fmt.Errorf("%s: password is empty; the file holds a private key", op)
	}
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s: key does not match certificate %q", op, cert.Subject.CommonName)
	}
	cas, err := parseCertsPEM(caPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: ca: %w", op, err)
	}
	issued := false
	for _, ca := range cas {
		if cert.CheckSignatureFrom(ca) == nil {
			issued = true
			break
		}
	}
	if !issued {
		return nil, fmt.Errorf("%s: certificate %q was not issued by the ca certificates given", op, cert.Subject.CommonName)
	}
	p12, err := pkcs12.Modern2023.Encode(key, cert, cas, password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return p12, nil
}

// validity checks that c can sign and returns the validity period of a
// certificate issued at now for ttl: back-dated by clockSkew, and clipped to
// the CA's own expiry, since a certificate outliving its issuer would not
// verify anyway.
func (c *CA) validity(now time.Time, ttl time.Duration) (notBefore, notAfter time.Time, err error) {
	if c == nil || c.Cert == nil || c.Key == nil {
		return time.Time{}, time.Time{}, errors.New("ca has no certificate or key")
	}
	if !c.Cert.BasicConstraintsValid || !c.Cert.IsCA {
		return time.Time{}, time.Time{}, fmt.Errorf("ca certificate %q is not a ca", c.Cert.Subject.CommonName)
	}
	if ttl <= 0 {
		return time.Time{}, time.Time{}, fmt.Errorf("ttl %s is not positive", ttl)
	}
	if !now.Before(c.Cert.NotAfter) {
		return time.Time{}, time.Time{}, fmt.Errorf("ca certificate %q expired at %s", c.Cert.Subject.CommonName, c.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	notAfter = now.Add(ttl)
	if notAfter.After(c.Cert.NotAfter) {
		notAfter = c.Cert.NotAfter
	}
	return now.Add(-clockSkew), notAfter, nil
}

// sign gives tmpl a fresh serial, signs it for pub and returns it as PEM.
func (c *CA) sign(op string, tmpl *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, pub, c.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: create certificate: %w", op, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), nil
}

// parseCSR reads a CSR, checks that it is signed by its own key and that
// the key is one checkNodeKey accepts.
func parseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	if len(csrPEM) > maxCSRPEM {
		return nil, fmt.Errorf("csr is %d bytes, at most %d are accepted", len(csrPEM), maxCSRPEM)
	}
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != pemCSR {
		return nil, errors.New("no CERTIFICATE REQUEST pem block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("csr signature: %w", err)
	}
	if err := checkNodeKey(csr.PublicKey); err != nil {
		return nil, err
	}
	return csr, nil
}

// csrExtraNames lists, for an error message, the names csr asks for beyond
// what the caller grants: a common name not in okCN, and every subject
// alternative name that is not a DNS name in okDNS or an IP in okIPs. It
// reads the SAN extensions itself rather than csr.DNSNames and friends,
// because crypto/x509 silently skips the GeneralName types it does not
// model (directoryName, otherName, ...), and those must be refused too.
func csrExtraNames(csr *x509.CertificateRequest, okCN, okDNS []string, okIPs []net.IP) ([]string, error) {
	var extra []string
	cnOK := false
	for _, cn := range okCN {
		if strings.EqualFold(csr.Subject.CommonName, cn) {
			cnOK = true
			break
		}
	}
	if !cnOK {
		extra = append(extra, "common name "+quoteShort(csr.Subject.CommonName))
	}
	for _, ext := range csr.Extensions {
		if !ext.Id.Equal(oidExtSubjectAltName) {
			continue
		}
		var names []asn1.RawValue
		rest, err := asn1.Unmarshal(ext.Value, &names)
		if err != nil || len(rest) > 0 {
			return nil, errors.New("csr: malformed subject alternative name extension")
		}
		for _, n := range names {
			if n.Class != asn1.ClassContextSpecific {
				return nil, errors.New("csr: malformed subject alternative name extension")
			}
			switch n.Tag {
			case 2:
				if !containsFold(okDNS, string(n.Bytes)) {
					extra = append(extra, "dns "+quoteShort(string(n.Bytes)))
				}
			case 7:
				ip := net.IP(n.Bytes)
				if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
					extra = append(extra, fmt.Sprintf("ip of %d bytes", len(ip)))
				} else if !containsIP(okIPs, ip) {
					extra = append(extra, "ip "+ip.String())
				}
			case 1:
				extra = append(extra, "email "+quoteShort(string(n.Bytes)))
			case 6:
				extra = append(extra, "uri "+quoteShort(string(n.Bytes)))
			default:
				t := fmt.Sprintf("[%d]", n.Tag)
				if n.Tag < len(generalNameTypes) {
					t = generalNameTypes[n.Tag]
				}
				extra = append(extra, "a name of type "+t)
			}
		}
	}
	return extra, nil
}

// namesRefused is the error for a CSR that asks for names it may not have.
func namesRefused(names []string) error {
	return fmt.Errorf("the CSR asks for names it may not have: %s", listShort(names))
}

// parseHosts splits a service's hosts into DNS names (lower-cased) and IP
// addresses (IPv4 in 4-byte form), refusing all bad entries at once.
func parseHosts(hosts []string) (dnsNames []string, ips []net.IP, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("no hosts: a service certificate needs at least one DNS name or IP address")
	}
	if len(hosts) > maxHosts {
		return nil, nil, fmt.Errorf("%d hosts, at most %d are allowed", len(hosts), maxHosts)
	}
	seen := make(map[string]bool, len(hosts))
	var bad []string
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if v4 := ip.To4(); v4 != nil {
				ip = v4
			}
			switch {
			case ip.IsUnspecified():
				bad = append(bad, h+" (the unspecified address)")
			case seen[ip.String()]:
				bad = append(bad, h+" (duplicate)")
			default:
				seen[ip.String()] = true
				ips = append(ips, ip)
			}
			continue
		}
		name := strings.ToLower(h)
		if err := checkDNSName(strings.TrimPrefix(name, "*.")); err != nil {
			bad = append(bad, quoteShort(h)+" ("+err.Error()+")")
			continue
		}
		if seen[name] {
			bad = append(bad, quoteShort(h)+" (duplicate)")
			continue
		}
		seen[name] = true
		dnsNames = append(dnsNames, name)
	}
	if len(bad) > 0 {
		return nil, nil, fmt.Errorf("bad hosts (want IP addresses or DNS names): %s", listShort(bad))
	}
	return dnsNames, ips, nil
}

// parsePermit splits an intermediate's permit list into DNS domains
// (lower-cased, with an optional leading '.') and IP ranges.
func parsePermit(permit []string) (domains []string, ranges []*net.IPNet, err error) {
	if len(permit) == 0 {
		return nil, nil, errors.New("no permitted names: an intermediate needs at least one DNS domain or CIDR range")
	}
	seen := make(map[string]bool, len(permit))
	var bad []string
	for _, p := range permit {
		var key string
		switch {
		case strings.Contains(p, "/"):
			ip, ipnet, err := net.ParseCIDR(p)
			if err != nil {
				bad = append(bad, quoteShort(p)+" (not a CIDR range)")
				continue
			}
			if !ip.Equal(ipnet.IP) {
				bad = append(bad, fmt.Sprintf("%s (has host bits set; the range is %s)", quoteShort(p), ipnet))
				continue
			}
			key = ipnet.String()
			if !seen[key] {
				ranges = append(ranges, ipnet)
			}
		case net.ParseIP(p) != nil:
			bad = append(bad, fmt.Sprintf("%s (an address, not a range; add a prefix length such as /32 or /128)", quoteShort(p)))
			continue
		default:
			name := strings.ToLower(p)
			if err := checkDNSName(strings.TrimPrefix(name, ".")); err != nil {
				bad = append(bad, quoteShort(p)+" ("+err.Error()+")")
				continue
			}
			key = name
			if !seen[key] {
				domains = append(domains, name)
			}
		}
		if seen[key] {
			bad = append(bad, quoteShort(p)+" (duplicate)")
		}
		seen[key] = true
	}
	if len(bad) > 0 {
		return nil, nil, fmt.Errorf("bad permitted names (want DNS domains or CIDR ranges): %s", listShort(bad))
	}
	return domains, ranges, nil
}

// checkDNSName checks a host name of RFC 1123 labels (letters, digits and
// inner hyphens, 1 to 63 characters each, 253 in all). A last label of only
// digits is refused: RFC 1123, section 2.1, keeps names from looking like
// dotted-decimal addresses, and such a name is almost always a mistyped IP.
func checkDNSName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > 253 {
		return fmt.Errorf("%d characters, at most 253 are allowed", len(name))
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return errors.New("empty label")
		}
		if len(l) > 63 {
			return fmt.Errorf("label of %d characters, at most 63 are allowed", len(l))
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-') {
				return fmt.Errorf("character %q is not allowed", ch)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", l)
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return errors.New("all-numeric last label, but not an IP address")
	}
	return nil
}

// hasNameConstraints reports whether cert restricts the names below it.
func hasNameConstraints(cert *x509.Certificate) bool {
	return len(cert.PermittedDNSDomains) > 0 || len(cert.ExcludedDNSDomains) > 0 ||
		len(cert.PermittedIPRanges) > 0 || len(cert.ExcludedIPRanges) > 0 ||
		len(cert.PermittedEmailAddresses) > 0 || len(cert.ExcludedEmailAddresses) > 0 ||
		len(cert.PermittedURIDomains) > 0 || len(cert.ExcludedURIDomains) > 0
}

// parseCertsPEM parses every CERTIFICATE block in data and wants at least
// one.
func parseCertsPEM(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != pemCertificate {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no CERTIFICATE pem block")
	}
	return certs, nil
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

func containsIP(list []net.IP, ip net.IP) bool {
	for _, v := range list {
		if v.Equal(ip) {
			return true
		}
	}
	return false
}

// quoteShort quotes s for an error message, cut to a readable length; the
// quoting escapes anything a hostile CSR might use to forge log lines.
func quoteShort(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q...", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}

// listShort joins items, listing at most maxListed of them.
func listShort(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxListed], ", "), len(items)-maxListed)
}
