// go run ./appliance/console/testdata/api/record.go appliance/console/testdata/api
// (from the module root) captured the JSON files beside it from an in-process node.

// Records real API answers from an in-process node for the console's client test.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store/inventory"
)

var base, admin, agent string

func call(method, path string, body any, hdr ...string) (int, []byte) {
	var r io.Reader
	if b, ok := body.([]byte); ok {
		r = bytes.NewReader(b)
	} else if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, r)
	req.Header.Set("Authorization", "Bearer "+admin)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(os.Stderr, "%s %s: %d %s\n", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, b
}

func record(out, name, method, path string, body any) []byte {
	code, b := call(method, path, body)
	var buf bytes.Buffer
	json.Indent(&buf, b, "", "  ")
	os.WriteFile(filepath.Join(out, name), append(buf.Bytes(), '\n'), 0o644)
	fmt.Println("recorded", name, code)
	return b
}

func report(uuid, serial string, macs ...string) inventory.Report {
	r := inventory.Report{
		Version: inventory.SchemaVersion, Collected: time.Now().UTC(), Agent: "rollcall-agent/0.1", BootMAC: macs[0],
		System: inventory.System{Manufacturer: "Supermicro", Product: "SYS-2029U-TR4", Serial: serial, UUID: uuid},
		Memory: inventory.Memory{TotalBytes: 384 << 30},
		BMC:    &inventory.BMC{Driver: "ipmi", Address: "10.0.20.17", MAC: "0c:c4:7a:ff:00:01", User: "rollcall", Password: "s3cret-pass", Source: "in-band"},
	}
	for s := range 2 {
		r.CPUs = append(r.CPUs, inventory.CPU{Socket: s, Vendor: "GenuineIntel", Model: "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", Cores: 20, Threads: 40})
	}
	for _, m := range macs {
		r.NICs = append(r.NICs, inventory.NIC{Name: "eno" + m[len(m)-1:], MAC: m})
	}
	return r
}

func main() {
	out := os.Args[1]
	dir, _ := os.MkdirTemp("", "rec")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := node.Start(ctx, node.Options{
		DataDir: dir, Name: "node-1", HTTPAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		RaftTune: func(c *cluster.Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
		},
	})
	if err != nil {
		panic(err)
	}
	defer n.Close()
	base = "http://" + n.HTTPAddr()
	a, _ := os.ReadFile(filepath.Join(dir, "admin.token"))
	g, _ := os.ReadFile(filepath.Join(dir, "agent.token"))
	admin, agent = strings.TrimSpace(string(a)), strings.TrimSpace(string(g))
	time.Sleep(time.Second)
	// The agent's boot token, as its boot script would hand it.
	_, b := call("POST", "/api/v1/boot-tokens", map[string]any{"mac": "0c:c4:7a:aa:00:01"})
	var bt struct{ Token string }
	json.Unmarshal(b, &bt)
	agent = bt.Token

	_, b = call("POST", "/api/v1/enlist", map[string]any{"system_uuid": "4c4c4544-0042-3510-8051-b7c04f563232", "serial": "S211X5A", "boot_mac": "0c:c4:7a:aa:00:01", "macs": []string{"0c:c4:7a:aa:00:01", "0c:c4:7a:aa:00:02"}}, "X-Rollcall-Token", agent)
	var en struct{ ID string }
	json.Unmarshal(b, &en)
	call("POST", "/api/v1/commission", report("4c4c4544-0042-3510-8051-b7c04f563232", "S211X5A", "0c:c4:7a:aa:00:01", "0c:c4:7a:aa:00:02"), "X-Rollcall-Token", agent)
	_, b = call("POST", "/api/v1/machines", map[string]any{"name": "spare-01", "mac": "52:54:00:12:34:56"})
	var sp struct{ ID string }
	json.Unmarshal(b, &sp)
	call("POST", "/api/v1/fabrics", map[string]any{"name": "mgmt", "kind": "ethernet"})
	vid := 0
	call("POST", "/api/v1/vlans", map[string]any{"fabric": "mgmt", "vid": vid, "mtu": 1500, "dhcp": "full", "servers": []map[string]string{{"node": "node-1", "iface": "eth1"}}})
	call("POST", "/api/v1/subnets", map[string]any{"cidr": "10.0.0.0/24", "fabric": "mgmt", "vid": vid, "purpose": "provisioning", "gateway": "10.0.0.1"})
	call("POST", "/api/v1/ips/allocate", map[string]any{"subnet": "10.0.0.0/24", "machine": en.ID})
	_, b = call("PUT", "/api/v1/images/commission-2026.03/files/kernel", []byte("fake kernel bytes"))
	var kf map[string]any
	json.Unmarshal(b, &kf)
	_, b = call("PUT", "/api/v1/images/commission-2026.03/files/initrd", []byte("fake initrd bytes"))
	var inf map[string]any
	json.Unmarshal(b, &inf)
	call("POST", "/api/v1/images", map[string]any{"name": "commission-2026.03", "files": []any{kf, inf}})

	l := record(out, "machines.json", "GET", "/api/v1/machines", nil)
	var list struct{ Index uint64 }
	json.Unmarshal(l, &list)
	fmt.Println("index", list.Index, "machine", en.ID, "spare", sp.ID)
	record(out, "machine.json", "GET", "/api/v1/machines/"+en.ID, nil)
	record(out, "events.json", "GET", "/api/v1/machines/"+en.ID+"/events", nil)
	record(out, "events-spare.json", "GET", "/api/v1/machines/"+sp.ID+"/events", nil)
	record(out, "jobs.json", "GET", "/api/v1/machines/"+en.ID+"/jobs", nil)
	record(out, "cluster.json", "GET", "/api/v1/cluster", nil)
	record(out, "fabrics.json", "GET", "/api/v1/fabrics", nil)
	record(out, "vlans.json", "GET", "/api/v1/vlans", nil)
	record(out, "subnets.json", "GET", "/api/v1/subnets", nil)
	record(out, "images.json", "GET", "/api/v1/images", nil)
	record(out, "power-nobmc.json", "POST", "/api/v1/machines/"+sp.ID+"/power", map[string]string{"action": "status"})
	record(out, "recommission.json", "POST", "/api/v1/machines/"+sp.ID+"/recommission", nil)
	record(out, "unauthorized.json", "GET", "/api/v1/machines?x=", nil)
	admin = "wrong"
	record(out, "unauthorized.json", "GET", "/api/v1/machines", nil)
	admin = strings.TrimSpace(string(a))
	record(out, "delete.json", "DELETE", "/api/v1/machines/"+sp.ID, nil)
	record(out, "notfound.json", "GET", "/api/v1/machines/"+sp.ID, nil)
	record(out, "recommission-ok.json", "POST", "/api/v1/machines/"+en.ID+"/recommission", nil)
	record(out, "network-plan.json", "GET", "/api/v1/machines/"+en.ID+"/network-plan", nil)
	call("POST", "/api/v1/machines", map[string]any{"name": "other-01"})
	record(out, "rename-taken.json", "POST", "/api/v1/machines/"+en.ID+"/rename", map[string]string{"name": "other-01"})
	record(out, "rename.json", "POST", "/api/v1/machines/"+en.ID+"/rename", map[string]string{"name": "ready-01"})
	record(out, "bmc-clear.json", "DELETE", "/api/v1/machines/"+en.ID+"/bmc", nil)
	record(out, "bmc-none.json", "DELETE", "/api/v1/machines/"+en.ID+"/bmc", nil)
}
