package pgexport

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// SchemaVersion is the layout of the exported tables. Bump it when a
// change is not a plain consequence of the Go types (a key, a rename); a
// field added to a store type changes the layout hash on its own.
//
// 2: leases, lease_blocks, images, image_files and bmc_jobs; foreign keys
// named after their column.
// 3: tags and racks; machines gain tags, auto_tags and location_*.
// 4: layouts (body jsonb); machines gain layout (a machine's pinned
// addresses are addresses rows of how 'pinned').
// 5: os_images, os_versions and deploy_jobs; machines gain deploy_* (the
// machine's latest deploy job).
// 6: profiles, overlays, overlay_files (without their content) and
// stateless_nodes (without the sealed SSH host key), cluster_vars.
// 7: certificates (by serial) and audit (administrators' actions).
// 8: cluster_cas (the current root and those a rotation keeps trusted).
const SchemaVersion = 8

// Column is one column of an exported table.
type Column struct {
	Name    string
	Type    string // SQL type
	Comment string
	// Field is the Go field the column comes from ("Machine.Summary.Cores"),
	// empty for key columns the exporter supplies.
	Field string

	path []int                   // field index path in the table's Go type
	conv func(reflect.Value) any // field value → what pgx encodes
}

// Table is one exported table.
type Table struct {
	Name    string
	Comment string
	Columns []Column
	Primary []string
	// Child tables hold rows of one machine: machine_id references
	// machines and the rows go with it.
	Child bool
	// Parent is the table whose rows own this table's rows (machines for
	// a machine's child tables, images for image_files): column ParentKey
	// references the parent's primary key, ON DELETE CASCADE.
	Parent, ParentKey string
	Indexes           [][]string
	// Skipped names the Go fields (by JSON name) that are not columns of
	// this table, and why: a child table, or a secret.
	Skipped map[string]string

	goType        reflect.Type
	keys          int    // leading columns the caller supplies
	parentPrimary string // the parent's primary key column ParentKey references
}

// Schema is the list of exported tables in creation order (parents first).
type Schema struct {
	Tables []*Table
	byName map[string]*Table
	// Layout is the SHA-256 of the DDL, so that a layout produced by other
	// Go types is recognised and rebuilt.
	Layout string
}

// Table returns a table by name; it panics on an unknown name, which is a
// programming error.
func (s *Schema) Table(name string) *Table {
	t, ok := s.byName[name]
	if !ok {
		panic("pgexport: no table " + name)
	}
	return t
}

// spec describes one table for the generator.
type spec struct {
	name, comment string
	of            any      // a value of the Go type whose fields are the columns; nil for none
	keys          []Column // leading columns the caller supplies
	extra         []Column // trailing columns the caller supplies
	primary       []string
	child         bool   // a machine's child table (parent machines, key machine_id)
	parent        string // the owning table, for a child of another table
	parentKey     string // the column that references parent
	indexes       [][]string
	skip          map[string]string // JSON field name (with prefix) → why
	types         map[string]string // JSON field name → SQL type, for fields stored as jsonb
	rename        map[string]string // column name → name in SQL
}

// deploymentColumns are the machine's latest deploy job, as its record
// shows it (store.Tx.CurrentDeployment): NULL when it never had one.
var deploymentColumns = []Column{
	{Name: "deploy_job", Type: "text", Comment: "the machine's latest deploy job (deploy_jobs.id); NULL when it was never deployed"},
	{Name: "deploy_os", Type: "text", Comment: "the OS that job deploys (os_images.name)"},
	{Name: "deploy_os_version", Type: "text", Comment: "the exact version it deploys (os_versions.version)"},
	{Name: "deploy_state", Type: "text", Comment: "the job's state: queued, running, done, failed or cancelled"},
	{Name: "deploy_disk", Type: "text", Comment: "the disk it writes, by serial (else WWN, else name as the inventory saw it)"},
	{Name: "deploy_phoned_home", Type: "timestamptz", Comment: "when the deployed system's cloud-init phoned home; NULL before"},
}

var (
	colMachineID = Column{Name: "machine_id", Type: "text", Comment: "the machine (machines.id) this row belongs to"}
	colOrdinal   = Column{Name: "ordinal", Type: "integer", Comment: "position in the inventory report, from 0"}
)

func specs() []spec {
	child := func(name, comment string, of any, skip map[string]string, extraKeys ...Column) spec {
		keys := append([]Column{colMachineID}, extraKeys...)
		keys = append(keys, colOrdinal)
		var primary []string
		for _, k := range keys {
			primary = append(primary, k.Name)
		}
		return spec{name: name, comment: comment, of: of, keys: keys, primary: primary, child: true, skip: skip}
	}
	rename := map[string]string{"index": "raft_index", "machine": "machine_id"}
	return []spec{
		{
			name: "machines", of: store.Machine{}, primary: []string{"id"}, rename: rename,
			comment: "Servers Rollcall knows, one row per machine record, with the summary of their last inventory. Child tables (machine_macs, bmcs, inventories, dimms, …, events) reference machines.id and go with it.",
			skip:    map[string]string{"macs": "table machine_macs", "bmc": "table bmcs"},
			extra: append([]Column{{Name: "inventory", Type: "jsonb",
				Comment: "the last inventory report as the agent sent it (inventory.Report), without the BMC password; NULL before the first commissioning"}},
				deploymentColumns...),
			indexes: [][]string{{"state"}, {"serial"}, {"system_uuid"}, {"location_rack"}, {"layout"}, {"deploy_os", "deploy_os_version"}},
		},
		{
			name: "machine_macs", primary: []string{"machine_id", "ordinal"}, child: true,
			comment: "The MAC addresses that identify a machine (Machine.MACs), in the record's order.",
			keys:    []Column{colMachineID, {Name: "ordinal", Type: "integer", Comment: "position in Machine.MACs, from 0"}},
			extra:   []Column{{Name: "mac", Type: "text", Comment: "MAC address, lowercase with colons (aa:bb:cc:dd:ee:ff)"}},
			indexes: [][]string{{"mac"}},
		},
		{
			name: "bmcs", of: store.BMC{}, primary: []string{"machine_id"}, child: true,
			comment: "Baseboard management controllers (Machine.BMC), one per machine that has one. The sealed password and what it is bound to are never exported.",
			keys:    []Column{colMachineID},
			skip:    map[string]string{"password_sealed": "secret: never exported", "password_aad": "binds the secret: never exported"},
		},
		{
			name: "inventories", of: inventory.Report{}, primary: []string{"machine_id"}, child: true,
			comment: "The scalar sections of each machine's last inventory report (SMBIOS system, baseboard, chassis, BIOS, memory, TPM); lists are in their own tables.",
			keys:    []Column{colMachineID},
			skip: map[string]string{
				"dimms": "table dimms", "cpus": "table cpus", "disks": "table disks", "nvme": "table nvme",
				"nics": "table nics", "infiniband": "table ib_hcas", "gpus": "table gpus", "pci": "table pci_devices",
				"lldp": "table lldp_neighbors", "errors": "table inventory_errors",
				"bmc": "table bmcs (the machine's record); machines.inventory without the password",
			},
		},
		child("dimms", "Memory slots (SMBIOS type 17), populated or not: size_mb = 0 is an empty slot.", inventory.DIMM{}, nil),
		child("cpus", "Processor sockets.", inventory.CPU{}, nil),
		child("disks", "Block devices the agent saw.", inventory.Disk{}, nil),
		child("nvme", "NVMe controllers; their namespaces are in nvme_namespaces.", inventory.NVMe{}, map[string]string{"namespaces": "table nvme_namespaces"}),
		child("nvme_namespaces", "Namespaces of NVMe controllers.", inventory.NVMeNamespace{}, nil,
			Column{Name: "controller", Type: "integer", Comment: "the controller's nvme.ordinal"}),
		child("nics", "Network interfaces.", inventory.NIC{}, nil),
		child("ib_hcas", "InfiniBand host channel adapters; their ports are in ib_ports.", inventory.IBHCA{}, map[string]string{"ports": "table ib_ports"}),
		child("ib_ports", "Ports of InfiniBand HCAs.", inventory.IBPort{}, nil,
			Column{Name: "hca", Type: "integer", Comment: "the adapter's ib_hcas.ordinal"}),
		child("gpus", "Accelerators.", inventory.GPU{}, nil),
		child("pci_devices", "Every device on the PCI bus.", inventory.PCIDevice{}, nil),
		child("lldp_neighbors", "Switch ports heard over LLDP, per interface.", inventory.LLDP{}, nil),
		child("inventory_errors", "Collectors that failed during the last commissioning run.", inventory.CollectErr{}, nil),
		{
			name: "events", of: store.Event{}, child: true, rename: rename,
			primary: []string{"machine_id", "raft_index", "seq"},
			comment: "Each machine's history, oldest first by raft_index then seq.",
			extra:   []Column{{Name: "seq", Type: "integer", Comment: "order of the event among those recorded by one command, from 0"}},
		},
		{
			name: "fabrics", of: store.Fabric{}, primary: []string{"name"}, rename: rename,
			comment: "Switched layer-2 domains (ethernet or infiniband): the top of the network model fabric → VLAN → subnet → ranges.",
		},
		{
			name: "vlans", of: store.VLAN{}, primary: []string{"fabric", "vid"}, rename: rename,
			types:   map[string]string{"servers": "jsonb"},
			comment: "VLANs (partition keys on InfiniBand) of a fabric, with who serves DHCP on them.",
		},
		{
			name: "subnets", of: store.Subnet{}, primary: []string{"cidr"}, rename: rename,
			comment: "IP networks on a VLAN.",
		},
		{
			name: "ranges", of: store.Range{}, primary: []string{"subnet", "first"}, rename: rename,
			comment: "Spans of addresses inside a subnet: dynamic (DHCP pool), reserved (never handed out) or static (allocated by IPAM).",
		},
		{
			name: "addresses", of: store.Address{}, primary: []string{"ip"}, rename: rename,
			comment: "Used addresses, as IPAM records them.",
			indexes: [][]string{{"machine_id"}, {"subnet"}},
		},
		{
			name: "nodes", of: store.Node{}, primary: []string{"name"}, rename: rename,
			comment: "Appliance nodes: the members of the Raft cluster.",
		},
		{
			name: "certificates", of: store.CertRecord{}, primary: []string{"serial"}, rename: rename,
			comment: "Certificates the cluster CA issued, by serial: node (each node's own and its HTTPS one), admin (admin:NAME client certificates), service (rollcall ca issue) and intermediate (rollcall ca intermediate). A revoked one has revoked set; records go a month after they end.",
			indexes: [][]string{{"kind", "name"}},
		},
		{
			name: "cluster_cas", of: clusterCA{}, primary: []string{"fingerprint"},
			comment: "The cluster's CA roots: the current one (role current) and those rollcall ca rotate replaced that are still trusted (role previous, until trusted_until). Certificates only: the keys are never exported.",
		},
		{
			name: "audit", of: store.AuditEvent{}, primary: []string{"seq"}, rename: rename,
			comment: "The audit log: every administrator's write the cluster applied, with who (token or admin:NAME), from which address, through which node, the route, the command and the outcome (ok or the error). The newest 100,000 are kept.",
			indexes: [][]string{{"actor"}, {"time"}},
		},
		{
			name: "lease_blocks", of: store.LeaseBlock{}, primary: []string{"first"}, rename: rename,
			comment: "Blocks of the dynamic ranges, each owned by one appliance node for a while: a node hands out DHCP leases only from blocks it owns, and a lease never outlives its block.",
			indexes: [][]string{{"subnet"}, {"node"}},
		},
		{
			name: "leases", of: store.Lease{}, primary: []string{"ip"}, rename: rename,
			comment: "DHCP leases granted by the appliance nodes, and addresses held out of use after a client declined them.",
			indexes: [][]string{{"mac"}, {"subnet"}},
		},
		{
			name: "images", of: store.Image{}, primary: []string{"name"}, rename: rename,
			comment: "Boot images (kernel, initrd, optional squashfs); their files are in image_files.",
			skip:    map[string]string{"files": "table image_files"},
		},
		{
			name: "image_files", of: store.ImageFile{}, primary: []string{"image", "ordinal"},
			parent: "images", parentKey: "image",
			comment: "The files of each boot image (Image.Files), in the record's order; they go with their image.",
			keys: []Column{
				{Name: "image", Type: "text", Comment: "the image (images.name) the file belongs to"},
				{Name: "ordinal", Type: "integer", Comment: "position in Image.Files, from 0"},
			},
		},
		{
			name: "tags", of: store.Tag{}, primary: []string{"name"}, rename: rename,
			comment: "Tag definitions. A machine carries a tag when machines.tags (given by an operator) or machines.auto_tags (matched by the tag's rule) names it: SELECT … FROM machines WHERE 'gpu' = ANY(tags || auto_tags).",
		},
		{
			name: "racks", of: store.Rack{}, primary: []string{"name"}, rename: rename,
			comment: "Racks, created on first use (42U) or by an operator. A machine stands in the rack machines.location_rack names, from location_unit up.",
		},
		{
			name: "layouts", of: store.Layout{}, primary: []string{"name"},
			rename:  map[string]string{"index": "raft_index", "json": "body"},
			types:   map[string]string{"json": "jsonb"},
			comment: "Interface layouts (ipam/layout): how a machine's NICs become interfaces. A machine uses machines.layout, else the layout of the first of its tags that names one (tags.layout), else the default (its boot NIC, auto or DHCP).",
		},
		{
			name: "os_images", of: store.OSImage{}, primary: []string{"name"}, rename: rename,
			comment: "The OS image catalog: one row per name (debian-13, rocky-9, …) with its track and current version; the versions are in os_versions.",
			skip:    map[string]string{"versions": "table os_versions"},
		},
		{
			name: "os_versions", of: store.OSVersion{}, primary: []string{"os", "version"},
			parent: "os_images", parentKey: "os",
			comment: "The versions of each OS image (OSImage.Versions): the compressed file (file_*, served as /os/blobs/{file_sha256}), the raw disk image the agent writes, the upstream checksum and the nodes holding a verified copy; they go with their name.",
			keys:    []Column{{Name: "os", Type: "text", Comment: "the OS image (os_images.name) the version belongs to"}},
		},
		{
			name: "deploy_jobs", of: store.DeployJob{}, primary: []string{"id"}, rename: rename,
			types: map[string]string{"addresses": "jsonb", "steps": "jsonb"},
			skip: map[string]string{
				"user_data_operator": "the operator's own user-data part may carry secrets: never exported",
			},
			comment: "Deploy and release jobs: the exact OS version (os, os_version, image_*), the disk written or wiped and the rule that chose it (disk_*), the addresses claimed, the agent's latest progress and every step's outcome (steps). A job's record outlives its machine, so machine_id is not a foreign key; machines.deploy_job names a machine's latest deploy job.",
			indexes: [][]string{{"machine_id"}, {"state"}, {"os", "os_version"}},
		},
		{
			name: "profiles", of: store.Profile{}, primary: []string{"name"}, rename: rename,
			comment: "Stateless profiles: the boot image (images.name) a node runs from RAM, the overlays applied in order, extra kernel arguments, the pool its node names are made from and the subnets its addresses come from. Its nodes are stateless_nodes rows of that profile.",
		},
		{
			name: "overlays", of: store.Overlay{}, primary: []string{"name"}, rename: rename,
			comment: "Overlays: named file trees (system/ applied once at boot, runtime/ refreshed) that stateless nodes get, templates (.tmpl) rendered per node; their files are in overlay_files, without their content.",
			skip:    map[string]string{"files": "table overlay_files"},
			extra:   []Column{{Name: "file_count", Type: "integer", Comment: "how many files the overlay has (overlay_files rows)"}},
		},
		{
			name: "overlay_files", of: store.OverlayFile{}, primary: []string{"overlay", "path"},
			parent: "overlays", parentKey: "overlay",
			comment: "The files of each overlay (Overlay.Files), by path; they go with their overlay. Their content stays in the store: a file may hold what a node's secrets are made from.",
			keys:    []Column{{Name: "overlay", Type: "text", Comment: "the overlay (overlays.name) the file belongs to"}},
			skip:    map[string]string{"content": "may hold secrets (an operator's keys, a template's inputs) and up to 8 MiB per overlay: never exported; size and sha256 say what it is"},
			extra: []Column{
				{Name: "size", Type: "bigint", Comment: "the file's size in bytes (the template's, not a rendering's)"},
				{Name: "sha256", Type: "text", Comment: "SHA-256 of the file as stored, lowercase hex"},
			},
		},
		{
			name: "stateless_nodes", of: store.StatelessNode{}, primary: []string{"machine_id"}, rename: rename,
			comment: "Machines assigned to a stateless profile (machines.state stateless or booted): the node name and number from the profile's pool, the addresses claimed for it (addresses rows of how 'stateless'), when it booted and was last seen. The sealed SSH host key is never exported; its public half is.",
			skip:    map[string]string{"ssh_host_key_sealed": "secret: never exported"},
			indexes: [][]string{{"profile"}, {"name"}},
		},
		{
			name: "cluster_vars", of: clusterVar{}, primary: []string{"name"},
			comment: "The cluster's variables (rollcall cluster vars): what every stateless node's templates see as .ClusterVars, under their profile's own vars.",
		},
		{
			name: "bmc_jobs", of: store.Job{}, primary: []string{"id"}, rename: rename,
			comment: "BMC commands (power, boot device, recommission, probe, detect) queued through Raft, and their results once done. No credential is part of a job. A job's record outlives its machine, so machine_id is not a foreign key.",
			indexes: [][]string{{"machine_id"}, {"done"}},
		},
	}
}

// Schema builds the exported layout from the Go types. An error names a
// field the generator cannot map: a programming error that the tests catch.
var loadSchema = sync.OnceValues(func() (*Schema, error) {
	s := &Schema{byName: map[string]*Table{}}
	for _, sp := range specs() {
		t, err := build(sp)
		if err != nil {
			return nil, err
		}
		if t.Parent != "" {
			p, ok := s.byName[t.Parent]
			if !ok || len(p.Primary) != 1 {
				return nil, fmt.Errorf("table %s: parent %s must come first and have a one-column primary key", t.Name, t.Parent)
			}
			t.parentPrimary = p.Primary[0]
		}
		s.Tables = append(s.Tables, t)
		s.byName[t.Name] = t
	}
	sum := sha256.Sum256([]byte(strings.Join(s.ddl("schema"), ";\n")))
	s.Layout = hex.EncodeToString(sum[:])
	return s, nil
})

// LoadSchema returns the exported layout.
func LoadSchema() (*Schema, error) { return loadSchema() }

func build(sp spec) (*Table, error) {
	t := &Table{Name: sp.name, Comment: sp.comment, Primary: sp.primary, Child: sp.child,
		Parent: sp.parent, ParentKey: sp.parentKey,
		Indexes: sp.indexes, Skipped: map[string]string{}, keys: len(sp.keys)}
	if sp.child {
		t.Parent, t.ParentKey = "machines", "machine_id"
	}
	t.Columns = append(t.Columns, sp.keys...)
	if sp.of != nil {
		t.goType = reflect.TypeOf(sp.of)
		if err := t.fields(sp, t.goType, nil, "", t.goType.Name()); err != nil {
			return nil, err
		}
		for k := range sp.skip {
			if _, ok := t.Skipped[k]; !ok {
				return nil, fmt.Errorf("table %s: skipped field %q is not a field of %s", sp.name, k, t.goType)
			}
		}
	}
	t.Columns = append(t.Columns, sp.extra...)
	seen := map[string]bool{}
	for i := range t.Columns {
		c := &t.Columns[i]
		if seen[c.Name] {
			return nil, fmt.Errorf("table %s: two columns named %s", sp.name, c.Name)
		}
		seen[c.Name] = true
		if com, ok := columnComments[sp.name+"."+c.Name]; ok {
			c.Comment = com
		}
		if c.Comment == "" && c.Name == "raft_index" {
			c.Comment = "Raft index of the command that last changed the record"
		}
		if c.Comment == "" && c.Field != "" {
			c.Comment = "Go field " + c.Field
		}
	}
	for _, p := range sp.primary {
		if !seen[p] {
			return nil, fmt.Errorf("table %s: primary key column %s does not exist", sp.name, p)
		}
	}
	if sp.child && !seen["machine_id"] {
		return nil, fmt.Errorf("table %s: a machine's child table needs machine_id", sp.name)
	}
	if t.Parent != "" && !seen[t.ParentKey] {
		return nil, fmt.Errorf("table %s: a child of %s needs column %q", sp.name, t.Parent, t.ParentKey)
	}
	return t, nil
}

var (
	typeTime   = reflect.TypeFor[time.Time]()
	typeAddr   = reflect.TypeFor[netip.Addr]()
	typePrefix = reflect.TypeFor[netip.Prefix]()
)

// fields appends a column per exported field of typ, flattening nested
// structs (Machine.Summary → summary_cores) and pointers to them.
func (t *Table) fields(sp spec, typ reflect.Type, path []int, prefix, goPath string) error {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		full := prefix + name
		p := append(slices.Clone(path), i)
		field := goPath + "." + f.Name
		if why, ok := sp.skip[full]; ok {
			t.Skipped[full] = why
			continue
		}
		colName := full
		if r, ok := sp.rename[full]; ok {
			colName = r
		}
		if sqlType, ok := sp.types[full]; ok && sqlType == "jsonb" {
			conv := convJSON
			if f.Type.Kind() == reflect.String {
				conv = convJSONText // a document kept as its text
			}
			t.Columns = append(t.Columns, Column{Name: colName, Type: "jsonb", Field: field, path: p, conv: conv})
			continue
		}
		if sqlType, conv, ok := sqlTypeOf(f.Type); ok {
			t.Columns = append(t.Columns, Column{Name: colName, Type: sqlType, Field: field, path: p, conv: conv})
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			if err := t.fields(sp, ft, p, full+"_", field); err != nil {
				return err
			}
			continue
		}
		return fmt.Errorf("table %s: field %s (%s, json %q) has no SQL type: map it in pgexport or skip it with a reason", t.Name, field, f.Type, full)
	}
	return nil
}

// sqlTypeOf maps a Go field type to a column type and the conversion of a
// value to what pgx encodes (nil is NULL).
func sqlTypeOf(t reflect.Type) (string, func(reflect.Value) any, bool) {
	switch t {
	case typeTime:
		return "timestamptz", func(v reflect.Value) any {
			tm := v.Interface().(time.Time)
			if tm.IsZero() {
				return nil
			}
			return tm
		}, true
	case typeAddr, typePrefix:
		return "inet", func(v reflect.Value) any { return v.Interface() }, true
	}
	switch t.Kind() {
	case reflect.String:
		return "text", func(v reflect.Value) any { return noNUL(v.String()) }, true
	case reflect.Bool:
		return "boolean", func(v reflect.Value) any { return v.Bool() }, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32:
		return "integer", func(v reflect.Value) any { return int32(v.Int()) }, true
	case reflect.Int64:
		return "bigint", func(v reflect.Value) any { return v.Int() }, true
	case reflect.Uint64, reflect.Uint32:
		return "bigint", func(v reflect.Value) any { return int64(v.Uint()) }, true
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			return "jsonb", convJSON, true
		}
	case reflect.Slice:
		if t.Elem() == typeAddr {
			return "inet[]", func(v reflect.Value) any {
				if v.IsNil() {
					return nil
				}
				return v.Interface()
			}, true
		}
		switch t.Elem().Kind() {
		case reflect.String:
			return "text[]", func(v reflect.Value) any {
				if v.IsNil() {
					return nil
				}
				out := make([]string, v.Len())
				for i := range out {
					out[i] = noNUL(v.Index(i).String())
				}
				return out
			}, true
		case reflect.Int64:
			return "bigint[]", func(v reflect.Value) any {
				if v.IsNil() {
					return nil
				}
				out := make([]int64, v.Len())
				for i := range out {
					out[i] = v.Index(i).Int()
				}
				return out
			}, true
		}
	}
	return "", nil, false
}

// convJSONText exports a string that holds a JSON document (a layout's
// file, as its operator wrote it) as that document; text that is not JSON
// (which the store never keeps) is NULL rather than a failed export.
func convJSONText(v reflect.Value) any {
	s := v.String()
	if s == "" || !json.Valid([]byte(s)) {
		return nil
	}
	return json.RawMessage(s)
}

func convJSON(v reflect.Value) any {
	if (v.Kind() == reflect.Map || v.Kind() == reflect.Slice) && v.IsNil() {
		return nil
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return nil
	}
	return json.RawMessage(b)
}

// row builds a table row: the caller's key values, the columns read from
// v (a value of the table's Go type, or a pointer to one), then extra.
func (t *Table) row(keys []any, v any, extra ...any) []any {
	out := make([]any, 0, len(t.Columns))
	out = append(out, keys...)
	if t.goType != nil {
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Pointer {
			rv = rv.Elem()
		}
		for _, c := range t.Columns[t.keys:] {
			if c.path == nil {
				continue
			}
			f, ok := fieldAt(rv, c.path)
			if !ok {
				out = append(out, nil)
				continue
			}
			out = append(out, c.conv(f))
		}
	}
	return append(out, extra...)
}

// fieldAt follows an index path; ok is false when a nil pointer is on the
// way (a missing TPM section: its columns are NULL).
func fieldAt(v reflect.Value, path []int) (reflect.Value, bool) {
	for _, i := range path {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, true
}

// ColumnNames lists the table's columns.
func (t *Table) ColumnNames() []string {
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

func ident(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ddl is the statements that create the tables in schema, with their
// comments and indexes.
func (s *Schema) ddl(schema string) []string {
	var out []string
	for _, t := range s.Tables {
		var cols []string
		for _, c := range t.Columns {
			def := pgx.Identifier{c.Name}.Sanitize() + " " + c.Type
			if slices.Contains(t.Primary, c.Name) {
				def += " NOT NULL"
			}
			cols = append(cols, def)
		}
		var pk []string
		for _, p := range t.Primary {
			pk = append(pk, pgx.Identifier{p}.Sanitize())
		}
		if len(pk) > 0 {
			cols = append(cols, "PRIMARY KEY ("+strings.Join(pk, ", ")+")")
		}
		if t.Parent != "" {
			cols = append(cols, t.foreignKey(schema))
		}
		out = append(out, "CREATE TABLE "+ident(schema, t.Name)+" (\n  "+strings.Join(cols, ",\n  ")+"\n)")
		out = append(out, "COMMENT ON TABLE "+ident(schema, t.Name)+" IS "+quoteLit(t.Comment))
		for _, c := range t.Columns {
			out = append(out, "COMMENT ON COLUMN "+ident(schema, t.Name)+"."+pgx.Identifier{c.Name}.Sanitize()+" IS "+quoteLit(c.Comment))
		}
		idx := t.Indexes
		if t.Parent != "" && t.Primary[0] != t.ParentKey {
			idx = append(idx, []string{t.ParentKey})
		}
		for _, cols := range idx {
			var q []string
			for _, c := range cols {
				q = append(q, pgx.Identifier{c}.Sanitize())
			}
			name := pgx.Identifier{t.Name + "_" + strings.Join(cols, "_") + "_idx"}.Sanitize()
			out = append(out, "CREATE INDEX "+name+" ON "+ident(schema, t.Name)+" ("+strings.Join(q, ", ")+")")
		}
	}
	return out
}

// foreignKey is a child table's reference to its parent (a machine, an
// image). A full export drops it while it loads and adds it back after (one
// validating join instead of a trigger per row: about 40% of the load
// time).
func (t *Table) foreignKey(schema string) string {
	return "CONSTRAINT " + t.foreignKeyName() + " FOREIGN KEY (" + pgx.Identifier{t.ParentKey}.Sanitize() + ") REFERENCES " +
		ident(schema, t.Parent) + " (" + pgx.Identifier{t.parentPrimary}.Sanitize() + ") ON DELETE CASCADE"
}

func (t *Table) foreignKeyName() string {
	return pgx.Identifier{t.Name + "_" + t.ParentKey + "_fk"}.Sanitize()
}
