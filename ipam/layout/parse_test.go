package layout_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/store"
)

func TestParseExample(t *testing.T) {
	l, err := layout.Parse([]byte(exampleLayout))
	if err != nil {
		t.Fatal(err)
	}
	want := &layout.Layout{Interfaces: []layout.Interface{
		{Type: "physical", Select: "boot", Links: []layout.Link{{Subnet: "boot", Mode: "auto", DefaultGateway: true}}},
		{Type: "bond", Name: "bond0", Members: []string{"fastest:2"}, MTU: 9000, Links: []layout.Link{{Mode: "link_up"}}},
		{Type: "vlan", Parent: "bond0", VID: 200, Links: []layout.Link{{Subnet: "10.60.0.0/24", Mode: "auto"}}},
		{Type: "physical", Select: "ib:0", Links: []layout.Link{{Subnet: "ib0", Mode: "auto"}}},
	}}
	if d := cmp.Diff(want, l); d != "" {
		t.Errorf("parsed (-want +got):\n%s", d)
	}
	// What Parse accepts, encoded again, parses to the same layout.
	b, _ := json.Marshal(l)
	again, err := layout.Parse(b)
	if err != nil || !cmp.Equal(l, again) {
		t.Errorf("re-encoded layout %s: %v, %v", b, again, err)
	}
}

// TestParseRefusals: each rule a layout breaks by itself is refused with
// the place and the reason, before any machine is looked at.
func TestParseRefusals(t *testing.T) {
	phys := `{"type": "physical", "select": "boot"}`
	lay := func(ifaces ...string) string { return `{"interfaces": [` + strings.Join(ifaces, ",") + `]}` }
	link := func(l string) string { return lay(`{"type": "physical", "select": "boot", "links": [` + l + `]}`) }
	many := func(n int, item string) string {
		return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
	}
	var manyIfaces []string
	for i := range layout.MaxInterfaces + 1 {
		manyIfaces = append(manyIfaces, fmt.Sprintf(`{"type": "physical", "select": "name:eth%d"}`, i))
	}
	for name, c := range map[string]struct{ doc, says string }{
		"empty":                 {"", "layout is empty"},
		"not JSON":              {"{interfaces", "layout is not JSON: invalid character 'i' looking for beginning of object key string (at byte 2)"},
		"data after the object": {lay(phys) + " {}", "data after the layout's object"},
		"a second object":       {lay(phys) + lay(phys), "data after the layout's object"},
		"too large":             {lay(phys) + strings.Repeat(" ", layout.MaxBytes), "bytes, more than the 65536 allowed"},
		"unknown top field":     {`{"interfaces": [` + phys + `], "bonds": []}`, `unknown field "bonds"`},
		"unknown interface field": {lay(`{"type": "physical", "select": "boot", "selector": "boot"}`),
			`unknown field "selector"`},
		"unknown link field":    {link(`{"mode": "dhcp", "gateway": "10.0.0.1"}`), `unknown field "gateway"`},
		"unknown bond field":    {lay(`{"type": "bond", "name": "b", "members": ["all"], "bond": {"miimon": 1}}`), `unknown field "miimon"`},
		"field in another case": {`{"Interfaces": [` + phys + `]}`, `field "Interfaces": write it interfaces (field names are lowercase)`},
		"field given twice":     {link(`{"mode": "dhcp", "mode": "auto"}`), `field "mode" is given twice in one object`},
		"wrong type of value":   {lay(`{"type": "physical", "select": "boot", "mtu": "9000"}`), "interfaces.mtu must be a whole number, not string"},
		"no interfaces":         {`{"interfaces": []}`, "a layout needs at least one interface"},
		"null":                  {`null`, "a layout needs at least one interface"},
		"too many interfaces":   {lay(manyIfaces...), "65 interfaces is more than the 64 a layout may have"},
		"too many links": {link(many(layout.MaxLinks+1, `{"mode": "dhcp"}`)),
			"17 links is more than the 16 an interface may have"},
		"too many members": {lay(`{"type": "bond", "name": "b", "members": [` + many(layout.MaxMembers+1, `"all"`) + `]}`),
			"17 member selectors is more than the 16 a bond may have"},
		"unknown type":             {lay(`{"type": "bridge", "name": "br0"}`), `interfaces[0] (bridge br0): type "bridge" is not one of physical, bond, vlan`},
		"bad selector":             {lay(`{"type": "physical", "select": "fastest"}`), `selector "fastest" is not one of boot, name:X, mac:X, fastest:N, ib:N, all`},
		"bad fastest count":        {lay(`{"type": "bond", "name": "b", "members": ["fastest:0"]}`), `fastest:N takes a number in 1–16`},
		"bad ib port":              {lay(`{"type": "physical", "select": "ib:-1"}`), `ib:N takes a number in 0–511`},
		"bad MAC":                  {lay(`{"type": "physical", "select": "mac:52:54"}`), `mac "52:54" is not a 48-bit MAC address`},
		"bad NIC name":             {lay(`{"type": "physical", "select": "name:../etc"}`), `interface "../etc" is not an interface name`},
		"physical needs select":    {lay(`{"type": "physical", "name": "eth0"}`), "interfaces[0] (physical eth0): a physical interface needs select"},
		"physical has one NIC":     {lay(`{"type": "physical", "select": "fastest:2"}`), "a physical interface has one NIC; fastest:2 chooses 2"},
		"bond needs a name":        {lay(`{"type": "bond", "members": ["all"]}`), "interfaces[0] (bond): a bond needs a name"},
		"bond needs members":       {lay(`{"type": "bond", "name": "bond0"}`), "interfaces[0] (bond bond0): a bond needs members"},
		"bond with one member":     {lay(`{"type": "bond", "name": "bond0", "members": ["name:eno1"]}`), "a bond with one member (name:eno1) is no bond"},
		"bond of fastest:1":        {lay(`{"type": "bond", "name": "bond0", "members": ["fastest:1"]}`), "a bond with one member (fastest:1) is no bond"},
		"bond of InfiniBand":       {lay(`{"type": "bond", "name": "bond0", "members": ["ib:0", "ib:1"]}`), "member ib:0 is an InfiniBand port; a bond is of Ethernet NICs"},
		"member named twice":       {lay(`{"type": "bond", "name": "bond0", "members": ["all", "all"]}`), "member all is named twice"},
		"NIC claimed twice":        {lay(phys, `{"type": "bond", "name": "bond0", "members": ["boot", "all"]}`), "boot is claimed by interfaces[0] too"},
		"bad bond mode":            {lay(`{"type": "bond", "name": "b", "members": ["all"], "bond": {"mode": "lacp"}}`), `bond mode "lacp" is not one of balance-rr, active-backup`},
		"lacp rate off 802.3ad":    {lay(`{"type": "bond", "name": "b", "members": ["all"], "bond": {"mode": "active-backup", "lacp_rate": "fast"}}`), "lacp_rate is for 802.3ad bonds, not active-backup"},
		"bad hash policy":          {lay(`{"type": "bond", "name": "b", "members": ["all"], "bond": {"transmit_hash_policy": "l3"}}`), `transmit_hash_policy "l3" is not one of`},
		"negative delay":           {lay(`{"type": "bond", "name": "b", "members": ["all"], "bond": {"up_delay": -1}}`), "up_delay -1 is outside 0–600000"},
		"bond options on physical": {lay(`{"type": "physical", "select": "boot", "bond": {}}`), "bond is for bond interfaces"},
		"select on a bond":         {lay(`{"type": "bond", "name": "b", "select": "boot"}`), "select is for physical interfaces"},
		"members on physical":      {lay(`{"type": "physical", "select": "boot", "members": ["all"]}`), "members is for bond interfaces"},
		"vid on physical":          {lay(`{"type": "physical", "select": "boot", "vid": 5}`), "parent and vid is for vlan interfaces"},
		"VLAN needs a parent":      {lay(phys, `{"type": "vlan", "vid": 200}`), "a VLAN needs a parent"},
		"VID 0":                    {lay(phys, `{"type": "vlan", "parent": "eno1", "vid": 0}`), "VID 0 is outside 1–4094"},
		"VID 4095":                 {lay(phys, `{"type": "vlan", "parent": "eno1", "vid": 4095}`), "VID 4095 is outside 1–4094"},
		"VLAN on a missing parent": {lay(`{"type": "physical", "select": "boot", "name": "eno1"}`, `{"type": "vlan", "parent": "bond0", "vid": 200}`),
			"interfaces[1] (vlan bond0.200): parent bond0 is not an interface of the layout"},
		"VLAN on a VLAN": {lay(phys, `{"type": "vlan", "parent": "eno1", "vid": 2, "name": "v2"}`, `{"type": "vlan", "parent": "v2", "vid": 3}`),
			"parent v2 is a VLAN"},
		"VLAN default name too long": {lay(`{"type": "physical", "select": "boot", "name": "enp129s0f1np1"}`, `{"type": "vlan", "parent": "enp129s0f1np1", "vid": 200}`),
			"the default name enp129s0f1np1.200 is longer than an interface name may be (15): give the VLAN a name"},
		"duplicate names": {lay(`{"type": "physical", "select": "boot", "name": "a"}`, `{"type": "physical", "select": "name:eno2", "name": "a"}`),
			"interfaces[1] (physical a): the name a is taken by interfaces[0]"},
		"bad name":             {lay(`{"type": "physical", "select": "boot", "name": "a very long name indeed"}`), "is not an interface name"},
		"MTU too small":        {lay(`{"type": "physical", "select": "boot", "mtu": 100}`), "MTU 100 is outside 576–65520"},
		"bad link mode":        {link(`{"mode": "manual"}`), `links[0]: mode "manual" is not one of auto, static, dhcp, link_up`},
		"no link mode":         {link(`{"subnet": "boot"}`), `links[0]: mode "" is not one of`},
		"auto needs subnet":    {link(`{"mode": "auto"}`), "an auto link needs a subnet"},
		"static needs address": {link(`{"mode": "static", "subnet": "boot"}`), "a static link needs an address"},
		"address with prefix":  {link(`{"mode": "static", "address": "10.50.0.7/24"}`), "give the address alone, the prefix is its subnet's"},
		"address not an IP":    {link(`{"mode": "static", "address": "ten"}`), `address "ten" is not an IP address`},
		"address on auto":      {link(`{"mode": "auto", "subnet": "boot", "address": "10.50.0.7"}`), "address is for static links, not auto"},
		"static outside its CIDR": {link(`{"mode": "static", "subnet": "10.50.0.0/24", "address": "10.60.0.7"}`),
			"static address 10.60.0.7 is outside its subnet 10.50.0.0/24"},
		"CIDR with host bits":   {link(`{"mode": "auto", "subnet": "10.50.0.1/24"}`), "subnet 10.50.0.1/24 has host bits set; the subnet is 10.50.0.0/24"},
		"subnet neither":        {link(`{"mode": "auto", "subnet": "Storage Net"}`), `subnet "Storage Net" is neither a CIDR, a subnet's name, nor boot`},
		"DHCP default gateway":  {link(`{"mode": "dhcp", "default_gateway": true}`), "a DHCP link's routes are the DHCP server's"},
		"link_up with subnet":   {link(`{"mode": "link_up", "subnet": "boot"}`), "a link_up link has no address"},
		"link_up beside a link": {link(`{"mode": "link_up"}, {"mode": "dhcp"}`), "link_up is an interface without addresses"},
		"two IPv4 default routes": {lay(`{"type": "physical", "select": "boot", "links": [{"mode": "static", "address": "10.50.0.7", "default_gateway": true}]}`, `{"type": "physical", "select": "name:eno2", "links": [{"mode": "auto", "subnet": "10.60.0.0/24", "default_gateway": true}]}`),
			"interfaces[1] (physical name:eno2) links[0]: a second default gateway (the first is interfaces[0] (physical boot) links[0])"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := layout.Parse([]byte(c.doc))
			if kindOf(err) != "invalid" || !strings.Contains(store.Public(err), c.says) {
				t.Errorf("got %s: %v\nwant invalid saying %q", kindOf(err), err, c.says)
			}
		})
	}
}

func TestParseSelector(t *testing.T) {
	for in, want := range map[string]string{
		"boot": "boot", "all": "all", "name:ens1f0": "name:ens1f0", "mac:B4-96-91-00-00-10": "mac:b4:96:91:00:00:10",
		"fastest:2": "fastest:2", "ib:0": "ib:0",
		"boot:1": "refused", "fastest:02": "refused", "fastest:17": "refused", "ib:": "refused", "name:": "refused", "eth0": "refused", "": "refused",
	} {
		s, err := layout.ParseSelector(in)
		got := s.String()
		if err != nil {
			got = "refused"
		}
		if got != want {
			t.Errorf("%q: %s (%v), want %s", in, got, err, want)
		}
	}
}

func TestParsePin(t *testing.T) {
	for in, want := range map[string]string{
		"ens18=10.0.0.60": "ens18=10.0.0.60", "bond0.200=fd00::7": "bond0.200=fd00::7",
		"ens18": "refused", "=10.0.0.60": "refused", "ens18=10.0.0.60/24": "refused", "a/b=10.0.0.1": "refused", "ens18=x": "refused",
	} {
		p, err := layout.ParsePin(in)
		got := p.String()
		if err != nil {
			got = "refused"
		}
		if got != want {
			t.Errorf("%q: %s (%v), want %s", in, got, err, want)
		}
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"gpu-bond": true, "a": true, "r12.v2": true, "GPU": false, "-a": false, "a/b": false, "": false, strings.Repeat("a", 64): false} {
		if err := layout.CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
}
