package cli

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/fleet"
)

// fleetMachines commissions the first count machines of the fleet
// simulator (machine 2 has 8 GPUs) and returns their IDs in fleet order.
func fleetMachines(t *testing.T, n *testNode, count int) []string {
	t.Helper()
	var ids []string
	for i := range count {
		rep := fleet.Generate(1, i)
		commissionAs(t, n, rep)
		var l wire.MachineList
		if err := json.Unmarshal([]byte(mustRun(t, "list", "-json", "-q", rep.BootMAC)), &l); err != nil || len(l.Machines) != 1 {
			t.Fatalf("machine %d: %v %+v", i, err, l)
		}
		ids = append(ids, l.Machines[0].ID)
	}
	return ids
}

// transcript runs commands and writes each with what it printed (stdout
// and stderr, and the exit status when it is not 0), normalised.
type transcript struct {
	t    *testing.T
	ids  []string
	dirs []string // temporary directories, shown as DIR
	out  strings.Builder
}

// Raft indexes depend on what else the node proposed meanwhile.
var indexes = regexp.MustCompile(`index \d+`)

// sortIndented sorts each run of lines that start with a machine ID
// (indented or not): lists by machine ID are in the order of the IDs,
// which are random.
func sortIndented(s string) string {
	lines := strings.Split(s, "\n")
	byMachine := func(l string) bool { return strings.HasPrefix(strings.TrimLeft(l, " "), "m-") }
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && byMachine(lines[j]) {
			j++
		}
		slices.Sort(lines[i:j])
		i = max(j, i+1)
	}
	return strings.Join(lines, "\n")
}

func (tr *transcript) run(stdin string, args ...string) (int, string) {
	tr.t.Helper()
	code, out, errs := runIn(stdin, args...)
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if strings.ContainsAny(a, " {}'\"") {
			shown[i] = "'" + a + "'"
		}
	}
	got := out + errs
	for _, d := range tr.dirs {
		got = strings.ReplaceAll(got, d, "DIR")
	}
	got = sortIndented(indexes.ReplaceAllString(normalize(got, tr.ids...), "index #"))
	if args[0] == "list" || (args[0] == "tags" && args[1] == "list") || (args[0] == "location" && args[1] == "racks") {
		got = sortRows(got)
	}
	cmd := "$ rollcall " + strings.Join(shown, " ")
	for _, d := range tr.dirs {
		cmd = strings.ReplaceAll(cmd, d, "DIR")
	}
	tr.out.WriteString(normalize(cmd, tr.ids...) + "\n" + got)
	if code != 0 {
		tr.out.WriteString("(exit " + string(rune('0'+code)) + ")\n")
	}
	return code, out
}

// ok runs a command that must succeed.
func (tr *transcript) ok(args ...string) string {
	tr.t.Helper()
	code, out := tr.run("", args...)
	if code != 0 {
		tr.t.Fatalf("rollcall %s: exit %d\n%s", strings.Join(args, " "), code, tr.out.String())
	}
	return out
}

// fails runs a command that must fail with exit 1.
func (tr *transcript) fails(args ...string) {
	tr.t.Helper()
	if code, _ := tr.run("", args...); code != 1 {
		tr.t.Errorf("rollcall %s: exit %d, want 1", strings.Join(args, " "), code)
	}
}

// The tag verbs against a node with fleet machines: tags add, set, show,
// list, rm; tag +a -b on one machine and on tag:NAME; list -tag; every
// output as a golden.
func TestTagsCLI(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	ids := fleetMachines(t, n, 4)
	tr := &transcript{t: t, ids: ids}
	tr.ok("tags", "add", "gpu", "-match", "{{ gt .Node.GPUs 0 }}", "-comment", "NVIDIA nodes")
	tr.ok("tags", "add", "rack-3", "-comment", "rack 3, row B")
	tr.fails("tags", "add", "gpu")
	tr.fails("tags", "add", "big", "-match", "{{ gt .Node.GPUs ")
	tr.ok("tag", ids[0], "+rack-3")
	tr.fails("tag", ids[0], "+burn-in")
	tr.fails("tag", ids[0])
	tr.ok("list", "-tag", "gpu")
	tr.ok("tags", "list")
	tr.ok("tags", "set", "gpu", "-comment", "8-GPU nodes", "-match", "{{ ge .Node.GPUs 8 }}")
	tr.ok("tags", "set", "gpu", "-match", `{{ eq (index .Node.GPUModels 0) "NVIDIA H100 80GB HBM3" }}`)
	tr.ok("tags", "show", "gpu")
	tr.ok("tag", "tag:gpu", "+rack-3")
	tr.ok("list", "-tag", "rack-3")
	tr.ok("tag", "tag:rack-3", "-rack-3")
	tr.fails("tag", "tag:rack-3", "+gpu")
	tr.fails("power", "tag:nosuch", "status")
	tr.ok("tags", "rm", "rack-3")
	tr.fails("tags", "show", "rack-3")
	golden(t, "tags", tr.out.String())

	var saved wire.TagSaved
	if err := json.Unmarshal([]byte(mustRun(t, "tags", "set", "gpu", "-comment", "x", "-json")), &saved); err != nil || saved.Tag.Comment != "x" || saved.Tag.Match == "" {
		t.Errorf("tags set -json: %+v %v (the rule must stay when only -comment is given)", saved, err)
	}
	var list []struct {
		Machine string          `json:"machine"`
		Result  json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "tag", "tag:gpu", "+gpu", "-json")), &list); err != nil || len(list) != 1 || list[0].Machine != ids[2] {
		t.Errorf("tag tag:gpu -json: %+v %v", list, err)
	}
	var tl wire.TagList
	if err := json.Unmarshal([]byte(mustRun(t, "tags", "list", "-json")), &tl); err != nil || len(tl.Tags) != 1 {
		t.Errorf("tags list -json: %+v %v", tl, err)
	}
}
