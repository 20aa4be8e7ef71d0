package layout

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// Selector kinds.
const (
	SelectBoot    = "boot"    // the NIC with the machine's boot MAC
	SelectName    = "name"    // name:X, the NIC the inventory names X
	SelectMAC     = "mac"     // mac:X, the NIC with MAC X
	SelectFastest = "fastest" // fastest:N, the N fastest NICs no other interface claims
	SelectIB      = "ib"      // ib:N, the Nth InfiniBand port (from 0)
	SelectAll     = "all"     // every NIC no other interface claims
)

var selectorKinds = "boot, name:X, mac:X, fastest:N, ib:N, all"

// maxIBPorts bounds ib:N: the inventory holds at most 64 HCAs of 8 ports.
const maxIBPorts = 64 * 8

// Selector chooses NICs of a machine.
type Selector struct {
	Kind string
	Arg  string // the name of name:X, the MAC (normalised) of mac:X
	N    int    // the count of fastest:N, the port of ib:N
}

// ParseSelector reads a selector as a layout writes it.
func ParseSelector(s string) (Selector, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	num := func(min, max int) (int, error) {
		n, err := strconv.Atoi(arg)
		if err != nil || n < min || n > max || arg != strconv.Itoa(n) {
			return 0, invalid("selector %q: %s:N takes a number in %d–%d", store.Clip(s), kind, min, max)
		}
		return n, nil
	}
	switch {
	case (kind == SelectBoot || kind == SelectAll) && !hasArg:
		return Selector{Kind: kind}, nil
	case kind == SelectName && hasArg:
		if arg == "" {
			return Selector{}, invalid("selector %q: name:X needs a name", store.Clip(s))
		}
		if err := ipam.CheckIface(arg); err != nil {
			return Selector{}, invalid("selector %q: %s", store.Clip(s), store.Public(err))
		}
		return Selector{Kind: kind, Arg: arg}, nil
	case kind == SelectMAC && hasArg:
		m, err := store.NormalizeMAC(arg)
		if err != nil {
			return Selector{}, invalid("selector %q: %s", store.Clip(s), store.Public(err))
		}
		return Selector{Kind: kind, Arg: m}, nil
	case kind == SelectFastest && hasArg:
		n, err := num(1, MaxMembers)
		return Selector{Kind: kind, N: n}, err
	case kind == SelectIB && hasArg:
		n, err := num(0, maxIBPorts-1)
		return Selector{Kind: kind, N: n}, err
	}
	return Selector{}, invalid("selector %q is not one of %s", store.Clip(s), selectorKinds)
}

func (s Selector) String() string {
	switch s.Kind {
	case SelectName, SelectMAC:
		return s.Kind + ":" + s.Arg
	case SelectFastest, SelectIB:
		return s.Kind + ":" + strconv.Itoa(s.N)
	}
	return s.Kind
}

// explicit selectors name one NIC whatever else the layout claims;
// fastest and all choose among what the explicit ones left.
func (s Selector) explicit() bool {
	return s.Kind == SelectBoot || s.Kind == SelectName || s.Kind == SelectMAC || s.Kind == SelectIB
}

// nic is a NIC a selector may choose: an Ethernet NIC of the inventory, or
// an InfiniBand port (ib >= 0), which the agent reports by its HCA since
// IPoIB interfaces have 20-byte addresses.
type nic struct {
	name  string // the inventory's name; for a port, ibN
	mac   string // Ethernet
	guid  string // a port's GUID, xx:xx:xx:xx:xx:xx:xx:xx
	ib    int    // the port's place among the machine's ports, -1 for Ethernet
	hca   string
	port  int
	speed int // Mb/s, 0 unknown
	link  bool
	boot  bool
	owner int // the interface (index) that claimed it, -1 none
}

func (n *nic) id() string {
	if n.ib >= 0 {
		return n.guid
	}
	return n.mac
}

// nics lists the machine's NICs: the inventory's Ethernet NICs, then its
// InfiniBand ports in HCA order (by name, numbers compared as numbers),
// each HCA's ports by number. RoCE ports (link layer Ethernet) are NICs of
// the inventory already.
func nics(inv *inventory.Report, bootMAC string) []*nic {
	var out []*nic
	for _, n := range inv.NICs {
		m, err := store.NormalizeMAC(n.MAC)
		if err != nil {
			continue // the inventory's validation refused such a report already
		}
		out = append(out, &nic{name: n.Name, mac: m, ib: -1, speed: n.SpeedMbps, link: n.Link, boot: m == bootMAC, owner: -1})
	}
	hcas := slices.Clone(inv.IB)
	slices.SortStableFunc(hcas, func(a, b inventory.IBHCA) int { return naturalCmp(a.Name, b.Name) })
	k := 0
	for _, h := range hcas {
		ports := slices.Clone(h.Ports)
		slices.SortStableFunc(ports, func(a, b inventory.IBPort) int { return cmp.Compare(a.Number, b.Number) })
		for _, p := range ports {
			if p.LinkLayer != "" && !strings.EqualFold(p.LinkLayer, "infiniband") {
				continue
			}
			out = append(out, &nic{name: fmt.Sprintf("ib%d", k), guid: normalGUID(p.GUID), ib: k, hca: h.Name, port: p.Number,
				link: strings.EqualFold(p.State, "active"), owner: -1})
			k++
		}
	}
	return out
}

// normalGUID writes a GUID as eight colon-separated bytes, the way the
// last eight bytes of an IPoIB hardware address read in sysfs; the agent
// reports the sysfs node_guid form (0c42:a103:0016:054c). "" when it is
// not a GUID.
func normalGUID(s string) string {
	h := strings.ToLower(strings.ReplaceAll(s, ":", ""))
	if len(h) != 16 || strings.Trim(h, "0123456789abcdef") != "" || strings.Trim(h, "0") == "" {
		return ""
	}
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

// naturalCmp orders mlx5_2 before mlx5_10.
func naturalCmp(a, b string) int {
	ta, na := splitNumber(a)
	tb, nb := splitNumber(b)
	if ta == tb && na >= 0 && nb >= 0 && na != nb {
		return cmp.Compare(na, nb)
	}
	return cmp.Compare(a, b)
}

func splitNumber(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	if i == len(s) || len(s)-i > 9 {
		return s, -1
	}
	n, _ := strconv.Atoi(s[i:])
	return s[:i], n
}

// chooseExplicit finds the one NIC an explicit selector names.
func chooseExplicit(all []*nic, s Selector, bootMAC string) (*nic, string, error) {
	for _, n := range all {
		switch {
		case s.Kind == SelectBoot && n.boot:
			return n, fmt.Sprintf("%s has the machine's boot MAC %s", n.name, n.mac), nil
		case s.Kind == SelectName && n.ib < 0 && n.name == s.Arg:
			return n, fmt.Sprintf("the inventory names it %s", n.name), nil
		case s.Kind == SelectMAC && n.ib < 0 && n.mac == s.Arg:
			return n, fmt.Sprintf("%s has MAC %s", n.name, n.mac), nil
		case s.Kind == SelectIB && n.ib == s.N:
			if n.guid == "" {
				return nil, "", invalid("%s: port %d of %s has no port GUID in the inventory, so its name cannot be pinned", s, n.port, n.hca)
			}
			return n, fmt.Sprintf("port %d of the InfiniBand HCA %s (GUID %s), the machine's %s port (HCAs by name, then ports by number)", n.port, n.hca, n.guid, ordinal(n.ib+1)), nil
		}
	}
	var have []string
	switch s.Kind {
	case SelectBoot:
		if bootMAC == "" {
			return nil, "", invalid("boot matches no NIC: the machine has no boot MAC (it has not PXE-booted or been commissioned)")
		}
		return nil, "", invalid("boot matches no NIC: no NIC of the inventory has the boot MAC %s", bootMAC)
	case SelectIB:
		ports := 0
		for _, n := range all {
			if n.ib >= 0 {
				ports++
			}
		}
		return nil, "", invalid("%s matches no NIC: the machine has %d InfiniBand port(s)", s, ports)
	}
	for _, n := range all {
		if n.ib < 0 {
			have = append(have, n.name+" "+n.mac)
		}
	}
	if len(have) == 0 {
		return nil, "", invalid("%s matches no NIC: the inventory lists no Ethernet NIC", s)
	}
	return nil, "", invalid("%s matches no NIC (the machine has %s)", s, strings.Join(have, ", "))
}

// chooseFree picks fastest:N or all among the Ethernet NICs no interface
// claimed: fastest first, then with carrier, then by name.
func chooseFree(all []*nic, s Selector) ([]*nic, []string, error) {
	var free []*nic
	for _, n := range all {
		if n.ib < 0 && n.owner < 0 {
			free = append(free, n)
		}
	}
	slices.SortStableFunc(free, func(a, b *nic) int {
		if c := cmp.Compare(b.speed, a.speed); c != 0 {
			return c
		}
		if a.link != b.link {
			if a.link {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.name, b.name)
	})
	want := len(free)
	if s.Kind == SelectFastest {
		want = s.N
	}
	if want == 0 || len(free) < want {
		return nil, nil, invalid("%s matches %d NIC(s) that no other interface claims, not %d", s, len(free), max(want, 1))
	}
	var reasons []string
	for i, n := range free[:want] {
		speed := "speed unknown"
		if n.speed > 0 {
			speed = fmt.Sprintf("%d Mb/s", n.speed)
		}
		if !n.link {
			speed += ", no carrier at commissioning"
		}
		if s.Kind == SelectFastest {
			rank := "the fastest"
			if i > 0 {
				rank = "the " + ordinal(i+1) + " fastest"
			}
			reasons = append(reasons, fmt.Sprintf("%s (%s): %s of the %d NICs no other interface claims", n.name, speed, rank, len(free)))
		} else {
			reasons = append(reasons, fmt.Sprintf("%s (%s): one of the %d NICs no other interface claims", n.name, speed, len(free)))
		}
	}
	return free[:want], reasons, nil
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}
