package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/rollcall/rollcall/appliance/pki"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/rollcall/rollcall/appliance/connlimit"
	"github.com/rollcall/rollcall/appliance/httpapi"
	"github.com/rollcall/rollcall/dhcp"
	"github.com/rollcall/rollcall/store"
)

// apiConfig is what the API is built from: the node's store, cluster and
// services, and rollcall.json's settings for it.
func (n *Node) apiConfig() httpapi.Config {
	hints := make(map[string]httpapi.BMCHint, len(n.conf.BMCHints))
	for mac, h := range n.conf.BMCHints {
		hints[mac] = httpapi.BMCHint{Driver: h.Driver, Address: h.Address, User: h.User, Password: h.Password}
	}
	return httpapi.Config{
		Name: n.opts.Name, Log: n.log, DB: n.db, Cluster: n.cluster, Key: n.key, Trust: n.trust.Load,
		OpenCA:  func() (*pki.CA, error) { ca, _, err := n.openSecrets(); return ca, err },
		Metrics: n.reg, Power: n.power, Jobs: n.jobs, Boot: n.boot, Blobs: n.blobs, OS: n.os,
		Export: n.export.Load, Parts: n.sup.status, Background: n.background(), RedfishDetect: n.opts.RedfishDetect,
		AdminHTTP: n.conf.AdminHTTP, AdminToken: n.conf.AdminToken, AgentToken: n.conf.AgentToken, BMCHints: hints,
		StatelessRefresh: time.Duration(n.conf.StatelessRefreshSeconds) * time.Second,
		DataDir:          n.opts.DataDir,
		TagFacts:         n.facts,
		DHCPProbe:        probeDHCP,
		Served:           n.servedNetworks,
	}
}

// servedNetworks are the networks this node's DHCP serves (the list the
// DHCP service starts from) and where each points booting machines: TFTP
// on port 69 of the node's address there, the HTTP boot server on the
// API's port, the loaders PXE firmware asks for (x86 BIOS and UEFI;
// pxelinux's on a VLAN that boots it).
func (n *Node) servedNetworks() []httpapi.ServedNetwork {
	nets, _ := n.dhcpNetworks(net.Interfaces)
	_, port, _ := net.SplitHostPort(n.HTTPAddr())
	bc := dhcp.BootConfig{}.WithDefaults()
	var out []httpapi.ServedNetwork
	for _, nw := range nets {
		sn := httpapi.ServedNetwork{VLAN: "VLAN " + nw.VLAN, Iface: nw.Iface, Mode: nw.Mode, Files: []string{bc.BIOS, bc.EFIx64}}
		if nw.BootLoader == store.BootLoaderPXELinux {
			sn.Files[0] = bc.LegacyBIOS
		}
		addr := nw.Addr
		if !addr.IsValid() {
			addr = interfaceAddrIn(nw.Iface, nw.Subnet)
		}
		if addr.IsValid() {
			sn.TFTP, sn.HTTP = netip.AddrPortFrom(addr, 69), "http://"+net.JoinHostPort(addr.String(), port)
		}
		out = append(out, sn)
	}
	return out
}

// probeDHCP is the doctor's probe for DHCP servers on an interface.
func probeDHCP(ctx context.Context, iface string) ([]httpapi.ProbeOffer, error) {
	offers, err := dhcp.Probe(ctx, iface, dhcpProbeWait)
	out := make([]httpapi.ProbeOffer, len(offers))
	for i, o := range offers {
		out[i] = httpapi.ProbeOffer{Server: o.Server, Offer: o.Offer, PXE: o.PXE}
	}
	return out, err
}

// dhcpProbeWait is how long the doctor listens for answers: dnsmasq, for
// one, pings an address for 3 s before it offers it.
const dhcpProbeWait = 4 * time.Second

// serveHTTP builds the API and serves it on the HTTP listener.
func (n *Node) serveHTTP() error {
	ln, err := net.Listen("tcp", n.opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", n.opts.HTTPAddr, err)
	}
	n.httpLn = ln
	api, err := httpapi.New(n.apiConfig())
	if err != nil {
		return err
	}
	n.apiServer, n.api = api, api.Handler()
	n.http = &http.Server{Handler: n.api, ConnContext: limitSendBuffer}
	guarded, err := n.guard("api", n.http, ln)
	if err != nil {
		return err
	}
	n.sup.run("list-cache", func(ctx context.Context, _ *slog.Logger) error { return api.Warm(ctx) })
	n.sup.run("stateless-seen", func(ctx context.Context, _ *slog.Logger) error { return api.RunSeen(ctx) })
	n.sup.run("api", servePart(n.http, guarded, func(l net.Listener) error { return n.http.Serve(l) }))
	return nil
}

// servePart runs an HTTP server as a part: its end before the node stops
// is a failure.
func servePart(srv *http.Server, ln net.Listener, serve func(net.Listener) error) func(context.Context, *slog.Logger) error {
	return func(ctx context.Context, _ *slog.Logger) error {
		err := serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			// Only Close shuts a server down, and the node's context ends
			// with it: not a failure.
			<-ctx.Done()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return public("stopped listening on "+ln.Addr().String(), err)
	}
}

// guard puts one of the node's HTTP servers behind the limits every
// listener has (connlimit): header, idle, body-rate and write timeouts, and
// caps on connections per client and in total that close the longest-idle
// ones first, so no client, authenticated or not, can exhaust the node's
// descriptors or hold its handlers. srv.Handler must be set.
func (n *Node) guard(name string, srv *http.Server, ln net.Listener) (net.Listener, error) {
	if err := connlimit.ApplyTimeouts(srv, connlimit.Timeouts{}); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	l, err := connlimit.NewListener(ln, srv, connlimit.Limits{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n.reg.MustRegister(l.Collector(name))
	return l, nil
}
