package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The location verbs: one machine, every machine of a tag, a CSV import
// (dry, good, bad), racks and an elevation; every output as a golden.
func TestLocationCLI(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	ids := fleetMachines(t, n, 4)
	tr := &transcript{t: t, ids: ids}
	tr.ok("location", ids[0], "-building", "DC1", "-room", "Hall A", "-rack", "R12", "-unit", "24", "-height", "2", "-asset", "A-0042")
	tr.fails("location", ids[1], "-rack", "R12", "-unit", "25")
	tr.ok("location", ids[0])
	tr.ok("tags", "add", "batch")
	tr.ok("tag", ids[1], "+batch")
	tr.ok("tag", ids[3], "+batch")
	tr.ok("location", "tag:batch", "-rack", "R7", "-building", "DC1", "-room", "Hall B")
	tr.ok("location", ids[1], "-unit", "3")

	dir := t.TempDir()
	tr.dirs = append(tr.dirs, dir)
	good := filepath.Join(dir, "racks.csv")
	os.WriteFile(good, []byte("id,rack,unit,height,asset_tag\n"+ids[2]+",R12,1,4,G-1\n"+ids[3]+",R7,5,,\n"), 0o644)
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("id,rack,unit\n"+ids[2]+",R12,25\nm-0123456789ab,R12,1\n"+ids[3]+",R7,x\n"), 0o644)
	tr.ok("location", "import", good, "-dry")
	tr.ok("location", "import", good)
	tr.fails("location", "import", bad)
	tr.ok("location", "racks")
	tr.ok("location", "rack", "R7", "-height", "8")
	tr.fails("location", "rack", "R12", "-height", "20")
	tr.ok("location", "rack", "R12")
	tr.ok("list", "-rack", "R7")
	golden(t, "location", tr.out.String())

	var d wire.RackDetail
	if err := json.Unmarshal([]byte(mustRun(t, "location", "rack", "R12", "-json")), &d); err != nil || d.Name != "R12" || len(d.Elevation) != 2 {
		t.Errorf("rack -json: %+v %v", d, err)
	}
	var ir wire.ImportReply
	if err := json.Unmarshal([]byte(mustRun(t, "location", "import", good, "-json")), &ir); err != nil || ir.Applied || ir.Unchanged != 2 {
		t.Errorf("import -json of a file already applied: %+v %v", ir, err)
	}
	var lr wire.LocationsReply
	if err := json.Unmarshal([]byte(mustRun(t, "location", "tag:batch", "-asset", "", "-json")), &lr); err != nil || len(lr.Machines) != 2 {
		t.Errorf("location tag: -json: %+v %v", lr, err)
	}
}
