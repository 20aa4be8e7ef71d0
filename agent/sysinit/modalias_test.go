package sysinit

import (
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Lines as depmod writes them for Debian's 6.1 kernel.
const modulesAlias = `alias pci:v00001AF4d00001000sv*sd*bc*sc*i* virtio_pci
alias pci:v00001AF4d*sv*sd*bc*sc*i* virtio_pci
alias virtio:d00000001v* virtio_net
alias virtio:d00000002v* virtio_blk
alias pci:v00009005d00000028sv*sd*bc*sc*i* smartpqi
alias pci:v0000103Cd0000323Asv0000103Csd00003241bc*sc*i* hpsa
alias pci:v000014E4d0000164Esv*sd*bc*sc*i* bnx2x
alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000
alias acpi*:PNP0501:* 8250_pnp
alias scsi:t-0x0[05]* sr_mod
`

func TestParseAliases(t *testing.T) {
	al, err := ParseAliases(modulesAlias + "\n# comment\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(al) != 10 || al[2] != (Alias{"virtio:d00000001v*", "virtio_net"}) {
		t.Fatalf("got %v", al)
	}
	for _, bad := range []string{"alias onlytwo\n", "options x y z\n", "alias a b c d\n"} {
		if _, err := ParseAliases(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestModulesFor(t *testing.T) {
	al, err := ParseAliases(modulesAlias)
	if err != nil {
		t.Fatal(err)
	}
	got := ModulesFor(al, []string{
		"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00", // virtio-net-pci
		"virtio:d00000001v00001AF4",
		"pci:v00009005d00000028sv0000103Csd00000600bc01sc04i00", // HPE Smart Array P408i
		"pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00", // the i440FX host bridge: no driver
		"scsi:t-0x05",
	})
	if d := cmp.Diff([]string{"smartpqi", "sr_mod", "virtio_net", "virtio_pci"}, got); d != "" {
		t.Errorf("modules (-want +got):\n%s", d)
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"pci:v00008086d*sv*sd*bc*sc*i*", "pci:v00008086d000010D3sv00008086sd0000A01Fbc02sc00i00", true},
		{"pci:v00008086d*sv*sd*bc*sc*i*", "pci:v000014E4d000010D3sv00008086sd0000A01Fbc02sc00i00", false},
		{"scsi:t-0x0[05]*", "scsi:t-0x05", true},
		{"scsi:t-0x0[05]*", "scsi:t-0x01", false},
		{"scsi:t-0x0[!05]*", "scsi:t-0x01", true},
		{"usb:v*p*d*dc*dsc*dp*ic03isc*ip*in*", "usb:v0627p0001d0000dc00dsc00dp00ic03isc00ip00in00", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"[a-c]x", "bx", true},
		{"[a-c]x", "dx", false},
		{"[abc", "[abc", true}, // an unclosed set is a literal '['
		{"", "", true},
		{"*", "", true},
		{"**a", "bba", true},
		{"*a*b", "xaxxbxb", true},
		{"*a*b", "xaxxbxc", false},
	} {
		if got := Glob(c.pat, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
}

func TestClosureOrder(t *testing.T) {
	order, err := closureOrder(modulesDep, []string{"virtio_net", "ipmi_si", "not_shipped"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kernel/drivers/char/ipmi/ipmi_msghandler.ko", "kernel/drivers/char/ipmi/ipmi_si.ko",
		"kernel/net/core/failover.ko", "kernel/drivers/net/net_failover.ko", "kernel/drivers/net/virtio_net.ko"}
	if d := cmp.Diff(want, order); d != "" {
		t.Errorf("order (-want +got):\n%s", d)
	}
}

// FuzzGlob checks Glob against the standard library's path.Match where
// both define the answer: no escapes, no '/', a pattern path.Match
// accepts (it negates a set with ^, fnmatch with !: sets with either are
// left to TestGlob; Glob matches bytes, path.Match runes, so ASCII
// only). modaliases come from the hardware, patterns from the kernel.
func FuzzGlob(f *testing.F) {
	for _, s := range []string{"pci:v00008086d*sv*", "scsi:t-0x0[05]*", "[a-c]?*", "a*b*c"} {
		f.Add(s, "pci:v00008086d000010D3sv00008086")
	}
	f.Fuzz(func(t *testing.T, pat, s string) {
		got := Glob(pat, s) // must not hang or panic on anything
		if !ascii(pat) || !ascii(s) || strings.ContainsAny(pat, `\/^!`) || strings.Contains(s, "/") || strings.Contains(pat, "[]") || strings.Contains(pat, "[!]") {
			return
		}
		want, err := path.Match(pat, s)
		if err != nil {
			return
		}
		if got != want {
			t.Fatalf("Glob(%q, %q) = %v, path.Match says %v", pat, s, got, want)
		}
	})
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
