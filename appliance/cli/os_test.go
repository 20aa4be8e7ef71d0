package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/testenv"
)

var osVersions = regexp.MustCompile(`\b\d{8}-\d+\b`)

// The os verbs against a node and a local mirror: import a file and a URL,
// list, sync (new, then unchanged), promote, rm; what they print on
// stdout, as a golden, and the steps they show on stderr.
func TestOSCLI(t *testing.T) {
	testenv.NeedTool(t, "qemu-img")
	dir := t.TempDir()
	raw := make([]byte, 2<<20)
	for i := 4096; i < 1<<20; i++ {
		raw[i] = byte(i * 7)
	}
	raw[510], raw[511] = 0x55, 0xaa
	os.WriteFile(filepath.Join(dir, "disk.raw"), raw, 0o644)
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	q, _ := os.ReadFile(filepath.Join(dir, "disk.qcow2"))
	mux := http.NewServeMux()
	mux.HandleFunc("/m/cloud.qcow2", func(w http.ResponseWriter, r *http.Request) { w.Write(q) })
	mux.HandleFunc("/m/CHECKSUM", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "SHA256 (cloud.qcow2) = %s\n", hexSum(q))
	})
	mux.HandleFunc("/m/disk.raw", func(w http.ResponseWriter, r *http.Request) { w.Write(raw) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	startNode(t, nodeOptions{config: fmt.Sprintf(`{"os_sources": [{"name": "rocky-9", "family": "rhel", "url": %q, "checksum_url": %q}]}`, srv.URL+"/m/cloud.qcow2", srv.URL+"/m/CHECKSUM")}).use(t)

	var printed, progress strings.Builder
	var first string
	for _, args := range [][]string{
		{"os", "import", "custom", filepath.Join(dir, "disk.qcow2"), "-family", "debian"},
		{"os", "import", "custom", srv.URL + "/m/disk.raw"},
		{"os", "sync"},
		{"os", "sync", "rocky-9"},
		{"os", "list"},
		{"os", "promote", "custom", "FIRST"},
		{"os", "rm", "custom", "SECOND"},
		{"os", "list"},
	} {
		for i, a := range args {
			if a == "FIRST" || a == "SECOND" {
				var l wire.OSList
				if err := json.Unmarshal([]byte(mustRun(t, "os", "list", "-json")), &l); err != nil || len(l.Images) == 0 {
					t.Fatalf("os list -json: %v", err)
				}
				first = l.Images[0].Versions[0].Version
				args[i] = map[string]string{"FIRST": first, "SECOND": l.Images[0].Versions[1].Version}[a]
			}
		}
		code, out, errs := run(args...)
		if code != 0 {
			t.Fatalf("rollcall %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		printed.WriteString("$ rollcall " + strings.Join(args, " ") + "\n" + out)
		progress.WriteString(errs)
	}
	got := strings.ReplaceAll(printed.String(), dir, "DIR")
	got = strings.ReplaceAll(got, srv.URL, "MIRROR")
	golden(t, "os", osVersions.ReplaceAllString(normalize(got), "YYYYMMDD-N"))
	for _, want := range []string{"custom: inspect done: qcow2", "custom: convert done", "custom: compress done", "custom: record done", "custom: replicate done (1 of 1 nodes)",
		"rocky-9: checksum done: sha256:", "rocky-9: download done", "rocky-9: verify done", "rocky-9: sync skipped: unchanged upstream"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, progress.String())
		}
	}

	for _, args := range [][]string{
		{"os"}, {"os", "frobnicate"}, {"os", "import", "custom"}, {"os", "import", "Bad Name", "x"},
		{"os", "import", "custom", filepath.Join(dir, "nosuch")}, {"os", "import", "custom", dir},
		{"os", "import", "custom", filepath.Join(dir, "disk.raw"), "-family", "arch"},
		{"os", "promote", "custom", "19990101-1"}, {"os", "rm", "custom", first + "x"}, {"os", "rm", "custom", "../x"},
		{"os", "sync", "slackware"},
	} {
		if code, _, errs := run(args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
