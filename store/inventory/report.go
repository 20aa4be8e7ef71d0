// Package inventory defines the hardware report the commissioning agent
// sends (the body of POST /api/v1/commission), its validation, the summary
// the store keeps beside it, and the rules that tell real identities
// (system UUID, serial) from firmware placeholders.
//
// It holds plain types only, so the agent can import it without pulling in
// the server.
package inventory

import "time"

// SchemaVersion is the report layout this package describes.
const SchemaVersion = 1

// Report is one commissioning run's findings. Collectors that fail leave
// their section empty and add an entry to Errors; the rest still report.
type Report struct {
	Version   int       `json:"version"`
	Collected time.Time `json:"collected,omitzero"`
	Agent     string    `json:"agent,omitempty"` // agent version
	BootMAC   string    `json:"boot_mac,omitempty"`

	System    System       `json:"system"`
	Baseboard Baseboard    `json:"baseboard,omitzero"`
	Chassis   Chassis      `json:"chassis,omitzero"`
	BIOS      BIOS         `json:"bios,omitzero"`
	DIMMs     []DIMM       `json:"dimms,omitempty"`
	CPUs      []CPU        `json:"cpus,omitempty"`
	Memory    Memory       `json:"memory,omitzero"`
	Disks     []Disk       `json:"disks,omitempty"`
	NVMe      []NVMe       `json:"nvme,omitempty"`
	NICs      []NIC        `json:"nics,omitempty"`
	IB        []IBHCA      `json:"infiniband,omitempty"`
	GPUs      []GPU        `json:"gpus,omitempty"`
	PCI       []PCIDevice  `json:"pci,omitempty"`
	LLDP      []LLDP       `json:"lldp,omitempty"`
	TPM       *TPM         `json:"tpm,omitempty"`
	BMC       *BMC         `json:"bmc,omitempty"`
	Errors    []CollectErr `json:"errors,omitempty"`
}

// System is SMBIOS type 1.
type System struct {
	Manufacturer string `json:"manufacturer,omitempty"`
	Product      string `json:"product,omitempty"`
	Version      string `json:"version,omitempty"`
	Serial       string `json:"serial,omitempty"`
	UUID         string `json:"uuid,omitempty"`
	SKU          string `json:"sku,omitempty"`
	Family       string `json:"family,omitempty"`
}

// Baseboard is SMBIOS type 2.
type Baseboard struct {
	Manufacturer string `json:"manufacturer,omitempty"`
	Product      string `json:"product,omitempty"`
	Version      string `json:"version,omitempty"`
	Serial       string `json:"serial,omitempty"`
	AssetTag     string `json:"asset_tag,omitempty"`
}

// Chassis is SMBIOS type 3.
type Chassis struct {
	Manufacturer string `json:"manufacturer,omitempty"`
	Type         string `json:"type,omitempty"`
	Serial       string `json:"serial,omitempty"`
	AssetTag     string `json:"asset_tag,omitempty"`
}

// BIOS is SMBIOS type 0.
type BIOS struct {
	Vendor  string `json:"vendor,omitempty"`
	Version string `json:"version,omitempty"`
	Date    string `json:"date,omitempty"`
}

// DIMM is one SMBIOS type 17 memory device: every slot, populated or not.
type DIMM struct {
	Locator      string `json:"locator"`
	BankLocator  string `json:"bank_locator,omitempty"`
	SizeMB       int64  `json:"size_mb"` // 0: empty slot
	SpeedMTs     int    `json:"speed_mts,omitempty"`
	Type         string `json:"type,omitempty"`
	FormFactor   string `json:"form_factor,omitempty"`
	Manufacturer string `json:"manufacturer,omitempty"`
	PartNumber   string `json:"part_number,omitempty"`
	Serial       string `json:"serial,omitempty"`
}

// CPU is one socket.
type CPU struct {
	Socket   int      `json:"socket"`
	Vendor   string   `json:"vendor,omitempty"`
	Model    string   `json:"model,omitempty"`
	Cores    int      `json:"cores"`
	Threads  int      `json:"threads"`
	MHz      int      `json:"mhz,omitempty"`
	NUMANode int      `json:"numa_node"`
	Flags    []string `json:"flags,omitempty"`
}

// Memory is the total the kernel sees, with its NUMA split.
type Memory struct {
	TotalBytes int64   `json:"total_bytes"`
	NUMANodes  []int64 `json:"numa_nodes_bytes,omitempty"`
}

// Disk is a block device.
type Disk struct {
	Name       string `json:"name"`
	SizeBytes  int64  `json:"size_bytes"`
	Model      string `json:"model,omitempty"`
	Serial     string `json:"serial,omitempty"`
	WWN        string `json:"wwn,omitempty"`
	Rotational bool   `json:"rotational"`
	Transport  string `json:"transport,omitempty"` // sata, sas, nvme, virtio, usb
	Removable  bool   `json:"removable,omitempty"`
	// ReadOnly is the kernel's ro flag (a write-protected card, a
	// read-only LUN): never a deployment's target.
	ReadOnly bool `json:"read_only,omitempty"`
	// LogicalBlockSize is queue/logical_block_size in bytes (4096 on a
	// 4Kn disk); 0 when the agent did not report it (older agents: taken
	// as 512).
	LogicalBlockSize int `json:"logical_block_size,omitempty"`
	// ByPath is the disk's /dev/disk/by-path name as udev makes it
	// (pci-0000:00:03.0, pci-0000:00:05.0-nvme-1) where the agent can tell
	// it from sysfs (virtio and NVMe); "" otherwise.
	ByPath string `json:"by_path,omitempty"`
}

// NVMe is one controller with its namespaces.
type NVMe struct {
	Name       string          `json:"name"`
	Model      string          `json:"model,omitempty"`
	Serial     string          `json:"serial,omitempty"`
	Firmware   string          `json:"firmware,omitempty"`
	PCIAddress string          `json:"pci_address,omitempty"`
	Namespaces []NVMeNamespace `json:"namespaces,omitempty"`
}

// NVMeNamespace is one namespace of a controller.
type NVMeNamespace struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
	EUI64     string `json:"eui64,omitempty"`
	NGUID     string `json:"nguid,omitempty"`
}

// NIC is a network interface.
type NIC struct {
	Name       string   `json:"name"`
	MAC        string   `json:"mac"`
	Driver     string   `json:"driver,omitempty"`
	Firmware   string   `json:"firmware,omitempty"`
	SpeedMbps  int      `json:"speed_mbps,omitempty"`
	Link       bool     `json:"link"`
	MTU        int      `json:"mtu,omitempty"`
	PCIAddress string   `json:"pci_address,omitempty"`
	IPs        []string `json:"ips,omitempty"` // addresses the agent saw configured
	SRIOVTotal int      `json:"sriov_total,omitempty"`
	SRIOVNum   int      `json:"sriov_num,omitempty"`
}

// IBHCA is an InfiniBand host channel adapter.
type IBHCA struct {
	Name       string   `json:"name"`
	NodeGUID   string   `json:"node_guid"`
	Model      string   `json:"model,omitempty"`
	Firmware   string   `json:"firmware,omitempty"`
	PCIAddress string   `json:"pci_address,omitempty"`
	Ports      []IBPort `json:"ports,omitempty"`
}

// IBPort is one port of an HCA.
type IBPort struct {
	Number    int    `json:"number"`
	GUID      string `json:"guid,omitempty"`
	State     string `json:"state,omitempty"`
	Rate      string `json:"rate,omitempty"`
	LinkLayer string `json:"link_layer,omitempty"`
}

// GPU is an accelerator.
type GPU struct {
	Vendor     string `json:"vendor,omitempty"`
	Model      string `json:"model"`
	PCIAddress string `json:"pci_address,omitempty"`
	MemoryMB   int64  `json:"memory_mb,omitempty"`
	NUMANode   int    `json:"numa_node"`
}

// PCIDevice is any device on the PCI bus.
type PCIDevice struct {
	Address     string `json:"address"`
	VendorID    string `json:"vendor_id"`
	DeviceID    string `json:"device_id"`
	Class       string `json:"class"`
	SubVendorID string `json:"subsystem_vendor_id,omitempty"`
	SubDeviceID string `json:"subsystem_device_id,omitempty"`
	Vendor      string `json:"vendor,omitempty"`
	Device      string `json:"device,omitempty"`
	Driver      string `json:"driver,omitempty"`
	NUMANode    int    `json:"numa_node"`
}

// LLDP is a neighbour heard on an interface.
type LLDP struct {
	Interface       string `json:"interface"`
	ChassisID       string `json:"chassis_id,omitempty"`
	PortID          string `json:"port_id,omitempty"`
	SystemName      string `json:"system_name,omitempty"`
	PortDescription string `json:"port_description,omitempty"`
	VLAN            int    `json:"vlan,omitempty"`
}

// TPM is the trusted platform module.
type TPM struct {
	Version      string `json:"version"`
	Manufacturer string `json:"manufacturer,omitempty"`
}

// BMC is what the agent learned or set up on the baseboard management
// controller. Password is the secret the agent generated; the server seals it
// before it enters a command and never returns it.
type BMC struct {
	Driver   string   `json:"driver,omitempty"` // ipmi, redfish, …
	Address  string   `json:"address,omitempty"`
	MAC      string   `json:"mac,omitempty"`
	Channel  int      `json:"channel,omitempty"`
	UserID   int      `json:"user_id,omitempty"`
	User     string   `json:"user,omitempty"`
	Password string   `json:"password,omitempty"`
	Source   string   `json:"source,omitempty"` // in-band, hint
	Errors   []string `json:"errors,omitempty"`
}

// CollectErr records a collector that failed.
type CollectErr struct {
	Collector string `json:"collector"`
	Error     string `json:"error"`
}
