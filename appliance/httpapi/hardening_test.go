package httpapi_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/httpapi"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"

	"github.com/rollcall/rollcall/appliance/boottoken"
)

// Regression tests for the outside probe's findings on the agent's side of
// the API (the provisioning network is hostile): each reproduction first,
// then the same class elsewhere.

var tokenArg = regexp.MustCompile(`rollcall\.token=(\S+)`)

// scriptToken is the token the iPXE script hands mac.
func scriptToken(t *testing.T, n *nodetest.Node, mac string) string {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/boot/ipxe?mac=" + mac)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := tokenArg.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no token in the script for %s:\n%s", mac, b)
	}
	return m[1]
}

// Finding 1: a commission upload with the agent token redirected an
// operator-set BMC to the attacker's address, and the next power call sent
// the operator's password there.
func TestBMCCannotBeRedirected(t *testing.T) {
	n := nodetest.Start(t)

	admin, agent := n.Admin, n.Agent
	n.ImportImage(t, admin, "commissioning", []byte("kernel bytes"), []byte("initrd bytes")) // boot scripts then boot the agent, and hand out its token
	const mac = "52:54:00:00:77:01"

	// The attacker's "BMC": any request reaching it is a leak.
	var hits atomic.Int32
	trap := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "trap", http.StatusTeapot)
	}))
	defer trap.Close()
	trapAddr := strings.TrimPrefix(trap.URL, "https://")

	if r := n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "victim", MAC: mac}, nodetest.Bearer(admin)...); r.Status != http.StatusCreated {
		t.Fatalf("add: %s", r)
	}
	if r := n.Do(t, "PUT", "/api/v1/machines/victim/bmc", wire.BMCRequest{Driver: "ipmi", Address: "127.0.0.1", User: "opadmin", Password: "op-secret-1"}, nodetest.Bearer(admin)...); r.Status != http.StatusOK {
		t.Fatalf("bmc: %s", r)
	}
	before := machineByName(t, n, "victim")

	// The shared agent token no longer commissions at all.
	attack := `{"version":1,"boot_mac":"` + mac + `","bmc":{"driver":"redfish","address":"` + trapAddr + `","user":"opadmin"}}`
	if r := n.Do(t, "POST", "/api/v1/commission", attack, nodetest.AgentHeader(agent)...); r.Status != http.StatusUnauthorized {
		t.Fatalf("commission with the shared agent token: %s, want 401", r)
	}
	// The boot token the script hands that MAC commissions, but cannot
	// touch the operator's BMC.
	boot := scriptToken(t, n, mac)
	if r := n.Do(t, "POST", "/api/v1/commission", attack, nodetest.AgentHeader(boot)...); r.Status != http.StatusOK {
		t.Fatalf("commission with the boot token: %s", r)
	}
	after := machineByName(t, n, "victim")
	if after.BMC == nil || after.BMC.Driver != "ipmi" || after.BMC.Address != "127.0.0.1" || string(after.BMC.PasswordSealed) != string(before.BMC.PasswordSealed) {
		t.Fatalf("the operator's BMC changed: %+v", after.BMC)
	}
	if d, _ := getMachine(t, n, admin, "victim"); !hasEvent(d.Events, "bmc-kept") {
		t.Errorf("no bmc-kept event: %+v", d.Events)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests reached the attacker's address", hits.Load())
	}
}

// A password is bound to the address it was made for, whoever changes it.
func TestBMCPasswordBoundToAddress(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	rep := testReport("0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f", "BIND0001", "0c:c4:7a:77:00:01")
	rep.BMC = &inventory.BMC{Driver: "ipmi", Address: "127.0.0.1:6230", User: "rollcall", Password: "agent-made-1"}
	id := commission(t, n, "", rep).ID
	m := machineByName(t, n, id)
	if pw, err := httpapi.OpenBMCPassword(n.Key(t), *m.BMC); err != nil || pw != "agent-made-1" {
		t.Fatalf("open the agent's password: %q %v", pw, err)
	}
	// The same agent, booted again, reports another address and no password.
	if r := n.Do(t, "POST", "/api/v1/machines/"+id+"/recommission", nil, nodetest.Bearer(admin)...); r.Status != http.StatusOK {
		t.Fatalf("recommission: %s", r)
	}
	rep.BMC = &inventory.BMC{Driver: "ipmi", Address: "127.0.0.1:6231", User: "rollcall"}
	commission(t, n, "", rep)
	if m := machineByName(t, n, id); len(m.BMC.PasswordSealed) != 0 || m.BMC.Address != "127.0.0.1:6231" {
		t.Fatalf("the password followed the BMC to a new address: %+v", m.BMC)
	}
	// A sealed password moved to another address by hand never opens.
	moved := *m.BMC
	moved.Address = "127.0.0.1:9999"
	if _, err := httpapi.OpenBMCPassword(n.Key(t), moved); err == nil {
		t.Fatal("a password opened for an address it was not made for")
	}
	// An operator who changes the address without a password loses it too.
	if r := n.Do(t, "PUT", "/api/v1/machines/"+id+"/bmc", wire.BMCRequest{Driver: "ipmi", Address: "127.0.0.1:6232", User: "op", Password: "op-made-1"}, nodetest.Bearer(admin)...); r.Status != http.StatusOK {
		t.Fatalf("bmc: %s", r)
	}
	if r := n.Do(t, "PUT", "/api/v1/machines/"+id+"/bmc", wire.BMCRequest{Driver: "ipmi", Address: "127.0.0.1:6233", User: "op"}, nodetest.Bearer(admin)...); r.Status != http.StatusOK {
		t.Fatalf("bmc: %s", r)
	}
	if m := machineByName(t, n, id); len(m.BMC.PasswordSealed) != 0 {
		t.Fatalf("the operator's password followed a new address: %+v", m.BMC)
	}
}

func machineByName(t *testing.T, n *nodetest.Node, ref string) store.Machine {
	t.Helper()
	var m store.Machine
	n.Store().View(func(tx *store.Tx) error { m, _ = tx.MachineByRef(ref); return nil })
	if m.ID == "" {
		t.Fatalf("no machine %s", ref)
	}
	return m
}

// A boot token acts for its own machine only, and only while it boots.
func TestBootTokenScope(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	n.ImportImage(t, admin, "commissioning", []byte("kernel bytes"), []byte("initrd bytes")) // boot scripts then boot the agent, and hand out its token
	ready := testReport("1a2b3c4d-0000-4e5f-8a9b-0c1d2e3f4a01", "READY0001", "0c:c4:7a:70:00:01", "0c:c4:7a:70:00:02")
	commission(t, n, "", ready)

	attacker := "52:54:00:66:00:01"
	boot := nodetest.AgentHeader(scriptToken(t, n, attacker))
	tests := map[string]struct {
		path string
		body any
		want int
		msg  string
	}{
		"enlist as another MAC":                      {"/api/v1/enlist", wire.EnlistRequest{Serial: "EVIL0001", BootMAC: "52:54:00:66:00:02"}, 403, "not the MAC"},
		"enlist claiming a ready machine's UUID":     {"/api/v1/enlist", wire.EnlistRequest{SystemUUID: ready.System.UUID, BootMAC: attacker}, 403, "does not own"},
		"enlist taking a ready machine's MAC":        {"/api/v1/enlist", wire.EnlistRequest{Serial: "EVIL0002", BootMAC: attacker, MACs: []string{attacker, "0c:c4:7a:70:00:02"}}, 403, "an operator must release it"},
		"commission claiming a ready machine's UUID": {"/api/v1/commission", testReport(ready.System.UUID, "EVIL0003", attacker), 403, "does not own"},
		"commission as the ready machine":            {"/api/v1/commission", ready, 403, "not the MAC"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, "POST", tc.path, tc.body, boot...)
			if r.Status != tc.want || !strings.Contains(r.ErrorMessage(), tc.msg) {
				t.Fatalf("got %s, want %d with %q", r, tc.want, tc.msg)
			}
			if after := stateOf(n); after != before {
				t.Errorf("a refused request changed the store or took an entry: %+v → %+v", before, after)
			}
		})
	}
	// The ready machine's own token is refused too: it acts only while
	// its machine is new or commissioning.
	// (Its boot script powers it off and hands out no token at all.)
	own := nodetest.AgentHeader(n.BootToken(t, ready.BootMAC))
	if r := n.Do(t, "POST", "/api/v1/enlist", wire.EnlistRequest{SystemUUID: ready.System.UUID, BootMAC: ready.BootMAC}, own...); r.Status != http.StatusForbidden {
		t.Fatalf("a ready machine's token enlisted: %s", r)
	}
	// A token for one MAC has nothing in common with another's.
	if a, b := scriptToken(t, n, "52:54:00:66:00:01"), scriptToken(t, n, "52:54:00:66:00:02"); a == b || !strings.HasPrefix(a, boottoken.Prefix) {
		t.Fatalf("tokens %q and %q", a, b)
	}
}

// Finding 4: 65,536 MACs were searched for BMC hints in 4 requests.
func TestBMCHintsOnlyForTheBootedMachine(t *testing.T) {
	n := nodetest.StartWith(t, nodetest.Options{Config: `{"bmc_hints": {"52:54:00:55:00:09": {"driver": "redfish", "address": "127.0.0.1:1", "user": "u", "password": "hint-secret-9"}}}`})

	agent := n.Agent
	boot := nodetest.AgentHeader(n.BootToken(t, "52:54:00:55:00:01"))
	many := make([]string, 16384)
	for i := range many {
		many[i] = "52:54:00:55:" + hex2(i>>8) + ":" + hex2(i&0xff)
	}
	// The whole request line is past the header limit (431) before the
	// handler's own bound of 8 MACs (400) is reached.
	if r := n.Do(t, "GET", "/api/v1/bmc-hint?macs="+strings.Join(many, ","), nil, boot...); r.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("16,384 MACs: %s", r)
	}
	if r := n.Do(t, "GET", "/api/v1/bmc-hint?macs="+strings.Join(many[:9], ","), nil, boot...); r.Status != http.StatusBadRequest {
		t.Fatalf("9 MACs: %s", r)
	}
	if r := n.Do(t, "GET", "/api/v1/bmc-hint?macs=52:54:00:55:00:09", nil, boot...); r.Status != http.StatusForbidden || strings.Contains(string(r.Body), "hint-secret") {
		t.Fatalf("another machine's hint: %s", r)
	}
	if r := n.Do(t, "GET", "/api/v1/bmc-hint?macs=52:54:00:55:00:09", nil, nodetest.AgentHeader(agent)...); r.Status != http.StatusUnauthorized {
		t.Fatalf("hint with the shared agent token: %s", r)
	}
	owner := nodetest.AgentHeader(n.BootToken(t, "52:54:00:55:00:09"))
	if r := n.Do(t, "GET", "/api/v1/bmc-hint?macs=52:54:00:55:00:09", nil, owner...); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "hint-secret-9") {
		t.Fatalf("the machine's own hint: %s", r)
	}
	limited := false
	for range httpapi.HintsPerMinute + 1 {
		if r := n.Do(t, "GET", "/api/v1/bmc-hint?macs=52:54:00:55:00:09", nil, owner...); r.Status == http.StatusTooManyRequests {
			limited = true
		}
	}
	if !limited {
		t.Fatalf("%d hints in a row were not rate-limited", httpapi.HintsPerMinute+2)
	}
}

func hex2(b int) string { return fmt.Sprintf("%02x", b&0xff) }

// Finding 2: 300,000 addresses under one NIC stalled every write of the
// cluster. Every field is bounded, before anything is proposed.
func TestCommissionLimits(t *testing.T) {
	n := nodetest.Start(t)
	const mac = "0c:c4:7a:71:00:01"
	boot := nodetest.AgentHeader(n.BootToken(t, mac))
	post := func(t *testing.T, rep inventory.Report) nodetest.Response {
		t.Helper()
		before := stateOf(n)
		r := n.Do(t, "POST", "/api/v1/commission", rep, boot...)
		if after := stateOf(n); r.Status != http.StatusOK && after != before {
			t.Errorf("a refused report changed the store or took an entry: %+v → %+v", before, after)
		}
		return r
	}
	rep := testReport("2b3c4d5e-0000-4f60-8a9b-0c1d2e3f4a02", "LIMIT0001", mac)
	ips := make([]string, 300000)
	for i := range ips {
		ips[i] = "10.0.0.1"
	}
	rep.NICs[0].IPs = ips
	if r := post(t, rep); r.Status != http.StatusRequestEntityTooLarge && r.Status != http.StatusBadRequest {
		t.Fatalf("300,000 addresses: %s", r)
	}
	rep.NICs[0].IPs = ips[:65]
	if r := post(t, rep); r.Status != http.StatusBadRequest || !strings.Contains(r.ErrorMessage(), "nics[].ips") {
		t.Fatalf("65 addresses on one NIC: %s", r)
	}
	rep.NICs[0].IPs = nil

	// Every string field of a report, one at a time: too long, then with a
	// terminal escape.
	for _, path := range stringFields(reflect.TypeOf(inventory.Report{}), "") {
		for what, v := range map[string]string{"long": strings.Repeat("x", 1100), "escape": "a\x1b[2Jb"} {
			r := rep
			b, _ := json.Marshal(r)
			var doc map[string]any
			json.Unmarshal(b, &doc)
			setPath(doc, path, v)
			body, _ := json.Marshal(doc)
			got := post(t, decodeReport(t, body))
			if got.Status != http.StatusBadRequest && got.Status != http.StatusForbidden {
				t.Errorf("%s %s: %s", path, what, got)
			}
		}
	}
	// The largest machine of the fleet simulator fits with room to spare.
	if r := post(t, rep); r.Status != http.StatusOK {
		t.Fatalf("a normal report: %s", r)
	}
}

// stringFields lists the JSON paths of every string field reachable in t
// without going through a list (lists get one element made for them).
func stringFields(t reflect.Type, prefix string) []string {
	var out []string
	switch t.Kind() {
	case reflect.Pointer:
		return stringFields(t.Elem(), prefix)
	case reflect.Slice:
		return stringFields(t.Elem(), prefix+"[]")
	case reflect.Struct:
		if t == reflect.TypeOf(time.Time{}) {
			return nil
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			out = append(out, stringFields(f.Type, p)...)
		}
	case reflect.String:
		out = append(out, prefix)
	}
	return out
}

// setPath sets a string at a path of stringFields in a decoded document,
// making the objects and one-element lists on the way.
func setPath(doc map[string]any, path string, v string) {
	parts := strings.Split(path, ".")
	var cur any = doc
	for i, p := range parts {
		list := strings.HasSuffix(p, "[]")
		key := strings.TrimSuffix(p, "[]")
		m := cur.(map[string]any)
		last := i == len(parts)-1
		switch {
		case last && list:
			m[key] = []any{v}
		case last:
			m[key] = v
		case list:
			l, _ := m[key].([]any)
			if len(l) == 0 {
				l = []any{map[string]any{}}
			}
			if _, ok := l[0].(map[string]any); !ok {
				l[0] = map[string]any{}
			}
			m[key] = l
			cur = l[0]
		default:
			o, ok := m[key].(map[string]any)
			if !ok {
				o = map[string]any{}
				m[key] = o
			}
			cur = o
		}
	}
}

func decodeReport(t *testing.T, b []byte) inventory.Report {
	t.Helper()
	var r inventory.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return r
}

// Finding 8: an enlist stored a serial with NUL, newline and terminal
// escapes, and an 80 KB serial failed with a 500 after a Raft entry.
func TestEnlistValidatesEveryString(t *testing.T) {
	n := nodetest.Start(t)

	agent := n.Agent
	for name, body := range map[string]wire.EnlistRequest{
		"NUL":            {Serial: "SER\x00IAL"},
		"newline":        {Serial: "SER\nIAL"},
		"terminal":       {Serial: "\x1b]0;owned\x07"},
		"80 KB":          {Serial: strings.Repeat("S", 80<<10)},
		"too many MACs":  {Serial: "MANY0001", MACs: make([]string, httpapi.MaxEnlistMACs+1)},
		"invalid UTF-8":  {Serial: "\xff\xfe"},
		"long boot MAC":  {Serial: "LONGMAC1", BootMAC: strings.Repeat("5", 300)},
		"long UUID junk": {SystemUUID: strings.Repeat("u", 300)},
	} {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, "POST", "/api/v1/enlist", body, nodetest.AgentHeader(agent)...)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("got %s, want 400", r)
			}
			if after := stateOf(n); after != before {
				t.Errorf("state changed: %+v → %+v", before, after)
			}
		})
	}
}

// Finding 12, the BMC half: the admin API took a 900 KB password, an
// address with a newline and 50,000 settings.
func TestBMCRequestLimits(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	if r := n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "limits"}, nodetest.Bearer(admin)...); r.Status != http.StatusCreated {
		t.Fatalf("add: %s", r)
	}
	settings := map[string]string{}
	for i := range 50000 {
		settings["k"+strconv.Itoa(i)] = "v"
	}
	for name, req := range map[string]wire.BMCRequest{
		"900 KB password":      {Driver: "ipmi", Address: "127.0.0.1", Password: strings.Repeat("p", 900<<10)},
		"address with newline": {Driver: "ipmi", Address: "127.0.0.1\nX-Evil: 1"},
		"50,000 settings":      {Driver: "ipmi", Address: "127.0.0.1", Settings: settings},
		"escape in a setting":  {Driver: "ipmi", Address: "127.0.0.1", Settings: map[string]string{"cipher": "\x1b[31m"}},
		"300-character driver": {Driver: strings.Repeat("d", 300), Address: "127.0.0.1"},
		"userinfo in address":  {Driver: "redfish", Address: "https://root:ppppp-pw@10.0.0.5"},
	} {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, "PUT", "/api/v1/machines/limits/bmc", req, nodetest.Bearer(admin)...)
			if r.Status != http.StatusBadRequest && r.Status != http.StatusRequestEntityTooLarge {
				t.Fatalf("got %s, want 400", r)
			}
			if strings.Contains(string(r.Body), "ppppp") {
				t.Errorf("the answer echoes the password")
			}
			if after := stateOf(n); after != before {
				t.Errorf("state changed: %+v → %+v", before, after)
			}
		})
	}
}

// Finding 14: a link in ipxe_dir to admin.token was served to anyone.
func TestBootFilesDoNotFollowLinksOut(t *testing.T) {
	ipxe := t.TempDir()
	n := nodetest.StartWith(t, nodetest.Options{Config: `{"ipxe_dir": "` + ipxe + `"}`})

	admin := n.Admin
	if err := os.Symlink(filepath.Join(n.Dir, "admin.token"), filepath.Join(ipxe, "ipxe.efi")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ipxe, "snponly.efi"), []byte("MZ-snponly"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := n.Do(t, "GET", "/boot/ipxe.efi", nil)
	if r.Status != http.StatusNotFound || strings.Contains(string(r.Body), admin) {
		t.Fatalf("a link to admin.token: %s", r)
	}
	if r := n.Do(t, "GET", "/boot/snponly.efi", nil); r.Status != http.StatusOK || string(r.Body) != "MZ-snponly" {
		t.Fatalf("a real boot file: %s", r)
	}
}

// Finding 6: 1,000 blocking readers of a 7 MB list took a node from 0.4 to
// 4.4 GB when one write woke them. The whole list is encoded once per change
// and shared, gzipped on request, paged on request, and waiters are capped.
func TestListSharedPagedAndCapped(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	for i := range 25 {
		if r := n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: fmt.Sprintf("page-%02d", i)}, nodetest.Bearer(admin)...); r.Status != http.StatusCreated {
			t.Fatalf("add: %s", r)
		}
	}
	a, shared, err := n.API().SharedList()
	if err != nil {
		t.Fatal(err)
	}
	if b, _, _ := n.API().SharedList(); a != b {
		t.Fatal("the same list was encoded twice")
	}
	plain := n.Do(t, "GET", "/api/v1/machines", nil, nodetest.Bearer(admin)...)
	if string(plain.Body) != string(shared) {
		t.Fatalf("the answer is not the shared encoding")
	}
	// gzip when asked (a Transport that does not decode for us).
	req, _ := http.NewRequest("GET", "http://"+n.HTTPAddr()+"/api/v1/machines", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("no gzip: %v %q", err, resp.Header.Get("Content-Encoding"))
	}
	unz, _ := io.ReadAll(zr)
	resp.Body.Close()
	if string(unz) != string(shared) {
		t.Fatal("the gzipped answer differs")
	}
	// Pages of 10 cover the list once, in order.
	var seen []string
	after := ""
	for page := 0; ; page++ {
		var l wire.MachineList
		r := n.Do(t, "GET", "/api/v1/machines?limit=10&after="+after, nil, nodetest.Bearer(admin)...)
		r.Decode(t, &l)
		for _, m := range l.Machines {
			seen = append(seen, m.ID)
		}
		if l.Next == "" {
			break
		}
		if page > 5 || len(l.Machines) != 10 {
			t.Fatalf("page %d: %d machines, next %q", page, len(l.Machines), l.Next)
		}
		after = l.Next
	}
	var all wire.MachineList
	plain.Decode(t, &all)
	if len(seen) != len(all.Machines) || len(seen) != 25 {
		t.Fatalf("pages saw %d machines, the list has %d", len(seen), len(all.Machines))
	}
	for i := range seen {
		if seen[i] != all.Machines[i].ID {
			t.Fatalf("page order differs at %d: %s vs %s", i, seen[i], all.Machines[i].ID)
		}
	}
	if r := n.Do(t, "GET", "/api/v1/machines?limit=0", nil, nodetest.Bearer(admin)...); r.Status != http.StatusBadRequest {
		t.Fatalf("limit=0: %s", r)
	}

	// More blocking queries than the cap: the ones past it are refused at
	// once with 429, the others are answered by one write.
	idx := all.Index
	client := func(a int) *http.Client {
		return &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 100,
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 3, byte(a))}}).DialContext}}
	}
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := range httpapi.MaxWaiters + 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/api/v1/machines?index=%d&wait=30s", n.HTTPAddr(), idx), nil)
			req.Header.Set("Authorization", "Bearer "+admin)
			resp, err := client(1 + i%12).Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
			}
		}()
	}
	nodetest.WaitFor(t, "the waiters to queue", func() bool {
		return n.API().Waiters()+refused.Load() >= httpapi.MaxWaiters+40 || refused.Load() >= 40 && n.API().Waiters() == httpapi.MaxWaiters
	})
	if r := n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "wake-up"}, nodetest.Bearer(admin)...); r.Status != http.StatusCreated {
		t.Fatalf("add: %s", r)
	}
	wg.Wait()
	if refused.Load() < 40 || ok.Load()+refused.Load() != httpapi.MaxWaiters+40 {
		t.Fatalf("%d answered, %d refused of %d waiters (cap %d)", ok.Load(), refused.Load(), httpapi.MaxWaiters+40, httpapi.MaxWaiters)
	}
}

// Finding 12, the rest: a VLAN served by a node that does not exist or on
// an "interface" that is a path, an address whose interface holds control
// characters, machines with the broadcast or the zero MAC, an image with no
// files. Each is refused, changes nothing and takes no Raft entry.
func TestNetworkAndMachineValidation(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	mid := referenceSite(t, n, admin)
	vid := 7
	tests := map[string]struct {
		method, path string
		body         any
	}{
		"VLAN served by a node that is not a member": {"POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-a", VID: &vid, DHCP: "full", Servers: []wire.VLANServer{{Node: "nosuch"}}}},
		"VLAN on an interface that is a path":        {"POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-a", VID: &vid, DHCP: "full", Servers: []wire.VLANServer{{Node: n.Name(), Iface: "../../etc"}}}},
		"VLAN served by a 300-character node name":   {"POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-a", VID: &vid, DHCP: "full", Servers: []wire.VLANServer{{Node: strings.Repeat("n", 300)}}}},
		"address on an interface with control chars": {"POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.50.0.0/24", Machine: mid, Interface: "\u0000\n", IP: "10.50.0.60"}},
		"machine with the broadcast MAC":             {"POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "bcast", MAC: "ff:ff:ff:ff:ff:ff"}},
		"machine with the zero MAC":                  {"POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "zero", MAC: "00:00:00:00:00:00"}},
		"machine with a multicast MAC":               {"POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "mcast", MAC: "01:00:5e:00:00:01"}},
		"image with no files":                        {"POST", "/api/v1/images", wire.ImageRequest{Name: "empty"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, tc.method, tc.path, tc.body, nodetest.Bearer(admin)...)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("got %s, want 400", r)
			}
			if after := stateOf(n); after != before {
				t.Errorf("state changed or an entry was taken: %+v → %+v", before, after)
			}
		})
	}
	// The node itself is a member: a VLAN it serves, on a real name, is fine.
	if r := n.Do(t, "POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-a", VID: &vid, DHCP: "full", Servers: []wire.VLANServer{{Node: n.Name(), Iface: "eth9"}}}, nodetest.Bearer(admin)...); r.Status != http.StatusCreated {
		t.Fatalf("a valid VLAN: %s", r)
	}
}
