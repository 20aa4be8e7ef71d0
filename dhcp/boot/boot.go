// Package boot decides what a network-booting client is handed, for both
// DHCP modes, and writes it into the reply.
//
// The client's kind comes from option 60 (vendor class, "PXEClient…" for PXE
// ROMs per the PXE 2.1 spec, "HTTPClient…" for UEFI HTTP boot, UEFI 2.x
// §24.7), option 93 (client architecture, RFC 4578 §2.1 and the IANA
// processor architecture registry) and iPXE's own markers (option 77
// "iPXE", option 175). Firmware is handed an iPXE binary; iPXE is handed the
// boot script URL, so it never chain-loads itself. On a network whose NICs
// cannot run iPXE (Config.PXELinux set), BIOS PXE firmware is handed
// lpxelinux.0 instead (syslinux's PXELINUX with an HTTP client); UEFI firmware
// still gets iPXE, since PXELINUX's EFI builds are not served.
package boot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/rollcall/rollcall/dhcp/wire"
)

// Architectures (option 93).
const (
	ArchBIOS     = 0
	ArchEFIIA32  = 6
	ArchEFIx64   = 7
	ArchEFIBC    = 9 // EFI byte code; firmware that sends it is x86-64 in practice
	ArchEFIARM32 = 10
	ArchEFIARM64 = 11
	ArchHTTPIA32 = 15
	ArchHTTPx64  = 16
	ArchHTTPARM  = 19
)

// Config names the boot loaders and where they are served.
type Config struct {
	BIOS     string // PXE BIOS over TFTP; default undionly.kpxe
	EFIx64   string // x86-64 UEFI over TFTP and HTTP; default ipxe.efi (snponly.efi is the other usual choice)
	EFIARM64 string // ARM64 UEFI; default ipxe-arm64.efi
	EFIIA32  string // 32-bit UEFI; empty: not served
	// PXELinux, when true, hands BIOS PXE firmware LegacyBIOS instead of
	// BIOS: the VLAN's boot loader is pxelinux. iPXE and UEFI clients are
	// answered as before.
	PXELinux   bool
	LegacyBIOS string // default lpxelinux.0
	// HTTPPort is the port of the node's HTTP boot server; default 80.
	HTTPPort int
	// HTTPPrefix is the URL path under which loaders are served over HTTP;
	// default "/boot/".
	HTTPPrefix string
	// ScriptPath is the iPXE script endpoint; default "/boot/ipxe".
	ScriptPath string
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.BIOS == "" {
		c.BIOS = "undionly.kpxe"
	}
	if c.EFIx64 == "" {
		c.EFIx64 = "ipxe.efi"
	}
	if c.LegacyBIOS == "" {
		c.LegacyBIOS = "lpxelinux.0"
	}
	if c.EFIARM64 == "" {
		c.EFIARM64 = "ipxe-arm64.efi"
	}
	if c.HTTPPort == 0 {
		c.HTTPPort = 80
	}
	if c.HTTPPrefix == "" {
		c.HTTPPrefix = "/boot/"
	}
	if !strings.HasSuffix(c.HTTPPrefix, "/") {
		c.HTTPPrefix += "/"
	}
	if c.ScriptPath == "" {
		c.ScriptPath = "/boot/ipxe"
	}
	return c
}

// Kind is what sort of network-boot client sent a request.
type Kind int

// Client kinds.
const (
	NotBoot Kind = iota // an ordinary DHCP client
	PXE                 // PXE firmware: TFTP
	HTTP                // UEFI HTTP boot
	IPXE                // iPXE itself
)

func (k Kind) String() string {
	return [...]string{"none", "pxe", "http", "ipxe"}[k]
}

// Client is what a request says about the booting client.
type Client struct {
	Kind      Kind
	Arch      int // -1 when not sent
	UserClass string
}

// Markers read in requests, as bytes: options 60 and 77 are compared in
// place, so an attacker's long option costs no copy of it.
var (
	pxeClient  = []byte("PXEClient")
	httpClient = []byte("HTTPClient")
	ipxeMarker = []byte("iPXE")
	archKey    = []byte(":Arch:")
)

// maxUserClass bounds the user class kept for a sighting (it is
// replicated with it).
const maxUserClass = 64

// Classify reads the boot markers of a request.
func Classify(p *dhcpv4.DHCPv4) Client {
	c := Client{Arch: -1}
	if v := p.Options[93]; len(v) >= 2 {
		c.Arch = int(binary.BigEndian.Uint16(v))
	}
	vendor := p.Options[60]
	if c.Arch < 0 {
		c.Arch = archFromVendor(vendor)
	}
	uc := p.Options[77]
	c.UserClass = printable(uc)
	_, has175 := p.Options[175]
	switch {
	case has175 || bytes.Contains(uc, ipxeMarker):
		c.Kind = IPXE
	case bytes.HasPrefix(vendor, httpClient), c.Arch == ArchHTTPIA32 || c.Arch == ArchHTTPx64 || c.Arch == ArchHTTPARM:
		c.Kind = HTTP
	case bytes.HasPrefix(vendor, pxeClient):
		c.Kind = PXE
	}
	return c
}

// IsBootClient reports whether option 60 names a PXE or UEFI HTTP boot
// client ("PXEClient…", "HTTPClient…").
func IsBootClient(p *dhcpv4.DHCPv4) bool {
	v := p.Options[60]
	return bytes.HasPrefix(v, pxeClient) || bytes.HasPrefix(v, httpClient)
}

// archFromVendor parses "PXEClient:Arch:00007:UNDI:003016".
func archFromVendor(v []byte) int {
	i := bytes.Index(v, archKey)
	if i < 0 || len(v) < i+len(archKey)+5 {
		return -1
	}
	n := 0
	for _, d := range v[i+len(archKey) : i+len(archKey)+5] {
		if d < '0' || d > '9' {
			return -1
		}
		n = n*10 + int(d-'0')
	}
	return n
}

// printable keeps the printable bytes of b, at most maxUserClass of them.
func printable(b []byte) string {
	var out [maxUserClass]byte
	n := 0
	for _, c := range b {
		if n == len(out) {
			break
		}
		if c >= 0x20 && c < 0x7f {
			out[n] = c
			n++
		}
	}
	return string(out[:n])
}

// Answer is the boot file a client gets.
type Answer struct {
	Kind Kind
	File string // a TFTP file name or an http:// URL
}

// Decide picks the boot file for client c of MAC mac, served by node. ok is
// false when the client does not network-boot or its architecture has no
// loader configured.
func (cfg Config) Decide(c Client, mac string, node netip.Addr) (Answer, bool) {
	base := "http://" + netip.AddrPortFrom(node, uint16(cfg.HTTPPort)).String()
	if cfg.HTTPPort == 80 {
		base = "http://" + node.String()
	}
	switch c.Kind {
	case IPXE:
		// The MAC goes in literally (not iPXE's ${mac}): the DHCP server
		// knows it, and not every iPXE expands settings in a DHCP filename.
		return Answer{Kind: IPXE, File: base + cfg.ScriptPath + "?mac=" + mac}, true
	case HTTP:
		var f string
		switch c.Arch {
		case ArchHTTPIA32, ArchEFIIA32:
			f = cfg.EFIIA32
		case ArchHTTPARM, ArchEFIARM64:
			f = cfg.EFIARM64
		default: // 16, 7, 9, or unsent: x86-64 is by far the common case
			f = cfg.EFIx64
		}
		if f == "" {
			return Answer{}, false
		}
		return Answer{Kind: HTTP, File: base + cfg.HTTPPrefix + f}, true
	case PXE:
		var f string
		switch c.Arch {
		case ArchBIOS, -1:
			f = cfg.BIOS
			if cfg.PXELinux {
				f = cfg.LegacyBIOS
			}
		case ArchEFIx64, ArchEFIBC:
			f = cfg.EFIx64
		case ArchEFIARM64:
			f = cfg.EFIARM64
		case ArchEFIIA32:
			f = cfg.EFIIA32
		}
		if f == "" {
			return Answer{}, false
		}
		return Answer{Kind: PXE, File: f}, true
	}
	return Answer{}, false
}

// Apply writes a boot answer into resp: siaddr, the file field (option 67
// when the name is longer than the 127 bytes the field holds, or when the
// client asks for 67), option 66 when asked for, option 60 (PXEClient or
// HTTPClient), option 43 with PXE discovery control = 8 ("boot the file
// named, no boot server discovery") for PXE ROMs, and option 97 echoed when
// the client sent it. Options 66 and 67 are NUL-terminated: some PXE ROMs
// read them as C strings.
func Apply(resp, req *dhcpv4.DHCPv4, a Answer, node netip.Addr) {
	resp.ServerIPAddr = wire.IP(node)
	asked := func(code uint8) bool {
		for _, c := range req.Options[55] {
			if c == code {
				return true
			}
		}
		return false
	}
	if len(a.File) <= 127 {
		resp.BootFileName = a.File
	} else {
		resp.BootFileName = ""
	}
	if len(a.File) > 127 || asked(67) {
		resp.Options[67] = append([]byte(a.File), 0)
	}
	if a.Kind != HTTP && asked(66) {
		resp.Options[66] = append([]byte(node.String()), 0)
	}
	switch a.Kind {
	case HTTP:
		resp.Options[60] = []byte("HTTPClient")
	case PXE:
		resp.Options[60] = []byte("PXEClient")
		resp.Options[43] = []byte{6, 1, 8, 255}
	}
	if v, ok := req.Options[97]; ok {
		resp.Options[97] = append([]byte(nil), v...)
	}
}

// Describe is a one-line summary for logs.
func (a Answer) Describe() string { return fmt.Sprintf("%s %s", a.Kind, a.File) }
