package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/fleet"
	"github.com/rollcall/rollcall/store/inventory"
)

// fleetNode is a node with the first count machines of the fleet
// simulator commissioned (server, GPU and storage shapes), their IDs in
// fleet order and their reports.
func fleetNode(t *testing.T, count int) (*nodetest.Node, []string, []inventory.Report) {
	t.Helper()
	n := nodetest.Start(t)
	var ids []string
	var reps []inventory.Report
	for i := range count {
		rep := fleet.Generate(1, i)
		ids = append(ids, commission(t, n, n.Agent, rep).ID)
		reps = append(reps, rep)
	}
	return n, ids, reps
}

// where are the IDs of the machines whose report pred holds, sorted.
func where(ids []string, reps []inventory.Report, pred func(inventory.Report) bool) []string {
	out := []string{}
	for i, r := range reps {
		if pred(r) {
			out = append(out, ids[i])
		}
	}
	slices.Sort(out)
	return out
}

func listIDs(t *testing.T, n *nodetest.Node, query string) []string {
	t.Helper()
	out := []string{}
	for _, m := range listMachines(t, n, n.Admin, query).Machines {
		out = append(out, m.ID)
	}
	slices.Sort(out)
	return out
}

// admin sends a request as the admin.
func admin(t *testing.T, n *nodetest.Node, method, path string, body any) nodetest.Response {
	t.Helper()
	return n.Do(t, method, path, body, nodetest.Bearer(n.Admin)...)
}

// refused checks that a request is refused with status (and code, and a
// message holding want), and that it changed nothing: no Raft entry, no
// machine written.
func refused(t *testing.T, n *nodetest.Node, method, path string, body any, status int, code, want string) nodetest.Response {
	t.Helper()
	before := stateOf(n)
	r := n.Do(t, method, path, body, nodetest.Bearer(n.Admin)...)
	if r.Status != status || (code != "" && r.ErrorCode() != code) || !strings.Contains(r.ErrorMessage(), want) {
		t.Errorf("%s %s: %s, want %d %s %q", method, path, r, status, code, want)
	}
	if after := stateOf(n); after != before {
		t.Errorf("%s %s: refused, but the node changed: %+v → %+v", method, path, before, after)
	}
	return r
}

func saved(t *testing.T, r nodetest.Response, status int) wire.TagSaved {
	t.Helper()
	if r.Status != status {
		t.Fatalf("save: %s, want %d", r, status)
	}
	var s wire.TagSaved
	r.Decode(t, &s)
	return s
}

func hasGPU(r inventory.Report) bool { return len(r.GPUs) > 0 }

// Tags over the fleet simulator's machines through the API: a rule saved
// tags exactly the machines it matches, a second save re-evaluates every
// machine, manual tags survive every rule, a failing rule leaves its
// machines as they were and says which, and the list filters by tag.
func TestTagsAPI(t *testing.T) {
	n, ids, reps := fleetNode(t, 10)
	gpus := where(ids, reps, hasGPU)
	if len(gpus) == 0 || len(gpus) == len(ids) {
		t.Fatalf("the fleet's first %d machines should mix shapes; GPU machines: %v", len(ids), gpus)
	}

	s := saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "gpu", Match: `{{ gt .Node.GPUs 0 }}`, Comment: "NVIDIA nodes"}), http.StatusCreated)
	if s.Tag.Name != "gpu" || s.Matched != len(gpus) || s.Tag.Machines != len(gpus) || len(s.Failures) != 0 || s.Index == 0 || s.Tag.Comment != "NVIDIA nodes" {
		t.Errorf("saved gpu = %+v, want %d matches", s, len(gpus))
	}
	if d := cmp.Diff(gpus, listIDs(t, n, "?tag=gpu")); d != "" {
		t.Errorf("?tag=gpu (-want +got):\n%s", d)
	}
	d, _ := getMachine(t, n, n.Admin, gpus[0])
	if !slices.Equal(d.AutoTags, []string{"gpu"}) || len(d.Tags) != 0 {
		t.Errorf("machine %s: tags %v, auto %v", gpus[0], d.Tags, d.AutoTags)
	}

	// Manual tags: a tag must exist first (as in MAAS), and then a rule
	// never touches it.
	notGPU := where(ids, reps, func(r inventory.Report) bool { return !hasGPU(r) })[0]
	r := refused(t, n, "POST", "/api/v1/machines/"+notGPU+"/tags", wire.MachineTagsRequest{Add: []string{"burn-in"}}, 400, "bad_request",
		"no tag burn-in; create it with rollcall tags add burn-in")
	if !strings.Contains(string(r.Body), `"field":"add"`) {
		t.Errorf("unknown tag: the error names no field: %s", r)
	}
	saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "burn-in", Comment: "manual only"}), http.StatusCreated)
	for _, tag := range []string{"burn-in", "gpu"} {
		if r := admin(t, n, "POST", "/api/v1/machines/"+notGPU+"/tags", wire.MachineTagsRequest{Add: []string{tag}}); r.Status != 200 {
			t.Fatalf("tag %s: %s", tag, r)
		}
	}
	var mv wire.MachineView
	admin(t, n, "GET", "/api/v1/machines/"+notGPU, nil).Decode(t, &mv)
	if !slices.Equal(mv.Tags, []string{"burn-in", "gpu"}) || len(mv.AutoTags) != 0 {
		t.Errorf("manual tags: %v, auto %v", mv.Tags, mv.AutoTags)
	}
	withManual := append(slices.Clone(gpus), notGPU)
	slices.Sort(withManual)
	if d := cmp.Diff(withManual, listIDs(t, n, "?tag=gpu")); d != "" {
		t.Errorf("?tag=gpu matches manual and auto tags (-want +got):\n%s", d)
	}

	// Replaced: every machine evaluated again; the manual gpu tag stays.
	eight := where(ids, reps, func(r inventory.Report) bool { return len(r.GPUs) >= 8 })
	s = saved(t, admin(t, n, "PUT", "/api/v1/tags/gpu", wire.TagRequest{Match: `{{ ge .Node.GPUs 8 }}`}), http.StatusOK)
	if s.Matched != len(eight) || s.Tag.Comment != "" {
		t.Errorf("replaced gpu = %+v, want %d matches and the comment cleared", s, len(eight))
	}
	want := append(slices.Clone(eight), notGPU)
	slices.Sort(want)
	if d := cmp.Diff(want, listIDs(t, n, "?tag=gpu")); d != "" {
		t.Errorf("after the new rule (-want +got):\n%s", d)
	}
	var detail wire.TagDetail
	admin(t, n, "GET", "/api/v1/tags/gpu", nil).Decode(t, &detail)
	if d := cmp.Diff(want, detail.MachineIDs); d != "" || !slices.Equal(detail.Manual, []string{notGPU}) || detail.Machines != len(want) {
		t.Errorf("GET /tags/gpu = %+v (-want +got ids):\n%s", detail, d)
	}

	// A rule that errors on some machines: those keep what they had and
	// are named, with the reason.
	s = saved(t, admin(t, n, "PUT", "/api/v1/tags/gpu", wire.TagRequest{Match: `{{ eq (index .Node.GPUModels 0) "NVIDIA H100 80GB HBM3" }}`}), http.StatusOK)
	noGPU := where(ids, reps, func(r inventory.Report) bool { return !hasGPU(r) })
	var failedIDs []string
	for _, f := range s.Failures {
		failedIDs = append(failedIDs, f.Machine)
		if !strings.Contains(f.Error, "tag gpu: rule line 1, column 8: <index .Node.GPUModels 0>: error calling index") {
			t.Errorf("failure %+v", f)
		}
	}
	if d := cmp.Diff(noGPU, failedIDs); d != "" {
		t.Errorf("failures (-want +got):\n%s", d)
	}
	admin(t, n, "GET", "/api/v1/machines/"+notGPU, nil).Decode(t, &mv)
	if !slices.Equal(mv.Tags, []string{"burn-in", "gpu"}) {
		t.Errorf("a failed rule touched manual tags: %v", mv.Tags)
	}

	// The list of tags counts each one's machines.
	var tl wire.TagList
	admin(t, n, "GET", "/api/v1/tags", nil).Decode(t, &tl)
	if len(tl.Tags) != 2 || tl.Tags[0].Name != "burn-in" || tl.Tags[0].Machines != 1 || tl.Tags[1].Name != "gpu" || tl.Index == 0 {
		t.Errorf("GET /tags = %+v", tl)
	}

	// Manual tags taken away; the tag itself removed from every machine.
	if r := admin(t, n, "POST", "/api/v1/machines/"+notGPU+"/tags", wire.MachineTagsRequest{Remove: []string{"burn-in"}}); r.Status != 200 {
		t.Fatalf("untag: %s", r)
	}
	if got := listIDs(t, n, "?tag=burn-in"); len(got) != 0 {
		t.Errorf("?tag=burn-in after removal: %v", got)
	}
	if r := admin(t, n, "DELETE", "/api/v1/tags/gpu", nil); r.Status != 200 {
		t.Fatalf("delete: %s", r)
	}
	if got := listIDs(t, n, "?tag=gpu"); len(got) != 0 {
		t.Errorf("?tag=gpu after delete: %v", got)
	}
	mv = wire.MachineView{}
	admin(t, n, "GET", "/api/v1/machines/"+notGPU, nil).Decode(t, &mv)
	if len(mv.Tags) != 0 {
		t.Errorf("deleted tag still on %s: %v", notGPU, mv.Tags)
	}
	refused(t, n, "GET", "/api/v1/tags/gpu", nil, 404, "not_found", `tag "gpu"`)
}

// A rule reads where a machine stands and its manual tags: placing a
// machine, or tagging it, re-evaluates its auto tags at once.
func TestAutoTagsFollowLocationAndTags(t *testing.T) {
	n, ids, _ := fleetNode(t, 3)
	saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "r12", Match: `{{ eq .Node.Rack "R12" }}`}), http.StatusCreated)
	saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "staging"}), http.StatusCreated)
	saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "burn", Match: `{{ has .Node.Tags "staging" }}`}), http.StatusCreated)
	if got := listIDs(t, n, "?tag=r12"); len(got) != 0 {
		t.Fatalf("no machine is in R12 yet: %v", got)
	}
	if r := admin(t, n, "PUT", "/api/v1/machines/"+ids[1]+"/location", wire.LocationRequest{Building: "DC1", Rack: "R12", Unit: 3}); r.Status != 200 {
		t.Fatalf("place: %s", r)
	}
	if got := listIDs(t, n, "?tag=r12"); !slices.Equal(got, []string{ids[1]}) {
		t.Errorf("?tag=r12 after placing %s: %v", ids[1], got)
	}
	if got := listIDs(t, n, "?rack=R12"); !slices.Equal(got, []string{ids[1]}) {
		t.Errorf("?rack=R12: %v", got)
	}
	r := admin(t, n, "POST", "/api/v1/locations", map[string]any{"machines": []string{ids[1]}, "rack": "R7"})
	if r.Status != 200 {
		t.Fatalf("move: %s", r)
	}
	if got := listIDs(t, n, "?tag=r12"); len(got) != 0 {
		t.Errorf("?tag=r12 after moving out: %v", got)
	}
	if r := admin(t, n, "POST", "/api/v1/machines/"+ids[2]+"/tags", wire.MachineTagsRequest{Add: []string{"staging"}}); r.Status != 200 {
		t.Fatalf("tag: %s", r)
	}
	var mv wire.MachineView
	admin(t, n, "GET", "/api/v1/machines/"+ids[2], nil).Decode(t, &mv)
	if !slices.Equal(mv.Tags, []string{"staging"}) || !slices.Equal(mv.AutoTags, []string{"burn"}) {
		t.Errorf("after +staging: tags %v, auto %v (want burn from its rule)", mv.Tags, mv.AutoTags)
	}
}

// Bad tag input: refused with the reason, nothing written, no Raft entry.
func TestTagsBadInput(t *testing.T) {
	n, ids, _ := fleetNode(t, 1)
	saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "gpu", Match: `{{ gt .Node.GPUs 0 }}`}), http.StatusCreated)
	for name, tc := range map[string]struct {
		method, path string
		body         any
		status       int
		code, want   string
	}{
		"exists":           {"POST", "/api/v1/tags", wire.TagRequest{Name: "gpu"}, 409, "conflict", "tag gpu exists: change it with rollcall tags set gpu"},
		"rule syntax":      {"POST", "/api/v1/tags", wire.TagRequest{Name: "big", Match: `{{ gt .Node.GPUs 0 `}, 400, "bad_request", "tag big: the rule does not parse: rule line 1"},
		"rule function":    {"POST", "/api/v1/tags", wire.TagRequest{Name: "big", Match: `{{ printf "%d" 1 }}`}, 400, "bad_request", "printf"},
		"empty rule text":  {"POST", "/api/v1/tags", wire.TagRequest{Name: "big", Match: ` `}, 400, "bad_request", "the rule is empty"},
		"bad name":         {"POST", "/api/v1/tags", wire.TagRequest{Name: "Big Tag"}, 400, "bad_request", "must be a DNS label"},
		"no name":          {"POST", "/api/v1/tags", wire.TagRequest{}, 400, "bad_request", "a tag needs a name"},
		"machine id name":  {"POST", "/api/v1/tags", wire.TagRequest{Name: "m-0123456789ab"}, 400, "bad_request", "not of the form of a machine ID"},
		"cloud-config":     {"POST", "/api/v1/tags", wire.TagRequest{Name: "cc", CloudConfig: "packages: [git]"}, 400, "invalid", "starts with #cloud-config"},
		"missing layout":   {"POST", "/api/v1/tags", wire.TagRequest{Name: "ll", Layout: "bond"}, 400, "invalid", "names layout bond, which does not exist"},
		"unknown field":    {"POST", "/api/v1/tags", map[string]any{"name": "x", "rules": "y"}, 400, "bad_request", `unknown field "rules"`},
		"not json":         {"POST", "/api/v1/tags", "{name:", 400, "bad_request", "not valid JSON"},
		"replace missing":  {"PUT", "/api/v1/tags/nosuch", wire.TagRequest{}, 404, "not_found", `tag "nosuch"`},
		"rename":           {"PUT", "/api/v1/tags/gpu", wire.TagRequest{Name: "gpus"}, 400, "bad_request", "a tag is not renamed"},
		"bad rule on put":  {"PUT", "/api/v1/tags/gpu", wire.TagRequest{Match: `{{ .Node.Nope }}`}, 400, "bad_request", "Nope"},
		"delete missing":   {"DELETE", "/api/v1/tags/nosuch", nil, 404, "not_found", `tag "nosuch"`},
		"untag unknown":    {"POST", "/api/v1/machines/" + ids[0] + "/tags", wire.MachineTagsRequest{Remove: []string{"nosuch"}}, 400, "bad_request", "no tag nosuch; create it with rollcall tags add nosuch"},
		"tag nothing":      {"POST", "/api/v1/machines/" + ids[0] + "/tags", wire.MachineTagsRequest{}, 400, "bad_request", "name a tag to add or to remove"},
		"tag bad name":     {"POST", "/api/v1/machines/" + ids[0] + "/tags", wire.MachineTagsRequest{Add: []string{"A B"}}, 400, "bad_request", "must be a DNS label"},
		"tag no machine":   {"POST", "/api/v1/machines/m-0123456789ab/tags", wire.MachineTagsRequest{Add: []string{"gpu"}}, 404, "not_found", "m-0123456789ab"},
		"list bad tag":     {"GET", "/api/v1/machines?tag=Not%20A%20Tag", nil, 400, "bad_request", "must be a DNS label"},
		"list bad rack":    {"GET", "/api/v1/machines?rack=-x", nil, 400, "bad_request", "rack name"},
		"too many to tag":  {"POST", "/api/v1/machines/" + ids[0] + "/tags", wire.MachineTagsRequest{Add: manyTags(65)}, 400, "bad_request", "more than the 64"},
		"both add, remove": {"POST", "/api/v1/machines/" + ids[0] + "/tags", wire.MachineTagsRequest{Add: []string{"gpu"}, Remove: []string{"gpu"}}, 400, "invalid", "both added and removed"},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, n, tc.method, tc.path, tc.body, tc.status, tc.code, tc.want)
		})
	}
}

func manyTags(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = "t" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	return out
}

// A machine commissioned while a rule exists leaves commissioning with the
// auto tags the rule gives it, in the same log entry; recommissioned with
// other hardware, it is evaluated again.
func TestCommissionGivesAutoTags(t *testing.T) {
	n := nodetest.Start(t)
	saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "gpu", Match: `{{ gt .Node.GPUs 0 }}`}), http.StatusCreated)
	saved(t, admin(t, n, "POST", "/api/v1/tags", wire.TagRequest{Name: "h100", Match: `{{ eq (index .Node.GPUModels 0) "NVIDIA H100 80GB HBM3" }}`}), http.StatusCreated)
	gpu := fleet.Generate(1, 2) // an XE9680: 8 H100
	plain := fleet.Generate(1, 0)
	before := n.Cluster().FSM().AppliedIndex()
	g := commission(t, n, n.Agent, gpu)
	if got := n.Cluster().FSM().AppliedIndex() - before; got != 1 {
		t.Errorf("commissioning took %d entries, want one (the commission and its auto tags batched)", got)
	}
	p := commission(t, n, n.Agent, plain)
	var mv wire.MachineView
	admin(t, n, "GET", "/api/v1/machines/"+g.ID, nil).Decode(t, &mv)
	if !slices.Equal(mv.AutoTags, []string{"gpu", "h100"}) {
		t.Errorf("GPU machine's auto tags: %v", mv.AutoTags)
	}
	mv = wire.MachineView{}
	admin(t, n, "GET", "/api/v1/machines/"+p.ID, nil).Decode(t, &mv)
	if len(mv.AutoTags) != 0 {
		t.Errorf("plain machine's auto tags: %v (h100 fails on it and keeps none)", mv.AutoTags)
	}
	// The GPU machine comes back without its GPUs.
	gone := gpu
	gone.GPUs = nil
	gone.PCI = nil
	if r := admin(t, n, "POST", "/api/v1/machines/"+g.ID+"/recommission", nil); r.Status != 200 {
		t.Fatal(r)
	}
	if r := commission(t, n, n.Agent, gone); r.ID != g.ID {
		t.Fatalf("recommissioned as %s, want %s", r.ID, g.ID)
	}
	mv = wire.MachineView{}
	admin(t, n, "GET", "/api/v1/machines/"+g.ID, nil).Decode(t, &mv)
	if !slices.Equal(mv.AutoTags, []string{"h100"}) {
		t.Errorf("after losing its GPUs: auto tags %v, want only h100 (whose rule now fails, so it stays)", mv.AutoTags)
	}
}
