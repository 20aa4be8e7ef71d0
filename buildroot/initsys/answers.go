// Package initsys is PID 1 of the appliance ISO: it mounts the kernel's
// file systems, loads the drivers the hardware asks for (by modalias),
// configures the management network from the unattended answers on the
// kernel command line, starts `rollcall serve` and keeps it running,
// imports the commissioning image the ISO carries on a new cluster's first
// start, and shows the web UI's address and the CA fingerprint on the
// consoles. Without answers it runs `rollcall setup` on the console.
//
// # Unattended answers
//
// One kernel parameter, rollcall.setup=, carries comma-separated KEY=VALUE
// pairs (no spaces; the kernel splits its command line at spaces):
//
//	name=NAME          the node's name, a DNS label (default "rollcall")
//	iface=NAME|MAC     the management interface (default: the first Ethernet NIC by name)
//	addr=ADDR/BITS     a static IPv4 address, or addr=dhcp
//	gw=ADDR            the default gateway (static only)
//	dns=ADDR+ADDR      name servers, '+'-separated, at most 4
//	ntp=HOST+HOST      time servers (recorded in /etc/rollcall/ntp; not applied yet)
//	cluster=new|join   create a cluster (default) or join one
//	join=CODE          the join code from `rollcall cluster join-code` (cluster=join)
//	mode=live          run from RAM; mode=install is phase 2 of issue 21, not built yet
//
// Example, as the ISO's boot test passes it:
//
//	rollcall.setup=name=rc1,addr=10.0.2.15/24,gw=10.0.2.2,dns=10.0.2.3
//
// The same answers can be built into an ISO for a fleet (build-iso
// -append). rollcall.setup=ask, or no rollcall.setup at all, asks on the
// console.
package initsys

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Answers are the unattended setup's answers.
type Answers struct {
	Name      string
	Interface string       // a name or a MAC; empty: the first Ethernet NIC
	Address   netip.Prefix // invalid when DHCP
	DHCP      bool
	Gateway   netip.Addr
	DNS       []netip.Addr
	NTP       []string
	Cluster   string // "new" or "join"
	Join      string
	Mode      string // "live"
}

// Param is the kernel parameter that carries the answers.
const Param = "rollcall.setup"

// Limits on what the command line may carry: the kernel's own line is
// 2048 bytes on x86.
const (
	maxValue = 2048
	maxList  = 4
)

// FromCmdline finds rollcall.setup= in a kernel command line and parses
// it. ok is false when the line has none (or asks for the interactive
// setup with rollcall.setup=ask).
func FromCmdline(cmdline string) (a Answers, ok bool, err error) {
	if len(cmdline) > 4*maxValue {
		return Answers{}, false, fmt.Errorf("kernel command line: %d bytes, more than %d", len(cmdline), 4*maxValue)
	}
	val, found := "", false
	for _, f := range strings.Fields(cmdline) {
		if v, is := strings.CutPrefix(f, Param+"="); is {
			val, found = v, true // the last one wins, as for the kernel's own parameters
		}
	}
	if !found || val == "ask" {
		return Answers{}, false, nil
	}
	a, err = Parse(val)
	return a, err == nil, err
}

// Parse reads the value of rollcall.setup=. Every problem is reported with
// the key it is about; nothing is half-applied because nothing is applied
// here.
func Parse(value string) (Answers, error) {
	if len(value) > maxValue {
		return Answers{}, fmt.Errorf("%s: %d bytes, more than %d", Param, len(value), maxValue)
	}
	a := Answers{Name: "rollcall", Cluster: "new", Mode: "live"}
	seen := map[string]bool{}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", Param, key, fmt.Sprintf(format, args...)))
	}
	for _, kv := range strings.Split(value, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			bad(kv, "want KEY=VALUE")
			continue
		}
		if seen[k] {
			bad(k, "given twice")
			continue
		}
		seen[k] = true
		switch k {
		case "name":
			if err := checkLabel(v); err != nil {
				bad(k, "%v", err)
			}
			a.Name = v
		case "iface":
			if v == "" || len(v) > 32 {
				bad(k, "want an interface name or MAC of 1 to 32 characters")
			}
			a.Interface = v
		case "addr":
			if v == "dhcp" {
				a.DHCP = true
				continue
			}
			p, err := netip.ParsePrefix(v)
			switch {
			case err != nil || !p.Addr().Is4():
				bad(k, "%q is not ADDRESS/BITS (IPv4) or dhcp", v)
			case p.Bits() == 0 || p.Bits() > 30 && p.Bits() != 32:
				bad(k, "%q: a /%d leaves no room for a gateway", v, p.Bits())
			case p.Addr() == p.Masked().Addr() && p.Bits() < 31:
				bad(k, "%q is the network's own address, not a host's", v)
			}
			a.Address = p
		case "gw":
			ip, err := netip.ParseAddr(v)
			if err != nil || !ip.Is4() {
				bad(k, "%q is not an IPv4 address", v)
			}
			a.Gateway = ip
		case "dns":
			for _, s := range strings.Split(v, "+") {
				ip, err := netip.ParseAddr(s)
				if err != nil {
					bad(k, "%q is not an address", s)
					continue
				}
				a.DNS = append(a.DNS, ip)
			}
			if len(a.DNS) > maxList {
				bad(k, "at most %d name servers", maxList)
			}
		case "ntp":
			for _, s := range strings.Split(v, "+") {
				if _, err := netip.ParseAddr(s); err != nil && checkHost(s) != nil {
					bad(k, "%q is neither an address nor a host name", s)
					continue
				}
				a.NTP = append(a.NTP, s)
			}
			if len(a.NTP) > maxList {
				bad(k, "at most %d time servers", maxList)
			}
		case "cluster":
			if v != "new" && v != "join" {
				bad(k, "%q: want new or join", v)
			}
			a.Cluster = v
		case "join":
			if v == "" || len(v) > 512 || strings.ContainsAny(v, "\x00\n") {
				bad(k, "want the join code from rollcall cluster join-code")
			}
			a.Join = v
		case "mode":
			switch v {
			case "live":
			case "install":
				bad(k, "install to disk is phase 2 of the appliance image and not built yet: use mode=live")
			default:
				bad(k, "%q: want live", v)
			}
			a.Mode = v
		default:
			bad(k, "unknown key (name, iface, addr, gw, dns, ntp, cluster, join, mode)")
		}
	}
	if !a.DHCP && !a.Address.IsValid() && !seen["addr"] {
		errs = append(errs, fmt.Errorf("%s: addr: missing (ADDRESS/BITS or dhcp)", Param))
	}
	if a.DHCP && a.Gateway.IsValid() {
		errs = append(errs, fmt.Errorf("%s: gw: DHCP brings its own gateway", Param))
	}
	if a.Gateway.IsValid() && a.Address.IsValid() && !a.Address.Masked().Contains(a.Gateway) {
		errs = append(errs, fmt.Errorf("%s: gw: %s is not on %s", Param, a.Gateway, a.Address.Masked()))
	}
	if a.Cluster == "join" && a.Join == "" {
		errs = append(errs, fmt.Errorf("%s: join: cluster=join needs join=CODE", Param))
	}
	if a.Cluster != "join" && a.Join != "" {
		errs = append(errs, fmt.Errorf("%s: join: a join code needs cluster=join", Param))
	}
	if err := errors.Join(errs...); err != nil {
		return Answers{}, err
	}
	return a, nil
}

// checkLabel holds a node name to a DNS label (RFC 1123): the node itself
// applies the store's rule again when it starts.
func checkLabel(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%q: want 1 to 63 characters", s)
	}
	for i, c := range []byte(s) {
		ok := 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' && i > 0 && i < len(s)-1
		if !ok {
			return fmt.Errorf("%q: lowercase letters, digits and inner '-' only", s)
		}
	}
	return nil
}

func checkHost(s string) error {
	if len(s) > 253 {
		return errors.New("too long")
	}
	for _, l := range strings.Split(s, ".") {
		if err := checkLabel(strings.ToLower(l)); err != nil {
			return err
		}
	}
	return nil
}
