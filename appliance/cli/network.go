package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// The fabric, vlan, subnet, range and ip commands: one verb each, flags
// before or after the positional arguments, -json on every list and show.

var netUsage = map[string]string{
	"fabric": "rollcall fabric add NAME [-kind ethernet|infiniband] | list | show NAME | rm NAME",
	"vlan":   "rollcall vlan add FABRIC VID [-dhcp|-proxy-dhcp] [-node NAME -iface IF] [-mtu N] [-boot-loader ipxe|pxelinux] | set FABRIC VID [same flags, -no-dhcp] | list | show FABRIC VID | rm FABRIC VID",
	"subnet": "rollcall subnet add CIDR -fabric F -vid V -purpose P [-gateway G] [-dns D,D] [-domain D] [-name N] | list | show CIDR | rm CIDR [-force]",
	"range":  "rollcall range add CIDR dynamic|reserved|static FIRST LAST | list [-subnet CIDR] | rm FIRST",
	"ip":     "rollcall ip list [-subnet CIDR] | reserve ADDR -name N | release ADDR",
}

// network is the verb of one network noun: fabric, vlan, subnet, range or ip.
func network(noun string) func(args []string, s streams) error {
	return func(args []string, s streams) error {
		if len(args) == 0 {
			return errors.New("usage: " + netUsage[noun])
		}
		verb, rest := args[0], args[1:]
		type handler func(rest []string, stdout io.Writer) error
		verbs := map[string]map[string]handler{
			"fabric": {"add": fabricAdd, "list": fabricList.run, "show": fabricShow.run, "rm": fabricRm},
			"vlan":   {"add": vlanAdd, "set": vlanSet, "list": vlanList.run, "show": vlanShow.run, "rm": vlanRm},
			"subnet": {"add": subnetAdd, "list": subnetList.run, "show": subnetShow.run, "rm": subnetRm},
			"range":  {"add": rangeAdd, "list": rangeList.run, "rm": rangeRm},
			"ip":     {"list": ipList.run, "reserve": ipReserve, "release": ipRelease},
		}[noun]
		h, ok := verbs[verb]
		if !ok {
			return fmt.Errorf("unknown %s command %q; usage: %s", noun, verb, netUsage[noun])
		}
		return h(rest, s.stdout)
	}
}

// subnetPath is the API path of the subnet cidr names.
func subnetPath(cidr string) (string, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("%q is not a CIDR such as 10.50.0.0/24", cidr)
	}
	return "/api/v1/subnets/" + url.PathEscape(p.Addr().String()) + "/" + strconv.Itoa(p.Bits()), nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}

func addrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return dash(strings.Join(s, ", "))
}

func addrOrDash(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	return a.String()
}

// The network nouns' list and show verbs.
var (
	fabricList = reader[wire.FabricList]{name: "fabric list", usage: "rollcall fabric list [-json]", path: at("/api/v1/fabrics"),
		table: func(w io.Writer, l wire.FabricList) error {
			tw := newTable(w)
			fmt.Fprintln(tw, "NAME\tKIND\tCREATED")
			for _, f := range l.Fabrics {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Name, f.Kind, stamp(f.Created))
			}
			return tw.Flush()
		}}
	fabricShow = reader[wire.FabricDetail]{name: "fabric show", usage: "rollcall fabric show NAME [-json]", nargs: 1,
		path: func(a []string) (string, error) { return "/api/v1/fabrics/" + url.PathEscape(a[0]), nil },
		table: func(w io.Writer, f wire.FabricDetail) error {
			if err := printRows(w, [][2]string{{"Name", f.Name}, {"Kind", f.Kind}, {"Created", stamp(f.Created)}}); err != nil || len(f.VLANs) == 0 {
				return err
			}
			fmt.Fprintln(w, "\nVLANs:")
			return printVLANs(w, f.VLANs)
		}}
	vlanList = reader[wire.VLANList]{name: "vlan list", usage: "rollcall vlan list [-json]", path: at("/api/v1/vlans"),
		table: func(w io.Writer, l wire.VLANList) error { return printVLANs(w, l.VLANs) }}
	vlanShow = reader[wire.VLANDetail]{name: "vlan show", usage: "rollcall vlan show FABRIC VID [-json]", nargs: 2,
		path: func(a []string) (string, error) { return vlanPath(a[0], a[1]), nil },
		table: func(w io.Writer, v wire.VLANDetail) error {
			err := printRows(w, [][2]string{
				{"Fabric", v.Fabric}, {"VID", strconv.Itoa(v.VID)}, {"MTU", mtuOf(v.MTU)}, {"DHCP", v.DHCP},
				{"Boot loader", loaderOf(v.BootLoader)},
				{"Served by", servers(v.Servers)}, {"Created", stamp(v.Created)},
			})
			if err != nil || len(v.Subnets) == 0 {
				return err
			}
			fmt.Fprintln(w, "\nSubnets:")
			views := make([]wire.SubnetView, len(v.Subnets))
			for i, s := range v.Subnets {
				views[i] = wire.SubnetView{Subnet: s, Used: -1}
			}
			return printSubnets(w, views)
		}}
	subnetList = reader[wire.SubnetList]{name: "subnet list", usage: "rollcall subnet list [-json]", path: at("/api/v1/subnets"),
		table: func(w io.Writer, l wire.SubnetList) error { return printSubnets(w, l.Subnets) }}
	subnetShow = reader[wire.SubnetDetail]{name: "subnet show", usage: "rollcall subnet show CIDR [-json]", nargs: 1,
		path: func(a []string) (string, error) { return subnetPath(a[0]) },
		table: func(w io.Writer, s wire.SubnetDetail) error {
			err := printRows(w, [][2]string{
				{"CIDR", s.CIDR.String()}, {"Name", dash(s.Name)}, {"Fabric", s.Fabric}, {"VID", strconv.Itoa(s.VID)},
				{"Purpose", s.Purpose}, {"Gateway", addrOrDash(s.Gateway)}, {"DNS", addrs(s.DNS)}, {"Domain", dash(s.Domain)},
				{"Used", strconv.Itoa(s.Used)}, {"Created", stamp(s.Created)},
			})
			if err != nil || len(s.Ranges) == 0 {
				return err
			}
			fmt.Fprintln(w, "\nRanges:")
			return printRanges(w, s.Ranges)
		}}
	rangeList = reader[wire.RangeList]{name: "range list", usage: "rollcall range list [-subnet CIDR] [-json]", path: at("/api/v1/ranges"),
		filter: "subnet", filterHelp: "only this subnet's ranges",
		table: func(w io.Writer, l wire.RangeList) error { return printRanges(w, l.Ranges) }}
	ipList = reader[wire.AddressList]{name: "ip list", usage: "rollcall ip list [-subnet CIDR] [-json]", path: at("/api/v1/ips"),
		filter: "subnet", filterHelp: "only addresses in this subnet",
		table: func(w io.Writer, l wire.AddressList) error {
			tw := newTable(w)
			fmt.Fprintln(tw, "IP\tSUBNET\tHOW\tMACHINE\tINTERFACE\tNAME\tCREATED")
			for _, a := range l.Addresses {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.IP, a.Subnet, a.How, dash(a.Machine), dash(a.Interface), dash(a.Name), stamp(a.Created))
			}
			return tw.Flush()
		}}
)

// ---- fabric

func fabricAdd(args []string, stdout io.Writer) error {
	fs := newFlags("fabric add", "rollcall fabric add NAME [-kind ethernet|infiniband]")
	kind := fs.String("kind", store.FabricEthernet, "ethernet or infiniband")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	var f wire.FabricDetail
	if err := c.do(http.MethodPost, "/api/v1/fabrics", wire.FabricRequest{Name: fs.Arg(0), Kind: *kind}, &f); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "fabric %s (%s) added\n", f.Name, f.Kind)
	return nil
}

func fabricRm(args []string, stdout io.Writer) error {
	fs := newFlags("fabric rm", "rollcall fabric rm NAME")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	if err := c.do(http.MethodDelete, "/api/v1/fabrics/"+url.PathEscape(fs.Arg(0)), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "fabric %s removed\n", fs.Arg(0))
	return nil
}

// ---- vlan

func vlanAdd(args []string, stdout io.Writer) error {
	fs := newFlags("vlan add", "rollcall vlan add FABRIC VID [-dhcp|-proxy-dhcp] [-node NAME [-iface IF]]… [-mtu N] [-boot-loader ipxe|pxelinux]")
	vf := vlanFlagSet(fs)
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	req := wire.VLANRequest{Fabric: fs.Arg(0), MTU: *vf.mtu, DHCP: store.DHCPOff, BootLoader: *vf.loader}
	vid, err := strconv.Atoi(fs.Arg(1))
	if err != nil {
		return fmt.Errorf("VID %q is not a number in 0–4094", fs.Arg(1))
	}
	req.VID = &vid
	if req.DHCP, req.Servers, err = dhcpFlags(*vf.dhcp, *vf.proxy, *vf.nodes, *vf.ifaces); err != nil {
		return err
	}
	var v wire.VLANDetail
	if err := c.do(http.MethodPost, "/api/v1/vlans", req, &v); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "VLAN %d added to fabric %s (DHCP %s, boot loader %s)\n", v.VID, v.Fabric, v.DHCP, loaderOf(v.BootLoader))
	return nil
}

// vlanFlags are the flags vlan add and vlan set share.
type vlanFlags struct {
	dhcp, proxy   *bool
	nodes, ifaces *listFlag
	mtu           *int
	loader        *string
}

func vlanFlagSet(fs verbFlags) vlanFlags {
	var nodes, ifaces listFlag
	vf := vlanFlags{
		dhcp:   fs.Bool("dhcp", false, "serve DHCP and PXE on this VLAN"),
		proxy:  fs.Bool("proxy-dhcp", false, "serve proxy DHCP (PXE only) beside another DHCP server"),
		nodes:  &nodes,
		ifaces: &ifaces,
		mtu:    fs.Int("mtu", 0, "MTU (0: the default)"),
		loader: fs.String("boot-loader", "", "what BIOS PXE firmware is handed: ipxe (default) or pxelinux, for NICs that cannot run iPXE (UEFI keeps iPXE)"),
	}
	fs.Var(&nodes, "node", "appliance node that serves DHCP here (repeatable; -iface names its interface)")
	fs.Var(&nodes, "rack", "the reference's name for -node")
	fs.Var(&ifaces, "iface", "the node's interface on this VLAN (default: the one with an address in the VLAN's subnet)")
	return vf
}

// vlanSet changes what its flags name and keeps the rest of the VLAN:
// -node replaces the serving nodes, -no-dhcp stops serving DHCP.
func vlanSet(args []string, stdout io.Writer) error {
	fs := newFlags("vlan set", "rollcall vlan set FABRIC VID [-dhcp|-proxy-dhcp|-no-dhcp] [-node NAME [-iface IF]]… [-mtu N] [-boot-loader ipxe|pxelinux]")
	vf := vlanFlagSet(fs)
	off := fs.Bool("no-dhcp", false, "stop serving DHCP on this VLAN")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if *off && (*vf.dhcp || *vf.proxy) {
		return errors.New("-no-dhcp excludes -dhcp and -proxy-dhcp")
	}
	mode, servers, err := dhcpFlags(*vf.dhcp, *vf.proxy, *vf.nodes, *vf.ifaces)
	if err != nil {
		return err
	}
	var v wire.VLANDetail
	if err := c.do(http.MethodGet, vlanPath(fs.Arg(0), fs.Arg(1)), nil, &v); err != nil {
		return err
	}
	req := wire.VLANUpdate{DHCP: v.DHCP, Servers: v.Servers, MTU: v.MTU, BootLoader: v.BootLoader}
	switch {
	case *vf.dhcp || *vf.proxy:
		req.DHCP = mode
	case *off:
		req.DHCP = store.DHCPOff
	}
	if len(*vf.nodes) > 0 {
		req.Servers = servers
	}
	if given["mtu"] {
		req.MTU = *vf.mtu
	}
	if given["boot-loader"] {
		req.BootLoader = *vf.loader
	}
	if err := c.do(http.MethodPut, vlanPath(fs.Arg(0), fs.Arg(1)), req, &v); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "VLAN %d on fabric %s: DHCP %s, boot loader %s\n", v.VID, v.Fabric, v.DHCP, loaderOf(v.BootLoader))
	return nil
}

// loaderOf names a VLAN's boot loader; empty is iPXE.
func loaderOf(l string) string {
	if l == "" {
		return store.BootLoaderIPXE
	}
	return l
}

func dhcpFlags(dhcp, proxy bool, nodes, ifaces []string) (string, []wire.VLANServer, error) {
	mode := store.DHCPOff
	switch {
	case dhcp && proxy:
		return "", nil, errors.New("-dhcp and -proxy-dhcp exclude each other")
	case dhcp:
		mode = store.DHCPFull
	case proxy:
		mode = store.DHCPProxy
	}
	if len(ifaces) > len(nodes) || len(ifaces) > 0 && len(ifaces) != len(nodes) {
		return "", nil, fmt.Errorf("give one -iface per -node, or none (%d nodes, %d interfaces)", len(nodes), len(ifaces))
	}
	var servers []wire.VLANServer
	for i := range nodes {
		s := wire.VLANServer{Node: nodes[i]}
		if i < len(ifaces) {
			s.Iface = ifaces[i]
		}
		servers = append(servers, s)
	}
	return mode, servers, nil
}

func printVLANs(w io.Writer, vs []wire.VLAN) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "FABRIC\tVID\tMTU\tDHCP\tSERVED BY")
	for _, v := range vs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", v.Fabric, v.VID, mtuOf(v.MTU), v.DHCP, servers(v.Servers))
	}
	return tw.Flush()
}

func mtuOf(m int) string {
	if m == 0 {
		return "default"
	}
	return strconv.Itoa(m)
}

func servers(ss []wire.VLANServer) string {
	var out []string
	for _, s := range ss {
		if s.Iface == "" {
			out = append(out, s.Node)
		} else {
			out = append(out, s.Node+" ("+s.Iface+")")
		}
	}
	return dash(strings.Join(out, ", "))
}

func vlanPath(fabric, vid string) string {
	return "/api/v1/vlans/" + url.PathEscape(fabric) + "/" + url.PathEscape(vid)
}

func vlanRm(args []string, stdout io.Writer) error {
	fs := newFlags("vlan rm", "rollcall vlan rm FABRIC VID")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	if err := c.do(http.MethodDelete, vlanPath(fs.Arg(0), fs.Arg(1)), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "VLAN %s removed from fabric %s\n", fs.Arg(1), fs.Arg(0))
	return nil
}

// ---- subnet

func subnetAdd(args []string, stdout io.Writer) error {
	fs := newFlags("subnet add", "rollcall subnet add CIDR -fabric F -vid V -purpose P [-gateway G] [-dns D,D] [-domain D] [-name N]")
	fabric := fs.String("fabric", "", "fabric the subnet is on")
	vid := fs.String("vid", "", "VID of its VLAN (0: untagged)")
	purpose := fs.String("purpose", "", "one of "+strings.Join(store.Purposes, ", "))
	gateway := fs.String("gateway", "", "default gateway")
	dns := fs.String("dns", "", "DNS servers, comma-separated")
	domain := fs.String("domain", "", "DNS domain")
	name := fs.String("name", "", "a short name for the subnet")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	req := wire.SubnetRequest{CIDR: fs.Arg(0), Name: *name, Fabric: *fabric, Purpose: *purpose, Gateway: *gateway, Domain: *domain}
	if *fabric == "" || *vid == "" || *purpose == "" {
		return errors.New("-fabric, -vid and -purpose are required; usage: " + fs.usage)
	}
	v, err := strconv.Atoi(*vid)
	if err != nil {
		return fmt.Errorf("-vid %q is not a number in 0–4094", *vid)
	}
	req.VID = &v
	for _, d := range strings.Split(*dns, ",") {
		if d = strings.TrimSpace(d); d != "" {
			req.DNS = append(req.DNS, d)
		}
	}
	var s wire.SubnetDetail
	if err := c.do(http.MethodPost, "/api/v1/subnets", req, &s); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "subnet %s added to fabric %s, VLAN %d", s.CIDR, s.Fabric, s.VID)
	if s.Used > 0 {
		fmt.Fprintf(stdout, " (%d addresses machines already had adopted)", s.Used)
	}
	fmt.Fprintln(stdout)
	return nil
}

func printSubnets(w io.Writer, ss []wire.SubnetView) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "CIDR\tNAME\tFABRIC\tVID\tPURPOSE\tGATEWAY\tDNS\tDOMAIN\tUSED")
	for _, s := range ss {
		used := strconv.Itoa(s.Used)
		if s.Used < 0 {
			used = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.CIDR, dash(s.Name), s.Fabric, s.VID, s.Purpose,
			addrOrDash(s.Gateway), addrs(s.DNS), dash(s.Domain), used)
	}
	return tw.Flush()
}

func subnetRm(args []string, stdout io.Writer) error {
	fs := newFlags("subnet rm", "rollcall subnet rm CIDR [-force]")
	force := fs.Bool("force", false, "also release the addresses still used in it")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	path, err := subnetPath(fs.Arg(0))
	if err != nil {
		return err
	}
	if *force {
		path += "?force=1"
	}
	if err := c.do(http.MethodDelete, path, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "subnet %s removed\n", fs.Arg(0))
	return nil
}

// ---- range

func rangeAdd(args []string, stdout io.Writer) error {
	fs := newFlags("range add", "rollcall range add CIDR dynamic|reserved|static FIRST LAST [-comment TEXT]")
	comment := fs.String("comment", "", "what the range is for")
	c, err := fs.client(args, 4)
	if err != nil {
		return err
	}
	req := wire.RangeRequest{Subnet: fs.Arg(0), Kind: fs.Arg(1), First: fs.Arg(2), Last: fs.Arg(3), Comment: *comment}
	var r wire.Range
	if err := c.do(http.MethodPost, "/api/v1/ranges", req, &r); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s range %s–%s added to %s\n", r.Kind, r.First, r.Last, r.Subnet)
	return nil
}

// rangeSize is the number of addresses in r, as text (IPv6 ranges can be
// larger than any integer type).
func rangeSize(r wire.Range) string {
	if !r.First.IsValid() || !r.Last.IsValid() {
		return "-"
	}
	f, l := r.First.As16(), r.Last.As16()
	n := new(big.Int).Sub(new(big.Int).SetBytes(l[:]), new(big.Int).SetBytes(f[:]))
	return n.Add(n, big.NewInt(1)).String()
}

func printRanges(w io.Writer, rs []wire.Range) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SUBNET\tKIND\tFIRST\tLAST\tSIZE\tCOMMENT")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Subnet, r.Kind, r.First, r.Last, rangeSize(r), dash(r.Comment))
	}
	return tw.Flush()
}

func rangeRm(args []string, stdout io.Writer) error {
	fs := newFlags("range rm", "rollcall range rm FIRST")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	var out wire.Deleted
	if err := c.do(http.MethodDelete, "/api/v1/ranges/"+url.PathEscape(fs.Arg(0)), nil, &out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s removed\n", out.Deleted)
	return nil
}

// ---- ip

func ipReserve(args []string, stdout io.Writer) error {
	fs := newFlags("ip reserve", "rollcall ip reserve ADDR -name N")
	name := fs.String("name", "", "what holds the address (switch-1, pdu-a)")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	var a wire.Address
	if err := c.do(http.MethodPost, "/api/v1/ips/reserve", wire.ReserveRequest{IP: fs.Arg(0), Name: *name}, &a); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s reserved for %s in %s\n", a.IP, a.Name, a.Subnet)
	return nil
}

func ipRelease(args []string, stdout io.Writer) error {
	fs := newFlags("ip release", "rollcall ip release ADDR")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	if err := c.do(http.MethodDelete, "/api/v1/ips/"+url.PathEscape(fs.Arg(0)), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s released\n", fs.Arg(0))
	return nil
}
