package httpapi_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/testenv"
)

// osDisk is a small raw disk (an MBR signature and some content) and the
// same disk as qcow2, made by qemu-img.
func osDisk(t *testing.T, seed byte) (raw, qcow2 []byte) {
	t.Helper()
	testenv.NeedTool(t, "qemu-img")
	raw = make([]byte, 2<<20)
	for i := 4096; i < len(raw)/2; i++ {
		raw[i] = byte(i*int(seed+1)) ^ seed
	}
	raw[510], raw[511] = 0x55, 0xaa
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "d.raw"), raw, 0o644)
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", filepath.Join(dir, "d.raw"), filepath.Join(dir, "d.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	qcow2, _ = os.ReadFile(filepath.Join(dir, "d.qcow2"))
	return raw, qcow2
}

func hexSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// readStream splits an NDJSON answer into its progress steps and its last
// line.
func readStream(t *testing.T, r nodetest.Response) (steps []string, progress []wire.OSProgress, last wire.OSStreamLine) {
	t.Helper()
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream answer: %s (%s)", r, r.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	for sc.Scan() {
		var l wire.OSStreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if l.Progress != nil {
			progress = append(progress, *l.Progress)
			if !slices.Contains(steps, l.Progress.Step) {
				steps = append(steps, l.Progress.Step)
			}
		}
		last = l
	}
	if last.Result == nil && last.Error == nil {
		t.Fatalf("the stream ends without a result or an error: %s", r.Body)
	}
	return steps, progress, last
}

// TestOSCatalogAPI on a 3-node cluster: an upload to a follower and a URL
// import to another become versions every node holds and serves at
// /os/blobs/{sha256}; promote and remove follow the catalog's rules; a
// sync against a local mirror; bad input refused with no Raft entry.
func TestOSCatalogAPI(t *testing.T) {
	raw1, q1 := osDisk(t, 1)
	raw2, _ := osDisk(t, 2)
	mirror := http.NewServeMux()
	mirror.HandleFunc("/img/disk.img", func(w http.ResponseWriter, r *http.Request) { w.Write(raw2) })
	mirror.HandleFunc("/vendor/cloud.qcow2", func(w http.ResponseWriter, r *http.Request) { w.Write(q1) })
	mirror.HandleFunc("/vendor/SHA256SUMS", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s *cloud.qcow2\n", hexSHA(q1))
	})
	srv := httptest.NewServer(mirror)
	defer srv.Close()
	conf := fmt.Sprintf(`{"os_sources": [{"name": "vendor-1", "url": %q, "checksum_url": %q, "family": "debian"}]}`, srv.URL+"/vendor/cloud.qcow2", srv.URL+"/vendor/SHA256SUMS")
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{Config: conf})
	admin := nodetest.Bearer(nodes[0].Admin)

	// An upload to a follower: every step reported, then every node.
	steps, progress, last := readStream(t, nodes[1].Do(t, "POST", "/api/v1/os/custom/import?family=rhel&file=/tmp/disk.qcow2", q1, admin...))
	for _, want := range []string{"inspect", "convert", "compress", "record", "replicate"} {
		if !slices.Contains(steps, want) {
			t.Errorf("import streamed steps %v, missing %s", steps, want)
		}
	}
	if p := progress[len(progress)-1]; p.Step != "replicate" || p.Bytes != 3 || p.Total != 3 {
		t.Errorf("last progress %+v, want replicate 3 of 3", p)
	}
	if last.Result == nil || last.Result.Version == nil {
		t.Fatalf("import result: %+v %+v", last, last.Error)
	}
	v1 := *last.Result.Version
	if v1.RawSHA256 != hexSHA(raw1) || v1.Format != "qcow2" || v1.Source != "disk.qcow2" || len(v1.Nodes) != 3 || !v1.Current {
		t.Errorf("imported version %+v", v1)
	}

	// A URL import on the third node, a raw image.
	_, _, last = readStream(t, nodes[2].Do(t, "POST", "/api/v1/os/custom/import?url="+srv.URL+"/img/disk.img", nil, admin...))
	if last.Result == nil || last.Result.Version.RawSHA256 != hexSHA(raw2) || last.Result.Version.Format != "raw" {
		t.Fatalf("URL import: %+v", last)
	}
	v2 := *last.Result.Version

	var list wire.OSList
	if code := nodes[0].Call(t, nodes[0].Admin, "GET", "/api/v1/os", "", &list); code != 200 {
		t.Fatalf("list: %d", code)
	}
	if len(list.Images) != 1 || list.Images[0].Current != v2.Version || len(list.Images[0].Versions) != 2 || list.Nodes != 3 || !slices.Equal(list.Sources, []string{"vendor-1"}) {
		t.Fatalf("list: %+v", list)
	}
	for _, n := range nodes {
		for _, v := range []wire.OSVersion{v1, v2} {
			r := n.Do(t, "GET", "/os/blobs/"+v.SHA256, nil) // no credential
			if r.Status != 200 || hexSHA(r.Body) != v.SHA256 || r.Header.Get("ETag") != `"`+v.SHA256+`"` {
				t.Errorf("%s: blob %s: %d, %d bytes", n.Name(), v.SHA256[:12], r.Status, len(r.Body))
			}
		}
		if r := n.Do(t, "GET", "/os/blobs/"+v1.SHA256, nil, "Range", "bytes=10-19"); r.Status != http.StatusPartialContent || len(r.Body) != 10 {
			t.Errorf("range: %s", r)
		}
	}
	for _, bad := range []string{strings.Repeat("0", 64), "..%2f..%2fetc%2fpasswd", strings.ToUpper(v1.SHA256)} {
		if r := nodes[0].Do(t, "GET", "/os/blobs/"+bad, nil); r.Status != http.StatusNotFound {
			t.Errorf("blob %s: %s, want 404", bad, r)
		}
	}

	// Promote and remove.
	var o wire.OSImage
	if code := nodes[1].Call(t, nodes[0].Admin, "POST", "/api/v1/os/custom/promote", `{"version":"`+v1.Version+`"}`, &o); code != 200 || o.Current != v1.Version {
		t.Errorf("promote: %d %+v", code, o)
	}
	if r := nodes[0].Do(t, "DELETE", "/api/v1/os/custom/"+v1.Version, nil, admin...); r.Status != http.StatusConflict || !strings.Contains(r.ErrorMessage(), "is current: promote another version first") {
		t.Errorf("remove current: %s", r)
	}
	if r := nodes[0].Do(t, "DELETE", "/api/v1/os/custom/"+v2.Version, nil, admin...); r.Status != 200 {
		t.Errorf("remove: %s", r)
	}

	// A sync of os_sources against the local mirror; then unchanged.
	_, _, last = readStream(t, nodes[0].Do(t, "POST", "/api/v1/os/sync", `{"names":["vendor-1"]}`, admin...))
	if last.Result == nil || len(last.Result.Sync) != 1 || last.Result.Sync[0].Action != "new" || len(last.Result.Sync[0].Nodes) != 3 {
		t.Fatalf("sync: %+v", last)
	}
	_, _, last = readStream(t, nodes[2].Do(t, "POST", "/api/v1/os/sync", nil, admin...))
	if last.Result == nil || last.Result.Sync[0].Action != "unchanged" {
		t.Errorf("second sync: %+v", last)
	}

	// Bad input: a clear refusal and no Raft entry.
	for name, c := range map[string]struct {
		method, path string
		body         any
		status       int
		says         string
	}{
		"a bad name":             {"GET", "/api/v1/os/Bad%20Name", nil, 400, "OS image name"},
		"an unknown name":        {"GET", "/api/v1/os/nope", nil, 404, `"nope"`},
		"promote: bad version":   {"POST", "/api/v1/os/custom/promote", `{"version":"../x"}`, 400, "OS version"},
		"promote: unknown":       {"POST", "/api/v1/os/custom/promote", `{"version":"19990101-1"}`, 404, `no version "19990101-1"`},
		"promote: unknown field": {"POST", "/api/v1/os/custom/promote", `{"version":"x","force":true}`, 400, "force"},
		"remove: unknown":        {"DELETE", "/api/v1/os/custom/19990101-1", nil, 404, "no version"},
		"import: both":           {"POST", "/api/v1/os/custom/import?url=" + srv.URL + "/img/disk.img", raw1, 400, "not both"},
		"import: nothing":        {"POST", "/api/v1/os/custom/import", nil, 400, "needs the image"},
		"import: bad family":     {"POST", "/api/v1/os/custom/import?family=suse", raw1, 400, `family "suse"`},
		"import: a secret URL":   {"POST", "/api/v1/os/custom/import?url=http://u:hunter2@x/a.img", nil, 400, "user:password@"},
		"import: bad name":       {"POST", "/api/v1/os/..x/import", raw1, 400, "OS image name"},
		"sync: unknown source":   {"POST", "/api/v1/os/sync", `{"names":["slackware"]}`, 400, "not in os_sources"},
		"sync: unknown field":    {"POST", "/api/v1/os/sync", `{"name":"vendor-1"}`, 400, "name"},
		"no token":               {"GET", "/api/v1/os", nil, 401, ""},
	} {
		t.Run(name, func(t *testing.T) {
			before := nodes[0].Cluster().FSM().AppliedIndex()
			h := admin
			if c.status == 401 {
				h = nil
			}
			r := nodes[0].Do(t, c.method, c.path, c.body, h...)
			if r.Status != c.status || !strings.Contains(r.ErrorMessage(), c.says) || strings.Contains(string(r.Body), "hunter2") {
				t.Errorf("got %s, want %d saying %q", r, c.status, c.says)
			}
			if after := nodes[0].Cluster().FSM().AppliedIndex(); after != before {
				t.Errorf("refused request took Raft entries (%d → %d)", before, after)
			}
		})
	}
	// A body that is no disk image: refused before the stream starts,
	// nothing recorded.
	before := nodes[0].Cluster().FSM().AppliedIndex()
	if r := nodes[0].Do(t, "POST", "/api/v1/os/custom/import", "not an image", admin...); r.Status != 400 || r.ErrorCode() != "bad_image" || !strings.Contains(r.ErrorMessage(), "not a disk image") {
		t.Errorf("a text body: %s", r)
	}
	if after := nodes[0].Cluster().FSM().AppliedIndex(); after != before {
		t.Errorf("refused import took Raft entries (%d → %d)", before, after)
	}
}
