package dhcp

import (
	"encoding/hex"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/rollcall/rollcall/dhcp/boot"
	"github.com/rollcall/rollcall/dhcp/wire"
	"github.com/rollcall/rollcall/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

// pxeClients are DISCOVERs as real network-boot clients send them (option
// sets and orders taken from captures of each kind of firmware).
func pxeClients() map[string]*dhcpv4.DHCPv4 {
	mk := func(i int, opts map[uint8][]byte) *dhcpv4.DHCPv4 {
		p := discover(macOf(0x100+i), xidOf(0x100+i))
		p.Flags = 0x8000
		p.NumSeconds = 4
		for k, v := range opts {
			p.Options[k] = v
		}
		return p
	}
	guid := append([]byte{0}, []byte("0123456789abcdef")...)
	prl := []byte{1, 2, 3, 4, 5, 6, 12, 13, 15, 17, 18, 22, 23, 28, 40, 41, 42, 43, 50, 51, 54, 58, 59, 60, 66, 67, 97, 128, 129, 130, 131, 132, 133, 134, 135}
	return map[string]*dhcpv4.DHCPv4{
		"bios": mk(1, map[uint8][]byte{
			57: {0x04, 0xec}, 55: prl, 97: guid, 93: {0, 0}, 94: {1, 2, 1},
			60: []byte("PXEClient:Arch:00000:UNDI:002001"),
		}),
		"uefi-x64": mk(2, map[uint8][]byte{
			57: {0x05, 0xc0}, 55: prl, 97: guid, 93: {0, 7}, 94: {1, 3, 0},
			60: []byte("PXEClient:Arch:00007:UNDI:003000"),
		}),
		"uefi-http": mk(3, map[uint8][]byte{
			57: {0x05, 0xc0}, 55: []byte{1, 3, 6, 15, 43, 60, 66, 67}, 97: guid, 93: {0, 16}, 94: {1, 3, 0},
			60: []byte("HTTPClient:Arch:00016:UNDI:003001"),
		}),
		"arm64": mk(4, map[uint8][]byte{
			57: {0x05, 0xc0}, 55: prl, 97: guid, 93: {0, 11}, 94: {1, 3, 0},
			60: []byte("PXEClient:Arch:00011:UNDI:003000"),
		}),
		"ipxe": mk(5, map[uint8][]byte{
			57: {0x05, 0xc0}, 55: []byte{1, 3, 6, 7, 12, 15, 17, 26, 43, 60, 66, 67, 119, 128, 129, 130, 131, 132, 133, 134, 135, 175, 203},
			93: {0, 0}, 94: {1, 2, 1}, 77: []byte("iPXE"),
			60:  []byte("PXEClient:Arch:00000:UNDI:002001"),
			175: {0xb1, 0x05, 0x01, 0x80, 0x86, 0x10, 0x0e, 0xeb, 0x03, 0x01, 0x00, 0x00, 0x17, 0x01, 0x01, 0x13, 0x01, 0x01},
		}),
		"plain": mk(6, map[uint8][]byte{55: {1, 3, 6, 15}}),
	}
}

// summary renders the fields of a reply that matter to a booting client.
func summary(p *dhcpv4.DHCPv4) string {
	if p == nil {
		return "no reply\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "type %s\nyiaddr %s\nsiaddr %s\nfile %q\n", p.MessageType(), p.YourIPAddr, p.ServerIPAddr, p.BootFileName)
	var codes []int
	for c := range p.Options {
		codes = append(codes, int(c))
	}
	sort.Ints(codes)
	for _, c := range codes {
		switch c {
		case 43, 54, 60, 66, 67, 97:
			fmt.Fprintf(&b, "option %d %q\n", c, p.Options[uint8(c)])
		}
	}
	return b.String()
}

// TestBootGolden feeds captured-style PXE, UEFI, UEFI HTTP, ARM64 and iPXE
// DISCOVERs (kept in testdata/golden/*.req as hex) to full mode, proxy mode
// on 67, and proxy mode's port 4011, and compares the answers with golden
// files. Run with -update to rewrite both. On a VLAN whose boot loader is
// pxelinux only BIOS firmware gets another answer (lpxelinux.0, in
// *.full-pxelinux.* and *.proxy-pxelinux.*); every other client's must be
// the very one of an iPXE VLAN.
func TestBootGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, p := range pxeClients() {
			if err := os.WriteFile(filepath.Join(dir, name+".req"), []byte(hex.EncodeToString(p.ToBytes())+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	reqs, _ := filepath.Glob(filepath.Join(dir, "*.req"))
	if len(reqs) < 6 {
		t.Fatalf("golden requests missing in %s (run with -update)", dir)
	}
	for _, v := range []struct{ mode, loader string }{
		{store.DHCPFull, ""}, {store.DHCPProxy, ""},
		{store.DHCPFull, store.BootLoaderPXELinux}, {store.DHCPProxy, store.BootLoaderPXELinux},
	} {
		mode := v.mode
		r := newRig(t, rigOpts{mode: mode, loader: v.loader, tweak: func(c *Config) {
			c.Boot.HTTPPort = 8080
			c.Boot.EFIARM64 = "ipxe-arm64.efi"
		}})
		if mode == store.DHCPFull {
			r.ready(0)
		}
		for _, path := range reqs {
			name := strings.TrimSuffix(filepath.Base(path), ".req")
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data, err := hex.DecodeString(strings.TrimSpace(string(raw)))
			if err != nil {
				t.Fatal(err)
			}
			req, err := dhcpv4.FromBytes(data)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			ports := []int{wire.ServerPort}
			if mode == store.DHCPProxy {
				ports = append(ports, wire.PXEPort)
			}
			for _, port := range ports {
				variant := mode
				if v.loader != "" {
					variant += "-" + v.loader
				}
				t.Run(fmt.Sprintf("%s/%d/%s", variant, port, name), func(t *testing.T) {
					p := req
					src := clientSrc
					dst := netip.Addr{}
					if port == wire.PXEPort {
						// The boot-server REQUEST firmware sends to 4011,
						// from the address the real DHCP server gave it.
						p, _ = dhcpv4.FromBytes(data)
						p = withType(p, dhcpv4.MessageTypeRequest)
						p.ClientIPAddr = wire.IP(netip.MustParseAddr("10.213.50.5"))
						src = netip.MustParseAddrPort("10.213.50.5:4011")
						dst = r.nodes[0].addr
					}
					resp, to, _ := r.sendPort(0, p, src, dst, port)
					got := summary(resp)
					if resp != nil {
						got += "to " + to.String() + "\n"
					}
					golden := filepath.Join(dir, fmt.Sprintf("%s.%s.%d.golden", name, mode, port))
					if v.loader != "" && name == "bios" {
						golden = filepath.Join(dir, fmt.Sprintf("%s.%s.%d.golden", name, variant, port))
					} else if v.loader != "" && *update {
						// Compared with the iPXE VLAN's answer, never rewritten.
						return
					}
					if *update {
						if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
							t.Fatal(err)
						}
						return
					}
					want, err := os.ReadFile(golden)
					if err != nil {
						t.Fatal(err)
					}
					if got != string(want) {
						t.Errorf("answer differs from %s\n--- got\n%s--- want\n%s", golden, got, want)
					}
				})
			}
		}
	}
}

// On a pxelinux VLAN, BIOS PXE firmware (arch 0, or a PXEClient that sends
// no arch) gets lpxelinux.0 over TFTP; iPXE itself, UEFI PXE and UEFI HTTP
// boot are answered as on an iPXE VLAN.
func TestBootDecidePXELinux(t *testing.T) {
	node := netip.MustParseAddr("10.0.0.2")
	for name, tc := range map[string]struct {
		c          boot.Client
		ipxe, pxel string
	}{
		"bios":         {boot.Client{Kind: boot.PXE, Arch: boot.ArchBIOS}, "undionly.kpxe", "lpxelinux.0"},
		"pxe, no arch": {boot.Client{Kind: boot.PXE, Arch: -1}, "undionly.kpxe", "lpxelinux.0"},
		"uefi x64":     {boot.Client{Kind: boot.PXE, Arch: boot.ArchEFIx64}, "ipxe.efi", "ipxe.efi"},
		"uefi http":    {boot.Client{Kind: boot.HTTP, Arch: boot.ArchHTTPx64}, "http://10.0.0.2/boot/ipxe.efi", "http://10.0.0.2/boot/ipxe.efi"},
		"ipxe on bios": {boot.Client{Kind: boot.IPXE, Arch: boot.ArchBIOS}, "http://10.0.0.2/boot/ipxe?mac=52:54:00:00:00:01", "http://10.0.0.2/boot/ipxe?mac=52:54:00:00:00:01"},
	} {
		for _, pxelinux := range []bool{false, true} {
			cfg := boot.Config{PXELinux: pxelinux}.WithDefaults()
			a, ok := cfg.Decide(tc.c, "52:54:00:00:00:01", node)
			want := tc.ipxe
			if pxelinux {
				want = tc.pxel
			}
			if !ok || a.File != want || a.Kind != tc.c.Kind {
				t.Errorf("%s (pxelinux %v): %+v %v, want %s", name, pxelinux, a, ok, want)
			}
		}
	}
}
