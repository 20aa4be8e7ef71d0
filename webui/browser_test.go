package webui_test

import (
	"context"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/fleet"
	"github.com/rollcall/rollcall/power/ipmi/ipmitest"
	"github.com/rollcall/rollcall/store/inventory"
)

const bmcPassword = "Ui-bmc-Secret-91"

// fleetSeed names the simulated fleet the tests commission.
const fleetSeed = 7

// commissionNamed adds a machine by hand under name (so the table shows a
// real name), then uploads report as its agent would.
func (e *env) commissionNamed(t testing.TB, name string, rep inventory.Report) wire.MachineView {
	t.Helper()
	var m wire.MachineView
	if code := e.call(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: name, MAC: rep.BootMAC}, &m); code != http.StatusCreated {
		t.Fatalf("create %s: %d", name, code)
	}
	var reply wire.CommissionReply
	if code := e.call(t, "POST", "/api/v1/commission", rep, &reply, true); code != http.StatusOK {
		t.Fatalf("commission %s: %d %+v", name, code, reply)
	}
	if reply.ID != m.ID {
		t.Fatalf("commission of %s landed on %s, not %s", name, reply.ID, m.ID)
	}
	m.Serial, m.State = rep.System.Serial, reply.State
	return m
}

// lab is the seeded appliance the browser tests look at: commissioned
// fleet machines, one with a simulated BMC, a new and a commissioning one,
// a small network and an image.
type lab struct {
	*env
	machines []wire.MachineView
	reports  []inventory.Report
	withBMC  wire.MachineView
	spare    wire.MachineView
	bmc      *ipmitest.BMC
}

func seedLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{env: startEnv(t)}
	for i := range 12 {
		rep := fleet.Generate(fleetSeed, i)
		l.reports = append(l.reports, rep)
		l.machines = append(l.machines, l.commissionNamed(t, fmt.Sprintf("r1-n%02d", i+1), rep))
	}
	l.withBMC = l.machines[0]
	var err error
	if l.bmc, err = ipmitest.Start("admin", bmcPassword); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.bmc.Close)
	l.call(t, "PUT", "/api/v1/machines/"+l.withBMC.ID+"/bmc", wire.BMCRequest{
		Driver: "ipmi", Address: l.bmc.Address(), User: "admin", Password: bmcPassword, Settings: map[string]string{"cipher": "17"},
	}, nil)
	l.call(t, "POST", "/api/v1/machines/"+l.withBMC.ID+"/power", wire.PowerRequest{Action: "on"}, nil)
	l.call(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "spare-01", MAC: "52:54:00:aa:00:01"}, &l.spare)
	l.call(t, "POST", "/api/v1/enlist", wire.EnlistRequest{Serial: "CZJ0NEW001", BootMAC: "52:54:00:aa:00:02", MACs: []string{"52:54:00:aa:00:02"}}, nil, true)

	vid := 10
	l.call(t, "POST", "/api/v1/fabrics", wire.FabricRequest{Name: "hall-a", Kind: "ethernet"}, nil)
	l.call(t, "POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-a", VID: &vid, MTU: 9000, DHCP: "off"}, nil)
	l.call(t, "POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "10.10.0.0/24", Name: "prov-a", Fabric: "hall-a", VID: &vid,
		Purpose: "provisioning", Gateway: "10.10.0.1", DNS: []string{"10.10.0.2"}, Domain: "hall-a.example"}, nil)
	l.call(t, "POST", "/api/v1/ranges", wire.RangeRequest{Subnet: "10.10.0.0/24", Kind: "dynamic", First: "10.10.0.100", Last: "10.10.0.199", Comment: "PXE"}, nil)
	l.call(t, "POST", "/api/v1/ranges", wire.RangeRequest{Subnet: "10.10.0.0/24", Kind: "reserved", First: "10.10.0.1", Last: "10.10.0.9", Comment: "switches"}, nil)
	for _, m := range l.machines[:4] {
		l.call(t, "POST", "/api/v1/ips/allocate", wire.AllocateRequest{Subnet: "10.10.0.0/24", Machine: m.ID, Interface: "eno1"}, nil)
	}
	l.call(t, "PUT", "/api/v1/machines/"+l.machines[0].ID+"/location", wire.LocationRequest{Building: "B1", Room: "hall-1", Rack: "R1", Unit: 1}, nil)
	l.call(t, "PUT", "/api/v1/machines/"+l.machines[1].ID+"/location", wire.LocationRequest{Rack: "R1", Unit: 3, Height: 2}, nil)
	l.call(t, "POST", "/api/v1/tags", wire.TagRequest{Name: "gpu", Match: "{{ gt .Node.GPUs 0 }}", Comment: "accelerators"}, nil)
	var files []wire.ImageFile
	for _, f := range []string{"kernel", "initrd"} {
		var got wire.ImageFile
		l.call(t, "PUT", "/api/v1/images/commission-2026.05/files/"+f, []byte(strings.Repeat(f, 4096)), &got)
		files = append(files, got)
	}
	l.call(t, "POST", "/api/v1/images", wire.ImageRequest{Name: "commission-2026.05", Files: files}, nil)
	return l
}

func TestBrowser(t *testing.T) {
	chromium(t)
	l := seedLab(t)
	b := newBrowser(t, 1280, 800)
	shots := shotsDir(t)
	t.Logf("screenshots in %s", shots)

	t.Run("sign in", func(t *testing.T) {
		b.signIn(t, l.env, l.admin)
		b.run(t, "overview", chromedp.WaitVisible(chromedp.CSS(`header.top`)), waitJS(`document.querySelector('.state-bars') !== null && document.querySelectorAll('table').length >= 2`))
		where := js[string](t, b, `location.href`)
		stored := js[string](t, b, `sessionStorage.getItem('rollcall.admin-token') || ''`)
		if strings.Contains(where, l.admin) {
			t.Errorf("the token is in the URL: %s", where)
		}
		if stored != l.admin {
			t.Errorf("sessionStorage holds %q, want the admin token", stored)
		}
		if got := b.text(t, `.big`); !strings.Contains(got, "14 machines") {
			t.Errorf("overview says %q, want 14 machines", got)
		}
		if got := b.text(t, `main`); !strings.Contains(got, "ui1") || !strings.Contains(got, "leader") {
			t.Errorf("overview lacks the cluster: %q", got)
		}
		// The CA certificate the overview links to is the one whose
		// fingerprint it shows.
		caPEM, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`fetch(document.querySelector('a.ca-pem').href).then((r) => r.text())`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("fetch the overview's CA certificate link: %v", err)
		}
		block, _ := pem.Decode([]byte(caPEM))
		if block == nil || block.Type != "CERTIFICATE" {
			t.Fatalf("the overview's CA certificate link: not a PEM certificate (%q)", caPEM)
		}
		if fp := fmt.Sprintf("%x", sha256.Sum256(block.Bytes)); !strings.Contains(b.text(t, `.fingerprint`), fp) {
			t.Errorf("the overview shows %q, the linked CA certificate's fingerprint is %s", b.text(t, `.fingerprint`), fp)
		}
	})

	t.Run("machines", func(t *testing.T) {
		b.run(t, "machines page", chromedp.Navigate(l.ui.URL+"/ui/#/machines"),
			waitJS(`document.querySelectorAll('.grid-canvas [role=row]:not([hidden])').length === 14`))
		if got := b.text(t, `#machines-count`); got != "14 machines" {
			t.Errorf("count %q, want 14 machines", got)
		}
		names := rowNames(t, b)
		for _, m := range l.machines {
			if !strings.Contains(names, m.Name) {
				t.Errorf("machine %s not in the table: %s", m.Name, names)
			}
		}
	})

	t.Run("filter", func(t *testing.T) {
		target := l.machines[5]
		cases := map[string]struct{ query, want string }{
			"serial":      {target.Serial, target.Name},
			"MAC, dashes": {strings.ReplaceAll(l.reports[5].BootMAC, ":", "-"), target.Name},
			"name":        {"spare", "spare-01"},
			"IP":          {"10.10.0.10", ""}, // allocated addresses: several rows
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				b.run(t, "type "+tc.query,
					clearFilter(),
					chromedp.SendKeys(chromedp.CSS(`input[type=search]`), tc.query))
				if tc.want == "" {
					b.run(t, "wait", waitJS(`/of 14 machines/.test(document.getElementById('machines-count').textContent)`))
					return
				}
				b.run(t, "wait for one row", waitJS(`document.getElementById('machines-count').textContent === '1 of 14 machines'`))
				if got := rowNames(t, b); got != tc.want {
					t.Errorf("filter %q shows %q, want %q", tc.query, got, tc.want)
				}
			})
		}
		b.run(t, "state filter", clearFilter(),
			chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('.toolbar select'); s.value = 'new'; s.dispatchEvent(new Event('change')); document.querySelector('input[type=search]').dispatchEvent(new Event('input')); })()`),
			waitJS(`document.getElementById('machines-count').textContent === '1 of 14 machines'`))
		if got := rowNames(t, b); got != "spare-01" {
			t.Errorf("state new shows %q, want spare-01", got)
		}
		b.run(t, "all states", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('.toolbar select'); s.value = ''; s.dispatchEvent(new Event('change')); })()`),
			waitJS(`document.getElementById('machines-count').textContent === '14 machines'`))
	})

	t.Run("bulk power status", func(t *testing.T) {
		// The machine with the simulated BMC and one without any BMC:
		// one result each, one good, one failed.
		b.run(t, "select two",
			chromedp.SendKeys(chromedp.CSS(`input[type=search]`), "r1-n01"),
			waitJS(`document.getElementById('machines-count').textContent === '1 of 14 machines'`),
			chromedp.Click(chromedp.CSS(`.grid-canvas [role=row]:not([hidden]) input[type=checkbox]`)),
			// A click on a row's checkbox moves focus to the row a moment
			// later: let it land before typing, or keys go to the row.
			waitJS(`document.activeElement && document.activeElement.getAttribute('role') === 'row'`),
			clearFilter(),
			chromedp.SendKeys(chromedp.CSS(`input[type=search]`), "spare"),
			waitJS(`document.getElementById('machines-count').textContent === '1 of 14 machines'`),
			chromedp.Click(chromedp.CSS(`.grid-canvas [role=row]:not([hidden]) input[type=checkbox]`)),
			waitJS(`document.querySelector('.selinfo').textContent.startsWith('2 selected')`),
			chromedp.Click(chromedp.CSS(`button[data-action=status]`)),
			waitJS(`document.querySelectorAll('.results-list li.ok, .results-list li.fail').length === 2`))
		ok := b.text(t, fmt.Sprintf(`.results-list li[data-id=%q]`, l.withBMC.ID))
		bad := b.text(t, fmt.Sprintf(`.results-list li[data-id=%q]`, l.spare.ID))
		if !strings.Contains(ok, "power on") {
			t.Errorf("result for %s: %q, want power on", l.withBMC.Name, ok)
		}
		if !strings.Contains(bad, "failed") || !strings.Contains(bad, "BMC") {
			t.Errorf("result for spare-01: %q, want a failure naming the BMC", bad)
		}
		if got := b.text(t, `.results .summary`); got != "2 of 2 done, 1 failed" {
			t.Errorf("summary %q", got)
		}
		b.screenshot(t, shots, "machines-results-1280")
		b.run(t, "clear", chromedp.Click(chromedp.CSS(`.actionbar button.link`)),
			clearFilter(),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('input[type=search]').dispatchEvent(new Event('input'))`))
	})

	t.Run("machine page", func(t *testing.T) {
		m := l.withBMC
		b.run(t, "open "+m.Name, chromedp.Navigate(l.ui.URL+"/ui/#/machines"),
			waitJS(`document.querySelectorAll('.grid-canvas [role=row]:not([hidden])').length === 14`),
			chromedp.Focus(chromedp.CSS(fmt.Sprintf(`.grid-canvas [role=row][data-id=%q]`, m.ID))),
			chromedp.KeyEvent(kb.Enter),
			waitJS(`document.querySelector('#inv-pci') !== null && document.querySelector('#bmc') !== null`))
		if got := b.text(t, `main h1`); !strings.HasPrefix(got, m.Name) {
			t.Errorf("heading %q, want %s", got, m.Name)
		}
		headings := js[[]string](t, b, `[...document.querySelectorAll('.inventory h3')].map(h => h.firstChild.textContent)`)
		for _, want := range []string{"System", "CPUs", "Memory (DIMMs by slot)", "Disks", "NVMe", "Network interfaces", "InfiniBand", "GPUs", "LLDP neighbours", "TPM", "PCI devices"} {
			if !contains(headings, want) {
				t.Errorf("inventory section %q missing; have %v", want, headings)
			}
		}
		bmc := b.text(t, `#bmc`)
		for _, want := range []string{"ipmi", l.bmc.Address(), "admin", "never shown"} {
			if !strings.Contains(bmc, want) {
				t.Errorf("BMC card lacks %q: %q", want, bmc)
			}
		}
		html := js[string](t, b, `document.documentElement.outerHTML`)
		if strings.Contains(html, bmcPassword) || strings.Contains(html, l.reports[0].BMC.Password) {
			t.Error("a BMC password is in the page")
		}
		rep := l.reports[0]
		page := b.text(t, `main`)
		for _, want := range []string{rep.System.Serial, rep.CPUs[0].Model, rep.DIMMs[0].Locator, rep.NICs[0].MAC} {
			if !strings.Contains(page, want) {
				t.Errorf("machine page lacks %q from the inventory", want)
			}
		}
		b.screenshot(t, shots, "machine-1280")
	})

	t.Run("power off with confirmation", func(t *testing.T) {
		b.run(t, "power off",
			chromedp.Click(chromedp.CSS(`.actionbar button.danger-text`)), // the first destructive action: Power off
			chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)))
		if got := b.text(t, `dialog[open] h2`); !strings.Contains(got, "Power off") {
			t.Fatalf("dialog %q, want Power off", got)
		}
		b.screenshot(t, shots, "confirm-1280")
		// Escape closes the dialog without acting.
		b.run(t, "escape", chromedp.KeyEvent(kb.Escape), waitJS(`document.querySelector('dialog[open]') === null`))
		if !l.bmc.PowerOn() {
			t.Fatal("the chassis went off although the dialog was cancelled")
		}
		b.run(t, "confirm",
			chromedp.Click(chromedp.CSS(`.actionbar button.danger-text`)),
			chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)),
			chromedp.Click(chromedp.CSS(`dialog[open] button.danger`)),
			waitJS(`document.querySelector('.results-list li.ok') !== null`),
			// The event arrives through the blocking query, without a reload.
			waitJS(`[...document.querySelectorAll('#events td')].some(td => td.textContent === 'power off done through ipmi')`))
		if l.bmc.PowerOn() {
			t.Error("the simulated chassis is still on")
		}
		if got := b.text(t, `.results-list li.ok`); !strings.Contains(got, "done") {
			t.Errorf("result %q", got)
		}
		b.run(t, "job listed", waitJS(`document.querySelector('#jobs').textContent.includes('power off')`))
	})

	t.Run("pages and screenshots", func(t *testing.T) {
		for _, p := range []struct{ name, hash, ready string }{
			{"overview", "#/", `document.querySelectorAll('#main table').length >= 2`},
			{"machines", "#/machines", `document.querySelectorAll('.grid-canvas [role=row]:not([hidden])').length === 14`},
			{"machine", "#/machines/" + l.machines[1].ID, `document.querySelector('#inv-pci') !== null`},
			{"network", "#/network", `document.querySelectorAll('#main table').length === 3`},
			{"subnet", "#/network/subnets/10.10.0.0/24", `document.querySelectorAll('#main table').length === 2`},
			{"images", "#/images", `document.querySelector('#main table') !== null`},
			{"racks", "#/racks", `document.querySelector('#main .rack-machine') !== null`},
			{"tags", "#/tags", `document.querySelector('#main table') !== null`},
			{"tag", "#/tags/gpu", `document.querySelector('#main [data-field=match] textarea') !== null && document.querySelectorAll('#main table').length === 1`},
			{"layouts", "#/layouts", `document.querySelector('#main .card .empty, #main table') !== null`},
		} {
			for _, size := range [][2]int64{{1280, 800}, {390, 844}} {
				b.run(t, p.name, chromedp.EmulateViewport(size[0], size[1]), chromedp.Navigate(l.ui.URL+"/ui/"+p.hash), waitJS(p.ready))
				if size[0] == 390 {
					overflow := js[bool](t, b, `document.documentElement.scrollWidth > window.innerWidth + 1`)
					if overflow {
						t.Errorf("%s at 390 px scrolls sideways", p.name)
					}
				}
				b.screenshot(t, shots, fmt.Sprintf("%s-%d", p.name, size[0]))
				if p.name == "machine" {
					b.run(t, "scroll to the inventory", chromedp.Evaluate[chromedp.Void](`document.getElementById('inventory').scrollIntoView()`))
					b.screenshot(t, shots, fmt.Sprintf("inventory-%d", size[0]))
					b.run(t, "scroll to the memory", chromedp.Evaluate[chromedp.Void](`document.getElementById('inv-memory').scrollIntoView()`))
					b.screenshot(t, shots, fmt.Sprintf("inventory-memory-%d", size[0]))
				}
				checkNames(t, b, p.name)
			}
		}
		b.run(t, "back to desktop", chromedp.EmulateViewport(1280, 800))
	})

	t.Run("keyboard", func(t *testing.T) {
		b.run(t, "rows by keyboard", chromedp.Navigate(l.ui.URL+"/ui/#/machines"),
			waitJS(`document.querySelectorAll('.grid-canvas [role=row]:not([hidden])').length === 14`),
			chromedp.Focus(chromedp.CSS(`input[type=search]`)),
			chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(" "),
			waitJS(`document.activeElement.getAttribute('aria-rowindex') === '3' && document.activeElement.getAttribute('aria-selected') === 'true'`),
			chromedp.KeyEvent(kb.Enter),
			waitJS(`location.hash.startsWith('#/machines/m-')`))
	})

	b.checkConsole(t, `status of 400`, `status of 502`) // the spare machine has no BMC: its power status fails, on purpose
}

// clearFilter empties the machines filter as a person would (the input
// event included).
func clearFilter() chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`(() => { const q = document.querySelector('input[type=search]'); q.value = ''; q.dispatchEvent(new Event('input')); })()`)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func rowNames(t testing.TB, b *browser) string {
	t.Helper()
	names := js[[]string](t, b, `[...document.querySelectorAll('.grid-canvas [role=row]:not([hidden])')].sort((a, b) => a.dataset.index - b.dataset.index).map(r => r.querySelector('.c-name').textContent)`)
	return strings.Join(names, ",")
}

// checkNames asserts that every element a person can operate has an
// accessible name, as Chromium computes it for screen readers.
func checkNames(t testing.TB, b *browser, page string) {
	t.Helper()
	const interactive = `a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"]), [role=button], [role=link], [role=checkbox], [role=row][tabindex]`
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(interactive), chromedp.AtLeast(0)))
	if err != nil {
		t.Fatalf("%s: interactive elements: %v", page, err)
	}
	if len(nodes) < 2 {
		t.Fatalf("%s: only %d interactive elements found", page, len(nodes))
	}
	checked := 0
	for _, n := range nodes {
		res, err := chromedp.Call(ctx, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{BackendNodeID: n.BackendNodeID, FetchRelatives: new(false)})
		if err != nil {
			t.Fatalf("%s: accessible name of <%s>: %v", page, n.NodeName, err)
		}
		ax := res.Nodes
		if len(ax) == 0 || ax[0].Ignored {
			continue // hidden (a pooled row not in use, a collapsed control)
		}
		checked++
		name := ""
		if ax[0].Name != nil {
			name = strings.Trim(string(ax[0].Name.Value), `" `)
		}
		if name == "" {
			t.Errorf("%s: <%s %s> has no accessible name", page, strings.ToLower(n.NodeName), attrs(n))
		}
	}
	if checked == 0 {
		t.Errorf("%s: no visible interactive element checked", page)
	}
}

func attrs(n *chromedp.Node) string {
	var parts []string
	for i := 0; i+1 < len(n.Attributes); i += 2 {
		parts = append(parts, fmt.Sprintf("%s=%q", n.Attributes[i], n.Attributes[i+1]))
	}
	return strings.Join(parts, " ")
}

func TestWrongToken(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	b := newBrowser(t, 1280, 800)
	b.signIn(t, e, "not-the-admin-token")
	b.run(t, "error", waitJS(`document.querySelector('#signin-status.alert') !== null`))
	if got := b.text(t, `#signin-status`); !strings.Contains(got, "not accepted") {
		t.Errorf("sign-in says %q", got)
	}
	stored := js[string](t, b, `sessionStorage.getItem('rollcall.admin-token') || ''`)
	where := js[string](t, b, `location.href`)
	invalid := js[string](t, b, `document.getElementById('token').getAttribute('aria-invalid')`)
	if stored != "" || strings.Contains(where, "not-the-admin") {
		t.Errorf("a rejected token was kept: storage %q, URL %s", stored, where)
	}
	if invalid != "true" {
		t.Errorf("the token field is not marked invalid")
	}
	b.screenshot(t, shotsDir(t), "wrong-token-1280")
	checkNames(t, b, "sign-in")

	// A token that stops working while signed in (another cluster's page
	// left open) leads back to sign-in, with the reason.
	b.run(t, "stale token", chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('rollcall.admin-token', 'stale')`),
		chromedp.Navigate(e.ui.URL+"/ui/#/machines"), chromedp.Reload(), waitJS(`document.querySelector('#signin-status.alert') !== null`))
	if got := b.text(t, `#signin-status`); !strings.Contains(got, "no longer accepts") {
		t.Errorf("stale token: %q", got)
	}
	b.checkConsole(t, `status of 401`)
}

func TestNoLeader(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	e.health = func(w http.ResponseWriter, r *http.Request) {
		// What a node that lost its quorum answers (appliance getHealth).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"node":"ui1","leader":"","state":"Candidate","applied_index":42,"ok":false}`)
	}
	b := newBrowser(t, 390, 844)
	b.signIn(t, e, e.admin)
	b.run(t, "problem page", waitJS(`document.querySelector('#problem-title') !== null`))
	if got := b.text(t, `#problem-title`); got != "This node cannot reach a leader" {
		t.Errorf("title %q", got)
	}
	if got := b.text(t, `.problem`); !strings.Contains(got, "Candidate") || !strings.Contains(got, "ui1") {
		t.Errorf("problem page lacks the node's state: %q", got)
	}
	b.screenshot(t, shotsDir(t), "no-leader-390")
	// The leader is back: the page recovers by itself.
	e.health = nil
	b.run(t, "recovers", waitJS(`document.querySelector('header.top') !== null`))
	b.checkConsole(t, `status of 503`)
}
