package httpapi

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/sys/unix"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// rollcall doctor: the checks an operator makes on a node, run by the node
// it asks (GET /api/v1/doctor), each saying what to do. Raft (a leader,
// this node's lag, a diverged store), the members (reachable, their
// clocks), the node's services, its data directory's free space, the
// certificates in its tls directory, the commissioning image on every
// node, the interfaces the network model has this node serve DHCP on, and
// on each, whether another DHCP server answers (foreign-dhcp) and whether
// TFTP and HTTP serve the loaders where DHCP points (boot files).

// Bounds of the checks.
const (
	doctorTimeout  = 5 * time.Second
	doctorMaxLag   = 1000                // entries behind the leader
	doctorMaxSkew  = 2 * time.Second     // clock difference to a member
	doctorCertWarn = 30 * 24 * time.Hour // a certificate ending sooner warns
	doctorDiskFail = 1 << 30             // bytes free on the data directory
	doctorDiskWarn = 5                   // percent free
)

func (s *Server) doctorRoutes() []Route {
	return []Route{
		{"GET", "/api/v1/doctor", AuthAdmin, "this node's checks (Raft, members and their clocks, services, disk, certificates, the commissioning image, DHCP interfaces, a foreign DHCP server on each served VLAN, the loaders over TFTP and HTTP where DHCP points), each ok, warn or fail with what to do", nil, s.getDoctor},
	}
}

type doctor struct{ checks []wire.DoctorCheck }

func (d *doctor) add(name, status, fix, format string, a ...any) {
	d.checks = append(d.checks, wire.DoctorCheck{Name: name, Status: status, Message: fmt.Sprintf(format, a...), Fix: fix})
}

func (s *Server) getDoctor(c *gin.Context) error {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*doctorTimeout)
	defer cancel()
	now := time.Now()
	d := &doctor{}
	s.doctorRaft(ctx, d)
	members := s.doctorMembers(ctx, d, now)
	s.doctorParts(d)
	s.doctorDisk(d)
	s.doctorCerts(d, now)
	s.doctorImage(d, members)
	s.doctorInterfaces(d)
	if s.cfg.Served != nil {
		served := s.cfg.Served()
		s.doctorForeignDHCP(ctx, d, served)
		s.doctorBoot(ctx, d, served)
	}
	rep := wire.DoctorReport{Node: s.cfg.Name, Time: now.UTC(), OK: true, Checks: d.checks}
	for _, ch := range d.checks {
		if ch.Status == wire.DoctorFail {
			rep.OK = false
		}
	}
	c.JSON(http.StatusOK, rep)
	return nil
}

func (s *Server) doctorRaft(ctx context.Context, d *doctor) {
	st := s.cfg.Cluster.LocalStatus()
	switch {
	case st.Diverged != "":
		d.add("raft", wire.DoctorFail, "rollcall cluster repair "+s.cfg.Name+" (rebuilds this node's store from the leader's)", "this node's store differs from the cluster's: %s", st.Diverged)
		return
	case st.Leader == "":
		d.add("raft", wire.DoctorFail, "check that a majority of the members run and reach each other (rollcall cluster status)", "no leader: writes wait")
		return
	}
	lag, err := s.cfg.Cluster.Lag(ctx, doctorTimeout)
	switch {
	case err != nil:
		d.add("raft", wire.DoctorWarn, "", "leader %s; cannot ask it how far this node is behind: %v", st.Leader, err)
	case lag > doctorMaxLag:
		d.add("raft", wire.DoctorFail, "look for a slow disk or network on this node; it catches up by itself once they keep up", "leader %s; this node is %d entries behind it", st.Leader, lag)
	default:
		d.add("raft", wire.DoctorOK, "", "leader %s, term %d; this node %s, %d entries behind", st.Leader, st.Term, st.State, lag)
	}
}

// doctorMembers checks every member answers and its clock agrees with
// this node's; it returns the members' names.
func (s *Server) doctorMembers(ctx context.Context, d *doctor, now time.Time) []string {
	ms, err := s.cfg.Cluster.Members(ctx, doctorTimeout)
	if err != nil {
		d.add("members", wire.DoctorFail, "rollcall cluster status", "cannot list the members: %v", err)
		return nil
	}
	var names, down, skewed []string
	for _, m := range ms {
		names = append(names, m.ID)
		if !m.Reachable || m.Status == nil {
			down = append(down, m.ID)
			continue
		}
		if t := m.Status.Time; !t.IsZero() && m.ID != s.cfg.Name {
			if skew := t.Sub(now); skew > doctorMaxSkew+doctorTimeout || -skew > doctorMaxSkew+doctorTimeout {
				skewed = append(skewed, fmt.Sprintf("%s by %s", m.ID, skew.Round(time.Second)))
			}
		}
	}
	switch {
	case len(down) > 0:
		d.add("members", wire.DoctorFail, "start them, or take a dead one out: rollcall cluster remove NAME", "%d of %d members do not answer: %s", len(down), len(ms), strings.Join(down, ", "))
	default:
		d.add("members", wire.DoctorOK, "", "%d members answer: %s", len(ms), strings.Join(names, ", "))
	}
	if len(skewed) > 0 {
		d.add("clock", wire.DoctorFail, "run NTP on every node (boot tokens and certificates depend on the time)", "clocks differ from this node's: %s", strings.Join(skewed, ", "))
	} else if len(ms) > 1 {
		d.add("clock", wire.DoctorOK, "", "the members' clocks agree with this node's within %s", doctorMaxSkew)
	}
	return names
}

func (s *Server) doctorParts(d *doctor) {
	var failed []string
	n := 0
	for _, p := range s.cfg.Parts() {
		n++
		if p.State == "failed" {
			failed = append(failed, p.Name+": "+p.Error)
		}
	}
	if len(failed) > 0 {
		d.add("services", wire.DoctorFail, "read the node's log for the part; it restarts by itself with backoff", "%d of %d services failed: %s", len(failed), n, strings.Join(failed, "; "))
		return
	}
	d.add("services", wire.DoctorOK, "", "%d services running", n)
}

func (s *Server) doctorDisk(d *doctor) {
	if s.cfg.DataDir == "" {
		return
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.cfg.DataDir, &st); err != nil {
		d.add("disk", wire.DoctorWarn, "", "cannot read the data directory's file system: %v", err)
		return
	}
	free, total := int64(st.Bavail)*int64(st.Bsize), int64(st.Blocks)*int64(st.Bsize)
	pct := 0
	if total > 0 {
		pct = int(free * 100 / total)
	}
	msg := fmt.Sprintf("%.1f GiB free (%d%%) on the data directory's file system", float64(free)/(1<<30), pct)
	switch {
	case free < doctorDiskFail:
		d.add("disk", wire.DoctorFail, "free space under "+s.cfg.DataDir+": old OS versions go with rollcall os rm NAME VERSION", "%s", msg)
	case pct < doctorDiskWarn:
		d.add("disk", wire.DoctorWarn, "free space soon: rollcall os rm NAME VERSION removes old OS versions", "%s", msg)
	default:
		d.add("disk", wire.DoctorOK, "", "%s", msg)
	}
}

// doctorCerts checks the certificates of the node's tls directory.
func (s *Server) doctorCerts(d *doctor, now time.Time) {
	if s.cfg.DataDir == "" {
		return
	}
	files, _ := filepath.Glob(filepath.Join(s.cfg.DataDir, "tls", "*.pem"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		block, _ := pem.Decode(b)
		if block == nil || block.Type != "CERTIFICATE" {
			continue // a key
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			d.add("certificates", wire.DoctorFail, "", "%s does not parse: %v", filepath.Base(f), err)
			continue
		}
		left := cert.NotAfter.Sub(now)
		name := fmt.Sprintf("%s (%s)", filepath.Base(f), cert.Subject.CommonName)
		switch {
		case left <= 0:
			d.add("certificates", wire.DoctorFail, "the node renews its node and HTTPS certificates a month before they end (checked hourly and at start): its log says why this one was not renewed; the CA itself is not renewed yet", "%s ended %s", name, cert.NotAfter.UTC().Format(time.DateOnly))
		case left < doctorCertWarn:
			d.add("certificates", wire.DoctorWarn, "the node renews it inside its last month (hourly check): if this stays, its log says why it was not renewed", "%s ends in %d days (%s)", name, int(left.Hours()/24), cert.NotAfter.UTC().Format(time.DateOnly))
		default:
			d.add("certificates", wire.DoctorOK, "", "%s good until %s", name, cert.NotAfter.UTC().Format(time.DateOnly))
		}
	}
}

// doctorImage checks every member holds the commissioning image (a
// machine PXE-booting through a node without it waits).
func (s *Server) doctorImage(d *doctor, members []string) {
	var im store.Image
	err := s.cfg.DB.View(func(tx *store.Tx) (err error) { im, err = tx.Image("commissioning"); return err })
	if err != nil {
		d.add("commissioning image", wire.DoctorFail, "rollcall image import commissioning -kernel vmlinuz -initrd initrd.img (make image builds them)", "no commissioning image: new machines wait at their boot script")
		return
	}
	var missing []string
	for _, m := range members {
		if !slices.Contains(im.Nodes, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		d.add("commissioning image", wire.DoctorWarn, "they fetch it from the others by themselves; check their logs if this stays", "not yet on %s", strings.Join(missing, ", "))
		return
	}
	d.add("commissioning image", wire.DoctorOK, "", "on every node (%d files)", len(im.Files))
}

// doctorInterfaces checks every VLAN this node serves DHCP on has an
// interface here with an address in the VLAN's subnets.
func (s *Server) doctorInterfaces(d *doctor) {
	var list []store.DHCPServed
	s.cfg.DB.View(func(tx *store.Tx) (err error) { list, err = tx.DHCPServedBy(s.cfg.Name); return err })
	// One check a VLAN, over its subnets, in the order they come.
	type vlan struct {
		name, iface string
		cidrs       []netip.Prefix
	}
	var vlans []*vlan
	by := map[string]*vlan{}
	for _, sv := range list {
		name := fmt.Sprintf("VLAN %s/%d", sv.VLAN.Fabric, sv.VLAN.VID)
		v, ok := by[name]
		if !ok {
			v = &vlan{name: name, iface: sv.Iface}
			by[name] = v
			vlans = append(vlans, v)
		}
		v.cidrs = append(v.cidrs, sv.Subnet.CIDR)
	}
	for _, v := range vlans {
		if problem := interfaceProblem(v.iface, v.cidrs); problem != "" {
			d.add("interfaces", wire.DoctorFail, "give the node an address in the subnet on that interface, or name the interface: rollcall vlan add … -node "+s.cfg.Name+" -iface IF", "%s: %s", v.name, problem)
		} else {
			d.add("interfaces", wire.DoctorOK, "", "%s: DHCP on %s", v.name, dashIf(v.iface))
		}
	}
	if len(vlans) == 0 {
		d.add("interfaces", wire.DoctorOK, "", "this node serves DHCP on no subnet")
	}
}

// ProbeOffer is a DHCP server that answered the doctor's probe.
type ProbeOffer struct {
	Server netip.Addr // its server identifier
	Offer  netip.Addr // the address it offered (unset: a proxy's offer)
	PXE    bool       // it offered PXE boot options
}

// doctorForeignDHCP probes each VLAN this node serves, one interface at a
// time in parallel: on a full-mode VLAN another server handing out
// addresses fails (two servers answer every machine, and the one that
// wins is chance); on a proxy VLAN, nobody handing out addresses does
// (proxy mode answers only for the boot: a machine gets no address).
func (s *Server) doctorForeignDHCP(ctx context.Context, d *doctor, served []ServedNetwork) {
	if s.cfg.DHCPProbe == nil {
		return
	}
	type vlan struct {
		ServedNetwork
		offers []ProbeOffer
		err    error
	}
	var vlans []*vlan
	seen := map[string]bool{}
	for _, sn := range served { // one a subnet: probed once a VLAN
		if !seen[sn.VLAN] {
			seen[sn.VLAN] = true
			vlans = append(vlans, &vlan{ServedNetwork: sn})
		}
	}
	var wg sync.WaitGroup
	for _, v := range vlans {
		wg.Go(func() { v.offers, v.err = s.cfg.DHCPProbe(ctx, v.Iface) })
	}
	wg.Wait()
	for _, v := range vlans {
		var leasing []string
		for _, o := range v.offers {
			if o.Offer.IsValid() {
				leasing = append(leasing, fmt.Sprintf("%s (offered %s)", o.Server, o.Offer))
			}
		}
		switch {
		case v.err != nil:
			d.add("foreign-dhcp", wire.DoctorWarn, "run the node as root (it needs port 68 and the interface) and ask again", "%s on %s: cannot probe: %v", v.VLAN, v.Iface, v.err)
		case v.Mode == store.DHCPProxy && len(leasing) == 0:
			d.add("foreign-dhcp", wire.DoctorFail, "start the site's DHCP server on this VLAN, or let Rollcall hand out addresses: rollcall vlan set … -dhcp full",
				"%s on %s is proxy mode, and no DHCP server hands out addresses there: machines get a boot file but no address", v.VLAN, v.Iface)
		case v.Mode == store.DHCPProxy:
			d.add("foreign-dhcp", wire.DoctorOK, "", "%s on %s: proxy mode beside %s", v.VLAN, v.Iface, strings.Join(leasing, ", "))
		case len(leasing) > 0:
			d.add("foreign-dhcp", wire.DoctorFail, "stop the other server on this VLAN, or make the VLAN proxy mode so Rollcall only adds the boot: rollcall vlan set … -dhcp proxy",
				"%s on %s: another DHCP server hands out addresses beside Rollcall: %s", v.VLAN, v.Iface, strings.Join(leasing, ", "))
		default:
			d.add("foreign-dhcp", wire.DoctorOK, "", "%s on %s: no other DHCP server answers", v.VLAN, v.Iface)
		}
	}
}

func dashIf(s string) string {
	if s == "" {
		return "the interface holding the subnet's address"
	}
	return s
}

// interfaceProblem says what is wrong with serving cidrs on iface ("": the
// interface holding an address in one of them).
func interfaceProblem(iface string, cidrs []netip.Prefix) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return "cannot list interfaces: " + err.Error()
	}
	for _, ifc := range ifs {
		if iface != "" && ifc.Name != iface {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			for _, p := range cidrs {
				if p.Contains(ip.Unmap()) {
					if ifc.Flags&net.FlagUp == 0 {
						return "interface " + ifc.Name + " is down"
					}
					return ""
				}
			}
		}
		if iface != "" {
			return fmt.Sprintf("interface %s has no address in %v", iface, cidrs)
		}
	}
	if iface != "" {
		return "no interface " + iface + " on this node"
	}
	return fmt.Sprintf("no interface of this node has an address in %v", cidrs)
}
