package layout

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Where a deployment puts the two files, beside the cloud-init seed and in
// the image.
const (
	// NetworkConfigFile is the seed file cloud-init's NoCloud datasource
	// reads the network configuration from.
	NetworkConfigFile = "network-config"
	// UdevRulesPath is where the udev rules go in the image: before
	// 80-net-setup-link.rules, which names an interface only when no rule
	// named it yet, and beside cloud-init's own 70-persistent-net.rules
	// (which its sysconfig and ENI renderers write with the same names).
	UdevRulesPath = "/etc/udev/rules.d/70-rollcall-net.rules"
)

// NetworkConfig renders the plan as cloud-init network-config version 2:
// ethernets matched by MAC and renamed (set-name), bonds, VLANs; addresses
// with their subnet's prefix, the default route as a route to 0.0.0.0/0 or
// ::/0 (gateway4 and gateway6 are deprecated), DNS servers and search
// domain from each subnet. Output is deterministic: interfaces in layout
// order, bond members at their bond, every field in one order.
//
// An InfiniBand port is written without a match: version 2 matches a MAC
// in its six-byte Ethernet form and IPoIB's hardware address has twenty
// bytes, so the udev rule names the port and the entry names that name.
func (p *Plan) NetworkConfig() []byte {
	var y yamlWriter
	y.comment("network-config (cloud-init, version 2) for " + p.Machine + ", " + p.what() + ": written by rollcall")
	y.line(0, "version: 2")
	var eth, bonds, vlans []Resolved
	mtuOf := map[string]int{}
	for _, it := range p.Interfaces {
		switch it.Type {
		case TypePhysical:
			eth = append(eth, it)
		case TypeBond:
			for _, m := range it.Members {
				eth = append(eth, Resolved{Name: m.Name, Type: TypePhysical, MAC: m.MAC})
				mtuOf[m.Name] = it.MTU // members carry their bond's MTU
			}
			bonds = append(bonds, it)
		case TypeVLAN:
			vlans = append(vlans, it)
		}
	}
	if len(eth) > 0 {
		y.line(0, "ethernets:")
		for _, it := range eth {
			y.key(1, it.Name)
			switch {
			case it.MAC != "":
				y.line(2, "match:")
				y.kv(3, "macaddress", it.MAC)
				y.kv(2, "set-name", it.Name)
			case it.GUID != "":
				y.comment2(2, "InfiniBand port GUID "+it.GUID+": named "+it.Name+" by the udev rules")
			}
			if it.MTU == 0 {
				it.MTU = mtuOf[it.Name]
			}
			y.body(2, it)
		}
	}
	if len(bonds) > 0 {
		y.line(0, "bonds:")
		for _, it := range bonds {
			y.key(1, it.Name)
			y.line(2, "interfaces:")
			for _, m := range it.Members {
				y.item(3, m.Name)
			}
			y.line(2, "parameters:")
			y.kv(3, "mode", it.Bond.Mode)
			if it.Bond.LACPRate != "" {
				y.kv(3, "lacp-rate", it.Bond.LACPRate)
			}
			// A string in cloud-init's schema (netplan takes units there).
			y.kv(3, "mii-monitor-interval", strconv.Itoa(it.Bond.MIIMonitor))
			if it.Bond.TransmitHashPolicy != "" {
				y.kv(3, "transmit-hash-policy", it.Bond.TransmitHashPolicy)
			}
			for _, v := range []struct {
				key string
				n   int
			}{{"min-links", it.Bond.MinLinks}, {"up-delay", it.Bond.UpDelay}, {"down-delay", it.Bond.DownDelay}} {
				if v.n != 0 {
					y.line(3, v.key+": "+strconv.Itoa(v.n))
				}
			}
			y.body(2, it)
		}
	}
	if len(vlans) > 0 {
		y.line(0, "vlans:")
		for _, it := range vlans {
			y.key(1, it.Name)
			y.line(2, "id: "+strconv.Itoa(it.VID))
			y.kv(2, "link", it.Parent)
			y.body(2, it)
		}
	}
	return y.bytes()
}

func (p *Plan) what() string {
	if p.Layout == "" {
		return "no layout (the default)"
	}
	return "layout " + p.Layout
}

// body writes what every kind of interface has: MTU, DHCP, addresses,
// routes, nameservers.
func (y *yamlWriter) body(n int, it Resolved) {
	if it.MTU != 0 {
		y.line(n, "mtu: "+strconv.Itoa(it.MTU))
	}
	var addrs, dns, search []string
	var routes [][2]string
	dhcp4, dhcp6 := false, false
	for _, ln := range it.Links {
		switch ln.Mode {
		case ModeDHCP:
			if ln.Subnet.CIDR.IsValid() && ln.Subnet.CIDR.Addr().Is6() {
				dhcp6 = true
			} else {
				dhcp4 = true
			}
			continue
		case ModeAuto, ModeStatic:
		default:
			continue
		}
		s := ln.Subnet
		addrs = append(addrs, netip.PrefixFrom(ln.Address, s.CIDR.Bits()).String())
		if ln.DefaultGateway {
			to := "0.0.0.0/0"
			if s.CIDR.Addr().Is6() {
				to = "::/0"
			}
			routes = append(routes, [2]string{to, s.Gateway.String()})
		}
		for _, d := range s.DNS {
			if !slices.Contains(dns, d.String()) {
				dns = append(dns, d.String())
			}
		}
		if s.Domain != "" && !slices.Contains(search, s.Domain) {
			search = append(search, s.Domain)
		}
	}
	if dhcp4 {
		y.line(n, "dhcp4: true")
	}
	if dhcp6 {
		y.line(n, "dhcp6: true")
	}
	if len(addrs) > 0 {
		y.line(n, "addresses:")
		for _, a := range addrs {
			y.item(n+1, a)
		}
	}
	if len(routes) > 0 {
		y.line(n, "routes:")
		for _, r := range routes {
			y.line(n+1, "- to: "+yamlScalar(r[0]))
			y.line(n+1, "  via: "+yamlScalar(r[1]))
		}
	}
	if len(dns) > 0 || len(search) > 0 {
		y.line(n, "nameservers:")
		if len(dns) > 0 {
			y.line(n+1, "addresses:")
			for _, d := range dns {
				y.item(n+2, d)
			}
		}
		if len(search) > 0 {
			y.line(n+1, "search:")
			for _, d := range search {
				y.item(n+2, d)
			}
		}
	}
}

// UdevRules renders a rule per NIC of the plan that pins its name to its
// MAC, so that an image's own naming (net.ifnames=0 on RHEL-family cloud
// images: eth0, eth1 in probe order) cannot swap them. DRIVERS=="?*"
// limits a rule to the NIC itself: a bond and a VLAN carry their first
// member's MAC and would otherwise be renamed too (cloud-init writes its
// rules the same way). An InfiniBand port is matched by its type (32) and
// by the port GUID that ends its 20-byte hardware address, whose first
// bytes (flags and queue pair) vary.
func (p *Plan) UdevRules() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# NIC names of %s, %s, pinned to their MACs: written by rollcall\n", p.Machine, p.what())
	rule := func(name, mac string) {
		fmt.Fprintf(&b, "SUBSYSTEM==\"net\", ACTION==\"add\", DRIVERS==\"?*\", ATTR{address}==\"%s\", NAME=\"%s\"\n", mac, name)
	}
	for _, it := range p.Interfaces {
		switch {
		case it.Type == TypePhysical && it.MAC != "":
			rule(it.Name, it.MAC)
		case it.Type == TypePhysical && it.GUID != "":
			fmt.Fprintf(&b, "SUBSYSTEM==\"net\", ACTION==\"add\", DRIVERS==\"?*\", ATTR{type}==\"32\", ATTR{address}==\"?*%s\", NAME=\"%s\"\n", it.GUID, it.Name)
		case it.Type == TypeBond:
			for _, m := range it.Members {
				rule(m.Name, m.MAC)
			}
		}
	}
	return []byte(b.String())
}

// yamlWriter writes the small YAML subset network-config needs, by hand:
// the output is then exactly what the goldens say, and every scalar that
// YAML 1.1 (PyYAML, cloud-init's parser) could read as something other
// than a string is quoted.
type yamlWriter struct{ b strings.Builder }

func (y *yamlWriter) line(n int, s string) {
	y.b.WriteString(strings.Repeat("  ", n))
	y.b.WriteString(s)
	y.b.WriteByte('\n')
}

func (y *yamlWriter) comment(s string)         { y.line(0, "# "+s) }
func (y *yamlWriter) comment2(n int, s string) { y.line(n, "# "+s) }
func (y *yamlWriter) key(n int, k string)      { y.line(n, yamlScalar(k)+":") }
func (y *yamlWriter) kv(n int, k, v string)    { y.line(n, k+": "+yamlScalar(v)) }
func (y *yamlWriter) item(n int, v string)     { y.line(n, "- "+yamlScalar(v)) }
func (y *yamlWriter) bytes() []byte            { return []byte(y.b.String()) }

var plainSafe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*$`)

// yaml11Words are the plain scalars YAML 1.1 reads as booleans or null.
var yaml11Words = []string{"y", "n", "yes", "no", "on", "off", "true", "false", "null"}

// yamlScalar writes s plain when no YAML parser can read it as anything
// but that string, and double-quoted otherwise (numbers, MACs, which YAML
// 1.1 may read as base-60 numbers, addresses, yes/no).
func yamlScalar(s string) string {
	if plainSafe.MatchString(s) && !slices.Contains(yaml11Words, strings.ToLower(s)) {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
