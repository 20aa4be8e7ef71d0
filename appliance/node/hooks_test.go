package node

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/dhcp"
	"github.com/rollcall/rollcall/store/pgexport"
)

// Hooks for the external tests (package appliance_test, which start nodes
// through appliance/nodetest): the node's insides they check.

func (n *Node) Blobs() *bootfiles.Blobs         { return n.blobs }
func (n *Node) BootFiles() *bootfiles.Server    { return n.boot }
func (n *Node) BootMetrics() *bootfiles.Metrics { return n.bootCounters }
func (n *Node) Registry() *prometheus.Registry  { return n.reg }
func (n *Node) FileConfig() *FileConfig         { return &n.conf }

// RunPart runs fn as one more supervised part of the node.
func (n *Node) RunPart(name string, fn func(context.Context, *slog.Logger) error) {
	n.sup.run(name, fn)
}

// DHCPNetworks is what the node's DHCP would serve on the interfaces given.
func (n *Node) DHCPNetworks(ifaces func() ([]net.Interface, error)) ([]dhcp.Network, []string) {
	return n.dhcpNetworks(ifaces)
}

// SetDHCPAddrCheck makes the DHCP service compare interface addresses
// every d until the test ends.
func SetDHCPAddrCheck(t testing.TB, d time.Duration) {
	old := dhcpAddrCheck
	dhcpAddrCheck = d
	t.Cleanup(func() { dhcpAddrCheck = old })
}

// HTTPSCert is the HTTPS certificate the node serves, nil before it has one.
func (n *Node) HTTPSCert() *x509.Certificate {
	if c := n.httpsCert.Load(); c != nil {
		return c.leaf
	}
	return nil
}

// RenewHTTPSCert renews the HTTPS certificate as the node would at now.
func (n *Node) RenewHTTPSCert(now time.Time) error { return n.renewHTTPSCert(now) }

// PublicError is a part's error whose message health may show.
func PublicError(msg string, cause error) error { return public(msg, cause) }

// SetExport makes r the node's PostgreSQL mirror, as postgres_export does.
func (n *Node) SetExport(r *pgexport.Runner) { n.export.Store(r) }

// NodeCert is the node certificate the node presents to its peers now.
func (n *Node) NodeCert() *x509.Certificate { return n.peerCert.Leaf() }

// RenewNodeCert renews the node certificate as the node would at now.
func (n *Node) RenewNodeCert(now time.Time) error { return n.renewNodeCert(now) }

// FinishCertSwap completes an interrupted renewal's files, as a start does.
func (n *Node) FinishCertSwap() error { return n.finishCertSwap() }
