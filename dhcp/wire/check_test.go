package wire

import (
	"bytes"
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

func TestCheckHW(t *testing.T) {
	for name, tc := range map[string]struct {
		htype iana.HWType
		hw    net.HardwareAddr
		want  string
	}{
		"unicast":              {1, net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}, ""},
		"locally administered": {1, net.HardwareAddr{0x02, 0, 0, 0, 0, 1}, ""},
		"broadcast":            {1, net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ReasonBadChaddr},
		"all zeros":            {1, net.HardwareAddr{0, 0, 0, 0, 0, 0}, ReasonBadChaddr},
		"IPv4 multicast":       {1, net.HardwareAddr{0x01, 0x00, 0x5e, 0, 0, 1}, ReasonBadChaddr},
		"IPv6 multicast":       {1, net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, ReasonBadChaddr},
		"group bit only":       {1, net.HardwareAddr{0x03, 0, 0, 0, 0, 1}, ReasonBadChaddr},
		"hlen 7":               {1, net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56, 7}, ReasonBadHWAddr},
		"hlen 0":               {1, nil, ReasonBadHWAddr},
		"hlen 16":              {1, make(net.HardwareAddr, 16), ReasonBadHWAddr},
		"token ring":           {6, net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}, ReasonBadHWAddr},
	} {
		got := ""
		if err := CheckHW(&dhcpv4.DHCPv4{HWType: tc.htype, ClientHWAddr: tc.hw}); err != nil {
			got = DropReason(err)
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q (\"\": accepted)", name, got, tc.want)
		}
	}
}

func TestCheckOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		opts map[uint8][]byte
		code uint8 // 0: accepted
	}{
		"none":                        {nil, 0},
		"client ID, MAC form":         {map[uint8][]byte{61: {1, 2, 0, 0, 0, 0, 1}}, 0},
		"client ID, longest RFC 4361": {map[uint8][]byte{61: bytes.Repeat([]byte{0xff}, MaxClientID)}, 0},
		"client ID one past":          {map[uint8][]byte{61: bytes.Repeat([]byte{0xff}, MaxClientID+1)}, 61},
		"client ID concatenated":      {map[uint8][]byte{61: bytes.Repeat([]byte{0xff}, 600)}, 61},
		"client ID of one byte":       {map[uint8][]byte{61: {1}}, 61},
		"client ID empty":             {map[uint8][]byte{61: {}}, 61},
		"relay info, one option":      {map[uint8][]byte{82: bytes.Repeat([]byte{1}, 255)}, 0},
		"relay info concatenated":     {map[uint8][]byte{82: bytes.Repeat([]byte{1}, 256)}, 82},
		"GUID":                        {map[uint8][]byte{97: make([]byte, 17)}, 0},
		"GUID too long":               {map[uint8][]byte{97: make([]byte, 18)}, 97},
		"long host name is no error":  {map[uint8][]byte{12: bytes.Repeat([]byte{'h'}, 900)}, 0},
	} {
		p := &dhcpv4.DHCPv4{Options: dhcpv4.Options{}}
		for k, v := range tc.opts {
			p.Options[k] = v
		}
		code, err := CheckOptions(p)
		if tc.code == 0 {
			if err != nil {
				t.Errorf("%s: refused (option %d): %v", name, code, err)
			}
			continue
		}
		if DropReason(err) != ReasonBadOption || code != tc.code {
			t.Errorf("%s: option %d, %v; want option %d refused", name, code, err, tc.code)
		}
	}
}

// What goes into a lease record is bounded and plain.
func TestLeaseFields(t *testing.T) {
	for name, tc := range map[string]struct {
		code uint8
		v    []byte
		want string
	}{
		"host name":                 {12, []byte("node-07.rack_3"), "node-07.rack_3"},
		"host name of 63":           {12, bytes.Repeat([]byte{'a'}, 63), string(bytes.Repeat([]byte{'a'}, 63))},
		"host name of 64":           {12, bytes.Repeat([]byte{'a'}, 64), ""},
		"host name with a quote":    {12, []byte(`a"b`), ""},
		"host name with a slash":    {12, []byte("../etc"), ""},
		"host name with a NUL":      {12, []byte("ab\x00"), ""},
		"host name starting with -": {12, []byte("-x"), ""},
		"client ID":                 {61, []byte{1, 0xab, 0xcd}, "01abcd"},
		"client ID too long":        {61, bytes.Repeat([]byte{1}, MaxClientID+1), ""},
		"client ID of one byte":     {61, []byte{1}, ""},
	} {
		p := &dhcpv4.DHCPv4{Options: dhcpv4.Options{tc.code: tc.v}}
		got := Hostname(p)
		if tc.code == 61 {
			got = ClientID(p)
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
