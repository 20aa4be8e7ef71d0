package httpapi_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// ---- the network model over HTTP and from the CLI, on one real node

// mustDo sends a request and fails the test unless it answers want.
func mustDo(t testing.TB, n *nodetest.Node, want int, method, path string, body any, admin string) nodetest.Response {
	t.Helper()
	r := n.Do(t, method, path, body, nodetest.Bearer(admin)...)
	if r.Status != want {
		t.Fatalf("%s %s = %s, want %d", method, path, r, want)
	}
	return r
}

// referenceSite is the reference's example over the API: hall-a, VLAN 0,
// 10.50.0.0/24 with reserved, static and dynamic ranges, and a machine.
func referenceSite(t testing.TB, n *nodetest.Node, admin string) (machineID string) {
	t.Helper()
	vid := 0
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/fabrics", wire.FabricRequest{Name: "hall-a"}, admin)
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-a", VID: &vid}, admin)
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/subnets", wire.SubnetRequest{
		CIDR: "10.50.0.0/24", Fabric: "hall-a", VID: &vid, Purpose: "provisioning",
		Gateway: "10.50.0.1", DNS: []string{"10.50.0.1"}, Domain: "dc.example",
	}, admin)
	for _, r := range [][3]string{
		{"reserved", "10.50.0.1", "10.50.0.20"},
		{"static", "10.50.0.50", "10.50.0.199"},
		{"dynamic", "10.50.0.200", "10.50.0.250"},
	} {
		mustDo(t, n, http.StatusCreated, "POST", "/api/v1/ranges", wire.RangeRequest{Subnet: "10.50.0.0/24", Kind: r[0], First: r[1], Last: r[2]}, admin)
	}
	var m wire.MachineView
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "node1"}, admin).Decode(t, &m)
	return m.ID
}

func TestNetworkAPI(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	mid := referenceSite(t, n, admin)

	alloc := func(body wire.AllocateRequest) wire.Address {
		t.Helper()
		r := mustDo(t, n, http.StatusCreated, "POST", "/api/v1/ips/allocate", body, admin)
		if r.Header.Get(headerIndex) == "" {
			t.Errorf("allocate: no %s", headerIndex)
		}
		var a wire.Address
		r.Decode(t, &a)
		return a
	}
	// Auto allocation walks the static range from its start, by name or ID.
	a := alloc(wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: "node1", Interface: "eth0"})
	if a.IP != netip.MustParseAddr("10.50.0.50") || a.How != store.HowAuto || a.Machine != mid || a.Interface != "eth0" || a.Created.IsZero() {
		t.Fatalf("first allocation = %+v", a)
	}
	if a := alloc(wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: mid}); a.IP.String() != "10.50.0.51" {
		t.Fatalf("second allocation = %+v", a)
	}
	// A given address is static.
	if a := alloc(wire.AllocateRequest{Machine: "node1", IP: "10.50.0.60", Interface: "eth1"}); a.How != store.HowStatic || a.Subnet.String() != "10.50.0.0/24" {
		t.Fatalf("static allocation = %+v", a)
	}
	var rsv wire.Address
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/ips/reserve", wire.ReserveRequest{IP: "10.50.0.5", Name: "switch-1"}, admin).Decode(t, &rsv)
	if rsv.How != store.HowReserved || rsv.Name != "switch-1" {
		t.Fatalf("reserve = %+v", rsv)
	}

	// Release, and the freed address comes back first.
	mustDo(t, n, http.StatusOK, "DELETE", "/api/v1/ips/10.50.0.50", nil, admin)
	if a := alloc(wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: mid}); a.IP.String() != "10.50.0.50" {
		t.Fatalf("after release = %+v", a)
	}

	var ips wire.AddressList
	r := mustDo(t, n, http.StatusOK, "GET", "/api/v1/ips?subnet=10.50.0.0/24", nil, admin)
	r.Decode(t, &ips)
	var got []string
	for _, a := range ips.Addresses {
		got = append(got, a.IP.String()+" "+a.How)
	}
	if want := "10.50.0.5 reserved,10.50.0.50 auto,10.50.0.51 auto,10.50.0.60 static"; strings.Join(got, ",") != want {
		t.Fatalf("ip list = %v, want %s", got, want)
	}
	if r.Header.Get(headerIndex) != fmt.Sprint(ips.Index) || ips.Index == 0 {
		t.Errorf("%s = %q, body index %d", headerIndex, r.Header.Get(headerIndex), ips.Index)
	}

	var sd wire.SubnetDetail
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/subnets/10.50.0.0/24", nil, admin).Decode(t, &sd)
	if sd.Used != 4 || len(sd.Ranges) != 3 || sd.Gateway.String() != "10.50.0.1" || sd.Domain != "dc.example" || len(sd.DNS) != 1 {
		t.Fatalf("subnet = %+v", sd)
	}
	var sl wire.SubnetList
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/subnets", nil, admin).Decode(t, &sl)
	if len(sl.Subnets) != 1 || sl.Subnets[0].Used != 4 {
		t.Fatalf("subnet list = %+v", sl)
	}
	var rl wire.RangeList
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/ranges?subnet=10.50.0.0/24", nil, admin).Decode(t, &rl)
	if len(rl.Ranges) != 3 || rl.Ranges[0].Kind != "reserved" || rl.Ranges[2].Kind != "dynamic" {
		t.Fatalf("ranges = %+v", rl)
	}

	// PUT replaces the VLAN's DHCP service.
	var vd wire.VLANDetail
	mustDo(t, n, http.StatusOK, "PUT", "/api/v1/vlans/hall-a/0", wire.VLANUpdate{DHCP: "full", Servers: []wire.VLANServer{{Node: "t1", Iface: "eth1"}}, MTU: 9000}, admin).Decode(t, &vd)
	if vd.DHCP != "full" || vd.MTU != 9000 || len(vd.Servers) != 1 || len(vd.Subnets) != 1 || vd.Created.IsZero() {
		t.Fatalf("vlan after PUT = %+v", vd)
	}
	var fd wire.FabricDetail
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/fabrics/hall-a", nil, admin).Decode(t, &fd)
	if fd.Kind != "ethernet" || len(fd.VLANs) != 1 || fd.VLANs[0].DHCP != "full" {
		t.Fatalf("fabric = %+v", fd)
	}

	// IPv6: a static range, allocation, and a subnet path with colons.
	vid := 0
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "fd00:50::/64", Fabric: "hall-a", VID: &vid, Purpose: "storage", Gateway: "fd00:50::1"}, admin)
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/ranges", wire.RangeRequest{Subnet: "fd00:50::/64", Kind: "static", First: "fd00:50::10", Last: "fd00:50::ff"}, admin)
	if a := alloc(wire.AllocateRequest{Subnet: "fd00:50::/64", Machine: mid}); a.IP.String() != "fd00:50::10" {
		t.Fatalf("IPv6 allocation = %+v", a)
	}
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/subnets/fd00:50::/64", nil, admin)

	// A blocking list wakes on a write to the network table.
	var il wire.AddressList
	r = mustDo(t, n, http.StatusOK, "GET", "/api/v1/ips", nil, admin)
	r.Decode(t, &il)
	go func() {
		time.Sleep(100 * time.Millisecond)
		n.Do(t, "POST", "/api/v1/ips/reserve", wire.ReserveRequest{IP: "10.50.0.6", Name: "switch-2"}, nodetest.Bearer(admin)...)
	}()
	waited := n.Do(t, "GET", fmt.Sprintf("/api/v1/ips?index=%d&wait=5s", il.Index), nil, nodetest.Bearer(admin)...)
	var wl wire.AddressList
	waited.Decode(t, &wl)
	if wl.Index <= il.Index || len(wl.Addresses) != len(il.Addresses)+1 {
		t.Fatalf("blocking query = %s, want the reservation", waited)
	}

	// Removal: ranges, then the subnet only with force while it has addresses.
	mustDo(t, n, http.StatusOK, "DELETE", "/api/v1/ranges/10.50.0.200", nil, admin)
	r = mustDo(t, n, http.StatusConflict, "DELETE", "/api/v1/subnets/10.50.0.0/24", nil, admin)
	if !strings.Contains(r.ErrorMessage(), "10.50.0.5") || !strings.Contains(r.ErrorMessage(), "-force") {
		t.Errorf("delete without force: %s", r)
	}
	mustDo(t, n, http.StatusOK, "DELETE", "/api/v1/subnets/10.50.0.0/24?force=1", nil, admin)
	mustDo(t, n, http.StatusNotFound, "GET", "/api/v1/subnets/10.50.0.0/24", nil, admin)
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/ips?subnet=10.0.0.0/8", nil, admin) // any prefix filters
	var left wire.AddressList
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/ips", nil, admin).Decode(t, &left)
	if len(left.Addresses) != 1 || left.Addresses[0].IP.String() != "fd00:50::10" {
		t.Fatalf("addresses after forced delete = %+v", left.Addresses)
	}
	mustDo(t, n, http.StatusOK, "DELETE", "/api/v1/subnets/fd00:50::/64?force=1", nil, admin)
	mustDo(t, n, http.StatusOK, "DELETE", "/api/v1/vlans/hall-a/0", nil, admin)
	mustDo(t, n, http.StatusOK, "DELETE", "/api/v1/fabrics/hall-a", nil, admin)
	var fl wire.FabricList
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/fabrics", nil, admin).Decode(t, &fl)
	if len(fl.Fabrics) != 0 || fl.Fabrics == nil {
		t.Fatalf("fabrics = %+v", fl)
	}
}

// TestConcurrentAllocate: many clients on one node at once each get a
// different address, and nothing in the range is skipped for good.
func TestConcurrentAllocate(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	mid := referenceSite(t, n, admin)
	const clients, each = 16, 6
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range each {
				r := n.Do(t, "POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: mid}, nodetest.Bearer(admin)...)
				if r.Status != http.StatusCreated {
					t.Errorf("allocate: %s", r)
					return
				}
				var a wire.Address
				r.Decode(t, &a)
				mu.Lock()
				if seen[a.IP.String()] {
					t.Errorf("%s handed out twice", a.IP)
				}
				seen[a.IP.String()] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// The static range has 150 addresses: the rest still come out, down to
	// the last one, then the subnet is full.
	for range 150 - clients*each {
		mustDo(t, n, http.StatusCreated, "POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: mid}, admin)
	}
	r := mustDo(t, n, http.StatusConflict, "POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: mid}, admin)
	if !strings.Contains(r.ErrorMessage(), "no free address") {
		t.Errorf("full subnet: %s", r)
	}
}

func TestNetworkBadInput(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	mid := referenceSite(t, n, admin)
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/ips/reserve", wire.ReserveRequest{IP: "10.50.0.5", Name: "switch-1"}, admin)
	vid := 0
	tests := map[string]struct {
		method, path string
		body         any
		status       int
		message      []string
	}{
		"unknown field":          {"POST", "/api/v1/fabrics", `{"name": "x", "knd": "ethernet"}`, 400, []string{`unknown field "knd"`}},
		"fabric kind":            {"POST", "/api/v1/fabrics", wire.FabricRequest{Name: "hall-b", Kind: "fddi"}, 400, []string{`"fddi"`, "ethernet, infiniband"}},
		"fabric name":            {"POST", "/api/v1/fabrics", wire.FabricRequest{Name: "Hall B"}, 400, []string{`"Hall B"`}},
		"fabric twice":           {"POST", "/api/v1/fabrics", wire.FabricRequest{Name: "hall-a"}, 409, []string{`"hall-a"`}},
		"fabric with its VLAN":   {"DELETE", "/api/v1/fabrics/hall-a", nil, 409, []string{`"hall-a"`, "VLAN 0"}},
		"fabric unknown":         {"GET", "/api/v1/fabrics/hall-z", nil, 404, []string{"hall-z"}},
		"VID above 4094":         {"POST", "/api/v1/vlans", map[string]any{"fabric": "hall-a", "vid": 4095}, 400, []string{"4095", "0–4094"}},
		"VID missing":            {"POST", "/api/v1/vlans", map[string]any{"fabric": "hall-a"}, 400, []string{"vid is required"}},
		"VID in a path":          {"GET", "/api/v1/vlans/hall-a/5000", nil, 400, []string{`"5000"`, "0–4094"}},
		"VID not a number":       {"DELETE", "/api/v1/vlans/hall-a/x", nil, 400, []string{`"x"`}},
		"VLAN DHCP without node": {"PUT", "/api/v1/vlans/hall-a/0", wire.VLANUpdate{DHCP: "full"}, 400, []string{"hall-a/0", "-node"}},
		"VLAN DHCP mode":         {"PUT", "/api/v1/vlans/hall-a/0", wire.VLANUpdate{DHCP: "relay"}, 400, []string{`"relay"`, "off, full, proxy"}},
		"VLAN unknown":           {"PUT", "/api/v1/vlans/hall-a/7", wire.VLANUpdate{}, 404, []string{"hall-a/7"}},
		"VLAN boot loader":       {"PUT", "/api/v1/vlans/hall-a/0", wire.VLANUpdate{BootLoader: "grub"}, 400, []string{`"grub"`, "ipxe, pxelinux"}},
		"VLAN boot loader, add":  {"POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-a", VID: &vid, BootLoader: "PXELINUX"}, 400, []string{`"PXELINUX"`, "ipxe, pxelinux"}},
		"VLAN with its subnet":   {"DELETE", "/api/v1/vlans/hall-a/0", nil, 409, []string{"hall-a/0", "10.50.0.0/24"}},
		"bad CIDR": {"POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "10.50.0.0/33", Fabric: "hall-a", VID: &vid, Purpose: "mgmt"},
			400, []string{`"10.50.0.0/33"`}},
		"bad gateway": {"POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "10.60.0.0/24", Fabric: "hall-a", VID: &vid, Purpose: "mgmt", Gateway: "10.60.0.300"},
			400, []string{`"10.60.0.300"`}},
		"bad DNS server": {"POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "10.60.0.0/24", Fabric: "hall-a", VID: &vid, Purpose: "mgmt", DNS: []string{"dns.example"}},
			400, []string{`"dns.example"`}},
		"subnet VID missing": {"POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "10.60.0.0/24", Fabric: "hall-a", Purpose: "mgmt"},
			400, []string{"vid is required"}},
		"overlapping subnets": {"POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "10.50.0.0/16", Fabric: "hall-a", VID: &vid, Purpose: "mgmt"},
			409, []string{"10.50.0.0/16", "10.50.0.0/24"}},
		"gateway outside": {"POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "10.60.0.0/24", Fabric: "hall-a", VID: &vid, Purpose: "mgmt", Gateway: "10.61.0.1"},
			400, []string{"10.61.0.1", "10.60.0.0/24"}},
		"subnet path":           {"GET", "/api/v1/subnets/10.50.0.0/99", nil, 400, []string{`"10.50.0.0/99"`}},
		"subnet with addresses": {"DELETE", "/api/v1/subnets/10.50.0.0/24", nil, 409, []string{"10.50.0.0/24", "10.50.0.5", "-force"}},
		"force value":           {"DELETE", "/api/v1/subnets/10.50.0.0/24?force=maybe", nil, 400, []string{`"maybe"`}},
		"range outside": {"POST", "/api/v1/ranges", wire.RangeRequest{Subnet: "10.50.0.0/24", Kind: "static", First: "10.50.0.251", Last: "10.50.1.5"},
			400, []string{"10.50.0.251–10.50.1.5", "10.50.0.0/24"}},
		"overlapping ranges": {"POST", "/api/v1/ranges", wire.RangeRequest{Subnet: "10.50.0.0/24", Kind: "reserved", First: "10.50.0.180", Last: "10.50.0.210"},
			409, []string{"10.50.0.180–10.50.0.210", "static range 10.50.0.50–10.50.0.199"}},
		"range first": {"POST", "/api/v1/ranges", wire.RangeRequest{Subnet: "10.50.0.0/24", Kind: "static", First: "ten", Last: "10.50.0.30"},
			400, []string{`"ten"`}},
		"range kind": {"POST", "/api/v1/ranges", wire.RangeRequest{Subnet: "10.50.0.0/24", Kind: "pool", First: "10.50.0.21", Last: "10.50.0.30"},
			400, []string{`"pool"`, "dynamic, reserved, static"}},
		"range list subnet": {"GET", "/api/v1/ranges?subnet=bogus", nil, 400, []string{`"bogus"`}},
		"range unknown":     {"DELETE", "/api/v1/ranges/10.50.0.30", nil, 404, []string{"10.50.0.30"}},
		"reservation in dynamic": {"POST", "/api/v1/ips/reserve", wire.ReserveRequest{IP: "10.50.0.210", Name: "switch-2"},
			409, []string{"10.50.0.210", "dynamic range 10.50.0.200–10.50.0.250"}},
		"reservation without name": {"POST", "/api/v1/ips/reserve", wire.ReserveRequest{IP: "10.50.0.6"}, 400, []string{"name"}},
		"reservation taken": {"POST", "/api/v1/ips/reserve", wire.ReserveRequest{IP: "10.50.0.5", Name: "switch-9"},
			409, []string{"10.50.0.5", "switch-1"}},
		"reservation outside every subnet": {"POST", "/api/v1/ips/reserve", wire.ReserveRequest{IP: "192.0.2.1", Name: "x"}, 404, []string{"192.0.2.1"}},
		"allocate bad subnet":              {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "nope", Machine: mid}, 400, []string{`"nope"`}},
		"allocate unknown subnet":          {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.99.0.0/24", Machine: mid}, 404, []string{"10.99.0.0/24"}},
		"allocate unknown machine":         {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: "nobody"}, 404, []string{"nobody"}},
		"allocate without machine":         {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.50.0.0/24"}, 400, []string{"machine is required"}},
		"static in dynamic": {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Machine: mid, IP: "10.50.0.220"},
			409, []string{"10.50.0.220", "dynamic range 10.50.0.200–10.50.0.250"}},
		"static taken": {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Machine: mid, IP: "10.50.0.5"},
			409, []string{"10.50.0.5", "already in use", "switch-1"}},
		"static on the gateway": {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Machine: mid, IP: "10.50.0.1"},
			409, []string{"10.50.0.1", "gateway", "10.50.0.0/24"}},
		"static in another subnet": {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: mid, IP: "10.50.1.1"},
			404, []string{"10.50.1.1"}},
		"release free": {"DELETE", "/api/v1/ips/10.50.0.77", nil, 404, []string{"10.50.0.77"}},
		"release bad":  {"DELETE", "/api/v1/ips/10.50.0", nil, 400, []string{`"10.50.0"`}},
		"ips subnet":   {"GET", "/api/v1/ips?subnet=10.50.0.0", nil, 400, []string{`"10.50.0.0"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, tc.method, tc.path, tc.body, nodetest.Bearer(admin)...)
			if r.Status != tc.status {
				t.Fatalf("%s %s = %s, want %d", tc.method, tc.path, r, tc.status)
			}
			for _, m := range tc.message {
				if !strings.Contains(r.ErrorMessage(), m) {
					t.Errorf("message %q does not name %q", r.ErrorMessage(), m)
				}
			}
			if after := stateOf(n); after.applied != before.applied {
				t.Errorf("a refused request went through the log (applied %d → %d)", before.applied, after.applied)
			}
		})
	}
	t.Run("admin token required", func(t *testing.T) {
		for _, path := range []string{"/api/v1/fabrics", "/api/v1/vlans", "/api/v1/subnets", "/api/v1/ranges", "/api/v1/ips"} {
			if r := n.Do(t, "GET", path, nil); r.Status != http.StatusUnauthorized {
				t.Errorf("GET %s without a token = %s", path, r)
			}
		}
	})
}
