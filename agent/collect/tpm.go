package collect

import (
	"strconv"
	"strings"

	"github.com/rollcall/rollcall/store/inventory"
)

// collectTPM reports the first TPM: its version from tpm_version_major
// (kernel 5.6+) or the TPM 1.2 caps file, its manufacturer from the caps
// file's vendor ID or the ACPI description. No TPM is not an error.
func collectTPM(fs sysfs, r *inventory.Report) error {
	names := fs.list("/sys/class/tpm")
	if len(names) == 0 {
		return nil
	}
	base := "/sys/class/tpm/" + names[0]
	caps := fs.str(base + "/caps")
	if caps == "" {
		caps = fs.str(base + "/device/caps")
	}
	t := &inventory.TPM{}
	switch major := fs.int(base+"/tpm_version_major", 0); {
	case major == 2:
		t.Version = "2.0"
	case major == 1:
		t.Version = "1.2"
	default:
		if v := capsField(caps, "TCG version"); v != "" {
			t.Version = v
		} else if strings.Contains(fs.str(base+"/device/description"), "2.0") {
			t.Version = "2.0"
		} else {
			t.Version = "unknown"
		}
	}
	if m := capsField(caps, "Manufacturer"); m != "" {
		t.Manufacturer = tpmVendor(m)
	}
	// Some ACPI tables name the part ("Infineon TPM 2.0"); the generic
	// "TPM 2.0 Device" names nobody.
	if d := fs.str(base + "/device/description"); t.Manufacturer == "" && d != "" && !strings.HasPrefix(d, "TPM") {
		t.Manufacturer = d
	}
	r.TPM = t
	return nil
}

func capsField(caps, key string) string {
	for _, line := range strings.Split(caps, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// tpmVendor decodes a TCG vendor ID ("0x49465800" is "IFX") and names it
// after the TCG vendor ID registry.
func tpmVendor(s string) string {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
	if err != nil {
		return s
	}
	var b []byte
	for shift := 24; shift >= 0; shift -= 8 {
		if c := byte(n >> shift); c >= 0x20 && c < 0x7f {
			b = append(b, c)
		}
	}
	id := strings.TrimSpace(string(b))
	if name, ok := tpmVendors[id]; ok {
		return name
	}
	return id
}

var tpmVendors = map[string]string{
	"IFX": "Infineon", "NTC": "Nuvoton", "NTZ": "Nationz", "STM": "STMicroelectronics",
	"ATML": "Atmel", "INTC": "Intel", "AMD": "AMD", "MSFT": "Microsoft", "IBM": "IBM",
	"HPE": "HPE", "NSM": "National Semiconductor", "ROCC": "Fuzhou Rockchip", "GOOG": "Google",
	"SMSC": "SMSC", "BRCM": "Broadcom", "QCOM": "Qualcomm", "TXN": "Texas Instruments",
}
