package collect

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/store/inventory"
)

// unhex reads a hex dump with spaces, newlines and # comments.
func unhex(t testing.TB, s string) []byte {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A frame as an access switch sends it, laid out TLV by TLV from
// IEEE 802.1AB-2016 §8.5 and Annex D/E.
const ciscoFrame = `
01 80 c2 00 00 0e  00 1e 49 4f c5 18  88 cc      # dst nearest bridge, src, ethertype
02 07 04 00 1e 49 4f c5 00                      # chassis ID, subtype 4 (MAC)
04 09 05 47 69 31 2f 30 2f 32 34                # port ID, subtype 5 (ifname) "Gi1/0/24"
06 02 00 78                                     # TTL 120
08 15 47 69 67 61 62 69 74 45 74 68 65 72 6e 65 74 31 2f 30 2f 32 34  # port description
0a 0d 73 77 2d 72 61 63 6b 31 32 2e 6c 61 62    # system name "sw-rack12.lab"
0c 08 43 69 73 63 6f 20 49 4f                   # system description "Cisco IO"
0e 04 00 14 00 04                               # capabilities
fe 06 00 80 c2 01 00 2a                         # 802.1 port VLAN ID 42
fe 09 00 12 0f 01 03 6c 00 00 10                # 802.3 MAC/PHY (skipped)
00 00                                           # end
00 00 00 00 00 00                               # padding`

// A Juniper-style frame: network-address chassis ID, locally assigned port
// ID, an 802.1Q tag in front, no end TLV.
const juniperFrame = `
01 80 c2 00 00 0e  2c 6b f5 01 02 03  81 00 00 64  88 cc
02 06 05 01 0a 00 00 01                         # chassis ID, subtype 5, IPv4 10.0.0.1
04 04 07 35 32 33                               # port ID, subtype 7 (local) "523"
06 02 00 78
0a 06 71 66 78 2d 30 31                         # "qfx-01"
fe 06 00 80 c2 01 0f a0                         # VLAN 4000`

func TestParseLLDPFrame(t *testing.T) {
	cases := map[string]struct {
		frame string
		want  inventory.LLDP
		err   string
	}{
		"cisco":          {frame: ciscoFrame, want: inventory.LLDP{ChassisID: "00:1e:49:4f:c5:00", PortID: "Gi1/0/24", SystemName: "sw-rack12.lab", PortDescription: "GigabitEthernet1/0/24", VLAN: 42}},
		"juniper tagged": {frame: juniperFrame, want: inventory.LLDP{ChassisID: "10.0.0.1", PortID: "523", SystemName: "qfx-01", VLAN: 4000}},
		"mac port id": {frame: `01 80 c2 00 00 0e 00 00 00 00 00 01 88 cc
			02 07 07 73 77 69 74 63 68                 # chassis local "switch"
			04 07 03 00 00 5e 00 53 01                 # port ID MAC
			06 02 00 78 00 00`, want: inventory.LLDP{ChassisID: "switch", PortID: "00:00:5e:00:53:01"}},
		"binary chassis component": {frame: `01 80 c2 00 00 0e 00 00 00 00 00 01 88 cc
			02 04 01 00 ff 01  04 02 05 70  06 02 00 78 00 00`, want: inventory.LLDP{ChassisID: "00ff01", PortID: "p"}},
		"not lldp":            {frame: `ff ff ff ff ff ff 00 00 00 00 00 01 08 00 45 00`, err: "ethertype"},
		"short":               {frame: `01 80 c2`, err: "shorter"},
		"tlv past end":        {frame: `01 80 c2 00 00 0e 00 00 00 00 00 01 88 cc 02 07 04 00 1e`, err: "runs past"},
		"port id first":       {frame: `01 80 c2 00 00 0e 00 00 00 00 00 01 88 cc 04 02 05 70 02 02 07 73`, err: "starts with"},
		"empty chassis tlv":   {frame: `01 80 c2 00 00 0e 00 00 00 00 00 01 88 cc 02 00`, err: "too short"},
		"half a tlv header":   {frame: `01 80 c2 00 00 0e 00 00 00 00 00 01 88 cc 02`, err: "truncated"},
		"truncated vlan tag":  {frame: `01 80 c2 00 00 0e 00 00 00 00 00 01 81 00 00`, err: "VLAN tag"},
		"no mandatory at all": {frame: `01 80 c2 00 00 0e 00 00 00 00 00 01 88 cc 00 00`, err: "starts with"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseLLDPFrame(unhex(t, tc.frame))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func FuzzParseLLDPFrame(f *testing.F) {
	f.Add(unhex(f, ciscoFrame))
	f.Add(unhex(f, juniperFrame))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseLLDPFrame(b)
		if err != nil {
			return
		}
		for _, s := range []string{n.ChassisID, n.PortID, n.SystemName, n.PortDescription} {
			if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("control characters in %q", s)
			}
		}
		if n.VLAN < 0 || n.VLAN > 0xffff {
			t.Fatalf("vlan %d", n.VLAN)
		}
	})
}
