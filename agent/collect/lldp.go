package collect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode/utf8"

	"github.com/rollcall/rollcall/store/inventory"
)

// LLDP decoding follows IEEE 802.1AB-2016: §8.5 TLV format (7-bit type,
// 9-bit length), §8.5.2 Chassis ID, §8.5.3 Port ID, §8.5.5 Port
// Description, §8.5.6 System Name, and Annex D.2.1 (IEEE 802.1
// organizationally specific TLV, OUI 00-80-C2, subtype 1: Port VLAN ID).

// EtherTypeLLDP is the LLDP ethertype (802.1AB §7.2).
const EtherTypeLLDP = 0x88cc

var errNotLLDP = errors.New("lldp: not an LLDP frame")

// ParseLLDPFrame decodes an Ethernet frame carrying an LLDPDU (an 802.1Q
// tag in front of the ethertype is allowed).
func ParseLLDPFrame(frame []byte) (inventory.LLDP, error) {
	if len(frame) < 14 {
		return inventory.LLDP{}, fmt.Errorf("%w: %d bytes is shorter than an Ethernet header", errNotLLDP, len(frame))
	}
	et := binary.BigEndian.Uint16(frame[12:14])
	off := 14
	if et == 0x8100 || et == 0x88a8 {
		if len(frame) < 18 {
			return inventory.LLDP{}, fmt.Errorf("%w: truncated VLAN tag", errNotLLDP)
		}
		et = binary.BigEndian.Uint16(frame[16:18])
		off = 18
	}
	if et != EtherTypeLLDP {
		return inventory.LLDP{}, fmt.Errorf("%w: ethertype %#04x", errNotLLDP, et)
	}
	return ParseLLDPDU(frame[off:])
}

// ParseLLDPDU decodes the TLVs of an LLDPDU. The three mandatory TLVs must
// lead in order (Chassis ID, Port ID, TTL; §8.2); unknown TLVs are skipped.
func ParseLLDPDU(b []byte) (inventory.LLDP, error) {
	var n inventory.LLDP
	for i := 0; ; i++ {
		if len(b) == 0 {
			// Some switches omit the End TLV when the frame is padded out.
			break
		}
		if len(b) < 2 {
			return n, fmt.Errorf("lldp: truncated TLV header")
		}
		h := binary.BigEndian.Uint16(b)
		typ, length := int(h>>9), int(h&0x1ff)
		if length > len(b)-2 {
			return n, fmt.Errorf("lldp: TLV type %d length %d runs past the frame", typ, length)
		}
		v := b[2 : 2+length]
		b = b[2+length:]
		switch {
		case i == 0 && typ != 1, i == 1 && typ != 2, i == 2 && typ != 3:
			return n, fmt.Errorf("lldp: TLV %d is type %d; an LLDPDU starts with chassis ID, port ID, TTL", i+1, typ)
		}
		switch typ {
		case 0: // End of LLDPDU
			return n, nil
		case 1:
			if length < 2 {
				return n, fmt.Errorf("lldp: chassis ID TLV too short")
			}
			n.ChassisID = idString(v[0], v[1:], 4, 5)
		case 2:
			if length < 2 {
				return n, fmt.Errorf("lldp: port ID TLV too short")
			}
			n.PortID = idString(v[0], v[1:], 3, 4)
		case 3:
			if length < 2 {
				return n, fmt.Errorf("lldp: TTL TLV too short")
			}
		case 4:
			n.PortDescription = printable(v)
		case 5:
			n.SystemName = printable(v)
		case 127:
			// IEEE 802.1 (00-80-C2), subtype 1: Port VLAN ID, 2 bytes.
			if length >= 6 && v[0] == 0x00 && v[1] == 0x80 && v[2] == 0xc2 && v[3] == 1 {
				n.VLAN = int(binary.BigEndian.Uint16(v[4:6]))
			}
		}
	}
	if n.ChassisID == "" && n.PortID == "" {
		return n, fmt.Errorf("lldp: no chassis or port ID")
	}
	return n, nil
}

// idString renders a chassis or port ID by its subtype: a MAC address, a
// network address (IANA address family 1 IPv4, 2 IPv6), or text.
func idString(subtype byte, v []byte, macSubtype, netSubtype byte) string {
	switch subtype {
	case macSubtype:
		if len(v) == 6 {
			return net.HardwareAddr(v).String()
		}
	case netSubtype:
		if len(v) == 5 && v[0] == 1 || len(v) == 17 && v[0] == 2 {
			return net.IP(v[1:]).String()
		}
	}
	return printable(v)
}

// printable keeps text TLVs safe to store and show: valid UTF-8 without
// control characters is text (trailing NULs dropped); anything else, such
// as a binary chassis component ID, is rendered as hex.
func printable(v []byte) string {
	t := bytes.TrimRight(v, "\x00")
	if utf8.Valid(t) && bytes.IndexFunc(t, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0 {
		return strings.TrimSpace(string(t))
	}
	return fmt.Sprintf("%x", v)
}
