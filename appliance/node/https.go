package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/rollcall/rollcall/appliance/pki"
)

// The HTTPS API: the same router as plain HTTP, with a certificate from the
// cluster CA for every name and address this node has. It is reissued when
// those change or a month before it expires.
const (
	httpsCertTTL    = 365 * 24 * time.Hour
	httpsRenewAhead = 30 * 24 * time.Hour
	httpsCheckEvery = time.Hour
	fileHTTPSCert   = "https.pem"
	fileHTTPSKey    = "https-key.pem"
)

type httpsCert struct {
	cert  *tls.Certificate
	leaf  *x509.Certificate
	hosts []string
}

// serveHTTPS starts the HTTPS listener; the certificate is issued in the
// background as soon as this node has the cluster identity (a joining node
// gets it with its first replication).
func (n *Node) serveHTTPS(ctx context.Context) error {
	ln, err := net.Listen("tcp", n.opts.HTTPSAddr)
	if err != nil {
		return fmt.Errorf("https: listen on %s: %w", n.opts.HTTPSAddr, err)
	}
	n.httpsLn = ln
	n.https = &http.Server{
		Handler: n.api,
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			// An administrator's client certificate, when the client has
			// one, is asked for but not verified here: the API checks it
			// at every request (revocation, records) and says why it
			// refuses one, where a failed handshake would say nothing.
			ClientAuth: tls.RequestClientCert,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				c := n.httpsCert.Load()
				if c == nil {
					return nil, errors.New("https certificate not issued yet")
				}
				return c.cert, nil
			},
		},
	}
	guarded, err := n.guard("https", n.https, ln)
	if err != nil {
		return err
	}
	n.sup.run("https", servePart(n.https, guarded, func(l net.Listener) error { return n.https.ServeTLS(l, "", "") }))
	n.sup.run("https-cert", func(ctx context.Context, _ *slog.Logger) error { n.keepHTTPSCert(ctx); return ctx.Err() })
	return nil
}

// HTTPSAddr is the address the HTTPS API listens on, or "".
func (n *Node) HTTPSAddr() string {
	if n.httpsLn == nil {
		return ""
	}
	return n.httpsLn.Addr().String()
}

func (n *Node) keepHTTPSCert(ctx context.Context) {
	wait := 200 * time.Millisecond
	for {
		if err := n.renewHTTPSCert(time.Now()); err != nil {
			n.log.Warn("https certificate not issued yet", "err", err)
		} else {
			wait = httpsCheckEvery
		}
		select {
		case <-ctx.Done():
			return
		case <-n.closing:
			return
		case <-time.After(wait):
		}
	}
}

// httpsHosts are the names and addresses the certificate must cover: the
// node name, tls_names, and the listener's address (every interface address
// when it listens on all of them).
func (n *Node) httpsHosts() []string {
	hosts := append([]string{n.opts.Name, "localhost"}, n.conf.TLSNames...)
	host, _, _ := net.SplitHostPort(n.HTTPSAddr())
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					hosts = append(hosts, ipn.IP.String())
				}
			}
		}
	} else {
		hosts = append(hosts, ip.String())
	}
	hosts = dedupe(hosts)
	sort.Strings(hosts)
	return hosts
}

// renewHTTPSCert issues a certificate when there is none, when the hosts
// changed, when it expires within a month, or when the cluster root was
// rotated.
func (n *Node) renewHTTPSCert(now time.Time) error {
	hosts := n.httpsHosts()
	cur := n.httpsCert.Load()
	trust := n.trust.Load()
	if cur != nil && slices.Equal(cur.hosts, hosts) && now.Add(httpsRenewAhead).Before(cur.leaf.NotAfter) &&
		cur.leaf.CheckSignatureFrom(trust.Current) == nil { // a rotated root re-issues it
		return nil
	}
	ca, _, err := n.openSecrets()
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.IssueNode(n.opts.Name, hosts, now, httpsCertTTL)
	if err != nil {
		return err
	}
	// After the leaf: the cross certificates and the roots, so a client
	// that still pins a previous root verifies the new leaf (pki.Trust).
	pair, err := tls.X509KeyPair(slices.Concat(certPEM, trust.CrossPEM(), trust.BundlePEM()), keyPEM)
	if err != nil {
		return err
	}
	leaf, err := pki.ParseCertPEM(certPEM)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(n.path(dirTLS, fileHTTPSKey), keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(n.path(dirTLS, fileHTTPSCert), certPEM, 0o644); err != nil {
		return err
	}
	n.httpsCert.Store(&httpsCert{cert: &pair, leaf: leaf, hosts: hosts})
	n.log.Info("https certificate issued", "hosts", hosts, "not_after", leaf.NotAfter.Format(time.RFC3339))
	return nil
}
