package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/httpapi"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
)

func placed(t *testing.T, n *nodetest.Node, id string) wire.Location {
	t.Helper()
	var mv wire.MachineView
	admin(t, n, "GET", "/api/v1/machines/"+id, nil).Decode(t, &mv)
	return mv.Location
}

func rackOf(t *testing.T, n *nodetest.Node, name string) wire.RackDetail {
	t.Helper()
	r := admin(t, n, "GET", "/api/v1/racks/"+name, nil)
	if r.Status != 200 {
		t.Fatalf("rack %s: %s", name, r)
	}
	var d wire.RackDetail
	r.Decode(t, &d)
	return d
}

// One machine placed, a rack made on first use where it stands, the
// elevation, resizing and removal refused while machines stand in the way.
func TestLocationAndRacksAPI(t *testing.T) {
	n, ids, _ := fleetNode(t, 4)
	a, b := ids[0], ids[1]

	r := admin(t, n, "PUT", "/api/v1/machines/"+a+"/location", wire.LocationRequest{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 10, Height: 2, Asset: "A-0042"})
	if r.Status != 200 {
		t.Fatalf("place a: %s", r)
	}
	var mv wire.MachineView
	r.Decode(t, &mv)
	if want := (wire.Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 10, Height: 2, Asset: "A-0042"}); mv.Location != want {
		t.Errorf("a's location %+v, want %+v", mv.Location, want)
	}
	// In the rack, b stands where the rack does.
	refused(t, n, "PUT", "/api/v1/machines/"+b+"/location", wire.LocationRequest{Rack: "R12", Unit: 11}, 409, "conflict",
		a+" at U10-11 and "+b+" at U11 in rack R12 share a unit")
	refused(t, n, "PUT", "/api/v1/machines/"+b+"/location", wire.LocationRequest{Building: "DC2", Rack: "R12", Unit: 12}, 409, "conflict",
		`rack R12 stands in building "DC1", not "DC2"`)
	if r := admin(t, n, "PUT", "/api/v1/machines/"+b+"/location", wire.LocationRequest{Rack: "R12", Unit: 12}); r.Status != 200 {
		t.Fatalf("place b: %s", r)
	}
	if got := placed(t, n, b); got != (wire.Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 12}) {
		t.Errorf("b stands at %+v, want the rack's building and room", got)
	}
	d := rackOf(t, n, "R12")
	wantElev := []wire.RackUnit{{Unit: 10, Height: 2, Machine: a, State: "ready"}, {Unit: 12, Height: 1, Machine: b, State: "ready"}}
	if diff := cmp.Diff(wantElev, d.Elevation); diff != "" || d.Height != 42 || d.Building != "DC1" || d.Room != "Hall A" || d.UsedUnits != 3 || d.Machines != 2 {
		t.Errorf("rack R12 = %+v (-want +got elevation):\n%s", d.Rack, diff)
	}

	// Resizing: never below a machine it holds.
	refused(t, n, "PUT", "/api/v1/racks/R12", wire.RackRequest{Height: 11}, 409, "conflict", b+" at U12 in rack R12 goes past its 11U")
	r = admin(t, n, "PUT", "/api/v1/racks/R12", wire.RackRequest{Building: "DC1", Room: "Hall B", Height: 12})
	if r.Status != 200 {
		t.Fatalf("resize: %s", r)
	}
	if got := placed(t, n, a); got.Room != "Hall B" {
		t.Errorf("the rack moved to Hall B, its machine did not: %+v", got)
	}
	refused(t, n, "DELETE", "/api/v1/racks/R12", nil, 409, "conflict", "rack R12 holds "+min(a, b))
	if r := admin(t, n, "PUT", "/api/v1/racks/R99", wire.RackRequest{Building: "DC9"}); r.Status != 201 {
		t.Fatalf("new rack: %s", r)
	}
	var rl wire.RackList
	admin(t, n, "GET", "/api/v1/racks", nil).Decode(t, &rl)
	if len(rl.Racks) != 2 || rl.Racks[0].Name != "R12" || rl.Racks[0].Height != 12 || rl.Racks[0].UsedUnits != 3 || rl.Racks[0].Machines != 2 ||
		rl.Racks[1].Name != "R99" || rl.Racks[1].Height != 42 || rl.Racks[1].Building != "DC9" || rl.Index == 0 {
		t.Errorf("GET /racks = %+v", rl)
	}
	if r := admin(t, n, "DELETE", "/api/v1/racks/R99", nil); r.Status != 200 {
		t.Fatalf("delete R99: %s", r)
	}
	refused(t, n, "GET", "/api/v1/racks/R99", nil, 404, "not_found", `rack "R99"`)

	// An empty location clears it; the rack keeps the other machine.
	if r := admin(t, n, "PUT", "/api/v1/machines/"+a+"/location", wire.LocationRequest{}); r.Status != 200 {
		t.Fatalf("clear: %s", r)
	}
	if got := placed(t, n, a); got != (wire.Location{}) {
		t.Errorf("cleared location: %+v", got)
	}
	if got := listIDs(t, n, "?rack=R12"); !slices.Equal(got, []string{b}) {
		t.Errorf("?rack=R12 = %v", got)
	}

	for name, tc := range map[string]struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		"unit without rack":  {"PUT", "/api/v1/machines/" + a + "/location", wire.LocationRequest{Unit: 3}, 400, "unit 3 needs a rack"},
		"unit out of range":  {"PUT", "/api/v1/machines/" + a + "/location", wire.LocationRequest{Rack: "R1", Unit: 500}, 400, "unit 500 is not between"},
		"control character":  {"PUT", "/api/v1/machines/" + a + "/location", wire.LocationRequest{Building: "DC\x01"}, 400, "control character"},
		"bad rack name":      {"PUT", "/api/v1/machines/" + a + "/location", wire.LocationRequest{Rack: "R 1"}, 400, "rack name"},
		"no such machine":    {"PUT", "/api/v1/machines/m-0123456789ab/location", wire.LocationRequest{}, 404, "m-0123456789ab"},
		"unknown field":      {"PUT", "/api/v1/machines/" + a + "/location", map[string]any{"asset_tag": "x"}, 400, `unknown field "asset_tag"`},
		"rack height":        {"PUT", "/api/v1/racks/R1", wire.RackRequest{Height: 101}, 400, "height 101 is not between 1 and 100"},
		"rack bad name":      {"PUT", "/api/v1/racks/-r", wire.RackRequest{}, 400, "rack name"},
		"delete no rack":     {"DELETE", "/api/v1/racks/R77", nil, 404, `rack "R77"`},
		"bulk nothing named": {"POST", "/api/v1/locations", map[string]any{"room": "x"}, 400, "name the machines"},
		"bulk no field":      {"POST", "/api/v1/locations", map[string]any{"machines": []string{a}}, 400, "give a field to set"},
		"bulk unknown tag":   {"POST", "/api/v1/locations", map[string]any{"tag": "nosuch", "room": "x"}, 400, "no tag nosuch; create it with rollcall tags add nosuch"},
		"bulk bad machine":   {"POST", "/api/v1/locations", map[string]any{"machines": []string{"nosuch"}, "room": "x"}, 404, "nosuch"},
		"bulk one unit":      {"POST", "/api/v1/locations", map[string]any{"machines": []string{ids[2], ids[3]}, "rack": "R5", "unit": 4}, 409, "share a unit"},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, n, tc.method, tc.path, tc.body, tc.status, "", tc.want)
		})
	}
}

// Many machines placed in one command, by ID and by tag; fields left out
// are kept.
func TestBulkLocation(t *testing.T) {
	n, ids, _ := fleetNode(t, 4)
	saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "batch"}), http.StatusCreated)
	refused(t, n, "POST", "/api/v1/locations", map[string]any{"tag": "batch", "room": "x"}, 400, "bad_request", "no machine carries tag batch")
	for _, id := range ids[1:3] {
		if r := admin(t, n, "POST", "/api/v1/machines/"+id+"/tags", wire.MachineTagsRequest{Add: []string{"batch"}}); r.Status != 200 {
			t.Fatal(r)
		}
	}
	if r := admin(t, n, "PUT", "/api/v1/machines/"+ids[1]+"/location", wire.LocationRequest{Asset: "A-1"}); r.Status != 200 {
		t.Fatal(r)
	}
	before := n.Cluster().FSM().AppliedIndex()
	r := admin(t, n, "POST", "/api/v1/locations", map[string]any{"machines": []string{ids[0]}, "tag": "batch", "building": "DC2", "rack": "R20"})
	if r.Status != 200 {
		t.Fatalf("bulk: %s", r)
	}
	if after := n.Cluster().FSM().AppliedIndex(); after != before+1 {
		t.Errorf("bulk placement took %d Raft entries, want one command", after-before)
	}
	var lr wire.LocationsReply
	r.Decode(t, &lr)
	want := slices.Clone(ids[:3])
	slices.Sort(want)
	var got []string
	for _, m := range lr.Machines {
		got = append(got, m.ID)
		if m.Location.Building != "DC2" || m.Location.Rack != "R20" {
			t.Errorf("%s stands at %+v", m.ID, m.Location)
		}
	}
	if !slices.Equal(got, want) || lr.Index == 0 {
		t.Errorf("bulk answer %+v, want %v", lr, want)
	}
	if l := placed(t, n, ids[1]); l.Asset != "A-1" {
		t.Errorf("a field left out was not kept: %+v", l)
	}
	if l := placed(t, n, ids[3]); l != (wire.Location{}) {
		t.Errorf("a machine not named was placed: %+v", l)
	}
	// A null field keeps, an empty one clears.
	if r := admin(t, n, "POST", "/api/v1/locations", map[string]any{"machines": []string{ids[1]}, "asset": ""}); r.Status != 200 {
		t.Fatal(r)
	}
	if l := placed(t, n, ids[1]); l.Asset != "" || l.Rack != "R20" {
		t.Errorf("after clearing the asset: %+v", l)
	}
}

// The CSV import: a good file (rows matched by id, serial, mac and
// node_name), -dry, every kind of bad row, bounds.
func TestLocationImport(t *testing.T) {
	n, ids, reps := fleetNode(t, 4)
	r := admin(t, n, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "spare-7", MAC: "52:54:00:77:00:01"})
	if r.Status != 201 {
		t.Fatal(r)
	}
	var spare wire.MachineView
	r.Decode(t, &spare)
	csvHeader := map[string]string{"Content-Type": "text/csv"}
	post := func(query, body string) nodetest.Response {
		return n.Do(t, "POST", "/api/v1/locations/import"+query, body, append(nodetest.Bearer(n.Admin), "Content-Type", csvHeader["Content-Type"])...)
	}
	good := "id,serial,mac,node_name,building,room,rack,unit,height,asset_tag\n" +
		ids[0] + ",,,,DC1,Hall A,R12,1,2,A-1\n" +
		"," + reps[1].System.Serial + ",,,DC1,Hall A,R12,3,,A-2\n" +
		",," + strings.ToUpper(reps[2].BootMAC) + ",,DC1,Hall A,R12,4,,\n" +
		",,,SPARE-7,DC1,Hall A,R13,U7,,\n"

	before := stateOf(n)
	r = post("?dry=1", good)
	if r.Status != 200 {
		t.Fatalf("dry run: %s", r)
	}
	var dry wire.ImportReply
	r.Decode(t, &dry)
	if dry.Applied || dry.Index != 0 || len(dry.Changes) != 4 || len(dry.Errors) != 0 || !slices.Equal(dry.NewRacks, []string{"R12", "R13"}) {
		t.Errorf("dry run = %+v", dry)
	}
	if after := stateOf(n); after != before {
		t.Errorf("a dry run changed the node: %+v → %+v", before, after)
	}
	matched := map[string]string{}
	for _, c := range dry.Changes {
		matched[c.Machine] = c.MatchedBy
	}
	if want := map[string]string{ids[0]: "id", ids[1]: "serial", ids[2]: "mac", spare.ID: "node_name"}; !cmp.Equal(want, matched) {
		t.Errorf("matched by %v, want %v", matched, want)
	}
	if c := dry.Changes[0]; c.Line != 2 || c.From != (wire.Location{}) || c.To != (wire.Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 1, Height: 2, Asset: "A-1"}) {
		t.Errorf("first change %+v", c)
	}
	if l := placed(t, n, ids[0]); l != (wire.Location{}) {
		t.Errorf("the dry run placed %s: %+v", ids[0], l)
	}

	r = post("", good)
	var done wire.ImportReply
	r.Decode(t, &done)
	if r.Status != 200 || !done.Applied || done.Index == 0 || done.Steps != 1 || len(done.Changes) != 4 {
		t.Fatalf("import: %s", r)
	}
	if l := placed(t, n, spare.ID); l != (wire.Location{Building: "DC1", Room: "Hall A", Rack: "R13", Unit: 7}) {
		t.Errorf("spare-7 at %+v", l)
	}
	// The same file again changes nothing.
	r = post("", good)
	var again wire.ImportReply
	r.Decode(t, &again)
	if r.Status != 200 || again.Applied || len(again.Changes) != 0 || again.Unchanged != 4 {
		t.Errorf("import again: %s", r)
	}

	// Every kind of bad row, each reported with its line; nothing applied.
	bad := "id,serial,mac,node_name,building,room,rack,unit,height\n" +
		"m-nothex,,,,DC1,,,,\n" + // 2: not an id
		"m-0123456789ab,,,,DC1,,,,\n" + // 3: no such machine
		",NO-SUCH-SERIAL,,,DC1,,,,\n" + // 4: serial names none
		",,zz:zz,,DC1,,,,\n" + // 5: a mac that is not one
		",,,nobody,DC1,,,,\n" + // 6: no such name
		ids[0] + "," + reps[1].System.Serial + ",,,DC1,,,,\n" + // 7: keys disagree
		",,,,DC1,,,,\n" + // 8: no key
		ids[3] + ",,,,DC1,,R30,abc,\n" + // 9: unit not a number
		ids[3] + ",,,,DC1,,,5,\n" + // 10: the machine again (and a unit without a rack)
		ids[1] + ",,,,DC2,,R12,3,\n" + // 11: the rack stands in DC1
		ids[2] + ",,,,DC1,,R40,1,2\n" + // 12
		spare.ID + ",,,,DC1,,R40,2,\n" + // 13: shares U2 with line 12
		",,,,DC1\n" // 14: too few fields
	before = stateOf(n)
	r = post("", bad)
	var er wire.ErrorReply
	r.Decode(t, &er)
	if r.Status != 400 || er.Error.Code != "bad_rows" || !strings.Contains(er.Error.Message, "nothing imported") {
		t.Fatalf("bad file: %s", r)
	}
	lines := map[int]string{}
	for _, e := range er.Errors {
		lines[e.Line] += e.Error + "; "
	}
	for line, want := range map[int]string{
		2: "is not a machine ID", 3: "names no machine", 4: `serial "NO-SUCH-SERIAL" names no machine`, 5: "zz:zz",
		6: `node_name "nobody" names no machine`, 7: "says " + ids[0] + ", serial says " + ids[1], 8: "no id, serial, mac or node_name",
		9: `unit "abc" is not a whole number`, 11: `rack R12 stands in building "DC1", not "DC2"`, 14: "fields, the header has 9",
	} {
		if !strings.Contains(lines[line], want) {
			t.Errorf("line %d: %q, want %q", line, lines[line], want)
		}
	}
	if after := stateOf(n); after != before {
		t.Errorf("a refused import changed the node: %+v → %+v", before, after)
	}
	// Rack conflicts are checked once every row is read.
	r = post("", "id,rack,unit,height\n"+ids[3]+",R40,1,2\n"+spare.ID+",R40,2,\n")
	er = wire.ErrorReply{}
	r.Decode(t, &er)
	if r.Status != 400 || len(er.Errors) != 1 || er.Errors[0].Line != 3 || !strings.Contains(er.Errors[0].Error, "share a unit") {
		t.Errorf("two machines in one unit: %s", r)
	}
	r = post("", "id,rack,unit,height\n"+ids[3]+",R12,42,2\n")
	if r.Status != 400 || !strings.Contains(r.ErrorMessage(), "goes past its 42U") {
		t.Errorf("unit past the top: %s", r)
	}

	for name, tc := range map[string]struct {
		query, ctype, body string
		status             int
		want               string
	}{
		"empty":           {"", "text/csv", "", 400, "the file is empty: it needs a header"},
		"unknown column":  {"", "text/csv", "id,colour\n", 400, `column "colour" is not one of`},
		"no key column":   {"", "text/csv", "building\nDC1\n", 400, "names no id, serial, mac or node_name column"},
		"no place column": {"", "text/csv", "id\n" + ids[0] + "\n", 400, "nothing to import"},
		"bare quote":      {"", "text/csv", "id,building\n" + ids[0] + ",D\"C1\n", 400, "line 2"},
		"bad dry":         {"?dry=maybe", "text/csv", "id,building\n", 400, "dry must be 1 or 0"},
		"json":            {"", "application/json", `{"id":1}`, 415, "send the location file as text/csv"},
		"too large":       {"", "text/csv", "id,building\n" + strings.Repeat(ids[0]+",DC1\n", 4<<20/19+1), 413, "larger than the 4 MiB"},
		"too many rows":   {"", "text/csv", manyRows(ids[0], 20_001), 400, "20001 rows, more than the 20000"},
	} {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, "POST", "/api/v1/locations/import"+tc.query, tc.body, append(nodetest.Bearer(n.Admin), "Content-Type", tc.ctype)...)
			if r.Status != tc.status || !strings.Contains(r.ErrorMessage(), tc.want) {
				t.Errorf("%s, want %d %q", r, tc.status, tc.want)
			}
			if after := stateOf(n); after != before {
				t.Errorf("refused, but the node changed")
			}
		})
	}
}

// manyRows is a file of k rows for one machine: refused for its count
// before its duplicates.
func manyRows(id string, k int) string {
	var b strings.Builder
	b.WriteString("id,building\n")
	for range k {
		fmt.Fprintf(&b, "%s,DC1\n", id)
	}
	return b.String()
}

// An import too large for one Raft entry goes in steps, and says so.
func TestLocationImportInSteps(t *testing.T) {
	defer httpapi.SetMaxLocationEntry(600)()
	n, ids, _ := fleetNode(t, 6)
	var b strings.Builder
	b.WriteString("id,building,room,rack,unit\n")
	for i, id := range ids {
		fmt.Fprintf(&b, "%s,DC1,Hall A,R%d,%d\n", id, 10+i%2, i+1)
	}
	before := n.Cluster().FSM().AppliedIndex()
	r := n.Do(t, "POST", "/api/v1/locations/import", b.String(), append(nodetest.Bearer(n.Admin), "Content-Type", "text/csv")...)
	var ans wire.ImportReply
	r.Decode(t, &ans)
	if r.Status != 200 || !ans.Applied || ans.Steps < 2 || len(ans.Changes) != len(ids) {
		t.Fatalf("import in steps: %s", r)
	}
	if got := n.Cluster().FSM().AppliedIndex() - before; got != uint64(ans.Steps) {
		t.Errorf("%d entries for %d steps", got, ans.Steps)
	}
	for i, id := range ids {
		if l := placed(t, n, id); l.Rack != fmt.Sprintf("R%d", 10+i%2) || l.Unit != i+1 {
			t.Errorf("%s at %+v", id, l)
		}
	}
}
