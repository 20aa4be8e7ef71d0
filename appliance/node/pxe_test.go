package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/testenv"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/tftp"
)

// A real network boot, BIOS PXE, UEFI PXE and UEFI HTTP boot: QEMU
// (software emulation) on a tap in a bridge inside a network namespace the
// test creates; the node's side of a veth pair is in this namespace with an
// address only on that link, where the node serves DHCP (from its network
// model), TFTP and HTTP. The assertion is from the node's side: the lease,
// ipxe.efi (UEFI PXE: a TFTP transfer; UEFI HTTP boot: a GET of
// /boot/ipxe.efi and no TFTP at all), then GET /boot/ipxe, the kernel and
// the initrd, in that order.
//
// The fourth machine is on the VLAN switched to the pxelinux boot loader,
// for NICs that cannot run iPXE. QEMU has no BIOS PXE ROM but iPXE's, which
// says iPXE in every DHCP request (options 77 and 175) and so is never
// handed pxelinux; the machine is therefore put together as a PXE ROM is:
// the firmware's DHCP exchange is busybox udhcpc in the bridge, with the
// machine's MAC and the PXE client's vendor class and arch 0, which must be
// handed lpxelinux.0; iPXE (ipxe.lkrn, configured from that answer: no DHCP
// of its own) is then only the PXE stack lpxelinux.0 runs on. The node must
// serve lpxelinux.0, ldlinux.c32 and pxelinux.cfg/01-<mac> over TFTP, then
// the kernel and initrd over HTTP, in that order.
//
// Ordering comes from one timeline fed by the node's own log records (DHCP
// and TFTP) and by a recording reverse proxy: the node's HTTP listens on
// 127.0.0.1:PORT and the proxy on LINK:PORT forwards to it with the Host
// header intact, so the boot config DHCP hands out (the link address and
// the port of HTTPAddr) and the script's URLs (built from Host) all pass
// through it. The node's own request metrics are checked too. The timeline
// and the VM's console are printed on failure, or always with PXE_DEBUG=1.
func TestRealPXEBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("boots four emulated machines (about two minutes)")
	}
	needNet(t, "qemu-system-x86_64", "udhcpc")
	testenv.NeedFile(t, "/dev/net/tun (tap devices)", "/dev/net/tun")
	ovmf := testenv.NeedFile(t, "UEFI firmware (Debian package ovmf)", "/usr/share/ovmf/OVMF.fd", "/usr/share/OVMF/OVMF.fd", "/usr/share/qemu/OVMF.fd")
	testenv.NeedFile(t, "iPXE binaries (Debian package ipxe)", filepath.Join(tftp.DefaultIPXEDir, "ipxe.efi"))
	testenv.NeedFile(t, "QEMU's e1000 iPXE ROM (package ipxe-qemu)", "/usr/lib/ipxe/qemu/pxe-e1000.rom", "/usr/share/qemu/pxe-e1000.rom")
	testenv.NeedFile(t, "iPXE as a Linux kernel (package ipxe)", filepath.Join(tftp.DefaultIPXEDir, "ipxe.lkrn"))
	testenv.NeedFile(t, "lpxelinux.0 (package pxelinux)", filepath.Join(bootfiles.DefaultPXELinuxDir, "lpxelinux.0"))
	testenv.NeedFile(t, "syslinux's BIOS modules (syslinux-common)", filepath.Join(bootfiles.DefaultSyslinuxDir, "ldlinux.c32"))

	// The network: namespace NS with bridge BR, QEMU's tap and the peer end
	// of the node's veth in it.
	var b [4]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:3])
	ns, br, tap, srvIf, peer := "rc-pxe-"+sfx, "rcb"+sfx, "rct"+sfx, "rcs"+sfx, "rcp"+sfx
	octet := 20 + int(b[3])%200
	linkIP := fmt.Sprintf("10.215.%d.1", octet)
	p := netip.MustParsePrefix(fmt.Sprintf("10.215.%d.0/24", octet))
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", ns).Run() // takes the bridge, the tap and the peer
		exec.Command("ip", "link", "del", srvIf).Run()
	})
	run(t, "ip", "netns", "add", ns)
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	run(t, "ip", "-n", ns, "link", "add", br, "type", "bridge")
	run(t, "ip", "-n", ns, "tuntap", "add", "dev", tap, "mode", "tap")
	run(t, "ip", "link", "add", srvIf, "type", "veth", "peer", "name", peer)
	run(t, "ip", "link", "set", peer, "netns", ns)
	for _, dev := range []string{tap, peer} {
		run(t, "ip", "-n", ns, "link", "set", dev, "master", br)
		run(t, "ip", "-n", ns, "link", "set", dev, "up")
	}
	run(t, "ip", "-n", ns, "link", "set", br, "up")
	run(t, "ip", "addr", "add", linkIP+"/24", "dev", srvIf)
	run(t, "ip", "link", "set", srvIf, "up")
	// Port 69 on the new address must be free: a CI run once found it
	// taken ("address already in use") with no test of this package
	// holding it. Say who holds it, so the next such failure names it.
	if probe, err := net.ListenPacket("udp4", linkIP+":69"); err != nil {
		out, _ := exec.Command("ss", "-ulnp").CombinedOutput()
		t.Fatalf("UDP %s:69 is not free before the node starts: %v\nss -ulnp:\n%s", linkIP, err, out)
	} else {
		probe.Close()
	}

	// The node: DHCP, TFTP (port 69 on the link address: PXE firmware asks
	// there) and HTTP, logging at debug level into the timeline.
	tl := &timeline{}
	n := nodetest.StartWith(t, nodetest.Options{Name: "pxe1", Node: func(o *node.Options) {
		o.TFTPAddr, o.Logger = linkIP+":69", slog.New(&timelineHandler{tl: tl})
	}})
	admin := n.Admin
	ctx := t.Context()
	now := time.Now().UTC()
	for _, c := range []raftfsm.Command{
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "pxe", Kind: store.FabricEthernet, Created: now}},
		&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: p, Fabric: "pxe", Purpose: "provisioning", Gateway: netip.MustParseAddr(linkIP), Created: now}},
		&raftfsm.RangePut{Range: raftfsm.Range{Subnet: p, Kind: store.RangeDynamic, First: p.Addr().Next().Next(), Last: netip.MustParseAddr(fmt.Sprintf("10.215.%d.199", octet)), Created: now}},
		&raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "pxe", VID: 0, DHCP: store.DHCPFull, Servers: []raftfsm.VLANServer{{Node: n.Name(), Iface: srvIf}}, Created: now}},
	} {
		if _, err := n.Cluster().Apply(ctx, c); err != nil {
			t.Fatalf("%T: %v", c, err)
		}
	}
	// The commissioning image: small files that are not Linux. They need not
	// boot; the assertion is that the chain reached them. UEFI iPXE refuses
	// to select a kernel the firmware cannot load (Exec format error) and
	// stops before the initrd, so the "kernel" is a small EFI application:
	// snponly.efi. BIOS iPXE takes it as a PXE image.
	efiApp, err := os.ReadFile(filepath.Join(tftp.DefaultIPXEDir, "snponly.efi"))
	if err != nil {
		testenv.Skip(t, "needs an EFI application as the test kernel: %v", err)
	}
	ipxeEFI, err := os.ReadFile(filepath.Join(tftp.DefaultIPXEDir, "ipxe.efi"))
	if err != nil {
		testenv.Skip(t, "needs ipxe.efi for UEFI HTTP boot: %v", err)
	}
	kf, inf := n.ImportImage(t, admin, "commissioning", efiApp, []byte(strings.Repeat("not an initrd\n", 5000)))

	// The recording proxy on LINK:PORT.
	_, port, _ := net.SplitHostPort(n.HTTPAddr())
	ln, err := net.Listen("tcp", net.JoinHostPort(linkIP, port))
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	target, _ := url.Parse("http://" + n.HTTPAddr())
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}}
	psrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(sw, r)
		tl.add(event{kind: "http", msg: r.Method + " " + r.URL.Path, attrs: map[string]string{"mac": r.URL.Query().Get("mac"), "status": fmt.Sprint(sw.status), "bytes": fmt.Sprint(sw.n)}})
	})}
	go psrv.Serve(ln)
	t.Cleanup(func() { psrv.Close() })

	nodetest.WaitFor(t, "the DHCP service on "+srvIf, func() bool { return tl.find(0, "log", "dhcp serving", nil) >= 0 })

	served := map[string]float64{} // rollcall_http_requests_total before each boot, by route
	for _, fw := range []struct {
		name, bios, nic string
		tftp, http      bool
		pxelinux        bool     // on the VLAN switched to pxelinux (see above)
		qemu            []string // more QEMU arguments
	}{
		// SeaBIOS and the e1000's iPXE ROM: it says iPXE (option 77) and is
		// handed the script URL at once.
		{name: "bios", nic: "e1000"},
		// OVMF's own PXE client (arch 7, over its virtio-net driver; the
		// NIC's iPXE ROM is left out so that the firmware, not iPXE, asks
		// first) is handed ipxe.efi over TFTP; iPXE then asks again and is
		// handed the script.
		{name: "uefi", bios: ovmf, nic: "virtio-net-pci,romfile=", tftp: true},
		// OVMF's UEFI HTTP boot (HttpBootDxe; arch 16, vendor class
		// HTTPClient) with its PXE clients turned off through fw_cfg
		// (OvmfPkg's PxeBcPcdProducerLib reads these since edk2 2020.05),
		// so the HTTPv4 boot option is the first that answers. It is handed
		// http://LINK:PORT/boot/ipxe.efi, which the node serves itself.
		{name: "uefi-http", bios: ovmf, nic: "virtio-net-pci,romfile=", http: true, qemu: []string{
			"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no",
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no",
		}},
		// BIOS firmware that cannot run iPXE (see above): the NIC has no
		// ROM; ipxe.lkrn's command line is set from the DHCP answer.
		{name: "bios-pxelinux", nic: "e1000,romfile=", pxelinux: true},
	} {
		t.Run(fw.name, func(t *testing.T) {
			var m [3]byte
			rand.Read(m[:])
			mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", m[0], m[1], m[2])
			for _, r := range []string{"/boot/ipxe", "/boot/:file", "/images/:name/:file"} {
				served[r] = requestCount(t, n.Registry(), r)
			}
			start := tl.len()
			var fwAnswer map[string]string // the PXE firmware's DHCP answer
			if fw.pxelinux {
				vlanLoader(t, n, admin, store.BootLoaderPXELinux, srvIf)
				nodetest.WaitFor(t, "the DHCP service restarted for pxelinux", func() bool { return tl.find(start, "log", "dhcp serving", nil) >= 0 })
				fwAnswer = firmwareDHCP(t, ns, br, mac)
				fw.qemu = append(fw.qemu, "-kernel", filepath.Join(tftp.DefaultIPXEDir, "ipxe.lkrn"), "-append", fmt.Sprintf(
					"ifopen net0 && set net0/ip %s && set net0/netmask %s && set net0/next-server %s && set net0/filename %s && chain tftp://%s/%s",
					fwAnswer["ip"], fwAnswer["subnet"], fwAnswer["siaddr"], fwAnswer["boot_file"], fwAnswer["siaddr"], fwAnswer["boot_file"]))
			}
			args := []string{"netns", "exec", ns, "qemu-system-x86_64", "-nographic", "-no-reboot", "-m", "256", "-accel", "tcg",
				"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
				"-device", fw.nic + ",netdev=n0,mac=" + mac + ",bootindex=1"}
			if fw.bios != "" {
				args = append(args, "-bios", fw.bios)
			}
			args = append(args, fw.qemu...)
			// The watchdog: 90 s for the whole run, then qemu is killed.
			vctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(vctx, "ip", args...)
			console := &nodetest.LogBuffer{}
			cmd.Stdout, cmd.Stderr = console, console
			cmd.WaitDelay = 5 * time.Second
			began := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatalf("qemu: %v", err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				cancel()
				<-exited
			}()
			// Done when the node has served the initrd to this machine.
			reached := func() bool {
				return tl.find(start, "http", "GET /images/commissioning/initrd", map[string]string{"status": "200"}) >= 0
			}
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
		wait:
			for !reached() {
				select {
				case err := <-exited:
					exited <- err
					break wait
				case <-vctx.Done():
					break wait
				case <-tick.C:
				}
			}
			t.Logf("%s: the node served the initrd %v after qemu started", fw.name, time.Since(began).Round(100*time.Millisecond))
			defer func() {
				if t.Failed() || os.Getenv("PXE_DEBUG") != "" {
					t.Logf("timeline:\n%s", tl.dump(start))
					t.Logf("console (last 4 KiB):\n%s", tail(console.String(), 4096))
				}
			}()
			if !reached() {
				t.Fatalf("the machine did not reach the initrd within the watchdog's 90 s")
			}

			// In order, from the node's side.
			at := start
			step := func(what, kind, msg string, attrs map[string]string) {
				t.Helper()
				i := tl.find(at, kind, msg, attrs)
				if i < 0 {
					t.Fatalf("no %s after event %d", what, at)
				}
				at = i + 1
			}
			if fw.tftp {
				step("DHCP boot answer for the firmware (ipxe.efi over TFTP)", "log", "boot", map[string]string{"mac": mac, "kind": "pxe", "file": "ipxe.efi"})
				step("TFTP transfer of ipxe.efi", "log", "tftp transfer complete", map[string]string{"file": "ipxe.efi"})
			}
			if fw.http {
				loader := "http://" + linkIP + ":" + port + "/boot/ipxe.efi"
				step("DHCP boot answer for HTTP boot firmware (the ipxe.efi URL)", "log", "boot", map[string]string{"mac": mac, "kind": "http", "arch": "16", "file": loader})
				step("DHCP ack for HTTP boot firmware", "log", "ack", map[string]string{"mac": mac})
				// edk2 asks for the size with HEAD first. Its fallback, a GET
				// with no buffer, is written for chunked answers and never
				// finishes one with a Content-Length (HttpBootGetBootFile).
				step("HEAD /boot/ipxe.efi", "http", "HEAD /boot/ipxe.efi", map[string]string{"status": "200"})
				step("GET /boot/ipxe.efi", "http", "GET /boot/ipxe.efi", map[string]string{"status": "200", "bytes": fmt.Sprint(len(ipxeEFI))})
				if i := tl.findPrefix(start, "log", "tftp "); i >= 0 {
					t.Fatalf("HTTP boot used TFTP: event %d", i)
				}
				if i := tl.find(start, "log", "boot", map[string]string{"mac": mac, "kind": "pxe"}); i >= 0 {
					t.Fatalf("the firmware asked as a PXE client (event %d): PXE was not turned off", i)
				}
			}
			asked := "GET /boot/ipxe" // what the loader asked for its configuration
			if fw.pxelinux {
				if fwAnswer["boot_file"] != "lpxelinux.0" || fwAnswer["siaddr"] != linkIP {
					t.Fatalf("PXE firmware on a pxelinux VLAN was answered %v, want lpxelinux.0 from %s", fwAnswer, linkIP)
				}
				step("DHCP boot answer for BIOS PXE firmware (lpxelinux.0 over TFTP)", "log", "boot", map[string]string{"mac": mac, "kind": "pxe", "arch": "0", "file": "lpxelinux.0"})
				step("DHCP ack for the firmware", "log", "ack", map[string]string{"mac": mac})
				step("TFTP transfer of lpxelinux.0", "log", "tftp transfer complete", map[string]string{"file": "lpxelinux.0"})
				step("TFTP transfer of ldlinux.c32", "log", "tftp transfer complete", map[string]string{"file": "ldlinux.c32"})
				asked = "pxelinux.cfg/01-" + strings.ReplaceAll(mac, ":", "-")
				step("TFTP transfer of "+asked, "log", "tftp transfer complete", map[string]string{"file": asked})
				if i := tl.find(start, "log", "boot", map[string]string{"mac": mac, "kind": "ipxe"}); i >= 0 {
					t.Fatalf("iPXE asked DHCP (event %d): it should run on the firmware's answer", i)
				}
				if i := tl.find(start, "http", "GET /boot/ipxe", nil); i >= 0 {
					t.Fatalf("the iPXE script was asked for (event %d)", i)
				}
			} else {
				step("DHCP boot answer for iPXE (the script URL)", "log", "boot", map[string]string{"mac": mac, "kind": "ipxe", "file": "http://" + linkIP + ":" + port + "/boot/ipxe?mac=" + mac})
				step("DHCP ack", "log", "ack", map[string]string{"mac": mac})
				step("GET /boot/ipxe", "http", "GET /boot/ipxe", map[string]string{"mac": mac, "status": "200"})
			}
			step("GET kernel", "http", "GET /images/commissioning/kernel", map[string]string{"status": "200", "bytes": fmt.Sprint(kf.Size)})
			step("GET initrd", "http", "GET /images/commissioning/initrd", map[string]string{"status": "200", "bytes": fmt.Sprint(inf.Size)})

			// The lease, replicated to the store, granted before the script
			// (or the pxelinux file) was asked for.
			script := tl.find(start, "http", "GET /boot/ipxe", nil)
			if fw.pxelinux {
				script = tl.find(start, "log", "tftp transfer complete", map[string]string{"file": asked})
			}
			var leases []store.Lease
			nodetest.WaitFor(t, "the lease in the store", func() bool {
				n.Store().View(func(tx *store.Tx) error { leases, _ = tx.LeasesByMAC(mac); return nil })
				return len(leases) == 1
			})
			if l := leases[0]; !p.Contains(l.IP) || l.Node != n.Name() || l.Granted.After(tl.at(script)) {
				t.Fatalf("lease %+v (script asked for at %v)", l, tl.at(script))
			}
			// The node's own counters agree.
			if got := requestCount(t, n.Registry(), "/boot/ipxe") - served["/boot/ipxe"]; got < 1 && !fw.pxelinux {
				t.Fatalf("rollcall_http_requests_total{route=/boot/ipxe} rose by %v", got)
			}
			if got := requestCount(t, n.Registry(), "/images/:name/:file") - served["/images/:name/:file"]; got < 2 {
				t.Fatalf("rollcall_http_requests_total{route=/images/:name/:file} rose by %v", got)
			}
			if got := requestCount(t, n.Registry(), "/boot/:file") - served["/boot/:file"]; fw.http && got < 1 {
				t.Fatalf("rollcall_http_requests_total{route=/boot/:file} rose by %v", got)
			}
			if (fw.tftp || fw.pxelinux) && gauge(t, n.Registry(), "rollcall_tftp_transfers_finished_total", map[string]string{"result": "complete"}) < 1 {
				t.Fatal("rollcall_tftp_transfers_finished_total{result=complete} is 0")
			}
		})
	}
}

// vlanLoader sets the boot loader of the test's VLAN (fabric pxe, VID 0,
// served on iface) through the API.
func vlanLoader(t *testing.T, n *nodetest.Node, admin, loader, iface string) {
	t.Helper()
	body, _ := json.Marshal(wire.VLANUpdate{DHCP: store.DHCPFull, Servers: []wire.VLANServer{{Node: n.Name(), Iface: iface}}, BootLoader: loader})
	var answer []byte
	if code := n.Call(t, admin, http.MethodPut, "/api/v1/vlans/pxe/0", string(body), &answer); code != http.StatusOK {
		t.Fatalf("set the VLAN's boot loader to %s: %d %s", loader, code, answer)
	}
}

// firmwareDHCP makes the DHCP exchange of BIOS PXE firmware with MAC mac
// from a veth in bridge br of namespace ns: busybox udhcpc with the vendor
// class and client architecture (option 93 = 0) a PXE ROM sends, and
// neither iPXE's options nor a client identifier. It returns udhcpc's view
// of the ACK (ip, subnet, siaddr, boot_file).
func firmwareDHCP(t *testing.T, ns, br, mac string) map[string]string {
	t.Helper()
	dev, peer := "rcf"+mac[12:14]+mac[15:17], "rcg"+mac[12:14]+mac[15:17]
	run(t, "ip", "-n", ns, "link", "add", dev, "address", mac, "type", "veth", "peer", "name", peer)
	defer exec.Command("ip", "-n", ns, "link", "del", dev).Run() // before the VM sends from the same MAC
	run(t, "ip", "-n", ns, "link", "set", peer, "master", br)
	run(t, "ip", "-n", ns, "link", "set", peer, "up")
	run(t, "ip", "-n", ns, "link", "set", dev, "up")
	dir := t.TempDir()
	script, out := filepath.Join(dir, "script"), filepath.Join(dir, "answer")
	os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = bound ] && printf 'ip=%s\\nsubnet=%s\\nsiaddr=%s\\nboot_file=%s\\n' \"$ip\" \"$subnet\" \"$siaddr\" \"$boot_file\" > "+out+"\nexit 0\n"), 0o755)
	cmd := exec.Command("ip", "netns", "exec", ns, "udhcpc", "-f", "-q", "-n", "-C", "-t", "10", "-T", "1", "-i", dev, "-s", script,
		"-V", "PXEClient:Arch:00000:UNDI:002001", "-x", "0x5d:0000")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("udhcpc as PXE firmware: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("udhcpc as PXE firmware got no lease: %v", err)
	}
	answer := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		answer[k] = v
	}
	return answer
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// requestCount sums rollcall_http_requests_total{method=GET,route,status=200}.
func requestCount(t *testing.T, reg *prometheus.Registry, route string) float64 {
	return gauge(t, reg, "rollcall_http_requests_total", map[string]string{"method": "GET", "route": route, "status": "200"})
}

// gauge sums the samples of a metric whose labels include want.
func gauge(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// timeline is what the node did, in order: its log records and the HTTP
// requests the proxy passed to it.
type timeline struct {
	mu     sync.Mutex
	events []event
}

type event struct {
	when  time.Time
	kind  string // log or http
	msg   string
	attrs map[string]string
}

func (tl *timeline) add(e event) {
	if e.when.IsZero() {
		e.when = time.Now()
	}
	tl.mu.Lock()
	tl.events = append(tl.events, e)
	tl.mu.Unlock()
}

func (tl *timeline) len() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.events)
}

func (tl *timeline) at(i int) time.Time {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if i < 0 || i >= len(tl.events) {
		return time.Time{}
	}
	return tl.events[i].when
}

// find is the index of the first event from index from on that matches, or -1.
func (tl *timeline) find(from int, kind, msg string, attrs map[string]string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
next:
	for i := from; i < len(tl.events); i++ {
		e := tl.events[i]
		if e.kind != kind || e.msg != msg {
			continue
		}
		for k, v := range attrs {
			if e.attrs[k] != v {
				continue next
			}
		}
		return i
	}
	return -1
}

// findPrefix is the index of the first event from index from on whose
// message starts with prefix, or -1.
func (tl *timeline) findPrefix(from int, kind, prefix string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i := from; i < len(tl.events); i++ {
		if e := tl.events[i]; e.kind == kind && strings.HasPrefix(e.msg, prefix) {
			return i
		}
	}
	return -1
}

func (tl *timeline) dump(from int) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var sb strings.Builder
	for i := from; i < len(tl.events); i++ {
		e := tl.events[i]
		fmt.Fprintf(&sb, "%4d %s %-4s %s %v\n", i, e.when.Format("15:04:05.000"), e.kind, e.msg, e.attrs)
	}
	return sb.String()
}

// timelineHandler is a slog.Handler that records into a timeline.
type timelineHandler struct {
	tl    *timeline
	attrs []slog.Attr
	group string
}

func (h *timelineHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *timelineHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{"level": r.Level.String()}
	put := func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Resolve().String()
		return true
	}
	for _, a := range h.attrs {
		put(a)
	}
	r.Attrs(put)
	h.tl.add(event{when: r.Time, kind: "log", msg: r.Message, attrs: attrs})
	return nil
}

func (h *timelineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *timelineHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.group = name
	return &c
}

// statusWriter remembers the status and the body bytes of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
