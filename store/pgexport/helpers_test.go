package pgexport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// One server for the package's tests (initdb costs seconds); tests that
// stop PostgreSQL start their own.
var (
	sharedOnce sync.Once
	shared     *pgtest.Server
	sharedErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

func server(t *testing.T) *pgtest.Server {
	t.Helper()
	bin := pgtest.Need(t)
	sharedOnce.Do(func() { shared, sharedErr = pgtest.New(bin) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// schemaName gives each test its own PostgreSQL schema.
func schemaName(t *testing.T) string {
	return strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))
}

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 123456789, time.UTC)

// fleet is a store fed through the state machine.
type fleet struct {
	db  *store.DB
	log *fsmtest.Log
	now time.Time
}

func newFleet(t testing.TB) *fleet {
	t.Helper()
	return openFleet(t, filepath.Join(t.TempDir(), "state.db"))
}

func openFleet(t testing.TB, path string) *fleet {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := fsmtest.New(db)
	if err != nil {
		t.Fatal(err)
	}
	return &fleet{db: db, log: l, now: t0}
}

func (f *fleet) tick() time.Time { f.now = f.now.Add(1500 * time.Millisecond); return f.now }

// commission commissions machines from..to-1 of the generated fleet, in
// batches of entries as raft would hand them over.
func (f *fleet) commission(t testing.TB, from, to int) {
	t.Helper()
	var cmds []raftfsm.Command
	for i := from; i < to; i++ {
		c, err := pgtest.Commission(pgtest.Machine(1, i), i, f.tick())
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
		if len(cmds) == 100 || i == to-1 {
			if err := f.log.ApplyBatch(cmds...); err != nil {
				t.Fatal(err)
			}
			cmds = nil
		}
	}
}

func (f *fleet) apply(t testing.TB, cmds ...raftfsm.Command) {
	t.Helper()
	if err := f.log.Apply(cmds...); err != nil {
		t.Fatal(err)
	}
}

// network builds a fabric, VLANs, subnets, ranges and addresses, and two
// appliance nodes.
func (f *fleet) network(t testing.TB) {
	t.Helper()
	now := f.tick()
	f.apply(t,
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "dc1", Kind: store.FabricEthernet, Created: now}},
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "ib0", Kind: store.FabricInfiniband, Created: now}},
		&raftfsm.NodePut{Node: raftfsm.Node{Name: "node1", RaftAddr: "10.0.0.1:8300", HTTPAddr: "10.0.0.1:8080", Joined: now}},
		&raftfsm.NodePut{Node: raftfsm.Node{Name: "node2", RaftAddr: "10.0.0.2:8300", Joined: now}},
		&raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "dc1", VID: 100, MTU: 9000, DHCP: store.DHCPFull, Servers: []raftfsm.VLANServer{{Node: "node1", Iface: "eno1"}}, Created: now}},
		&raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "dc1", VID: 200, MTU: 1500, DHCP: store.DHCPOff, Created: now}},
		&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: netip.MustParsePrefix("10.20.0.0/16"), Name: "prov", Fabric: "dc1", VID: 100, Purpose: "provisioning",
			Gateway: netip.MustParseAddr("10.20.0.1"), DNS: []netip.Addr{netip.MustParseAddr("10.20.0.2"), netip.MustParseAddr("10.20.0.3")}, Domain: "dc1.example", Created: now}},
		&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: netip.MustParsePrefix("10.30.0.0/16"), Fabric: "dc1", VID: 200, Purpose: "bmc", Created: now}},
		&raftfsm.RangePut{Range: raftfsm.Range{Subnet: netip.MustParsePrefix("10.20.0.0/16"), Kind: store.RangeDynamic, First: netip.MustParseAddr("10.20.200.1"), Last: netip.MustParseAddr("10.20.200.254"), Comment: "pxe pool", Created: now}},
		&raftfsm.RangePut{Range: raftfsm.Range{Subnet: netip.MustParsePrefix("10.20.0.0/16"), Kind: store.RangeReserved, First: netip.MustParseAddr("10.20.0.1"), Last: netip.MustParseAddr("10.20.0.9"), Created: now}},
	)
	for i, a := range []string{"10.20.0.10", "10.20.0.11", "10.30.0.10"} {
		claim := &raftfsm.AddressClaim{Address: raftfsm.Address{IP: netip.MustParseAddr(a), How: store.HowStatic, Machine: pgtest.ID(i), Interface: "ens1f0", Created: now}}
		f.apply(t, claim)
	}
	f.apply(t, &raftfsm.AddressClaim{Address: raftfsm.Address{IP: netip.MustParseAddr("10.20.0.20"), How: store.HowReserved, Name: "vip", Created: now}})
}

var (
	poolSubnet = netip.MustParsePrefix("10.20.0.0/16")
	pxeBlock1  = netip.MustParseAddr("10.20.200.1")  // 10.20.200.1–64, node1's
	pxeBlock2  = netip.MustParseAddr("10.20.200.65") // 10.20.200.65–128, node2's
)

// sha is a SHA-256 in hex made from a byte.
func sha(b byte) string { return strings.Repeat(fmt.Sprintf("%02x", b), 32) }

// dhcpImagesJobs gives the fleet (after network) lease blocks and leases in
// the dynamic range, a declined address, boot images and BMC jobs, all
// through the state machine.
func (f *fleet) dhcpImagesJobs(t testing.TB) {
	t.Helper()
	now := f.tick()
	f.apply(t,
		&raftfsm.LeaseBlockClaim{Subnet: poolSubnet, First: pxeBlock1, Last: netip.MustParseAddr("10.20.200.64"), Node: "node1", Expires: now.Add(time.Hour), Now: now},
		&raftfsm.LeaseBlockClaim{Subnet: poolSubnet, First: pxeBlock2, Last: netip.MustParseAddr("10.20.200.128"), Node: "node2", Expires: now.Add(time.Hour), Now: now},
	)
	now = f.tick()
	f.apply(t,
		&raftfsm.LeaseBatch{Node: "node1", Now: now, Grants: []raftfsm.LeaseGrant{
			{IP: netip.MustParseAddr("10.20.200.5"), MAC: "02:aa:00:00:00:05", ClientID: "01:02:aa:00:00:00:05", Hostname: "node-05", Granted: now, Expires: now.Add(30 * time.Minute)},
			{IP: netip.MustParseAddr("10.20.200.6"), MAC: "02:aa:00:00:00:06", Granted: now, Expires: now.Add(30 * time.Minute)},
		}, Seen: []raftfsm.Seen{{MAC: "02:aa:00:00:00:05", Node: "node1", Interface: "eno1", VLAN: "dc1/100", Arch: 7, Last: now}}},
		&raftfsm.LeaseBatch{Node: "node2", Now: now, Grants: []raftfsm.LeaseGrant{
			{IP: netip.MustParseAddr("10.20.200.70"), MAC: "02:aa:00:00:00:70", Granted: now, Expires: now.Add(20 * time.Minute)},
		}, Releases: []raftfsm.LeaseRelease{
			// A DECLINE of an address nobody leased: no subnet.
			{IP: netip.MustParseAddr("10.20.200.200"), MAC: "02:aa:00:00:00:c8", Declined: true, Until: now.Add(10 * time.Minute)},
		}},
		&raftfsm.ImagePut{Image: raftfsm.Image{Name: "ubuntu-24.04", Nodes: []string{"node1"}, Created: now, Files: []raftfsm.ImageFile{
			{Name: "kernel", Size: 14_000_000, SHA256: sha(1)}, {Name: "initrd", Size: 80_000_000, SHA256: sha(2)}, {Name: "squashfs", Size: 900_000_000, SHA256: sha(3)},
		}}},
		&raftfsm.ImagePut{Image: raftfsm.Image{Name: "rescue", Nodes: []string{"node2"}, Created: now, Files: []raftfsm.ImageFile{
			{Name: "initrd", Size: 30_000_000, SHA256: sha(4)}, {Name: "kernel", Size: 12_000_000, SHA256: sha(5)},
		}}},
		&raftfsm.ImageHave{Name: "ubuntu-24.04", Node: "node2", Now: now, Files: []raftfsm.ImageFile{
			{Name: "kernel", Size: 14_000_000, SHA256: sha(1)}, {Name: "initrd", Size: 80_000_000, SHA256: sha(2)}, {Name: "squashfs", Size: 900_000_000, SHA256: sha(3)},
		}},
		&raftfsm.BMCSet{Machine: pgtest.ID(0), Now: now, BMC: raftfsm.BMC{Driver: "redfish", Address: "10.30.0.100", User: "rollcall",
			PasswordSealed: []byte("SEALED-SECRET-set"), PasswordAAD: "bmc-password/set", Operator: true, Settings: map[string]string{"verify": "pin"}}},
	)
	now = f.tick()
	f.apply(t,
		&raftfsm.JobEnqueue{Now: now, Job: raftfsm.Job{ID: "j-0001", Machine: pgtest.ID(0), Kind: store.JobPower, Arg: "on", Requester: "alice"}},
		&raftfsm.JobEnqueue{Now: now, Job: raftfsm.Job{ID: "j-0002", Machine: pgtest.ID(0), Kind: store.JobBootDev, Arg: "pxe", Persistent: true, UEFI: true, Runner: "node2"}},
		&raftfsm.JobEnqueue{Now: now, Job: raftfsm.Job{ID: "j-0003", Machine: pgtest.ID(1), Kind: store.JobProbe}},
		&raftfsm.JobStart{ID: "j-0001", Node: "node1", Until: now.Add(time.Minute), Now: now},
		&raftfsm.JobStart{ID: "j-0002", Node: "node2", Until: now.Add(time.Minute), Now: now},
		&raftfsm.JobFinish{ID: "j-0001", Node: "node1", Result: "on", Now: f.tick()},
	)
	f.tagsRacks(t)
}

// tagsRacks gives the fleet a layout, a rule tag (naming it) evaluated over it, a manual tag on
// two machines, and racks with machines placed in them.
func (f *fleet) tagsRacks(t testing.TB) {
	t.Helper()
	f.apply(t, &raftfsm.LayoutPut{Layout: raftfsm.Layout{Name: "gpu-bond", Created: f.tick(),
		JSON: `{"interfaces": [{"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto"}]}]}`}})
	f.putTag(t, raftfsm.Tag{Name: "gpu", Match: `{{ gt .Node.GPUs 0 }}`, CloudConfig: "#cloud-config\npackages: [nvidia-driver]\n",
		Overlays: []string{"gres"}, Layout: "gpu-bond", Comment: "GPU nodes"})
	now := f.tick()
	f.apply(t,
		&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "burn-in", Comment: "new arrivals"}, Now: now},
		&raftfsm.MachineTags{Machines: []string{pgtest.ID(0), pgtest.ID(2)}, Add: []string{"burn-in", "gpu"}, Now: now},
		&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R12", Building: "DC1", Room: "Hall A", Height: 48}, Now: now},
		&raftfsm.LocationSet{Now: now, Machines: []raftfsm.MachineLocation{
			{ID: pgtest.ID(0), Location: raftfsm.Location{Rack: "R12", Unit: 1, Height: 2, AssetTag: "A-0001"}},
			{ID: pgtest.ID(1), Location: raftfsm.Location{Building: "DC1", Room: "Hall B", Rack: "R7", Unit: 10}},
			{ID: pgtest.ID(2), Location: raftfsm.Location{Building: "DC2"}},
		}},
		&raftfsm.MachineNetSet{Machine: pgtest.ID(1), SetLayout: true, Layout: "gpu-bond", Now: now},
	)
}

// putTag saves a tag as the API would: its rule evaluated over the store.
func (f *fleet) putTag(t testing.TB, tag raftfsm.Tag) {
	t.Helper()
	var c *raftfsm.TagPut
	err := f.db.View(func(tx *store.Tx) (err error) {
		c, _, err = raftfsm.NewTagPut(tx, tag, f.tick(), nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f.apply(t, c)
}

// waitExported waits until the mirror has exported everything applied.
func waitExported(t testing.TB, m *Mirror, db *store.DB) Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		applied, _, err := db.Applied()
		if err != nil {
			t.Fatal(err)
		}
		st := m.Status()
		if st.ExportedIndex >= applied && applied > 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror did not catch up: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --- comparing PostgreSQL with the store -------------------------------

// readTable reads a table back into values of its Go type (keys first),
// ordered by primary key: the export's mapping run backwards, so a column
// written into the wrong place or a lost value shows up as a difference.
func readTable(t testing.TB, conn *pgx.Conn, schema string, tb *Table) [][]any {
	t.Helper()
	ctx := context.Background()
	var pk []string
	for _, p := range tb.Primary {
		pk = append(pk, pgx.Identifier{p}.Sanitize())
	}
	var cols []string
	for _, c := range tb.ColumnNames() {
		cols = append(cols, pgx.Identifier{c}.Sanitize())
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + ident(schema, tb.Name)
	if len(pk) > 0 {
		q += " ORDER BY " + strings.Join(pk, ", ")
	}
	rows, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatalf("read %s: %v", tb.Name, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// decode sets the Go value of a table row from its columns.
func decode(t testing.TB, tb *Table, vals []any, dst any) {
	t.Helper()
	rv := reflect.ValueOf(dst).Elem()
	for i, c := range tb.Columns {
		if c.path == nil || vals[i] == nil {
			continue
		}
		f := settable(rv, c.path)
		if err := setValue(f, vals[i]); err != nil {
			t.Fatalf("%s.%s: %v", tb.Name, c.Name, err)
		}
	}
}

func settable(v reflect.Value, path []int) reflect.Value {
	for _, i := range path {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v
}

func setValue(f reflect.Value, v any) error {
	switch x := v.(type) {
	case netip.Prefix:
		if f.Type() == typeAddr {
			f.Set(reflect.ValueOf(x.Addr()))
			return nil
		}
		f.Set(reflect.ValueOf(x))
		return nil
	case time.Time:
		f.Set(reflect.ValueOf(x))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(v.(string))
	case reflect.Bool:
		f.SetBool(v.(bool))
	case reflect.Int, reflect.Int32, reflect.Int64:
		switch n := v.(type) {
		case int32:
			f.SetInt(int64(n))
		case int64:
			f.SetInt(n)
		default:
			return fmt.Errorf("integer column gave %T", v)
		}
	case reflect.Uint64:
		f.SetUint(uint64(v.(int64)))
	default: // arrays and jsonb: through JSON into the field's type
		if arr, ok := v.([]any); ok && f.Type().Elem() == typeAddr {
			for i, e := range arr {
				arr[i] = e.(netip.Prefix).Addr()
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		p := reflect.New(f.Type())
		if err := json.Unmarshal(b, p.Interface()); err != nil {
			return err
		}
		f.Set(p.Elem())
	}
	return nil
}

// diffFast is cmp.Diff for large values: times are cut to what
// timestamptz keeps and put in UTC on both sides, then reflect.DeepEqual
// decides and cmp only explains a difference.
func diffFast(want, got any) string {
	normTimes(reflect.ValueOf(want))
	normTimes(reflect.ValueOf(got))
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return cmp.Diff(want, got, cmpOpts...)
}

func normTimes(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			normTimes(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == typeTime {
			if v.CanSet() {
				tm := v.Interface().(time.Time)
				v.Set(reflect.ValueOf(tm.Truncate(time.Microsecond).UTC()))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				normTimes(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			normTimes(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			c := reflect.New(e.Type()).Elem()
			c.Set(e)
			normTimes(c)
			v.SetMapIndex(k, c)
		}
	}
}

var cmpOpts = []cmp.Option{
	cmpopts.EquateApproxTime(time.Microsecond), // timestamptz keeps microseconds
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// compareAll checks every exported table against the store.
func compareAll(t *testing.T, conn *pgx.Conn, schema string, db *store.DB) {
	t.Helper()
	s, err := LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	type expect struct {
		machines  map[string]store.Machine
		reports   map[string]*inventory.Report
		events    map[string][]store.Event
		fabrics   []store.Fabric
		vlans     []store.VLAN
		subnets   []store.Subnet
		ranges    []store.Range
		addresses []store.Address
		nodes     []store.Node
		blocks    []store.LeaseBlock
		leases    []store.Lease
		images    []store.Image
		jobs      []store.Job
		tags      []store.Tag
		racks     []store.Rack
		layouts   []store.Layout
		applied   uint64
	}
	want := expect{machines: map[string]store.Machine{}, reports: map[string]*inventory.Report{}, events: map[string][]store.Event{}}
	err = db.View(func(tx *store.Tx) error {
		want.applied, _ = tx.Applied()
		ms, err := tx.Machines(store.MachineFilter{})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.BMC != nil {
				m.BMC.PasswordSealed, m.BMC.PasswordAAD = nil, "" // never exported
			}
			want.machines[m.ID] = m
			if doc, err := tx.Inventory(m.ID); err == nil {
				var r inventory.Report
				if err := json.Unmarshal(doc, &r); err != nil {
					return err
				}
				want.reports[m.ID] = &r
			}
			if want.events[m.ID], err = tx.Events(m.ID); err != nil {
				return err
			}
		}
		if want.fabrics, err = tx.Fabrics(); err != nil {
			return err
		}
		if want.vlans, err = tx.VLANs(); err != nil {
			return err
		}
		if want.subnets, err = tx.Subnets(); err != nil {
			return err
		}
		if want.ranges, err = tx.Ranges(netip.Prefix{}); err != nil {
			return err
		}
		if want.addresses, err = tx.Addresses(netip.Prefix{}, 0); err != nil {
			return err
		}
		if want.nodes, err = tx.Nodes(); err != nil {
			return err
		}
		if want.blocks, err = tx.LeaseBlocks(netip.Prefix{}); err != nil {
			return err
		}
		if err := tx.ForEachLease(func(l store.Lease) error { want.leases = append(want.leases, l); return nil }); err != nil {
			return err
		}
		if want.images, err = tx.Images(); err != nil {
			return err
		}
		if want.tags, err = tx.Tags(); err != nil {
			return err
		}
		if want.racks, err = tx.Racks(); err != nil {
			return err
		}
		if want.layouts, err = tx.Layouts(); err != nil {
			return err
		}
		return tx.ForEachJob(func(j store.Job) error { want.jobs = append(want.jobs, j); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}

	// machines, with machine_macs and bmcs folded back in.
	got := map[string]store.Machine{}
	invJSON := map[string]any{}
	tm := s.Table("machines")
	invCol := slices.Index(tm.ColumnNames(), "inventory")
	for _, r := range readTable(t, conn, schema, tm) {
		var m store.Machine
		decode(t, tm, r, &m)
		got[m.ID] = m
		invJSON[m.ID] = r[invCol]
	}
	for _, r := range readTable(t, conn, schema, s.Table("machine_macs")) {
		m := got[r[0].(string)]
		if int(r[1].(int32)) != len(m.MACs) {
			t.Fatalf("machine_macs of %s: ordinal %d after %d MACs", m.ID, r[1], len(m.MACs))
		}
		m.MACs = append(m.MACs, r[2].(string))
		got[m.ID] = m
	}
	tb := s.Table("bmcs")
	for _, r := range readTable(t, conn, schema, tb) {
		m := got[r[0].(string)]
		m.BMC = &store.BMC{}
		decode(t, tb, r, m.BMC)
		got[m.ID] = m
	}
	if d := diffFast(want.machines, got); d != "" {
		t.Errorf("machines differ from the store (-store +postgres):\n%s", d)
	}

	// inventories and their lists, folded back into reports.
	reports := map[string]*inventory.Report{}
	ti := s.Table("inventories")
	for _, r := range readTable(t, conn, schema, ti) {
		rep := &inventory.Report{}
		decode(t, ti, r, rep)
		reports[r[0].(string)] = rep
	}
	appendRows := func(name string, add func(rep *inventory.Report, vals []any, tb *Table)) {
		tb := s.Table(name)
		for _, r := range readTable(t, conn, schema, tb) {
			rep := reports[r[0].(string)]
			if rep == nil {
				t.Fatalf("%s row for %s, which has no inventories row", name, r[0])
			}
			add(rep, r, tb)
		}
	}
	list := func(name string, field string) {
		appendRows(name, func(rep *inventory.Report, vals []any, tb *Table) {
			sl := reflect.ValueOf(rep).Elem().FieldByName(field)
			if int(vals[1].(int32)) != sl.Len() {
				t.Fatalf("%s: ordinal %d after %d rows", name, vals[1], sl.Len())
			}
			item := reflect.New(sl.Type().Elem())
			decode(t, tb, vals, item.Interface())
			sl.Set(reflect.Append(sl, item.Elem()))
		})
	}
	list("dimms", "DIMMs")
	list("cpus", "CPUs")
	list("disks", "Disks")
	list("nvme", "NVMe")
	list("nics", "NICs")
	list("ib_hcas", "IB")
	list("gpus", "GPUs")
	list("pci_devices", "PCI")
	list("lldp_neighbors", "LLDP")
	list("inventory_errors", "Errors")
	appendRows("nvme_namespaces", func(rep *inventory.Report, vals []any, tb *Table) {
		var ns inventory.NVMeNamespace
		decode(t, tb, vals, &ns)
		c := &rep.NVMe[vals[1].(int32)]
		c.Namespaces = append(c.Namespaces, ns)
	})
	appendRows("ib_ports", func(rep *inventory.Report, vals []any, tb *Table) {
		var p inventory.IBPort
		decode(t, tb, vals, &p)
		h := &rep.IB[vals[1].(int32)]
		h.Ports = append(h.Ports, p)
	})
	wantReports := map[string]*inventory.Report{}
	for id, r := range want.reports {
		c := *r
		c.BMC = nil // in the bmcs table (the machine's record) and the jsonb
		wantReports[id] = &c
	}
	if d := diffFast(wantReports, reports); d != "" {
		t.Errorf("inventory tables differ from the store (-store +postgres):\n%s", d)
	}
	// machines.inventory holds the whole report, minus the BMC password.
	for id, m := range want.machines {
		raw, ok := invJSON[id]
		if !ok {
			continue // the machines comparison reported it
		}
		if want.reports[id] == nil {
			if raw != nil {
				t.Errorf("machine %s has no inventory but machines.inventory is %v", id, raw)
			}
			continue
		}
		b, _ := json.Marshal(raw)
		var rep inventory.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("machines.inventory of %s: %v", id, err)
		}
		if d := diffFast(want.reports[id], &rep); d != "" {
			t.Errorf("machines.inventory of %s differs (-store +postgres):\n%s", m.ID, d)
		}
	}

	// events
	gotEvents := map[string][]store.Event{}
	te := s.Table("events")
	for _, r := range readTable(t, conn, schema, te) {
		var e store.Event
		decode(t, te, r, &e)
		gotEvents[e.Machine] = append(gotEvents[e.Machine], e)
	}
	for id, evs := range want.events {
		if len(evs) == 0 {
			delete(want.events, id)
		}
	}
	if d := diffFast(want.events, gotEvents); d != "" {
		t.Errorf("events differ from the store (-store +postgres):\n%s", d)
	}

	compareList(t, conn, schema, s.Table("fabrics"), want.fabrics)
	compareList(t, conn, schema, s.Table("vlans"), want.vlans)
	compareList(t, conn, schema, s.Table("subnets"), want.subnets)
	compareList(t, conn, schema, s.Table("ranges"), want.ranges)
	compareList(t, conn, schema, s.Table("addresses"), want.addresses)
	compareList(t, conn, schema, s.Table("nodes"), want.nodes)
	compareList(t, conn, schema, s.Table("lease_blocks"), want.blocks)
	compareList(t, conn, schema, s.Table("leases"), want.leases)
	compareList(t, conn, schema, s.Table("bmc_jobs"), want.jobs)
	compareList(t, conn, schema, s.Table("tags"), want.tags)
	compareList(t, conn, schema, s.Table("racks"), want.racks)
	compareLayouts(t, conn, schema, s.Table("layouts"), want.layouts)
	compareOSDeploy(t, conn, schema, s, db)
	compareStateless(t, conn, schema, s, db)

	// images, with image_files folded back in.
	wantImages, images := map[string]*store.Image{}, map[string]*store.Image{}
	for i := range want.images {
		wantImages[want.images[i].Name] = &want.images[i]
	}
	tim := s.Table("images")
	for _, r := range readTable(t, conn, schema, tim) {
		im := &store.Image{}
		decode(t, tim, r, im)
		images[im.Name] = im
	}
	tf := s.Table("image_files")
	for _, r := range readTable(t, conn, schema, tf) {
		im := images[r[0].(string)]
		if im == nil {
			t.Fatalf("image_files row for %s, which has no images row", r[0])
		}
		if int(r[1].(int32)) != len(im.Files) {
			t.Fatalf("image_files of %s: ordinal %d after %d files", r[0], r[1], len(im.Files))
		}
		var file store.ImageFile
		decode(t, tf, r, &file)
		im.Files = append(im.Files, file)
	}
	if d := diffFast(wantImages, images); d != "" {
		t.Errorf("images differ from the store (-store +postgres):\n%s", d)
	}

	var idx int64
	if err := conn.QueryRow(context.Background(), "SELECT raft_index FROM "+ident(schema, "export_state")).Scan(&idx); err != nil {
		t.Fatal(err)
	}
	if uint64(idx) != want.applied {
		t.Errorf("export_state.raft_index = %d, store applied %d", idx, want.applied)
	}
	// No secret anywhere, in any column of any table.
	for _, tb := range s.Tables {
		var n int
		q := "SELECT count(*) FROM " + ident(schema, tb.Name) + " x WHERE x::text LIKE '%SEALED-SECRET%' OR x::text LIKE '%bmc-password/%'"
		if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Errorf("table %s: %d rows carry the sealed BMC password or its AAD", tb.Name, n)
		}
	}
}

// compareList compares a table with the store's records, both in primary
// key order.
func compareList[T any](t *testing.T, conn *pgx.Conn, schema string, tb *Table, want []T) {
	t.Helper()
	var got []T
	for _, r := range readTable(t, conn, schema, tb) {
		var v T
		decode(t, tb, r, &v)
		got = append(got, v)
	}
	sort.SliceStable(want, func(i, j int) bool { return lessKey(tb, &want[i], &want[j]) })
	sort.SliceStable(got, func(i, j int) bool { return lessKey(tb, &got[i], &got[j]) })
	if d := cmp.Diff(want, got, cmpOpts...); d != "" {
		t.Errorf("%s differs from the store (-store +postgres):\n%s", tb.Name, d)
	}
}

// lessKey orders two records by their primary key columns.
func lessKey(tb *Table, a, b any) bool {
	ra, rb := tb.row(nil, a), tb.row(nil, b)
	for i, c := range tb.Columns {
		if !contains(tb.Primary, c.Name) {
			continue
		}
		if pa, ok := ra[i].(netip.Addr); ok {
			if pb := rb[i].(netip.Addr); pa != pb {
				return pa.Less(pb)
			}
			continue
		}
		if pa, ok := ra[i].(netip.Prefix); ok {
			pb := rb[i].(netip.Prefix)
			if pa.Addr() != pb.Addr() {
				return pa.Addr().Less(pb.Addr())
			}
			if pa.Bits() != pb.Bits() {
				return pa.Bits() < pb.Bits()
			}
			continue
		}
		if n, ok := ra[i].(int32); ok {
			if m := rb[i].(int32); n != m {
				return n < m
			}
			continue
		}
		if x, y := fmt.Sprint(ra[i]), fmt.Sprint(rb[i]); x != y {
			return x < y
		}
	}
	return false
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// compareLayouts compares the layouts table with the store: body is the
// layout's file as a jsonb document (PostgreSQL keeps its value, not its
// spacing), every other column as compareList does.
func compareLayouts(t *testing.T, conn *pgx.Conn, schema string, tb *Table, want []store.Layout) {
	t.Helper()
	body := slices.Index(tb.ColumnNames(), "body")
	if body < 0 {
		t.Fatal("layouts has no body column")
	}
	var got []store.Layout
	var docs []any
	for _, r := range readTable(t, conn, schema, tb) {
		docs = append(docs, r[body])
		r[body] = nil
		var l store.Layout
		decode(t, tb, r, &l)
		got = append(got, l)
	}
	if len(got) != len(want) {
		t.Fatalf("layouts: %d rows, the store has %d", len(got), len(want))
	}
	for i := range want {
		var doc any
		if err := json.Unmarshal([]byte(want[i].JSON), &doc); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(doc, docs[i]); d != "" {
			t.Errorf("layouts %s: body differs from the store's file (-store +postgres):\n%s", want[i].Name, d)
		}
		got[i].JSON = want[i].JSON
	}
	if d := diffFast(want, got); d != "" {
		t.Errorf("layouts differ from the store (-store +postgres):\n%s", d)
	}
}
