package webui_test

import (
	"bytes"
	"crypto/sha256"
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

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/fleet"
	"github.com/rollcall/rollcall/lab/testenv"
)

// importOS imports a small raw disk as a version of name through the API
// (the real import: magic bytes, hashes, zstd, the blob store, the Raft
// command) and returns the version the node named.
func (e *env) importOS(t *testing.T, name string, seed byte) string {
	t.Helper()
	raw := make([]byte, 2<<20)
	for i := 4096; i < 1<<20; i++ {
		raw[i] = byte(i*7) ^ seed
	}
	raw[510], raw[511] = 0x55, 0xaa
	r := e.node.Do(t, "POST", "/api/v1/os/"+name+"/import?file=disk.raw&family=debian", raw, nodetest.Bearer(e.admin)...)
	if r.Status != http.StatusOK {
		t.Fatalf("import %s: %s", name, r)
	}
	lines := bytes.Split(bytes.TrimSpace(r.Body), []byte("\n"))
	var last wire.OSStreamLine
	if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil || last.Result == nil || last.Result.Version == nil {
		t.Fatalf("import %s: last line %s (%v)", name, lines[len(lines)-1], err)
	}
	return last.Result.Version.Version
}

func (e *env) osImage(t *testing.T, name string) wire.OSImage {
	t.Helper()
	var im wire.OSImage
	if code := e.call(t, "GET", "/api/v1/os/"+name, nil, &im); code != http.StatusOK {
		t.Fatalf("GET os %s: %d", name, code)
	}
	return im
}

var jobToken = regexp.MustCompile(`rollcall\.job=(rcj1\.[A-Za-z0-9_.-]+)`)

// The OS images page lists imported versions with their sizes and hashes
// and promotes one; the Deploy… dialog on the machine page names what it
// overwrites, starts a job, and the page follows the job's progress as the
// agent (played here with the job token the boot script hands it) reports
// it, until it is done.
func TestOSPageAndDeploy(t *testing.T) {
	chromium(t)
	testenv.NeedTool(t, "qemu-img") // the import inspects even a raw image with qemu-img info
	e := startEnv(t)
	rep := fleet.Generate(fleetSeed, 0)
	m := e.commissionNamed(t, "dep-01", rep)
	v1 := e.importOS(t, "custom", 1)
	v2 := e.importOS(t, "custom", 2)
	if im := e.osImage(t, "custom"); im.Current != v2 || len(im.Versions) != 2 {
		t.Fatalf("after two imports: current %q, %d versions", im.Current, len(im.Versions))
	}
	sha1 := e.osImage(t, "custom").Versions[0].SHA256

	b := newBrowser(t, 1400, 1000)
	b.signIn(t, e, e.admin)
	b.run(t, "open the OS images page",
		chromedp.Navigate(e.ui.URL+"/ui/#/os"),
		waitJS(`document.querySelectorAll('[data-os="custom"] tbody tr').length === 2`),
	)
	page := b.text(t, `[data-os="custom"]`)
	for _, want := range []string{v1, v2, "current " + v2, "family debian", "track latest", "1 of 1 nodes", "raw 2 MiB"} {
		if !strings.Contains(page, want) {
			t.Errorf("the OS page does not show %q:\n%s", want, page)
		}
	}
	if got := js[string](t, b, fmt.Sprintf(`document.querySelector('[data-os="custom"] code[title="%s"]')?.title || ''`, sha1)); got != sha1 {
		t.Errorf("the full sha256 of %s is not on the page (title %q)", v1, got)
	}
	if st := b.text(t, `.sync-state`); !strings.Contains(st, "Sources: ") {
		t.Errorf("the sync state does not list the os_sources: %q", st)
	}
	b.run(t, "promote the older version",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-os="custom"] button[data-promote="%s"]`, v1))),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[value=ok]`)),
		chromedp.Click(chromedp.CSS(`dialog[open] button[value=ok]`)),
		waitJS(fmt.Sprintf(`!document.querySelector('[data-os="custom"] button[data-promote="%s"]') && !!document.querySelector('[data-os="custom"] button[data-promote="%s"]')`, v1, v2)),
	)
	if im := e.osImage(t, "custom"); im.Current != v1 {
		t.Fatalf("promote through the page: current is %q, not %q", im.Current, v1)
	}

	// Deploy from the machine page: the first dialog asks, the second
	// names the disk it overwrites.
	b.run(t, "open the machine and its Deploy dialog",
		chromedp.Navigate(e.ui.URL+"/ui/#/machines/"+m.ID),
		// The actions wait for the machine's record: a click before it is
		// loaded does nothing.
		waitJS(`document.querySelector('h1')?.textContent.startsWith('dep-01')`),
		waitJS(`[...document.querySelectorAll('.actionbar button')].some((x) => x.textContent === 'Deploy…')`),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('.actionbar button')].find((x) => x.textContent === 'Deploy…').click()`),
		waitJS(`!!document.querySelector('dialog[open] select[name=disk]')`),
	)
	disk := rep.Disks[0]
	b.run(t, "choose the disk and confirm",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector('dialog[open] select[name=disk]'); s.value = %q; })()`, disk.Serial)),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] input[name=hostname]`), "web1"),
		chromedp.Click(chromedp.CSS(`dialog[open] button[value=ok]`)),
		waitJS(`!!document.querySelector('dialog[open] .confirm-disk')`),
	)
	confirm := b.text(t, `dialog[open] .confirm-disk`)
	if !strings.Contains(confirm, disk.Name) || !strings.Contains(confirm, disk.Serial) || !strings.Contains(confirm, "custom") {
		t.Errorf("the confirmation does not name the disk %s (serial %s) and the OS: %q", disk.Name, disk.Serial, confirm)
	}
	b.run(t, "deploy",
		chromedp.Click(chromedp.CSS(`dialog[open] button[value=ok]`)),
		waitJS(`!!document.querySelector('#deployment[data-state="queued"]')`),
	)
	var jobs wire.JobList
	e.call(t, "GET", "/api/v1/machines/"+m.ID+"/jobs", nil, &jobs)
	if len(jobs.Deploy) != 1 || jobs.Deploy[0].Disk.Serial != disk.Serial || jobs.Deploy[0].OSVersion != v1 || jobs.Deploy[0].Hostname != "web1" {
		t.Fatalf("the job the dialog made: %+v", jobs.Deploy)
	}
	job := jobs.Deploy[0]
	if txt := b.text(t, `.results`); !strings.Contains(txt, job.ID) || !strings.Contains(txt, disk.Name) {
		t.Errorf("the results line does not name the job and disk: %q", txt)
	}

	// The agent's side: the boot script hands it the job token.
	e.node.ImportImage(t, e.admin, "commissioning", []byte("kernel"), []byte("initrd"))
	script := e.node.Do(t, "GET", "/boot/ipxe?mac="+rep.BootMAC, nil)
	tok := jobToken.FindStringSubmatch(string(script.Body))
	if tok == nil {
		t.Fatalf("no job token in the boot script of a deploying machine:\n%s", script.Body)
	}
	report := func(p wire.ProgressRequest) {
		t.Helper()
		if r := e.node.Do(t, "POST", "/api/v1/jobs/self/progress", p, "X-Rollcall-Job", tok[1]); r.Status != http.StatusOK {
			t.Fatalf("progress %+v: %s", p, r)
		}
	}
	report(wire.ProgressRequest{Step: "write", State: "running", Bytes: 1 << 20, Total: 2 << 20})
	b.run(t, "the page shows the write at 50%",
		waitJS(`document.querySelector('#deployment progress')?.value === 50 && document.querySelector('#deployment[data-state="running"]') !== null`),
	)
	if txt := b.text(t, `#deployment`); !strings.Contains(txt, "write running") || !strings.Contains(txt, "1 MiB of 2 MiB") {
		t.Errorf("the deployment panel during the write: %q", txt)
	}
	for _, step := range []string{"write", "verify", "done"} {
		report(wire.ProgressRequest{Step: step, State: "done"})
	}
	b.run(t, "the page shows the job done and the machine deployed",
		waitJS(`!!document.querySelector('#deployment[data-state="done"]') && !document.querySelector('#deployment button')`),
		waitJS(`document.querySelector('h1 .badge')?.textContent === 'deployed'`),
	)
	if txt := b.text(t, `#deployment .steps`); !strings.Contains(txt, "verify done") {
		t.Errorf("the steps do not list verify: %q", txt)
	}
	b.checkConsole(t)
}

// "Sync now" on the OS images page streams the node's progress lines as
// they arrive and ends with what the sync did; the new name then shows.
// The vendor mirror is a local HTTP server (a fake: this machine has no
// internet) with a qcow2 and a checksum file in Rocky's format.
func TestOSSyncNow(t *testing.T) {
	chromium(t)
	testenv.NeedTool(t, "qemu-img")
	dir := t.TempDir()
	raw := make([]byte, 2<<20)
	for i := 4096; i < 1<<20; i++ {
		raw[i] = byte(i * 7)
	}
	raw[510], raw[511] = 0x55, 0xaa
	if err := os.WriteFile(filepath.Join(dir, "disk.raw"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	q, err := os.ReadFile(filepath.Join(dir, "disk.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(q)
	mux := http.NewServeMux()
	mux.HandleFunc("/m/cloud.qcow2", func(w http.ResponseWriter, r *http.Request) { w.Write(q) })
	mux.HandleFunc("/m/CHECKSUM", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "SHA256 (cloud.qcow2) = %x\n", sum)
	})
	mirror := httptest.NewServer(mux)
	defer mirror.Close()
	e := startEnvConfig(t, fmt.Sprintf(`{"os_sources": [{"name": "rocky-9", "family": "rhel", "url": %q, "checksum_url": %q}]}`,
		mirror.URL+"/m/cloud.qcow2", mirror.URL+"/m/CHECKSUM"))

	b := newBrowser(t, 1400, 1000)
	b.signIn(t, e, e.admin)
	b.run(t, "open the OS images page and sync",
		chromedp.Navigate(e.ui.URL+"/ui/#/os"),
		waitJS(`document.querySelector('.sync-state')?.textContent.includes('rocky-9') && !document.querySelector('button.sync-now').disabled`),
		chromedp.Click(chromedp.CSS(`button.sync-now`)),
		waitJS(`[...document.querySelectorAll('.sync-log li')].some((li) => li.textContent.startsWith('rocky-9: new'))`),
		waitJS(`!!document.querySelector('[data-os="rocky-9"] tbody tr')`),
	)
	log := js[string](t, b, `[...document.querySelectorAll('.sync-log li')].map((li) => li.textContent).join('\n')`)
	for _, step := range []string{"rocky-9: download", "rocky-9: convert", "rocky-9: compress"} {
		if !strings.Contains(log, step) {
			t.Errorf("the sync log has no %q line:\n%s", step, log)
		}
	}
	im := e.osImage(t, "rocky-9")
	if len(im.Versions) != 1 || im.Current != im.Versions[0].Version || !strings.Contains(b.text(t, `[data-os="rocky-9"]`), im.Current) {
		t.Errorf("after the sync: %+v", im)
	}
	b.checkConsole(t)
}
