package collect

import (
	"fmt"
	"os"
	"strconv"

	"github.com/rollcall/rollcall/store/inventory"
)

// collectDMI fills system, baseboard, chassis, BIOS and DIMMs from the raw
// SMBIOS table, then fills any field the table left empty from
// /sys/class/dmi/id (which is all there is when the table is not readable:
// no DIMMs then, and an error saying why).
func collectDMI(fs sysfs, r *inventory.Report) error {
	var tableErr error
	table, err := os.ReadFile(fs.path("/sys/firmware/dmi/tables/DMI"))
	if err == nil {
		ep, _ := os.ReadFile(fs.path("/sys/firmware/dmi/tables/smbios_entry_point"))
		major, minor := SMBIOSVersion(ep)
		d, err := DecodeSMBIOS(table, major, minor)
		r.System, r.Baseboard, r.Chassis, r.BIOS, r.DIMMs = d.System, d.Baseboard, d.Chassis, d.BIOS, d.DIMMs
		if err != nil {
			tableErr = fmt.Errorf("smbios table: %w", err)
		}
	} else {
		tableErr = fmt.Errorf("smbios table: %w", err)
	}

	id := func(name string) string { return fs.str("/sys/class/dmi/id/" + name) }
	fill := func(dst *string, name string) {
		if *dst == "" {
			*dst = id(name)
		}
	}
	fill(&r.System.Manufacturer, "sys_vendor")
	fill(&r.System.Product, "product_name")
	fill(&r.System.Version, "product_version")
	fill(&r.System.Serial, "product_serial")
	fill(&r.System.UUID, "product_uuid")
	fill(&r.System.SKU, "product_sku")
	fill(&r.System.Family, "product_family")
	fill(&r.Baseboard.Manufacturer, "board_vendor")
	fill(&r.Baseboard.Product, "board_name")
	fill(&r.Baseboard.Version, "board_version")
	fill(&r.Baseboard.Serial, "board_serial")
	fill(&r.Baseboard.AssetTag, "board_asset_tag")
	fill(&r.Chassis.Manufacturer, "chassis_vendor")
	fill(&r.Chassis.Serial, "chassis_serial")
	fill(&r.Chassis.AssetTag, "chassis_asset_tag")
	if r.Chassis.Type == "" {
		if n, err := strconv.Atoi(id("chassis_type")); err == nil && n >= 0 && n < 256 {
			r.Chassis.Type = chassisType(byte(n))
		}
	}
	fill(&r.BIOS.Vendor, "bios_vendor")
	fill(&r.BIOS.Version, "bios_version")
	fill(&r.BIOS.Date, "bios_date")
	// The kernel prints the UUID in upper or lower case depending on the
	// version; the server normalises, the agent reports what is there.
	if r.System.UUID != "" {
		if u := inventory.NormalizeUUID(r.System.UUID); u != "" {
			r.System.UUID = u
		}
	}
	if r.System == (inventory.System{}) {
		if tableErr == nil {
			tableErr = fmt.Errorf("no system information")
		}
		return fmt.Errorf("dmi: %w; /sys/class/dmi/id is empty too", tableErr)
	}
	return tableErr
}
