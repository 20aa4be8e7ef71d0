package raftfsm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Golden log entries: testdata/golden holds, for every command type and
// every body version Decode accepts, one encoded entry as an xxd hex dump
// (`xxd -r NAME.hex` gives the raw entry; the text diffs and reviews):
//
//	NAME.vN.hex         the entry, body version N, made from the command's
//	                    representative value below (every field set)
//	NAME.vN.to-vM.hex   an older version N decoded and encoded again at the
//	                    current version M (what an upgraded node makes of it)
//
// An entry of a given version is in logs and snapshots forever, so its
// golden is frozen: the test fails when the current version's golden no
// longer decodes to a command with every field set that encodes back to the
// same bytes (a field was added, dropped or renamed in the command or in a
// store record it carries), and -update refuses to rewrite it then: bump the
// command's version instead, keep decoding the old one, and run -update to
// write the new version's golden and the old ones' re-encodings. -update
// rewrites a current version's golden only when the existing one still
// round-trips (the representative value was changed on purpose), and never
// rewrites an older version's golden: today's code cannot make the bytes
// an older node wrote (the legacy encoders below only recreate a missing
// one).
//
//	go test ./raftfsm -run 'TestCommandGoldens' -update
var update = flag.Bool("update", false, "write missing golden entries in testdata/golden and rewrite re-encodings")

const goldenDir = "testdata/golden"

// addedIn names fields that older body versions do not carry, with the
// version that added them: decoding an older golden leaves them unset, and
// only them. A field added with a version bump goes here.
var addedIn = map[string]uint8{
	"MachineEnlist.AgentMAC": 2,
	"Commission.AgentMAC":    3,
	"GateProbe.Seq":          2,
}

// legacyEncoders write the body of an older version the way the nodes of
// that version did, from the current representative value. They run only
// when an older version's golden is missing (a new golden directory).
var legacyEncoders = map[string]func(Command) ([]byte, error){
	// Version 1 had no sequence number.
	"gate-probe.v1": func(c Command) ([]byte, error) {
		return json.Marshal(&gateProbeV1{Note: c.(*GateProbe).Note})
	},
	// Version 1 had no agent MAC.
	"machine-enlist.v1": func(c Command) ([]byte, error) {
		e := *c.(*MachineEnlist)
		e.AgentMAC = ""
		return json.Marshal(&e)
	},
	// Version 1 was all JSON, the inventory inside it.
	"commission.v1": func(c Command) ([]byte, error) {
		e := *c.(*Commission)
		e.AgentMAC = ""
		return json.Marshal(&e)
	},
	// Version 2 is version 3's layout without the agent MAC.
	"commission.v2": func(c Command) ([]byte, error) {
		e := *c.(*Commission)
		e.AgentMAC = ""
		return e.marshalBody()
	},
	// Version 1 was JSON.
	"lease-batch.v1": func(c Command) ([]byte, error) {
		return json.Marshal(c)
	},
}

func hash64(s string) string { return fmt.Sprintf("%064x", []byte(s)) }

// gt is a distinct time for each n, with nanoseconds, so that a decoder
// that swaps two times or drops their precision shows.
func gt(n int) time.Time {
	return time.Date(2026, 11, 30, 8, n, n, 1000*n+7, time.UTC)
}

// representativeCommands is one command of each type with every field set
// to a distinct value, nested records included: a field a decoder drops, or
// a field the format does not carry, is then visible.
func representativeCommands(t testing.TB) map[Type]Command {
	t.Helper()
	ip := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	bmc := BMC{
		Driver: "redfish", Address: "10.1.0.21", MAC: "52:54:00:00:b0:21", User: "rollcall",
		PasswordSealed: []byte{0x01, 0xa5, 0x5a, 0xff, 0x00, 0x10}, PasswordAAD: "m-00000000c0de@10.1.0.21",
		CertSHA256: hash64("bmc-cert"), Operator: true, Source: "agent",
		Settings: map[string]string{"interface": "lanplus", "port": "623"},
		Errors:   []string{"ipmi: session refused", "redfish: 401"}, UpdatedAt: gt(1),
	}
	identity := Identity{
		Key: "uuid:4c4c4544-0042-3510-8052-b4c04f564433", UUID: "4c4c4544-0042-3510-8052-b4c04f564433",
		Serial: "B5RVD43", BootMAC: "52:54:00:00:c0:01", MACs: []string{"52:54:00:00:c0:01", "52:54:00:00:c0:02"},
	}
	event := Event{Machine: "m-00000000c0de", Index: 77, Time: gt(2), Kind: "note", Message: "rack 4, slot 12"}
	files := []ImageFile{
		{Name: "kernel", Size: 12345678, SHA256: hash64("kernel")},
		{Name: "initrd", Size: 87654321, SHA256: hash64("initrd")},
		{Name: "squashfs", Size: 1 << 31, SHA256: hash64("squashfs")},
	}
	mustEncode := func(c Command) []byte {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	all := []Command{
		&Noop{},
		&Batch{Entries: [][]byte{mustEncode(&MachineDelete{ID: "m-00000000ba01"}), mustEncode(&NodeRemove{Name: "n9"})}},
		&StateCheck{Now: gt(3)},

		&ClusterInit{Identity: ClusterIdentity{
			CACertPEM: "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUR29sZGVu\n-----END CERTIFICATE-----\n", SealedCAKey: []byte("sealed-ca-key\x00\x01"),
			AdminTokenHash: hash64("admin-token"), SealedAdminToken: []byte("sealed-admin\xfe"),
			AgentTokenHash: hash64("agent-token"), SealedAgentToken: []byte("sealed-agent\xfd"), Created: gt(4),
		}},
		&NodePut{Node: Node{Name: "n2", RaftAddr: "10.0.0.2:8300", HTTPAddr: "10.0.0.2:8443", Joined: gt(5), Index: 4242}},
		&NodeRemove{Name: "n3"},
		&JoinCodeAdd{Code: JoinCode{
			SecretHash: hash64("join"), Expires: gt(6), CreatedBy: "admin@n1", Created: gt(7), UsedBy: "n4", Used: gt(8),
		}, Now: gt(9)},
		&JoinCodeUse{SecretHash: hash64("join2"), Node: "n5", Now: gt(10)},

		&MachineCreate{ID: "m-00000000c0de", Name: "node1", MACs: []string{"52:54:00:00:00:01", "52:54:00:00:00:02"}, Now: gt(11)},
		&MachineDelete{ID: "m-00000000dead"},
		&MachineEvent{Event: event},
		&MachineEnlist{NewID: "m-00000000e001", Identity: identity, Node: "n1", Now: gt(12), AgentMAC: "52:54:00:00:c0:01"},
		&Commission{
			NewID: "m-00000000c001", Identity: identity, IPs: []string{"10.9.0.17", "fd00::17"},
			Summary: Summary{
				Manufacturer: "Dell Inc.", Product: "PowerEdge R650", CPUModel: "Intel Xeon Gold 6338",
				Sockets: 2, Cores: 64, Threads: 128, MemoryBytes: 512 << 30, DIMMs: 16, Disks: 4, DiskBytes: 7680 << 30,
				NVMe: 2, NICs: 4, GPUs: 2, GPUModels: []string{"NVIDIA A100", "NVIDIA A100"}, IBHCAs: 1, TPM: "2.0",
			},
			Inventory: json.RawMessage(`{"version":1,"system":{"manufacturer":"Dell Inc.","serial":"B5RVD43"},"disks":[{"name":"nvme0n1"}]}`),
			BMC:       &bmc, Node: "n2", Now: gt(13), AgentMAC: "52:54:00:00:c0:01",
		},
		&Recommission{ID: "m-00000000c0de", Reason: "replaced DIMM B2", Now: gt(14)},
		&MachineRename{ID: "m-00000000c0de", Name: "r12-n07", Now: gt(56)},

		&FabricPut{Fabric: Fabric{Name: "fab1", Kind: "ethernet", Created: gt(15), Index: 15}},
		&FabricDelete{Name: "fab2"},
		&VLANPut{VLAN: VLAN{
			Fabric: "fab1", VID: 100, MTU: 9000, DHCP: "full",
			Servers:    []VLANServer{{Node: "n1", Iface: "eth1"}, {Node: "n2", Iface: "bond0.100"}},
			BootLoader: "pxelinux", Implicit: true, Created: gt(16), Index: 16,
		}, Replace: true},
		&VLANDelete{Fabric: "fab1", VID: 200},
		&SubnetPut{Subnet: Subnet{
			CIDR: pfx("10.9.0.0/16"), Name: "prov", Fabric: "fab1", VID: 100, Purpose: "provisioning",
			Gateway: ip("10.9.0.1"), DNS: []netip.Addr{ip("10.9.0.2"), ip("fd00::53")}, Domain: "lab.example",
			Created: gt(17), Index: 17,
		}},
		&SubnetDelete{CIDR: pfx("fd00:1::/64"), Force: true},
		&RangePut{Range: Range{
			Subnet: pfx("10.9.0.0/16"), Kind: "dynamic", First: ip("10.9.1.0"), Last: ip("10.9.1.255"),
			Comment: "pxe pool", Created: gt(18), Index: 18,
		}},
		&RangeDelete{Subnet: pfx("10.9.0.0/16"), First: ip("10.9.2.0")},
		&AddressClaim{Address: Address{
			IP: ip("10.9.0.40"), Subnet: pfx("10.9.0.0/16"), How: "pinned", Machine: "m-00000000c0de",
			Interface: "eno1", Name: "node1-eno1", Created: gt(19), Index: 19,
		}},
		&AddressRelease{IP: ip("fd00::41")},

		&LeaseBlockClaim{Subnet: pfx("10.9.0.0/16"), First: ip("10.9.1.0"), Last: ip("10.9.1.63"), Node: "n1", Expires: gt(20), Now: gt(21)},
		&LeaseBlockRenew{Node: "n1", Blocks: []netip.Addr{ip("10.9.1.0"), ip("10.9.1.64")}, Expires: gt(22), Now: gt(23)},
		&LeaseBlockRelease{Node: "n2", Blocks: []netip.Addr{ip("10.9.1.128")}, Quarantine: gt(24), Now: gt(25)},
		&LeaseBatch{
			Node: "n1", Now: gt(26),
			Grants: []LeaseGrant{
				{IP: ip("10.9.1.10"), MAC: "52:54:00:00:10:01", ClientID: "01525400001001", Hostname: "node10", Granted: gt(27), Expires: gt(28)},
				{IP: ip("10.9.1.11"), MAC: "52:54:00:00:10:02", Granted: gt(29), Expires: gt(30)},
			},
			Releases: []LeaseRelease{
				{IP: ip("10.9.1.12"), MAC: "52:54:00:00:10:03", Declined: true, Until: gt(31)},
				{IP: ip("10.9.1.13"), MAC: "52:54:00:00:10:04"},
			},
			Seen: []Seen{
				{MAC: "52:54:00:00:10:05", Node: "n1", Interface: "eth1", VLAN: "fab1/100", Arch: 7, UserClass: "iPXE", Last: gt(32)},
				{MAC: "52:54:00:00:10:06", Node: "n1", Last: gt(33)},
			},
		},
		&LeaseExpire{First: ip("10.9.1.0"), Last: ip("10.9.1.255"), Now: gt(34)},

		&ImagePut{Image: Image{Name: "ubuntu-24.04", Files: files, Nodes: []string{"n1"}, Created: gt(35), Index: 35}},
		&ImageDelete{Name: "debian-12"},
		&ImageHave{Name: "ubuntu-24.04", Node: "n2", Files: files, Now: gt(36)},

		&JobEnqueue{Job: Job{
			ID: "j-0000000000000001", Machine: "m-00000000c0de", Kind: "boot-device", Arg: "pxe", Persistent: true, UEFI: true,
			Runner: "n2", Created: gt(37), Requester: "admin", StartedBy: "n3", Started: gt(38), StartedUntil: gt(39),
			Attempts: 2, Done: true, Finished: gt(40), Result: "on", Error: "timeout", Index: 40,
		}, Now: gt(41)},
		&JobStart{ID: "j-0000000000000002", Node: "n1", Until: gt(42), Now: gt(43)},
		&JobFinish{
			ID: "j-0000000000000003", Node: "n1", Result: "off", Error: "bmc busy",
			BMC:    &BMCUpdate{Driver: "redfish", CertSHA256: hash64("new-cert")},
			Events: []Event{event, {Machine: "m-00000000c0df", Index: 78, Time: gt(44), Kind: "power", Message: "off"}},
			Now:    gt(45),
		},
		&BMCSet{Machine: "m-00000000c0de", BMC: bmc, Now: gt(46)},
		&BMCClear{Machine: "m-00000000c0df", Now: gt(55)},

		&LayoutPut{Layout: Layout{
			Name: "gpu-bond", JSON: `{"interfaces": [{"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto"}]}]}`,
			Comment: "GPU nodes: boot NIC only", Created: gt(47), Index: 47,
		}, Replace: true},
		&LayoutDelete{Name: "old-bond"},
		&TagPut{
			Tag: Tag{
				Name: "gpu", Match: `{{ gt .Node.GPUs 0 }}`, CloudConfig: "#cloud-config\npackages: [nvidia-driver-550]\n",
				Overlays: []string{"gres", "nvidia-modules"}, Layout: "gpu-bond", Comment: "NVIDIA nodes",
			},
			Now: gt(47), Basis: 4711, Matches: []string{"m-00000000c0de", "m-00000000c0df"}, Failed: []string{"m-00000000c0e0"},
		},
		&TagDelete{Name: "staging", Now: gt(48)},
		&MachineTags{Machines: []string{"m-00000000c0de", "m-00000000c0df"}, Add: []string{"rack-3", "burn-in"}, Remove: []string{"staging"}, Now: gt(49)},
		&AutoTagsSet{Machines: []MachineRules{
			{ID: "m-00000000c001", Rules: []RuleResult{{Tag: "gpu", RuleIndex: 4712, Match: true}, {Tag: "ib", RuleIndex: 4713}}},
			{ID: "m-00000000c0de", Index: 4714, Rules: []RuleResult{{Tag: "gpu", RuleIndex: 4712}}},
		}, Now: gt(50)},
		&LocationSet{Machines: []MachineLocation{
			{ID: "m-00000000c0de", Location: Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 24, Height: 2, AssetTag: "A-0042"}},
			{ID: "m-00000000c0df", Location: Location{Building: "DC2", Room: "Hall B", Rack: "R7", Unit: 1, Height: 6, AssetTag: "A-0043"}},
		}, Now: gt(51)},
		&RackPut{Rack: Rack{Name: "R12", Building: "DC1", Room: "Hall A", Height: 48}, Now: gt(52)},
		&RackDelete{Name: "R13"},
		&MachineNetSet{
			Machine: "m-00000000c0de", SetLayout: true, Layout: "gpu-bond", SetPins: true,
			Pins: []NetPin{{Interface: "eno1", Address: netip.MustParseAddr("10.50.0.60")}, {Interface: "bond0.200", Address: netip.MustParseAddr("fd00:60::60")}},
			Now:  gt(53),
		},

		&OSVersionAdd{
			Name: "debian-13", Family: "debian", Track: "pinned", Node: "n1", Now: gt(53),
			New: OSVersion{
				Version: "20261201-1", File: ImageFile{Name: "disk.raw.zst", Size: 412345678, SHA256: hash64("disk.raw.zst")},
				RawSize: 3 << 30, RawSHA256: hash64("disk.raw"), SectorSize: 512, Upstream: "sha512:" + hash64("upstream") + hash64("upstream"),
				Source: "https://cloud.debian.org/images/cloud/trixie/latest/debian-13-genericcloud-amd64.qcow2", Format: "qcow2", Imported: gt(54),
			},
		},
		&OSPromote{Name: "rocky-9", OSVersion: "9.6-20261115", Now: gt(55)},
		&OSVersionRemove{Name: "ubuntu-24.04", OSVersion: "20261001", Now: gt(56)},
		&OSImageSet{Name: "almalinux-9", Family: "rhel", Track: "latest", Now: gt(57)},
		&OSHave{Name: "debian-13", OSVersion: "20261201-1", Node: "n2", SHA256: hash64("disk.raw.zst"), Now: gt(58)},
		&OSImageDelete{Name: "centos-stream-9"},
		&OSPrune{Name: "debian-13", Versions: []string{"20260901-1", "20261001-1"}, Keep: 3, Now: gt(59)},
		&OSSyncStart{Node: "n1", Now: gt(1), Until: gt(2), Timer: true, Interval: 24 * time.Hour, Renew: true},
		&OSSyncEnd{Node: "n1", Started: gt(3), Now: gt(4), Result: []string{"debian-13: new version 20261201-1", "rocky-9: unchanged"}, Error: "ubuntu-24.04: checksum file: 404"},
		&DeployStart{Job: DeployJob{
			ID: "j-0000019ad5a1c0de", Machine: "m-00000000c0de", Kind: "deploy", OS: "debian-13", OSVersion: "20261201-1",
			Image: JobImage{SHA256: hash64("disk.raw.zst"), Size: 541 << 20, RawSHA256: hash64("disk.raw"), RawSize: 3 << 30, SectorSize: 512, Family: "debian"},
			Disk: JobDisk{Name: "nvme0n1", Serial: "S6CRNA0T123456", WWN: "eui.36344730521234560025384500000001", ByPath: "pci-0000:b1:00.0-nvme-1",
				Size: 1920383410176, LogicalBlockSize: 512, Rule: "smallest non-removable disk that fits"},
			Hostname: "node1", FQDN: "node1.lab.example",
			Addresses:     []JobAddress{{IP: "10.9.0.40", Subnet: "10.9.0.0/16", Interface: "eno1", MAC: "52:54:00:00:00:01"}},
			NetworkConfig: "version: 2\nethernets:\n  eno1:\n    dhcp4: true\n",
			UdevRules:     "SUBSYSTEM==\"net\", ACTION==\"add\", ATTR{address}==\"02:00:00:00:0d:01\", NAME=\"eno1\"\n",
			Boot:          true, Wipe: "quick",
			UserData: JobUserData{SSHKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGolden op@example"}, Packages: []string{"htop", "nvme-cli"},
				Upgrade: true, Operator: "#cloud-config\nruncmd: [touch /golden]\n"},
			Requester: "admin",
		}, Now: gt(53)},
		&ReleaseStart{ID: "j-0000019ad5a1c0df", Machine: "m-00000000c0de", Wipe: "full", Boot: true, Requester: "admin", Now: gt(54)},
		&JobReport{Job: "j-0000019ad5a1c0de", Step: "write", State: "running", Bytes: 1 << 30, Total: 3 << 30, Message: "118 MB/s", Now: gt(55)},
		&JobCancel{Job: "j-0000019ad5a1c0de", Requester: "admin", Now: gt(56)},
		&JobTimeout{Job: "j-0000019ad5a1c0de", Basis: gt(57), After: 30 * time.Minute, Now: gt(58)},
		&PhoneHome{Job: "j-0000019ad5a1c0de", Hostname: "node1.lab.example", Now: gt(59)},

		&ProfilePut{Profile: Profile{
			Name: "compute", Image: "compute-debian13", Overlays: []string{"compute", "gres"}, Args: "console=ttyS0,115200 quiet",
			NameFormat: "node%03d", NameFirst: 1, NameLast: 999, Subnets: []string{"10.20.0.0/24", "fd00:20::/64"},
			Vars: map[string]string{"authorized_keys": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGolden op@example", "slurm_controller": "head1"},
		}, Replace: true, Now: gt(60)},
		&ProfileDelete{Name: "old-compute"},
		&Assign{Machine: "m-00000000c0de", Profile: "compute", SSHHostKeySealed: []byte("sealed host key bytes"),
			SSHHostKeyPub: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGoldenHostKey", Now: gt(61)},
		&Unassign{Machine: "m-00000000c0de", Now: gt(62)},
		&OverlayPut{Name: "compute", Files: []OverlayFile{
			{Path: "runtime/etc/hosts.tmpl", Mode: 0o644, Content: []byte("{{ range .Nodes }}{{ .IP }} {{ .Name }}\n{{ end }}")},
			{Path: "system/etc/munge/munge.key.tmpl", Mode: 0o400, Content: []byte("{{ .Secrets.MungeKey }}")},
		}, Now: gt(63)},
		&OverlayDelete{Name: "old-overlay"},
		&StatelessSeen{Nodes: []NodeSeen{
			{Machine: "m-00000000c0de", Generation: 4711, Time: gt(64), Booted: true},
			{Machine: "m-00000000c0df", Generation: 4712, Time: gt(65)},
		}},
		&MungeKeySet{Sealed: []byte("sealed munge key bytes"), Now: gt(66)},
		&ClusterVarsSet{Vars: map[string]string{"slurm_controller": "head1"}, Now: gt(67)},
		&NodeVersions{Node: "node2", Build: "build-68", Boot: "0123456789abcdef", Types: map[string]uint8{"24": 3, "152": 2}, Formats: map[string]int{"tags": 1}},
		&GateOpen{Types: map[string]uint8{"152": 2}, Formats: map[string]int{"tags": 2}},
		&GateProbe{Note: "probe-69", Seq: 69},
		&CertPut{Cert: Cert{Serial: "4a1f", Kind: "admin", Name: "ada", NotAfter: gt(71), Fingerprint: "ab12", Hosts: []string{"svc.lab"}, Permit: []string{"10.0.0.0/8"}, Issued: gt(70), IssuedBy: "token"}, Now: gt(70)},
		&CertRevoke{Kind: "node", Name: "node3", Serial: "4a1f", By: "admin:ada", Require: true, Now: gt(72)},
		&Audited{Actor: "admin:ada", From: "192.0.2.7", Node: "node1", Action: "DELETE /api/v1/racks/:name", Target: "/api/v1/racks/r1", Now: gt(73), Entry: []byte{106, 1, '{', '}'}},
		&CARotate{From: "old ca pem", CACertPEM: "new ca pem", SealedCAKey: []byte("sealed new key"),
			Previous: []PreviousCA{{CertPEM: "old ca pem", SealedKey: []byte("sealed old key"), CrossPEM: "cross pem", Until: gt(75)}}, By: "admin:ada", Now: gt(74)},
	}
	out := make(map[Type]Command, len(all))
	for _, c := range all {
		if _, dup := out[c.Type()]; dup {
			t.Fatalf("two representative commands of type %d", c.Type())
		}
		out[c.Type()] = c
	}
	return out
}

func TestCommandGoldens(t *testing.T) {
	reps := representativeCommands(t)
	for typ, c := range reps {
		if _, ok := commands[typ]; !ok {
			t.Errorf("representative %T has type %d, which is not registered", c, typ)
		}
	}
	expected := map[string]bool{}
	for _, typ := range slices.Sorted(maps.Keys(commands)) {
		info := commands[typ]
		rep, ok := reps[typ]
		if !ok {
			t.Errorf("command %s (type %d) has no representative value in representativeCommands", info.name, typ)
			continue
		}
		cur := info.maxVersion
		for v := uint8(1); v <= cur; v++ {
			expected[goldenName(info.name, v)] = true
			if v < cur {
				expected[reencodedName(info.name, v, cur)] = true
			}
		}
		t.Run(info.name, func(t *testing.T) {
			if rep.Version() != cur {
				t.Fatalf("%T encodes version %d, the registry decodes up to %d", rep, rep.Version(), cur)
			}
			if unset := unsetFields(rep); len(unset) > 0 {
				t.Errorf("representative %T leaves fields unset (set every field, so that a field the format drops shows): %s", rep, strings.Join(unset, ", "))
			}
			checkCurrentGolden(t, info.name, rep)
			for v := uint8(1); v < cur; v++ {
				checkOlderGolden(t, info.name, v, rep)
			}
		})
	}

	entries, err := os.ReadDir(goldenDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if expected[e.Name()] {
			continue
		}
		if *update && strings.Contains(e.Name(), ".to-v") {
			// A re-encoding for a version that is no longer current.
			if err := os.Remove(filepath.Join(goldenDir, e.Name())); err != nil {
				t.Error(err)
			}
			continue
		}
		if strings.Contains(e.Name(), ".to-v") {
			t.Errorf("%s/%s re-encodes at a version that is no longer current: run -update to replace it", goldenDir, e.Name())
			continue
		}
		t.Errorf("%s/%s belongs to no registered command and version: a type was removed or renamed, or a version dropped (its entries would no longer decode)", goldenDir, e.Name())
	}
}

// checkCurrentGolden: the golden of the current version decodes to the
// representative value, with every field set, and encodes back to the same
// bytes.
func checkCurrentGolden(t *testing.T, name string, rep Command) {
	v := rep.Version()
	file := goldenName(name, v)
	want, err := Encode(rep)
	if err != nil {
		t.Fatal(err)
	}
	golden, err := readGolden(file)
	switch {
	case errors.Is(err, fs.ErrNotExist) && *update:
		writeGolden(t, file, want)
		return
	case errors.Is(err, fs.ErrNotExist):
		t.Errorf("%s is missing: run go test ./raftfsm -run TestCommandGoldens -update", file)
		return
	case err != nil:
		t.Fatal(err)
	}
	if problems := roundTripProblems(golden, rep.Type(), v); len(problems) > 0 {
		t.Errorf("%s: the version %d body of %T changed:\n\t%s\n"+
			"Entries of version %d are in logs and snapshots already, written by older nodes, and an older node would misread the new body. "+
			"If %T (or a store record it carries) gained, lost or renamed a field: bump its Version and the registry's maxVersion, keep decoding %d "+
			"(note the new field in addedIn), add the version to the pinned table and run -update, which keeps %s as an older version.",
			file, v, rep, strings.Join(problems, "\n\t"), v, rep, v, file)
		return
	}
	got, _ := Decode(golden)
	d := commandDiff(got, rep)
	if d == "" && bytes.Equal(golden, want) {
		return
	}
	if *update {
		// The golden still round-trips: the representative value changed,
		// not the format.
		writeGolden(t, file, want)
		return
	}
	if d == "" {
		d = dumpDiff(golden, want)
	}
	t.Errorf("%s still round-trips, but the representative value differs from it (-golden +representative):\n%s\nRun -update if you changed the representative on purpose.", file, d)
}

// checkOlderGolden: an older version's golden still decodes, carries every
// field that version had, and encodes at the current version to the pinned
// re-encoding, which decodes to the same command.
//
// The re-encoding is pinned as a second golden rather than compared with the
// current version's golden: an older body cannot carry the fields added
// since (they decode unset), so the two commands differ by design, while
// the pinned bytes show in review exactly what an upgraded node makes of an
// old entry.
func checkOlderGolden(t *testing.T, name string, v uint8, rep Command) {
	cur := rep.Version()
	file := goldenName(name, v)
	golden, err := readGolden(file)
	if errors.Is(err, fs.ErrNotExist) {
		enc := legacyEncoders[fmt.Sprintf("%s.v%d", name, v)]
		switch {
		case enc == nil:
			t.Errorf("%s is missing: an older version's golden is what nodes of that version wrote, which today's code cannot make; restore it from git", file)
			return
		case !*update:
			t.Errorf("%s is missing: restore it from git, or run -update to recreate it with legacyEncoders", file)
			return
		}
		body, err := enc(rep)
		if err != nil {
			t.Fatal(err)
		}
		golden = append([]byte{byte(rep.Type()), v}, body...)
		writeGolden(t, file, golden)
	} else if err != nil {
		t.Fatal(err)
	}
	if len(golden) < headerLen || golden[0] != byte(rep.Type()) || golden[1] != v {
		t.Fatalf("%s is not an entry of type %d version %d: % x", file, rep.Type(), v, golden[:min(len(golden), headerLen)])
	}
	var allowUnset []string
	for path, added := range addedIn {
		if added > v {
			allowUnset = append(allowUnset, path)
		}
	}
	c, err := Decode(golden)
	if err != nil {
		t.Errorf("%s no longer decodes: entries of version %d stay in logs and snapshots and must decode forever: %v", file, v, err)
		return
	}
	if unset := unsetFields(c); len(unset) > 0 {
		var bad []string
		for _, u := range unset {
			if !slices.Contains(allowUnset, u) {
				bad = append(bad, u)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s decodes with fields unset that version %d carries (a field added since goes in addedIn): %s", file, v, strings.Join(bad, ", "))
		}
	}
	re, err := Encode(c)
	if err != nil {
		t.Fatalf("%s decodes to a command that does not encode: %v", file, err)
	}
	if re2, _ := Encode(c); !bytes.Equal(re, re2) {
		t.Errorf("%s: encoding the decoded command twice gives different bytes", file)
	}
	if re[1] != cur {
		t.Errorf("%s re-encodes at version %d, want the current %d", file, re[1], cur)
	}
	if back, err := Decode(re); err != nil {
		t.Errorf("%s re-encoded does not decode: %v", file, err)
	} else if d := commandDiff(c, back); d != "" {
		t.Errorf("%s: re-encoding at version %d loses data (-v%d +v%d):\n%s", file, cur, v, cur, d)
	}
	refile := reencodedName(name, v, cur)
	pinned, err := readGolden(refile)
	switch {
	case err == nil && bytes.Equal(pinned, re):
	case *update:
		writeGolden(t, refile, re)
	case errors.Is(err, fs.ErrNotExist):
		t.Errorf("%s is missing: run -update", refile)
	case err != nil:
		t.Fatal(err)
	default:
		t.Errorf("%s re-encoded at version %d differs from %s (-pinned +now):\n%s", file, cur, refile, dumpDiff(pinned, re))
	}
}

// roundTripProblems checks that b decodes as type typ, version v, to a
// command with every field set, which encodes back to b.
func roundTripProblems(b []byte, typ Type, v uint8) []string {
	if len(b) < headerLen || Type(b[0]) != typ || b[1] != v {
		return []string{fmt.Sprintf("the entry does not start with type %d version %d", typ, v)}
	}
	c, err := Decode(b)
	if err != nil {
		return []string{"it no longer decodes: " + err.Error()}
	}
	var problems []string
	for _, u := range unsetFields(c) {
		problems = append(problems, "decoded, "+u+" is unset: the body does not carry it")
	}
	again, err := Encode(c)
	if err != nil {
		return append(problems, "the decoded command does not encode: "+err.Error())
	}
	if !bytes.Equal(again, b) {
		problems = append(problems, "decoded and encoded again, the bytes differ (-golden +now):\n"+dumpDiff(b, again))
	}
	return problems
}

// commandCmp compares decoded commands: addresses by value, times as
// instants, nil and empty slices alike (a JSON body keeps the difference,
// a binary one does not).
var commandCmp = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmpopts.EquateEmpty(),
}

func commandDiff(a, b Command) string { return cmp.Diff(a, b, commandCmp...) }

const modulePath = "github.com/rollcall/rollcall"

// unsetFields lists the exported fields of a command left at their zero
// value, by path (Commission.BMC.Settings, LeaseBatch.Grants[].ClientID). A
// slice or map is set when it has an element and each field of its
// elements is set in at least one of them. Types from outside the module
// (time.Time, netip.Addr) are values: set when not zero.
func unsetFields(c any) []string {
	v := reflect.ValueOf(c)
	return walkUnset(v, reflect.Indirect(v).Type().Name())
}

func walkUnset(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return []string{path}
		}
		return walkUnset(v.Elem(), path)
	case reflect.Struct:
		if !strings.HasPrefix(v.Type().PkgPath(), modulePath) {
			if v.IsZero() {
				return []string{path}
			}
			return nil
		}
		var out []string
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			out = append(out, walkUnset(v.Field(i), path+"."+f.Name)...)
		}
		return out
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return []string{path}
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		count := map[string]int{}
		for _, e := range v.Seq2() {
			for _, p := range walkUnset(e, path+"[]") {
				count[p]++
			}
		}
		var out []string
		for p, n := range count {
			if n == v.Len() {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	default:
		if v.IsZero() {
			return []string{path}
		}
		return nil
	}
}

// dumpDiff compares two entries line by line of their hex dumps.
func dumpDiff(a, b []byte) string {
	return cmp.Diff(strings.Split(hexDump(a), "\n"), strings.Split(hexDump(b), "\n"))
}

func goldenName(name string, v uint8) string { return fmt.Sprintf("%s.v%d.hex", name, v) }

func reencodedName(name string, v, cur uint8) string {
	return fmt.Sprintf("%s.v%d.to-v%d.hex", name, v, cur)
}

func readGolden(file string) ([]byte, error) {
	s, err := os.ReadFile(filepath.Join(goldenDir, file))
	if err != nil {
		return nil, err
	}
	b, err := parseHexDump(string(s))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return b, nil
}

func writeGolden(t *testing.T, file string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(goldenDir, file), []byte(hexDump(b)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s/%s", goldenDir, file)
}

// xxd's default layout: offset, 16 bytes in groups of two, the printable
// characters.
const dumpWidth, dumpHexChars = 16, 39

func hexDump(b []byte) string {
	var s strings.Builder
	for off := 0; off < len(b); off += dumpWidth {
		line := b[off:min(off+dumpWidth, len(b))]
		var hx, text strings.Builder
		for i, c := range line {
			if i > 0 && i%2 == 0 {
				hx.WriteByte(' ')
			}
			fmt.Fprintf(&hx, "%02x", c)
			if c >= 0x20 && c < 0x7f {
				text.WriteByte(c)
			} else {
				text.WriteByte('.')
			}
		}
		fmt.Fprintf(&s, "%08x: %-*s  %s\n", off, dumpHexChars, hx.String(), text.String())
	}
	return s.String()
}

func parseHexDump(s string) ([]byte, error) {
	var out []byte
	for n, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		off, rest, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("line %d: not an xxd line", n+1)
		}
		if o, err := strconv.ParseUint(off, 16, 64); err != nil || o != uint64(len(out)) {
			return nil, fmt.Errorf("line %d: offset %q, want %08x", n+1, off, len(out))
		}
		b, err := hex.DecodeString(strings.ReplaceAll(rest[:min(dumpHexChars, len(rest))], " ", ""))
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("line %d: bad hex: %v", n+1, err)
		}
		out = append(out, b...)
	}
	return out, nil
}

func TestHexDumpIsXXD(t *testing.T) {
	b := []byte("\x18\x03{\"a\":\"\xff\x00z\"}\nabcdefghijklmnopqrstuvwxyz")
	for n := range len(b) + 1 {
		got, err := parseHexDump(hexDump(b[:n]))
		if n == 0 {
			continue // an empty entry is never a golden
		}
		if err != nil || !bytes.Equal(got, b[:n]) {
			t.Fatalf("%d bytes: %q %v", n, got, err)
		}
	}
	const xxd = "00000000: 1803 7b22 6122 3a22 ff00 7a22 7d0a 6162  ..{\"a\":\"..z\"}.ab\n" +
		"00000010: 6364                                     cd\n"
	if got := hexDump(b[:18]); got != xxd {
		t.Fatalf("not xxd's layout:\n%s\nwant\n%s", got, xxd)
	}
}
