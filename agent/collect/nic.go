package collect

import (
	"fmt"
	"net"
	"strings"

	"github.com/rollcall/rollcall/store/inventory"
)

// collectNICs lists Ethernet interfaces backed by a device. Virtual ones
// (bridges, veth, bonds, tunnels: no "device" link) are skipped, and so are
// IPoIB interfaces (ARPHRD 32, 20-byte addresses), which the InfiniBand
// collector reports by their HCA.
func (c *collector) collectNICs(fs sysfs, r *inventory.Report) error {
	names := fs.list("/sys/class/net")
	if names == nil {
		return fmt.Errorf("/sys/class/net: not readable")
	}
	for _, name := range names {
		base := "/sys/class/net/" + name
		if !fs.exists(base+"/device") || fs.int(base+"/type", 1) != 1 {
			continue
		}
		mac := fs.str(base + "/address")
		if hw, err := net.ParseMAC(mac); err != nil || len(hw) != 6 {
			continue
		}
		n := inventory.NIC{
			Name: name, MAC: strings.ToLower(mac),
			Driver:     fs.link(base + "/device/driver"),
			MTU:        int(fs.int(base+"/mtu", 0)),
			PCIAddress: fs.pciAddress(base + "/device"),
			SRIOVTotal: int(fs.int(base+"/device/sriov_totalvfs", 0)),
			SRIOVNum:   int(fs.int(base+"/device/sriov_numvfs", 0)),
		}
		// speed and carrier read as EINVAL while the link is down.
		n.Link = fs.int(base+"/carrier", 0) == 1
		if sp := fs.int(base+"/speed", -1); sp > 0 && sp < 10_000_000 {
			n.SpeedMbps = int(sp)
		}
		if c.opts.Live {
			if fw, drv := ethtoolDriverInfo(name); fw != "" || drv != "" {
				n.Firmware = fw
				if n.Driver == "" {
					n.Driver = drv
				}
			}
			n.IPs = interfaceIPs(name)
		}
		r.NICs = append(r.NICs, n)
	}
	return nil
}

// interfaceIPs lists the addresses configured on an interface, so the
// server can record the address the machine commissioned with.
func interfaceIPs(name string) []string {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// collectIB lists InfiniBand (and RoCE) HCAs with their ports.
func collectIB(fs sysfs, r *inventory.Report) error {
	for _, name := range fs.list("/sys/class/infiniband") {
		base := "/sys/class/infiniband/" + name
		h := inventory.IBHCA{
			Name: name, NodeGUID: fs.str(base + "/node_guid"),
			Model:      firstNonEmpty(fs.str(base+"/hca_type"), fs.str(base+"/board_id")),
			Firmware:   fs.str(base + "/fw_ver"),
			PCIAddress: fs.pciAddress(base + "/device"),
		}
		for _, p := range sortedNumeric(fs.list(base + "/ports")) {
			pb := fmt.Sprintf("%s/ports/%d", base, p)
			port := inventory.IBPort{
				Number:    p,
				GUID:      portGUID(fs.str(pb + "/gids/0")),
				State:     stripEnumPrefix(fs.str(pb + "/state")),
				Rate:      fs.str(pb + "/rate"),
				LinkLayer: fs.str(pb + "/link_layer"),
			}
			h.Ports = append(h.Ports, port)
		}
		r.IB = append(r.IB, h)
	}
	return nil
}

// portGUID is the interface identifier half of the port's GID 0
// ("fe80:0000:0000:0000:0c42:a103:0016:054c" → "0c42:a103:0016:054c"), the
// form node_guid uses.
func portGUID(gid string) string {
	parts := strings.Split(gid, ":")
	if len(parts) != 8 {
		return ""
	}
	g := strings.Join(parts[4:], ":")
	if strings.Trim(g, "0:") == "" {
		return ""
	}
	return g
}

// stripEnumPrefix turns "4: ACTIVE" into "ACTIVE".
func stripEnumPrefix(s string) string {
	if _, v, ok := strings.Cut(s, ": "); ok {
		return v
	}
	return s
}
