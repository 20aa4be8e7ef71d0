package initsys

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromCmdline(t *testing.T) {
	line := "BOOT_IMAGE=/live/vmlinuz console=ttyS0,115200 panic=10 rollcall.setup=name=rc1,iface=52:54:00:12:34:56,addr=10.0.2.15/24,gw=10.0.2.2,dns=10.0.2.3+192.0.2.53,ntp=ntp.example.org,mode=live quiet"
	a, ok, err := FromCmdline(line)
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	want := Answers{Name: "rc1", Interface: "52:54:00:12:34:56", Address: netip.MustParsePrefix("10.0.2.15/24"),
		Gateway: netip.MustParseAddr("10.0.2.2"), DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3"), netip.MustParseAddr("192.0.2.53")},
		NTP: []string{"ntp.example.org"}, Cluster: "new", Mode: "live"}
	if d := cmp.Diff(want, a, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); d != "" {
		t.Errorf("answers (-want +got):\n%s", d)
	}
	for _, l := range []string{"console=ttyS0 quiet", "rollcall.setup=ask", ""} {
		if _, ok, err := FromCmdline(l); ok || err != nil {
			t.Errorf("%q: ok %v, err %v", l, ok, err)
		}
	}
	a, ok, err = FromCmdline("rollcall.setup=addr=dhcp,cluster=join,join=rcj1abc")
	if err != nil || !ok || !a.DHCP || a.Join != "rcj1abc" || a.Name != "rollcall" {
		t.Errorf("dhcp join: %+v %v %v", a, ok, err)
	}
}

func TestParseRefuses(t *testing.T) {
	for value, want := range map[string]string{
		"":                              "addr: missing",
		"addr=10.0.2.15":                "not ADDRESS/BITS",
		"addr=fe80::1/64":               "not ADDRESS/BITS",
		"addr=10.0.2.0/24":              "network's own address",
		"addr=10.0.2.15/0":              "no room",
		"addr=10.0.2.15/24,gw=10.0.3.1": "not on 10.0.2.0/24",
		"addr=dhcp,gw=10.0.2.2":         "DHCP brings its own gateway",
		"addr=dhcp,name=Bad_Name":       "name:",
		"addr=dhcp,name=-x":             "name:",
		"addr=dhcp,cluster=join":        "needs join=CODE",
		"addr=dhcp,join=abc":            "needs cluster=join",
		"addr=dhcp,cluster=maybe":       "want new or join",
		"addr=dhcp,mode=install":        "phase 2",
		"addr=dhcp,colour=blue":         "unknown key",
		"addr=dhcp,addr=dhcp":           "given twice",
		"addr=dhcp,dns=1.1.1.1+x":       `"x" is not an address`,
		"addr=dhcp,dns=1.1.1.1+1.1.1.2+1.1.1.3+1.1.1.4+1.1.1.5": "at most 4",
		"addr=dhcp,noequals":                          "want KEY=VALUE",
		"addr=dhcp,ntp=bad_host!":                     "neither an address",
		"addr=dhcp,name=" + strings.Repeat("a", 3000): "more than 2048",
	} {
		_, err := Parse(value)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%.60q): %v, want an error with %q", value, err, want)
		}
	}
}

// FuzzParse: any value either parses into answers that hold the rules or
// is refused; nothing panics.
func FuzzParse(f *testing.F) {
	f.Add("name=rc1,addr=10.0.2.15/24,gw=10.0.2.2,dns=10.0.2.3")
	f.Add("addr=dhcp,cluster=join,join=rcj1abcdef")
	f.Add("addr=192.168.1.7/32,ntp=pool.ntp.org+10.0.0.1")
	f.Fuzz(func(t *testing.T, v string) {
		a, err := Parse(v)
		if err != nil {
			return
		}
		if a.DHCP == a.Address.IsValid() {
			t.Fatalf("%q: DHCP %v with address %v", v, a.DHCP, a.Address)
		}
		if checkLabel(a.Name) != nil || (a.Cluster == "join") != (a.Join != "") || len(a.DNS) > maxList {
			t.Fatalf("%q: accepted %+v", v, a)
		}
	})
}
