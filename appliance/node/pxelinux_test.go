package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tftpclient "github.com/pin/tftp/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/raftfsm"

	"github.com/rollcall/rollcall/appliance/boottoken"
)

// A node serves lpxelinux.0 and its modules from pxelinux_dir and
// syslinux_dir over TFTP, and renders pxelinux.cfg/01-<mac> from the
// machine's state; the other names pxelinux asks for first (UUID, hex IP)
// are not found so that it goes on to the MAC file; default is the
// commissioning entry for an address no lease names; a MAC that is not a MAC
// is refused and counted; the agent token never reaches the log.
func TestNodeServesPXELinux(t *testing.T) {
	data := t.TempDir()
	pxelinuxDir, syslinuxDir := filepath.Join(data, "pxelinux"), filepath.Join(data, "syslinux")
	os.MkdirAll(pxelinuxDir, 0o755)
	os.MkdirAll(syslinuxDir, 0o755)
	files := map[string][]byte{
		filepath.Join(pxelinuxDir, "lpxelinux.0"): bytes.Repeat([]byte("lpxelinux."), 4000),
		filepath.Join(syslinuxDir, "ldlinux.c32"): bytes.Repeat([]byte("ldlinux."), 3000),
		filepath.Join(syslinuxDir, "menu.c32"):    []byte("not allow-listed"),
	}
	for p, b := range files {
		os.WriteFile(p, b, 0o644)
	}
	conf, _ := json.Marshal(node.FileConfig{PXELinuxDir: pxelinuxDir, SyslinuxDir: syslinuxDir, IPXEDir: t.TempDir()})
	os.WriteFile(filepath.Join(data, "rollcall.json"), conf, 0o600)
	var logs nodetest.LogBuffer
	n, admin := startTFTPNode(t, data, &logs)

	c, err := tftpclient.NewClient(n.TFTPAddrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(name string) (string, error) {
		t.Helper()
		wt, err := c.Receive(name, "octet")
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		_, err = wt.WriteTo(&b)
		return b.String(), err
	}
	for name, want := range map[string][]byte{"lpxelinux.0": files[filepath.Join(pxelinuxDir, "lpxelinux.0")], "ldlinux.c32": files[filepath.Join(syslinuxDir, "ldlinux.c32")]} {
		if got, err := fetch(name); err != nil || got != string(want) {
			t.Fatalf("%s: %v, %d bytes", name, err, len(got))
		}
	}

	// Before any image a commissioning machine waits and reboots.
	const mac = "52:54:00:12:34:56"
	cfgName := "pxelinux.cfg/01-52-54-00-12-34-56"
	if got, err := fetch(cfgName); err != nil || !strings.Contains(got, "COM32 reboot.c32") || !strings.Contains(got, "rollcall image import") {
		t.Fatalf("%s without an image: %v\n%s", cfgName, err, got)
	}
	n.ImportImage(t, admin, "commissioning", []byte("kernel"), []byte("initrd"))

	_, port, _ := strings.Cut(n.HTTPAddr(), ":")
	kernel := "KERNEL http://127.0.0.1:" + port + "/images/commissioning/kernel\n"
	expect := func(name, action string) {
		t.Helper()
		got, err := fetch(name)
		if err != nil {
			t.Fatalf("%s (%s): %v", name, action, err)
		}
		ok := map[string]bool{
			"commission": strings.Contains(got, kernel) && strings.Contains(got, "initrd=http://127.0.0.1:"+port+"/images/commissioning/initrd rollcall.server=") &&
				strings.Contains(got, "rollcall.token=") && strings.Contains(got, "rollcall.ca=") && strings.Contains(got, "IPAPPEND 2"),
			"poweroff": strings.Contains(got, "COM32 poweroff.c32") && !strings.Contains(got, "rollcall.token="),
			// No MAC, nothing to bind a boot token to: commissioning without one.
			"commission without a token": strings.Contains(got, kernel) && !strings.Contains(got, "rollcall.token=") && strings.Contains(got, "IPAPPEND 2"),
		}[action]
		if !ok {
			t.Fatalf("%s: want %s:\n%s", name, action, got)
		}
	}
	expect(cfgName, "commission") // unknown
	machine := "m-00000000abcd"
	if _, err := n.Cluster().Apply(context.Background(), &raftfsm.MachineCreate{ID: machine, MACs: []string{mac}, Now: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	expect(cfgName, "commission") // new
	n.Cluster().Apply(context.Background(), &raftfsm.Commission{NewID: "m-000000000fff", Identity: raftfsm.Identity{BootMAC: mac, MACs: []string{mac}}, Inventory: json.RawMessage(`{}`), Now: time.Now().UTC()})
	expect(cfgName, "poweroff")
	expect("pxelinux.cfg/default", "commission without a token") // 127.0.0.1 holds no lease

	// What pxelinux asks before and after the MAC file, and bad names.
	refusedBefore := testutil.ToFloat64(n.BootMetrics().BootRefused)
	for _, name := range []string{
		"pxelinux.cfg/b8945908-d6a6-41a9-611d-74a6ab80b83d", // UUID
		"pxelinux.cfg/7F000001", "pxelinux.cfg/7F",          // hex IP, shortened
		"pxelinux.cfg/20-52-54-00-12-34-56",   // not Ethernet
		"pxelinux.cfg/01-52-54-00-12-34-56/x", // below a MAC file
		"pxelinux.cfg", "pxelinux.cfg/../rollcall.json", "menu.c32", "../syslinux/menu.c32",
	} {
		if got, err := fetch(name); err == nil {
			t.Errorf("%s was served:\n%s", name, got)
		}
	}
	if got := testutil.ToFloat64(n.BootMetrics().BootRefused) - refusedBefore; got != 0 {
		t.Errorf("names that are not MAC files counted as refused MACs: %v", got)
	}
	for _, name := range []string{"pxelinux.cfg/01-zz-zz-zz-zz-zz-zz", "pxelinux.cfg/01-", "pxelinux.cfg/01-52-54-00-12-34-56-78", "pxelinux.cfg/01-%35%32"} {
		if got, err := fetch(name); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("%s: %v\n%s", name, err, got)
		}
	}
	if got := testutil.ToFloat64(n.BootMetrics().BootRefused) - refusedBefore; got != 4 {
		t.Errorf("rollcall_boot_refused_total rose by %v for 4 bad MACs", got)
	}
	if got := gauge(t, n.Registry(), "rollcall_tftp_refused_total", map[string]string{"reason": "not-found"}); got < 12 {
		t.Errorf("rollcall_tftp_refused_total{reason=not-found} = %v", got)
	}

	// A MAC's file carries that MAC's boot token, never the shared agent
	// token; neither is in the log.
	shared := n.Agent
	got, _ := fetch("pxelinux.cfg/01-52-54-00-00-99-99")
	m := regexp.MustCompile(`rollcall\.token=(\S+)`).FindStringSubmatch(got)
	if m == nil || !strings.HasPrefix(m[1], boottoken.Prefix) {
		t.Fatalf("the MAC file has no boot token:\n%s", got)
	}
	if mac, err := boottoken.Parse(n.Key(t), m[1], time.Now()); err != nil || mac != "52:54:00:00:99:99" {
		t.Errorf("the boot token is for %q (%v)", mac, err)
	}
	for _, name := range []string{"pxelinux.cfg/default", "pxelinux.cfg/01-52-54-00-00-99-99"} {
		if got, _ := fetch(name); strings.Contains(got, shared) {
			t.Errorf("%s hands out the shared agent token:\n%s", name, got)
		}
	}
	if l := logs.String(); strings.Contains(l, shared) || strings.Contains(l, m[1]) || !strings.Contains(l, "pxelinux config") {
		t.Errorf("a token is in the log, or the log has no pxelinux config line:\n%s", l)
	}
}

// startTFTPNode starts a node with TFTP on a loopback port and DATA at data,
// logging at debug level into log, and returns it with its admin token.
func startTFTPNode(t *testing.T, data string, log *nodetest.LogBuffer) (*nodetest.Node, string) {
	t.Helper()
	n := nodetest.StartWith(t, nodetest.Options{Log: log, Node: func(o *node.Options) {
		o.DataDir, o.TFTPAddr = data, "127.0.0.1:0"
	}})
	if len(n.TFTPAddrs()) == 0 {
		t.Fatal("no TFTP listener")
	}
	return n, n.Admin
}
