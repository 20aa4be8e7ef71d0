package webui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/fleet"
)

// Layouts and a machine's network section against a real node: a file that
// is not a layout is refused beside it, a saved layout is chosen for a
// commissioned machine, and the plan preview shows the NIC it chose and the
// rendered network-config.
func TestBrowserLayouts(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	rep := fleet.Generate(fleetSeed, 0)
	m := e.commissionNamed(t, "ly-01", rep)
	b := newBrowser(t, 1280, 900)
	b.signIn(t, e, e.admin)
	b.run(t, "shell", chromedp.WaitVisible(chromedp.CSS(`header.top`)))

	const good = `{"interfaces": [{"type": "physical", "name": "boot", "select": "boot", "links": [{"mode": "dhcp"}]}]}`
	t.Run("layout", func(t *testing.T) {
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/layouts")}, openDialog(`#add-layout`)...)...)
		b.run(t, "not JSON", setField("name", "one-nic"), setField("json", `{"interfaces": [`), submitDialog(), waitFieldError("json"))
		expectBeside(t, b, "json", "not valid JSON")
		b.run(t, "not a layout", setField("json", `{"interfacez": []}`), submitDialog(),
			waitJS(`document.querySelector('dialog[open] [data-field=json] .field-error')?.textContent.includes('interfacez')`))
		expectBeside(t, b, "json", "interfacez")
		b.run(t, "good", setField("json", good), setField("comment", "one NIC, DHCP"), submitDialog(),
			waitJS(`location.hash === '#/layouts/one-nic' && document.querySelector('[data-field=json] textarea') !== null`))
		if got := js[string](t, b, `document.querySelector('[data-field=json] textarea').value`); got != good {
			t.Errorf("the page shows the file as %q, want it as saved", got)
		}
		var l wire.LayoutView
		e.call(t, "GET", "/api/v1/layouts/one-nic", nil, &l)
		if l.JSON != good || l.Comment != "one NIC, DHCP" {
			t.Errorf("the API shows %+v", l)
		}
	})

	t.Run("machine network", func(t *testing.T) {
		b.run(t, "machine page", chromedp.Navigate(e.ui.URL+"/ui/#/machines/"+m.ID),
			waitJS(`[...(document.querySelector('#network [data-field=layout] select')?.options || [])].some((o) => o.value === 'one-nic')`))
		b.run(t, "choose", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#network [data-field=layout] select'); s.value = 'one-nic'; s.dispatchEvent(new Event('change')); })()`),
			chromedp.Click(chromedp.CSS(`#network form button[type=submit]`)),
			waitJS(`document.querySelector('#network .form-ok') !== null`))
		var d wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+m.ID, nil, &d)
		if d.Layout != "one-nic" {
			t.Fatalf("the API shows layout %q, want one-nic", d.Layout)
		}
		// Clicked from the page itself: the network card may be drawn again
		// (the machine's record moved) between a lookup and a click.
		b.run(t, "preview", waitJS(`document.getElementById('preview-plan') !== null`),
			chromedp.Evaluate[chromedp.Void](`document.getElementById('preview-plan').click()`), waitJS(`document.querySelector('#plan') !== null || document.querySelector('#network .alert.error') !== null`))
		plan := b.text(t, `#network`)
		if !strings.Contains(plan, "network-config") || !strings.Contains(plan, rep.BootMAC) || !strings.Contains(plan, "one-nic") {
			t.Errorf("the plan preview says %q, want the chosen boot NIC and the network-config", plan)
		}
		b.screenshot(t, shotsDir(t), "machine-network-1280")
	})

	b.checkConsole(t, `status of 400`)
}
