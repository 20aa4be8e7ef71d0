package store

import (
	"net"
)

// CheckMachineMAC refuses MACs no machine's NIC has: the broadcast and
// multicast addresses (the group bit of the first octet) and all zeros.
// A machine, a DHCP lease or an agent's identity naming one would answer for
// every host on the segment, or for none. mac must be in normal form.
func CheckMachineMAC(mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return Errorf(ErrInvalid, "mac %q is not a 48-bit MAC address", clipMAC(mac))
	}
	switch {
	case hw[0]&1 == 1:
		return Errorf(ErrInvalid, "mac %s is a broadcast or multicast address, not a NIC's", mac)
	case hw[0]|hw[1]|hw[2]|hw[3]|hw[4]|hw[5] == 0:
		return Errorf(ErrInvalid, "mac %s is all zeros, not a NIC's", mac)
	}
	return nil
}

func clipMAC(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
