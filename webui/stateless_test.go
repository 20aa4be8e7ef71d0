package webui_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/overlay"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/fleet"
)

var nodeToken = regexp.MustCompile(`rollcall\.node=(rcn1\.[A-Za-z0-9_.-]+)`)

// statelessSetup imports what a profile needs, through the API: the boot
// image compute (kernel, initrd, squashfs), the example overlay compute
// and the cluster's variables its templates read.
func (e *env) statelessSetup(t *testing.T) {
	t.Helper()
	var files []wire.ImageFile
	for _, f := range []string{"kernel", "initrd", "squashfs"} {
		files = append(files, e.node.Upload(t, e.admin, "compute", f, []byte("the "+f)))
	}
	e.call(t, "POST", "/api/v1/images", wire.ImageRequest{Name: "compute", Files: files}, nil)
	example, err := overlay.Example("compute")
	if err != nil {
		t.Fatal(err)
	}
	var ov wire.OverlayRequest
	for _, f := range example {
		ov.Files = append(ov.Files, wire.OverlayFile{Path: f.Path, Mode: f.Mode, Content: f.Content})
	}
	e.call(t, "PUT", "/api/v1/overlays/compute", ov, nil)
	e.call(t, "PUT", "/api/v1/cluster/vars", wire.ClusterVars{Vars: map[string]string{"slurm_controller": "head1"}}, nil)
}

// The stateless faces against a real node: a profile added through the
// Profiles page's form (a bad name format refused beside its field), the
// overlay's files, a ready machine assigned from the machines list's bulk
// actions, its node name and heartbeat in the list once it fetches its
// overlay as a booted node would, the machine page's node card, Unassign
// with its confirmation, and the profile deleted.
func TestBrowserStateless(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	rep := fleet.Generate(fleetSeed, 0)
	m := e.commissionNamed(t, "st-01", rep)
	e.commissionNamed(t, "st-02", fleet.Generate(fleetSeed, 1))
	if m.State != wire.StateReady {
		t.Fatalf("st-01 is %s, not ready", m.State)
	}
	e.statelessSetup(t)
	shots := shotsDir(t)

	b := newBrowser(t, 1280, 900)
	b.signIn(t, e, e.admin)
	b.run(t, "shell", chromedp.WaitVisible(chromedp.CSS(`header.top`)))

	t.Run("profile form", func(t *testing.T) {
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/profiles"),
			waitJS(`[...document.querySelectorAll('.overlays a')].some((a) => a.textContent === 'compute')`)}, openDialog(`#add-profile`)...)...)
		ov := b.text(t, `.overlays tbody tr`)
		for _, want := range []string{"compute", "9", "—"} { // 9 files, all templates; no profile yet
			if !strings.Contains(ov, want) {
				t.Errorf("the overlays list says %q, want %q in it", ov, want)
			}
		}
		b.run(t, "a name format that is not one",
			setField("name", "rack1"), setField("image", "compute"), setField("overlays", "compute"), setField("args", "console=ttyS0"),
			setField("name_format", "cn%s"), setField("name_first", "1"), setField("name_last", "20"),
			setField("subnets", ""), setField("vars", "site=lab\nrole=compute"),
			submitDialog(), waitFieldError("name_format"))
		expectBeside(t, b, "name_format", "name format")
		b.screenshot(t, shots, "profile-add-1280")
		if r := e.node.Do(t, "GET", "/api/v1/profiles/rack1", nil, nodetest.Bearer(e.admin)...); r.Status != http.StatusNotFound {
			t.Fatalf("a refused profile was saved: %s", r)
		}
		b.run(t, "a good one", setField("name_format", "cn%02d"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null && location.hash === '#/profiles/rack1'`),
			waitJS(`document.querySelector('[data-field=name_format] input')?.value === 'cn%02d'`))
		var p wire.Profile
		e.call(t, "GET", "/api/v1/profiles/rack1", nil, &p)
		if p.Image != "compute" || !slices.Equal(p.Overlays, []string{"compute"}) || p.Args != "console=ttyS0" || p.NameFormat != "cn%02d" ||
			p.NameFirst != 1 || p.NameLast != 20 || p.Vars["site"] != "lab" || p.Vars["role"] != "compute" || len(p.Subnets) != 0 {
			t.Errorf("the form saved %+v", p)
		}
		// Edited on its page: a PUT of the whole.
		b.run(t, "edit", chromedp.Evaluate[chromedp.Void](`(() => { const el = document.querySelector('[data-field=name_last] input'); el.value = '30'; el.dispatchEvent(new Event('input')); })()`),
			chromedp.Click(chromedp.CSS(`#main form button[type=submit]`)),
			waitJS(`document.querySelector('.form-ok') !== null`))
		e.call(t, "GET", "/api/v1/profiles/rack1", nil, &p)
		if p.NameLast != 30 || p.NameFormat != "cn%02d" || p.Vars["site"] != "lab" {
			t.Errorf("after the edit: %+v", p)
		}
		b.run(t, "the list", chromedp.Navigate(e.ui.URL+"/ui/#/profiles"),
			waitJS(`[...document.querySelectorAll('.profiles a')].some((a) => a.textContent === 'rack1')`))
		row := b.text(t, `.profiles tbody tr`)
		for _, want := range []string{"rack1", "compute", "cn%02d (1–30)", "0"} {
			if !strings.Contains(row, want) {
				t.Errorf("the profiles list says %q, want %q in it", row, want)
			}
		}
		if got := b.text(t, `.overlays tbody tr`); !strings.Contains(got, "rack1") {
			t.Errorf("the overlay's row does not name the profile using it: %q", got)
		}
		b.screenshot(t, shots, "profiles-1280")
		checkNames(t, b, "profiles")
	})

	t.Run("overlay files", func(t *testing.T) {
		b.run(t, "open", chromedp.Navigate(e.ui.URL+"/ui/#/overlays/compute"),
			waitJS(`document.querySelectorAll('.overlay-files tbody tr').length === 9`))
		files := b.text(t, `.overlay-files`)
		for _, want := range []string{"system/etc/hostname.tmpl", "runtime/etc/hosts.tmpl", "template", "0644"} {
			if !strings.Contains(files, want) {
				t.Errorf("the file list lacks %q:\n%s", want, files)
			}
		}
	})

	t.Run("assign", func(t *testing.T) {
		row := fmt.Sprintf(`.grid-canvas [role=row][data-id=%q]`, m.ID)
		b.run(t, "select st-01 and open Assign profile",
			chromedp.Navigate(e.ui.URL+"/ui/#/machines"),
			waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, row)),
			// The state filter knows the stateless states before any machine is in them.
			waitJS(`[...document.querySelectorAll('.toolbar select option')].map((o) => o.value).join() === ',new,commissioning,ready,deploying,deployed,deploy-failed,releasing,stateless,booted'`),
			chromedp.Click(chromedp.CSS(row+` input[type=checkbox]`)),
			waitJS(`document.querySelector('.selinfo').textContent.startsWith('1 selected')`),
			chromedp.Click(chromedp.CSS(`button[data-action=assign]`)),
			waitJS(`document.querySelector('dialog[open] select[name=profile]')?.value === 'rack1'`))
		if got := b.text(t, `dialog[open]`); !strings.Contains(got, "Power-cycle now") || !strings.Contains(got, "rack1 (image compute, 0 nodes)") {
			t.Errorf("the assign dialog says %q", got)
		}
		b.run(t, "assign with a power cycle",
			chromedp.Click(chromedp.CSS(`dialog[open] input[name=boot]`)),
			chromedp.Click(chromedp.CSS(`dialog[open] button[value=ok]`)),
			waitJS(`document.querySelectorAll('.results-list li.ok, .results-list li.fail').length === 1`))
		res := b.text(t, `.results-list li`)
		// The machine has no BMC the node can reach: assigned, and the
		// power cycle either queued or refused, as the answer says.
		if !strings.Contains(res, "node cn01 of rack1") || !(strings.Contains(res, "power cycle job") || strings.Contains(res, "not power-cycled")) {
			t.Errorf("the result says %q", res)
		}
		b.run(t, "the node in the list", waitJS(fmt.Sprintf(`document.querySelector(%q)?.textContent.includes('cn01 not booted')`, row+` .c-node`)))
		var d wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+m.ID, nil, &d)
		if d.State != wire.StateStateless {
			t.Fatalf("after assign st-01 is %s", d.State)
		}

		// The node boots: its boot script hands it its token, and its
		// first overlay fetch is its heartbeat.
		e.node.ImportImage(t, e.admin, "commissioning", []byte("kernel"), []byte("initrd"))
		script := e.node.Do(t, "GET", "/boot/ipxe?mac="+rep.BootMAC, nil)
		tok := nodeToken.FindStringSubmatch(string(script.Body))
		if tok == nil {
			t.Fatalf("no node token in the boot script of an assigned machine:\n%s", script.Body)
		}
		if r := e.node.Do(t, "GET", "/api/v1/stateless/self/overlay/system", nil, "X-Rollcall-Node", tok[1]); r.Status != http.StatusOK {
			t.Fatalf("overlay fetch: %s", r)
		}
		b.run(t, "booted and seen", waitJS(fmt.Sprintf(`document.querySelector(%q)?.textContent === 'cn01 seen just now'`, row+` .c-node`)),
			waitJS(fmt.Sprintf(`document.querySelector(%q)?.textContent === 'booted'`, row+` .c-state .badge`)))
		b.screenshot(t, shots, "machines-nodes-1280")
		// The filter finds a machine by its node name.
		b.run(t, "filter by node name", chromedp.SendKeys(chromedp.CSS(`input[type=search]`), "cn01"),
			waitJS(`document.getElementById('machines-count').textContent === '1 of 2 machines'`))
		if got := rowNames(t, b); got != "st-01" {
			t.Errorf("filter cn01 shows %q", got)
		}
		b.run(t, "clear the filter", clearFilter())
		// A stale node is marked (drawn by the same code from an answer
		// whose heartbeats stopped).
		stale, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`import(new URL('js/stateless.js', location.href).href).then((m) => m.nodeSummary({name: 'cn09', profile: 'rack1', booted: '2026-01-01T00:00:00Z', last_seen: '2026-01-01T00:00:00Z', stale: true}).textContent)`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(stale, "cn09 seen ") || !strings.HasSuffix(stale, "stale") {
			t.Errorf("a stale node's cell says %q", stale)
		}
	})

	t.Run("machine page and unassign", func(t *testing.T) {
		b.run(t, "open st-01", chromedp.Navigate(e.ui.URL+"/ui/#/machines/"+m.ID),
			waitJS(`document.querySelector('#node')?.textContent.includes('cn01')`),
			// The actions wait for the machine's record: a click before it is
			// loaded does nothing.
			waitJS(`document.querySelector('h1')?.textContent.startsWith('st-01')`))
		card := b.text(t, `#node`)
		var n wire.StatelessNode
		e.call(t, "GET", "/api/v1/stateless/nodes/"+m.ID, nil, &n)
		for _, want := range []string{"cn01", "rack1", "booted, seen", n.SSHHostKeyPub[:30]} {
			if !strings.Contains(card, want) {
				t.Errorf("the node card lacks %q:\n%s", want, card)
			}
		}
		b.run(t, "unassign, cancelled first",
			waitJS(`[...document.querySelectorAll('.actionbar button')].some((x) => x.textContent === 'Unassign…')`),
			chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('.actionbar button')].find((x) => x.textContent === 'Unassign…').click()`),
			waitJS(`document.querySelector('dialog[open] button.danger')?.textContent === 'Unassign'`))
		if got := b.text(t, `dialog[open]`); !strings.Contains(got, "node name and addresses are freed") {
			t.Errorf("the unassign confirmation says %q", got)
		}
		b.run(t, "cancel", chromedp.Click(chromedp.CSS(`dialog[open] button[value=cancel]`)), waitJS(`document.querySelector('dialog[open]') === null`))
		e.call(t, "GET", "/api/v1/machines/"+m.ID, nil, &wire.MachineDetail{})
		if r := e.node.Do(t, "GET", "/api/v1/stateless/nodes/"+m.ID, nil, nodetest.Bearer(e.admin)...); r.Status != http.StatusOK {
			t.Fatalf("a cancelled unassign unassigned: %s", r)
		}
		b.run(t, "unassign",
			chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('.actionbar button')].find((x) => x.textContent === 'Unassign…').click()`),
			waitJS(`document.querySelector('dialog[open] button.danger') !== null`),
			chromedp.Click(chromedp.CSS(`dialog[open] button.danger`)),
			waitJS(`document.querySelector('.results-list li.ok')?.textContent.includes('was node cn01 of rack1')`),
			waitJS(`document.querySelector('h1 .badge')?.textContent === 'ready' && document.querySelector('#node') === null`))
		var d wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+m.ID, nil, &d)
		var l wire.StatelessNodeList
		e.call(t, "GET", "/api/v1/stateless/nodes", nil, &l)
		if d.State != wire.StateReady || len(l.Nodes) != 0 {
			t.Fatalf("after unassign: st-01 %s, nodes %+v", d.State, l.Nodes)
		}
		b.run(t, "no node in the list", chromedp.Navigate(e.ui.URL+"/ui/#/machines"),
			waitJS(fmt.Sprintf(`document.querySelector(%q)?.textContent === ''`, fmt.Sprintf(`.grid-canvas [role=row][data-id=%q] .c-node`, m.ID))))
	})

	t.Run("delete profile", func(t *testing.T) {
		b.run(t, "delete", chromedp.Navigate(e.ui.URL+"/ui/#/profiles/rack1"),
			waitJS(`document.querySelector('#delete-profile') !== null`),
			chromedp.Click(chromedp.CSS(`#delete-profile`)),
			waitJS(`document.querySelector('dialog[open] button.danger') !== null`),
			chromedp.Click(chromedp.CSS(`dialog[open] button.danger`)),
			waitJS(`location.hash === '#/profiles' && [...document.querySelectorAll('.empty')].some((p) => p.textContent === 'No profiles yet.')`))
		if r := e.node.Do(t, "GET", "/api/v1/profiles/rack1", nil, nodetest.Bearer(e.admin)...); r.Status != http.StatusNotFound {
			t.Errorf("after delete: %s", r)
		}
	})

	b.checkConsole(t, `status of 400`, `status of 422`)
}
