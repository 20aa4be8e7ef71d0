package httpapi

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// jsonNames lists the names encoding/json gives a struct's fields: the tag's
// name, else the field's; embedded structs' fields promoted.
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonNames(f.Type)...)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// conversion is one function that writes a record into a wire type (or a
// request's wire type into a record), with what it decided about the
// fields the two do not share.
type conversion struct {
	from, to reflect.Type
	convert  func(any) any
	// onlyFrom are from's fields that to does not carry, each with why;
	// onlyTo are to's fields that from has not, each with why.
	onlyFrom, onlyTo map[string]string
	// nested are fields carried as another wire type, whose JSON is
	// checked by that type's own conversion, not byte for byte here.
	nested map[string]string
}

func written[F, T any](f func(F) T) conversion {
	return conversion{
		from: reflect.TypeFor[F](), to: reflect.TypeFor[T](),
		convert: func(v any) any { return f(v.(F)) },
	}
}

func (c conversion) leaving(onlyFrom map[string]string) conversion {
	c.onlyFrom = onlyFrom
	return c
}

func (c conversion) adding(onlyTo map[string]string) conversion {
	c.onlyTo = onlyTo
	return c
}

func (c conversion) nesting(nested map[string]string) conversion {
	c.nested = nested
	return c
}

// conversions are every record the API answers with (or fills from a
// request), and the function that writes it.
var conversions = []conversion{
	written(wireMachine).nesting(map[string]string{
		"bmc":      "a wire.BMCView: it hides the secret",
		"location": "a wire.Location, whose asset tag is named asset",
	}),
	written(wireLocation).leaving(map[string]string{"asset_tag": "sent as asset, the name the API's contract gives it"}).
		adding(map[string]string{"asset": "the record's asset_tag"}),
	written(wireTag).adding(map[string]string{"machines": "counted from the tag index by the handler"}),
	written(wireRack).adding(map[string]string{
		"used_units": "counted from the machines in the rack by the handler",
		"machines":   "counted from the rack index by the handler",
	}),
	written(wireBMC).leaving(map[string]string{
		"password_sealed": "the secret: no answer carries it (has_password says whether there is one)",
		"password_aad":    "what the secret is sealed to: of no use outside the node",
		"cert_sha256":     "the node's pin of an HTTPS BMC's certificate: the node's business, never shown",
		"operator":        "marks the driver as the operator's choice, which only Redfish detection reads",
	}).adding(map[string]string{"has_password": "whether a password is sealed, in place of it"}),
	written(wireEvent),
	written(wireJob),
	written(wireDriver),
	written(wireImageFile),
	written(storeImageFile),
	written(wireImage),
	written(wireFabric),
	written(wireVLANServer),
	written(storeVLANServer),
	written(wireVLAN),
	written(wireSubnet),
	written(wireRange),
	written(wireAddress),
	written(wireNode),
	written(func(r store.CertRecord) wire.CertView { return wireCert(r, time.Time{}) }).adding(map[string]string{"state": "valid, revoked or expired, from the record and the clock"}),
	written(wireAudit),
	written(wireMember),
	written(wireNodeStatus).nesting(map[string]string{"gate": "a wire.GateStatus, by wireGate"}),
	written(func(g cluster.GateStatus) wire.GateStatus { return *wireGate(&g) }),
	written(wirePart),
	written(wireExportStats),
	written(wireExportStatus),
	written(wireLayout),
	written(wireOSImage).nesting(map[string]string{"versions": "wire.OSVersion, by wireOSVersion"}),
	written(func(v store.OSVersion) wire.OSVersion { return wireOSVersion(v, "") }).
		leaving(map[string]string{"file": "its sha256 and size, flattened"}).
		adding(map[string]string{"sha256": "the file's", "size": "the file's", "current": "whether the name's current is this version"}),
	written(wireOSSync).leaving(map[string]string{
		"until": "when the holder's claim lapses: the node's business; running says whether it holds",
		"index": "the change index is the list's",
	}).adding(map[string]string{"running": "whether a sync holds the claim now"}),
	written(wireDeployJob).nesting(map[string]string{
		"image": "a wire.JobImage", "disk": "a wire.JobDisk", "addresses": "wire.JobAddress", "progress": "a wire.JobProgress", "steps": "wire.JobStep",
	}).leaving(map[string]string{
		"network_config": "the seed's: the agent reads it in jobs/self",
		"udev_rules":     "the seed's: the agent reads it in jobs/self (rollcall net show previews it)",
		"user_data":      "the seed's inputs: the agent reads the rendered seed in jobs/self; the answer counts keys and lists packages",
		"prior":          "a release's bookkeeping for its cancel",
	}).adding(map[string]string{
		"packages":  "user_data.packages",
		"ssh_keys":  "how many user_data.ssh_keys (public, but long)",
		"upgrade":   "user_data.upgrade",
		"power_job": "the BMC job respondJob queued, not in the record",
	}),
	written(func(p store.Profile) wire.Profile { return wireProfile(p, 0) }).
		adding(map[string]string{"nodes": "counted from the profile index by the handler"}),
	written(func(o store.Overlay) wire.Overlay { return wireOverlay(o, nil, false, false) }).
		leaving(map[string]string{"files": "listed as wire.OverlayFile (path, mode, size, sha256; content with ?content=1) in GET /overlays/{name}"}).
		adding(map[string]string{"file_count": "len(files)", "templates": "files ending in .tmpl", "profiles": "the profiles naming it, by the handler"}),
	written(func(n store.StatelessNode) wire.StatelessNode { return wireStatelessNode(n, false) }).
		leaving(map[string]string{"ssh_host_key_sealed": "the node's secret: only the node's own overlay carries it, unsealed"}).
		adding(map[string]string{"stale": "computed when read from last_seen and the refresh interval"}),
}

// The wire types are written, not inherited (STYLE.md 20): a field added to
// a record (store.Machine, store.Job, cluster.Member, …) fails here until
// someone decides whether clients see it, and writes it into the wire type
// and its conversion, or leaves it out above with the reason. Where the
// fields agree, the wire type's JSON is the record's, value for value.
func TestWireTypesAreWritten(t *testing.T) {
	seen := map[[2]reflect.Type]bool{}
	for _, c := range conversions {
		name := fmt.Sprintf("%v→%v", c.from, c.to)
		t.Run(name, func(t *testing.T) {
			if seen[[2]reflect.Type{c.from, c.to}] {
				t.Fatalf("listed twice")
			}
			seen[[2]reflect.Type{c.from, c.to}] = true
			from, to := jsonNames(c.from), jsonNames(c.to)
			for _, f := range from {
				if !slices.Contains(to, f) && c.onlyFrom[f] == "" {
					t.Errorf("%v has %q, which %v does not carry: write it into the wire type and its conversion, or leave it out in conversions with the reason", c.from, f, c.to)
				}
			}
			for _, f := range to {
				if !slices.Contains(from, f) && c.onlyTo[f] == "" {
					t.Errorf("%v has %q, which %v has not: say where it comes from in conversions", c.to, f, c.from)
				}
			}
			for _, m := range []map[string]string{c.onlyFrom, c.nested} {
				for f := range m {
					if !slices.Contains(from, f) {
						t.Errorf("conversions name %q, which %v no longer has", f, c.from)
					}
				}
			}
			for f := range c.onlyTo {
				if !slices.Contains(to, f) {
					t.Errorf("conversions name %q, which %v no longer has", f, c.to)
				}
			}

			// Filled, every value must come across; zero, every field must
			// be left out (omitempty, omitzero) or sent alike.
			filled := reflect.New(c.from).Elem()
			fill(filled, c.from.Name(), new(int))
			for what, rec := range map[string]reflect.Value{"filled": filled, "zero": reflect.New(c.from).Elem()} {
				var a, b map[string]json.RawMessage
				ja, err := json.Marshal(rec.Interface())
				if err != nil {
					t.Fatal(err)
				}
				jb, err := json.Marshal(c.convert(rec.Interface()))
				if err != nil {
					t.Fatal(err)
				}
				json.Unmarshal(ja, &a)
				json.Unmarshal(jb, &b)
				for k, want := range a {
					if c.onlyFrom[k] != "" || c.nested[k] != "" {
						continue
					}
					if string(b[k]) != string(want) {
						t.Errorf("%s %s: %s, from %s", what, k, b[k], want)
					}
				}
				for k := range b {
					if _, ok := a[k]; !ok && c.onlyTo[k] == "" {
						t.Errorf("%s %s: %s, not in the record's JSON", what, k, b[k])
					}
				}
			}
		})
	}
}

// unconverted are the wire types no conversion writes from a record, and
// why none needs to.
var unconverted = map[string]string{
	"EnlistRequest": "a request", "CreateMachineRequest": "a request", "RenameMachineRequest": "a request", "JoinCodeRequest": "a request",
	"FabricRequest": "a request", "VLANRequest": "a request", "VLANUpdate": "a request", "SubnetRequest": "a request",
	"RangeRequest": "a request", "ReserveRequest": "a request", "AllocateRequest": "a request", "ImageRequest": "a request",
	"PowerRequest": "a request", "BootdevRequest": "a request", "BMCRequest": "a request", "ExportRequest": "a request",
	"BootTokenRequest": "a request", "JoinRequest": "a request between nodes",
	"EnlistReply": "written by its handler", "CommissionReply": "written by its handler", "BMCHintReply": "written from the configuration's hint",
	"JoinCodeView": "written from the minted code", "CAView": "written from the CA certificate by wireCA", "CAState": "written from the cluster identity by caState", "PreviousCA": "written from the cluster identity by caState", "CARotateRequest": "a request", "BootTokenReply": "written from the minted token", "JoinReply": "written by the join listener",
	"AdminCertRequest": "a request", "ServiceCertRequest": "a request", "IntermediateRequest": "a request",
	"IssuedCert": "written from the signed certificate and its record", "CertList": "a list of CertView", "CertsRevoked": "a count",
	"WhoAmI": "written from the request's actor", "AuditLog": "a list of AuditEvent",
	"Health": "written by its handler", "Removed": "one name", "Repaired": "written by its handler", "CheckReply": "one index",
	"Deleted": "one name", "ErrorReply": "the error path's", "ErrorDetail": "the error path's",
	"ExportReply": "the export's node and target around ExportStats", "ExportStatusView": "the role around ExportStatus",
	"MachineDetail": "wire types composed", "MachineList": "wire types composed", "EventList": "wire types composed",
	"RecentEvents": "wire types composed", "ClusterView": "wire types composed", "FabricList": "wire types composed",
	"FabricDetail": "wire types composed", "VLANList": "wire types composed", "VLANDetail": "wire types composed",
	"SubnetView": "wire types composed", "SubnetList": "wire types composed", "SubnetDetail": "wire types composed",
	"RangeList": "wire types composed", "AddressList": "wire types composed", "ImageList": "wire types composed",
	"JobList": "wire types composed", "DriverList": "wire types composed",
	"TagRequest": "a request", "MachineTagsRequest": "a request", "LocationRequest": "a request",
	"BulkLocationRequest": "a request", "RackRequest": "a request",
	"TagList": "wire types composed", "TagDetail": "wire types composed", "TagSaved": "wire types composed",
	"TagFailure": "written from a rule's failure on a machine", "MachineLocation": "wire types composed",
	"LocationsReply": "wire types composed", "ImportChange": "written from a row of the import's plan",
	"ImportError": "written from a bad row of the import", "ImportReply": "wire types composed",
	"RackList": "wire types composed", "RackUnit": "written from a machine in the rack", "RackDetail": "wire types composed",
	"LayoutList": "wire types composed", "NetworkRequest": "a request", "NetworkView": "written by its handler from the record and its pins",
	"LayoutDoc": "a request: the layout's file, which ipam/layout parses (TestLayoutDocIsTheLayoutShape)", "LayoutInterface": "part of LayoutDoc",
	"LayoutBond": "part of LayoutDoc", "LayoutLink": "part of LayoutDoc",
	"NetworkPlan": "written by wireNetworkPlan from a layout.Plan (TestNetworkPlanAnswer)", "PlanChoice": "part of NetworkPlan", "PlanAddress": "part of NetworkPlan",
	"OSList": "wire types composed", "OSResult": "wire types composed", "OSStreamLine": "wire types composed",
	"OSSyncRequest": "a request decoded field by field into oscatalog.SyncRequest", "OSPromoteRequest": "one version name",
	"OSProgress":    "oscatalog.Progress (not a record) copied field by field in osStream.progress",
	"OSSyncResult":  "oscatalog.NameResult (not a record) copied field by field in postOSSync",
	"DeployRequest": "a request", "ReleaseRequest": "a request", "ProgressRequest": "a request", "ProgressReply": "one flag",
	"JobImage": "written inside wireDeployJob", "JobDisk": "written inside wireDeployJob", "JobAddress": "written inside wireDeployJob",
	"JobProgress": "written inside wireDeployJob", "JobStep": "written inside wireDeployJob", "DeployJobList": "wire types composed",
	"Deployment": "written by deploymentOf from the job", "JobSelf": "the agent contract, written by getJobSelf",
	"ProfileList": "wire types composed", "ProfileRequest": "a request", "OverlayList": "wire types composed",
	"OverlayRequest": "a request", "OverlayFile": "written from a store.OverlayFile by wireOverlay (path, mode, size, sha256, content on request)",
	"StatelessNodeList": "wire types composed", "AssignRequest": "a request", "AssignResult": "wire types composed",
	"Render": "written by getRender from the rendered file", "StatelessSelf": "the node's contract, written by getStatelessSelf",
	"ClusterVars":  "the record's vars, updated and index, written by getClusterVars",
	"DoctorReport": "written by getDoctor from its checks", "DoctorCheck": "one check's outcome, written by getDoctor",
	"SelfImage": "the agent contract", "SelfDisk": "the agent contract", "SelfSeed": "the rendered seed",
}

// Every wire type is written by a conversion above, or is named in
// unconverted with why it needs none: a new answer type that carries a
// record's fields cannot slip past TestWireTypesAreWritten.
func TestEveryWireTypeIsDecided(t *testing.T) {
	files, err := filepath.Glob("../wire/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no wire package here: %v", err)
	}
	converted := map[string]bool{}
	for _, c := range conversions {
		for _, typ := range []reflect.Type{c.from, c.to} {
			if typ.PkgPath() == reflect.TypeFor[wire.MachineView]().PkgPath() {
				converted[typ.Name()] = true
			}
		}
	}
	declared := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
						declared[ts.Name.Name] = true
					}
				}
			}
		}
	}
	for name := range declared {
		switch {
		case converted[name] && unconverted[name] != "":
			t.Errorf("wire.%s is converted and listed in unconverted", name)
		case !converted[name] && unconverted[name] == "":
			t.Errorf("wire.%s: add its conversion to conversions, or say in unconverted why it needs none", name)
		}
	}
	for name := range unconverted {
		if !declared[name] {
			t.Errorf("unconverted names wire.%s, which package wire no longer declares", name)
		}
	}
}

var (
	typeAddr   = reflect.TypeFor[netip.Addr]()
	typePrefix = reflect.TypeFor[netip.Prefix]()
)

// fill sets every field of v to a value of its own (strings name their
// field, numbers and times count up), so that a conversion that writes one
// field into another shows.
func fill(v reflect.Value, path string, n *int) {
	*n++
	switch v.Type() {
	case typeTime:
		v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 9, 0, *n, 0, time.UTC)))
		return
	case typeAddr:
		v.Set(reflect.ValueOf(netip.AddrFrom4([4]byte{10, 0, byte(*n >> 8), byte(*n)})))
		return
	case typePrefix:
		v.Set(reflect.ValueOf(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(*n), 0, 0}), 16)))
		return
	case typeRawMessage:
		v.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"n":%d}`, *n))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), fmt.Sprintf("%s[%d]", path, i), n)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, path+".key", n)
		fill(e, path+".value", n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), path, n)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), path+"."+v.Type().Field(i).Name, n)
			}
		}
	}
}

// The machine view shows everything of the record but the BMC's secret.
func TestMachineViewHidesTheBMCSecret(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	m := store.Machine{
		ID: "m-0123456789ab", Name: "db-07", State: store.StateReady, SystemUUID: "4c4c4544-0042-3510-8051-b7c04f563232",
		Serial: "S211X5A", MACs: []string{"0c:c4:7a:aa:00:01"}, BootMAC: "0c:c4:7a:aa:00:01", IdentityKey: "uuid:4c4c4544",
		IPs: []string{"10.0.0.5"}, Summary: inventory.Summary{Manufacturer: "Dell Inc.", Sockets: 2},
		BMC:       &store.BMC{Driver: "ipmi", Address: "10.1.0.5", User: "root", PasswordSealed: []byte("sealed"), PasswordAAD: "aad", CertSHA256: "ab"},
		CreatedAt: at, UpdatedAt: at.Add(time.Second), LastSeen: at.Add(2 * time.Second), Commissioned: at.Add(3 * time.Second), Index: 42,
	}
	var rec, view map[string]json.RawMessage
	b, _ := json.Marshal(m)
	json.Unmarshal(b, &rec)
	v, _ := json.Marshal(wireMachine(m))
	json.Unmarshal(v, &view)
	for k, want := range rec {
		if k == "bmc" {
			continue
		}
		if string(view[k]) != string(want) {
			t.Errorf("%s: view %s, record %s", k, view[k], want)
		}
	}
	for _, secret := range []string{"sealed", "c2VhbGVk", "password_sealed", "password_aad", "aad"} {
		if strings.Contains(string(view["bmc"]), secret) {
			t.Errorf("the view's BMC shows %q: %s", secret, view["bmc"])
		}
	}
	if !strings.Contains(string(view["bmc"]), `"has_password":true`) {
		t.Errorf("bmc: %s", view["bmc"])
	}
}

// The states clients see and filter by are the store's.
func TestWireStatesAreTheStores(t *testing.T) {
	if !slices.Equal(wire.States, store.States) {
		t.Errorf("wire.States %v, store.States %v", wire.States, store.States)
	}
	for w, s := range map[string]string{wire.StateNew: store.StateNew, wire.StateCommissioning: store.StateCommissioning, wire.StateReady: store.StateReady} {
		if w != s {
			t.Errorf("wire state %q, store state %q", w, s)
		}
	}
}

// The document's description of a layout (wire.LayoutDoc) is the shape
// ipam/layout parses, field for field: a field added to a layout shows up
// in the OpenAPI document only when it is written here too.
func TestLayoutDocIsTheLayoutShape(t *testing.T) {
	for _, pair := range [][2]reflect.Type{
		{reflect.TypeFor[wire.LayoutDoc](), reflect.TypeFor[layout.Layout]()},
		{reflect.TypeFor[wire.LayoutInterface](), reflect.TypeFor[layout.Interface]()},
		{reflect.TypeFor[wire.LayoutBond](), reflect.TypeFor[layout.Bond]()},
		{reflect.TypeFor[wire.LayoutLink](), reflect.TypeFor[layout.Link]()},
	} {
		if a, b := jsonNames(pair[0]), jsonNames(pair[1]); !slices.Equal(a, b) {
			t.Errorf("%v has %v, %v has %v", pair[0], a, pair[1], b)
		}
	}
}
