package raftfsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// bodyPair is a body and the record it carries, with the record's fields
// the log leaves out on purpose (field name → why).
type bodyPair struct {
	body, record reflect.Type
	notInLog     map[string]string
	roundTrip    func(t *testing.T, notInLog map[string]string)
}

func pair[R, B any](toBody func(R) B, toRecord func(B) R, notInLog map[string]string) bodyPair {
	return bodyPair{
		body: reflect.TypeFor[B](), record: reflect.TypeFor[R](), notInLog: notInLog,
		roundTrip: func(t *testing.T, notInLog map[string]string) {
			var rec R
			v := reflect.ValueOf(&rec).Elem()
			n := 0
			fill(t, v, &n)
			for name := range notInLog {
				if f := v.FieldByName(name); f.IsValid() {
					f.SetZero()
				}
			}
			b := toBody(rec)
			rj, _ := json.Marshal(rec)
			bj, _ := json.Marshal(b)
			if len(notInLog) == 0 && !bytes.Equal(rj, bj) {
				t.Errorf("the body's JSON differs from the record's: a log entry would change\nrecord %s\nbody   %s", rj, bj)
			}
			if d := cmp.Diff(rec, toRecord(b), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("record → body → record loses data (-record +back): a conversion misses a field\n%s", d)
			}
		},
	}
}

// bodyPairs is every body of bodies.go. Each record field is carried by its
// body or named in notInLog with the reason. The bodies written to keep
// the log format of the records they replaced carry every field; the
// bodies made since carry what a proposer decides, and the state machine
// stamps the rest.
var bodyPairs = []bodyPair{
	pair(ClusterIdentityBody, ClusterIdentity.record, map[string]string{
		"PreviousCAs": "written only by CARotate",
		"Rotated":     "CARotate's Now",
		"RotatedBy":   "CARotate's By",
	}),
	pair(PreviousCABody, PreviousCA.record, nil),
	pair(NodeBody, Node.record, nil),
	pair(CertBody, Cert.record, map[string]string{"Revoked": "written only by CertRevoke", "RevokedBy": "written only by CertRevoke"}),
	pair(JoinCodeBody, JoinCode.record, nil),
	pair(ImageBody, Image.record, nil),
	pair(imageFileBody, ImageFile.record, nil),
	pair(seenBody, Seen.record, nil),
	pair(EventBody, Event.record, nil),
	pair(BMCBody, BMC.record, nil),
	pair(SummaryBody, Summary.record, nil),
	pair(FabricBody, Fabric.record, nil),
	pair(VLANBody, VLAN.record, nil),
	pair(vlanServerBody, VLANServer.record, nil),
	pair(SubnetBody, Subnet.record, nil),
	pair(RangeBody, Range.record, nil),
	pair(AddressBody, Address.record, nil),
	pair(JobBody, Job.record, nil),
	pair(LayoutBody, Layout.record, nil),
	pair(TagBody, Tag.record, map[string]string{
		"Created":   "the TagPut's Now when it creates the tag",
		"Updated":   "the TagPut's Now",
		"RuleIndex": "the index of the TagPut that changed the rule, stamped by the state machine",
		"Index":     "stamped by the store",
	}),
	pair(LocationBody, Location.record, nil),
	pair(OSVersionBody, OSVersion.record, map[string]string{
		"Nodes": "the node an OSVersionAdd names holds it; others join with OSHave",
	}),
	pair(RackBody, Rack.record, map[string]string{
		"Created": "the Now of the command that creates the rack",
		"Index":   "stamped by the store",
	}),
	pair(jobImageBody, JobImage.record, nil),
	pair(JobDiskBody, JobDisk.record, nil),
	pair(jobAddressBody, JobAddress.record, nil),
	pair(jobUserDataBody, JobUserData.record, nil),
	pair(DeployJobBody, DeployJob.record, map[string]string{
		"State":      "queued when DeployStart makes it; reports, cancels and timeouts move it",
		"Progress":   "the agent's reports (JobReport)",
		"Steps":      "the agent's reports (JobReport)",
		"Cancel":     "set by JobCancel",
		"Prior":      "a release's, read by ReleaseStart from the machine",
		"Created":    "the DeployStart's Now",
		"Started":    "the first JobReport's Now",
		"Finished":   "the Now of the command that ends it",
		"LastReport": "the latest JobReport's Now",
		"Error":      "written by the command that fails it",
		"PhonedHome": "the PhoneHome's Now",
		"PhoneHost":  "the PhoneHome's hostname",
		"Index":      "stamped by the store",
	}),
	pair(ProfileBody, Profile.record, map[string]string{
		"Created": "the Now of the ProfilePut that creates the profile",
		"Index":   "stamped by the store",
	}),
	pair(OverlayFileBody, OverlayFile.record, nil),
}

// TestBodiesDecideEveryField fails when a store record gains a field that
// its body has not decided on. A new field reaches the log only when
// someone writes it into the body (with a new body version and golden, see
// TestCommandGoldens) or lists it in notInLog, saying why.
func TestBodiesDecideEveryField(t *testing.T) {
	for _, p := range bodyPairs {
		t.Run(p.body.Name(), func(t *testing.T) {
			var want []reflect.StructField
			for _, f := range reflect.VisibleFields(p.record) {
				if _, left := p.notInLog[f.Name]; !left {
					want = append(want, f)
				}
			}
			for name := range p.notInLog {
				if _, ok := p.record.FieldByName(name); !ok {
					t.Errorf("notInLog names %s, which %s no longer has", name, p.record)
				}
			}
			got := reflect.VisibleFields(p.body)
			if names(got) != names(want) {
				t.Fatalf("%s has fields %s; %s has %s (without those left out of the log): carry the new field in the body (and bump the command's version) or add it to notInLog with the reason",
					p.body, names(got), p.record, names(want))
			}
			for i, bf := range got {
				rf := want[i]
				if bf.Tag != rf.Tag {
					t.Errorf("%s: tag %q, the record's is %q: the log would change", bf.Name, bf.Tag, rf.Tag)
				}
				if !sameShape(bf.Type, rf.Type) {
					t.Errorf("%s: type %s, the record's is %s", bf.Name, bf.Type, rf.Type)
				}
			}
			p.roundTrip(t, p.notInLog)
		})
	}
}

// TestCommandsCarryNoRecords: no command holds a type of store (or of a
// package below it), however deep; each holds the bodies above instead.
func TestCommandsCarryNoRecords(t *testing.T) {
	for _, typ := range slices.Sorted(maps.Keys(commands)) {
		c := reflect.TypeOf(commands[typ].new()).Elem()
		walkTypes(c, c.Name(), map[reflect.Type]bool{}, func(path string, ty reflect.Type) {
			if strings.HasPrefix(ty.PkgPath(), modulePath+"/store") {
				t.Errorf("%s is a %s: a command carries a body of raftfsm's own (bodies.go), not a store record", path, ty)
			}
		})
	}
}

func walkTypes(ty reflect.Type, path string, seen map[reflect.Type]bool, visit func(string, reflect.Type)) {
	switch ty.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		walkTypes(ty.Elem(), path+"[]", seen, visit)
		return
	case reflect.Map:
		walkTypes(ty.Key(), path+"{key}", seen, visit)
		walkTypes(ty.Elem(), path+"{}", seen, visit)
		return
	}
	if ty.Name() != "" {
		visit(path, ty)
	}
	if ty.Kind() != reflect.Struct || seen[ty] || !strings.HasPrefix(ty.PkgPath(), modulePath) {
		return
	}
	seen[ty] = true
	for _, f := range reflect.VisibleFields(ty) {
		if f.IsExported() {
			walkTypes(f.Type, path+"."+f.Name, seen, visit)
		}
	}
}

func names(fs []reflect.StructField) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return strings.Join(out, ", ")
}

// sameShape: the same type, or for the module's own structs (a record and
// its body) the same name, through slices and pointers.
func sameShape(a, b reflect.Type) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Slice:
		return sameShape(a.Elem(), b.Elem())
	case reflect.Struct:
		if strings.HasPrefix(a.PkgPath(), modulePath) && strings.HasPrefix(b.PkgPath(), modulePath) {
			return a.Name() == b.Name()
		}
	}
	return a == b
}

// fill sets every field of v to a value distinct from the others.
func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	i := *n
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", i))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(i))
	case reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint8:
		v.SetUint(uint64(i))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), n)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, n)
		fill(t, e, n)
		v.SetMapIndex(k, e)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Struct:
		switch v.Type() {
		case reflect.TypeFor[time.Time]():
			v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 8, i, i, i, time.UTC)))
		case reflect.TypeFor[netip.Addr]():
			v.Set(reflect.ValueOf(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})))
		case reflect.TypeFor[netip.Prefix]():
			v.Set(reflect.ValueOf(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)))
		default:
			if !strings.HasPrefix(v.Type().PkgPath(), modulePath) {
				t.Fatalf("fill: no value for %s: teach fill this type", v.Type())
			}
			for j := range v.NumField() {
				if v.Type().Field(j).IsExported() {
					fill(t, v.Field(j), n)
				}
			}
		}
	default:
		t.Fatalf("fill: no value for %s: teach fill this kind", v.Type())
	}
}
