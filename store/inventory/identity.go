package inventory

import (
	"net"
	"regexp"
	"strings"
)

// Firmware fills SMBIOS fields it was never given with placeholders; two
// boards with the same placeholder are not one machine. These lists come
// from values seen in the field (AMI and Insyde defaults, white-box boards,
// hypervisors without -smbios).
var placeholderUUIDs = map[string]bool{
	"00000000-0000-0000-0000-000000000000": true,
	"ffffffff-ffff-ffff-ffff-ffffffffffff": true,
	"03000200-0400-0500-0006-000700080009": true, // AMI default
	"00020003-0004-0005-0006-000700080009": true, // AMI default, byte-swapped
	"01234567-8910-1112-1314-151617181920": true,
	"12345678-1234-5678-90ab-cddeefaabbcc": true,
	"4c4c4544-0000-2010-8020-80c04f202020": true, // Dell board without service tag
	"fefefefe-fefe-fefe-fefe-fefefefefefe": true,
}

var placeholderSerials = map[string]bool{
	"":                         true,
	"to be filled by o.e.m.":   true,
	"to be filled by oem":      true,
	"default string":           true,
	"0123456789":               true,
	"123456789":                true,
	"system serial number":     true,
	"chassis serial number":    true,
	"base board serial number": true,
	"not specified":            true,
	"not applicable":           true,
	"none":                     true,
	"n/a":                      true,
	"na":                       true,
	"unknown":                  true,
	"invalid":                  true,
	"serial":                   true,
	"sn":                       true,
	"0":                        true,
	"00000000":                 true,
	"0000000000":               true,
	"xxxxxxxxxx":               true,
	"empty":                    true,
	"oem":                      true,
	"o.e.m.":                   true,
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// NormalizeUUID lowercases and trims a UUID; it returns "" for anything that
// is not a UUID.
func NormalizeUUID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if !uuidPattern.MatchString(s) {
		return ""
	}
	return s
}

// RealUUID reports whether u is a usable system identity: well formed, not a
// known placeholder, and not one hex digit repeated.
func RealUUID(u string) bool {
	u = NormalizeUUID(u)
	if u == "" || placeholderUUIDs[u] {
		return false
	}
	hex := strings.ReplaceAll(u, "-", "")
	return strings.Trim(hex, hex[:1]) != ""
}

// RealSerial reports whether s is a usable serial number.
func RealSerial(s string) bool {
	t := strings.ToLower(strings.TrimSpace(s))
	if placeholderSerials[t] {
		return false
	}
	// One character repeated ("0000000", "........") is filler too.
	return strings.Trim(t, t[:1]) != ""
}

// Key is how Rollcall recognises a machine across boots: the DMI system
// UUID, falling back to the serial, then the boot MAC. It returns "" when
// there is nothing to go by.
func Key(uuid, serial, bootMAC string) string {
	if RealUUID(uuid) {
		return "uuid:" + NormalizeUUID(uuid)
	}
	if RealSerial(serial) {
		return "serial:" + strings.TrimSpace(serial)
	}
	if hw, err := net.ParseMAC(strings.TrimSpace(bootMAC)); err == nil && len(hw) == 6 {
		return "mac:" + hw.String()
	}
	return ""
}
