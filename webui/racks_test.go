package webui_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The Racks page and the bulk "Set location…" dialog against a real node:
// a machine placed through the API is drawn over its units, coloured by
// its state, and opens when clicked; two machines selected in the table are
// placed in one rack by the dialog, as the API then shows.
func TestBrowserRacks(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	var ms []wire.MachineView
	for i := range 3 {
		var m wire.MachineView
		if code := e.call(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: fmt.Sprintf("rk-%02d", i+1), MAC: fmt.Sprintf("52:54:00:cc:00:%02x", i+1)}, &m); code != http.StatusCreated {
			t.Fatalf("create: %d", code)
		}
		ms = append(ms, m)
	}
	e.call(t, "PUT", "/api/v1/machines/"+ms[0].ID+"/location", wire.LocationRequest{Building: "B1", Room: "hall-2", Rack: "R7", Unit: 10, Height: 2}, nil)

	b := newBrowser(t, 1280, 900)
	b.signIn(t, e, e.admin)
	b.run(t, "shell", chromedp.WaitVisible(chromedp.CSS(`header.top`)))
	shots := shotsDir(t)

	placed := func(rack, id string) string {
		return fmt.Sprintf(`figure.rack[data-rack=%q] .rack-machine[data-id=%q]`, rack, id)
	}
	// unitsUnder are the unit numbers whose labels a machine's block covers
	// on the screen.
	unitsUnder := func(t *testing.T, sel string) []string {
		t.Helper()
		return js[[]string](t, b, fmt.Sprintf(`(() => {
			const el = document.querySelector(%q);
			const r = el.getBoundingClientRect();
			return [...el.closest('.elevation').querySelectorAll('.u-label')].filter((l) => {
				const lr = l.getBoundingClientRect();
				const mid = (lr.top + lr.bottom) / 2;
				return mid > r.top && mid < r.bottom;
			}).map((l) => l.textContent);
		})()`, sel))
	}

	t.Run("elevation", func(t *testing.T) {
		b.run(t, "racks page", chromedp.Navigate(e.ui.URL+"/ui/#/racks"), waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, placed("R7", ms[0].ID))))
		if got := unitsUnder(t, placed("R7", ms[0].ID)); strings.Join(got, ",") != "11,10" {
			t.Errorf("rk-01 (unit 10, 2U) is drawn over units %v, want 11,10", got)
		}
		if got := b.text(t, placed("R7", ms[0].ID)); !strings.Contains(got, "rk-01") {
			t.Errorf("the block says %q, want rk-01", got)
		}
		if cls := js[string](t, b, fmt.Sprintf(`document.querySelector(%q).className`, placed("R7", ms[0].ID))); !strings.Contains(cls, "state-new") {
			t.Errorf("the block's classes %q lack its state", cls)
		}
		// The table follows the racks list, which may answer after the
		// elevation is drawn on a loaded machine.
		b.run(t, "the racks table", waitJS(`(document.querySelector('#main table')?.textContent || '').includes('B1')`))
		if got := b.text(t, `#main table`); !strings.Contains(got, "R7") || !strings.Contains(got, "B1") || !strings.Contains(got, "2U") {
			t.Errorf("the racks table says %q", got)
		}
		// Placed through the API while the page is open: drawn without a reload.
		e.call(t, "PUT", "/api/v1/machines/"+ms[1].ID+"/location", wire.LocationRequest{Rack: "R7", Unit: 30}, nil)
		b.run(t, "live", waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, placed("R7", ms[1].ID))))
		if got := unitsUnder(t, placed("R7", ms[1].ID)); strings.Join(got, ",") != "30" {
			t.Errorf("rk-02 (unit 30) is drawn over units %v", got)
		}
		b.screenshot(t, shots, "racks-1280")
		checkNames(t, b, "racks")
		b.run(t, "one rack", chromedp.Navigate(e.ui.URL+"/ui/#/racks/R7"), waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, placed("R7", ms[0].ID))))
		b.screenshot(t, shots, "rack-1280")
		b.run(t, "click opens the machine", chromedp.Click(chromedp.CSS(placed("R7", ms[0].ID))),
			waitJS(fmt.Sprintf(`location.hash === '#/machines/%s' && document.querySelector('main h1')?.textContent.startsWith('rk-01')`, ms[0].ID)),
			waitJS(`document.querySelector('#location')?.textContent.includes('R7')`))
		if got := b.text(t, `#location`); !strings.Contains(got, "U10–11") || !strings.Contains(got, "hall-2") {
			t.Errorf("the machine's location card says %q", got)
		}
	})

	t.Run("bulk location", func(t *testing.T) {
		b.run(t, "machines", chromedp.Navigate(e.ui.URL+"/ui/#/machines"),
			waitJS(`document.querySelectorAll('.grid-canvas [role=row]:not([hidden])').length === 3`))
		for _, m := range ms[1:] {
			b.run(t, "select "+m.Name, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.grid-canvas [role=row][data-id=%q] input[type=checkbox]`, m.ID))),
				waitJS(fmt.Sprintf(`document.querySelector('.grid-canvas [role=row][data-id=%q]').getAttribute('aria-selected') === 'true'`, m.ID)))
		}
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{waitJS(`document.querySelector('.selinfo').textContent.startsWith('2 selected')`)},
			openDialog(`button[data-action=location]`)...)...)
		if got := b.text(t, `dialog[open] h2`); !strings.Contains(got, "2 machines") {
			t.Errorf("dialog title %q", got)
		}
		b.run(t, "a unit past any rack", setField("rack", "R9"), setField("unit", "200"), submitDialog(), waitFieldError("unit"))
		expectBeside(t, b, "unit", "200")
		b.run(t, "set rack", setField("unit", ""), setField("building", "B2"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(fmt.Sprintf(`[%q, %q].every((id) => document.querySelector('.grid-canvas [role=row][data-id="' + id + '"] .c-loc')?.textContent.includes('R9'))`, ms[1].ID, ms[2].ID)))
		var list wire.MachineList
		e.call(t, "GET", "/api/v1/machines?rack=R9", nil, &list)
		var names []string
		for _, m := range list.Machines {
			names = append(names, m.Name)
			if m.Location.Building != "B2" || m.Location.Unit != 0 {
				t.Errorf("%s stands at %+v, want building B2 without a unit", m.Name, m.Location)
			}
		}
		sort.Strings(names)
		if strings.Join(names, ",") != "rk-02,rk-03" {
			t.Errorf("rack R9 holds %v, want rk-02 and rk-03", names)
		}
		if got := b.text(t, fmt.Sprintf(`.grid-canvas [role=row][data-id=%q] .c-loc`, ms[0].ID)); !strings.Contains(got, "B1") || !strings.Contains(got, "R7") {
			t.Errorf("rk-01's location cell says %q", got)
		}
		b.screenshot(t, shots, "machines-location-1280")
	})

	t.Run("CSV import", func(t *testing.T) {
		setCSV := func(text string) chromedp.Action[chromedp.Void] {
			return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const el = document.querySelector('#import textarea'); el.value = %q; el.dispatchEvent(new Event('input')); })()`, text))
		}
		b.run(t, "racks page", chromedp.Navigate(e.ui.URL+"/ui/#/racks"), waitJS(`document.querySelector('#import textarea') !== null`))
		b.run(t, "a bad row", setCSV("node_name,rack,unit\nrk-03,R7,40\nnobody,R7,1\n"), chromedp.Click(chromedp.ID("import-dry")),
			waitJS(`document.querySelector('#import-errors') !== null`))
		if got := b.text(t, `#import-errors`); !strings.Contains(got, "line 3") || !strings.Contains(got, "nothing was changed") {
			t.Errorf("the bad rows say %q", got)
		}
		b.run(t, "dry run", setCSV("node_name,building,room,rack,unit\nrk-03,B1,hall-2,R7,40\n"), chromedp.Click(chromedp.ID("import-dry")),
			waitJS(`document.querySelector('#import-changes') !== null`))
		if got := b.text(t, `#import-changes`); !strings.Contains(got, "Dry run: 1 machine would move") || !strings.Contains(got, ms[2].ID) || !strings.Contains(got, "R7 U40") {
			t.Errorf("the dry run says %q", got)
		}
		var m wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+ms[2].ID, nil, &m)
		if m.Location.Rack != "R9" {
			t.Fatalf("the dry run moved rk-03: %+v", m.Location)
		}
		b.run(t, "import", chromedp.Click(chromedp.CSS(`#import button[type=submit]`)),
			waitJS(`document.querySelector('#import-changes')?.textContent.startsWith('Imported')`),
			waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, placed("R7", ms[2].ID))))
		m = wire.MachineDetail{}
		e.call(t, "GET", "/api/v1/machines/"+ms[2].ID, nil, &m)
		if m.Location.Rack != "R7" || m.Location.Unit != 40 {
			t.Errorf("after the import rk-03 stands at %+v", m.Location)
		}
	})

	b.checkConsole(t, `status of 400`)
}
