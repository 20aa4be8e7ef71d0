package webui_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The forms that edit what the CLI edits, against a real node: each
// refusal the API sends is shown beside the field it concerns, and what a
// form saves is what the API then answers.

// dialogField is the control of a field in the open dialog (or, with a
// scope, in another form).
func dialogField(name string) string {
	return fmt.Sprintf(`(document.querySelector('dialog[open] [data-field=%q]')?.querySelector('input, select, textarea'))`, name)
}

// setField types a value into a field of the open dialog, with the events
// a person's typing sends.
func setField(name, value string) chromedp.Action[chromedp.Void] {
	v, _ := json.Marshal(value)
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const el = %s; el.value = %s; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); })()`, dialogField(name), v))
}

func openDialog(sel string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, sel)),
		chromedp.Click(chromedp.CSS(sel)),
		waitJS(`document.querySelector('dialog[open] form') !== null`),
	}
}

func submitDialog() chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(`dialog[open] form button[type=submit]`))
}

// waitFieldError waits for a message in the open dialog, beside a field or
// not (expectBeside says whether it is beside the right one).
func waitFieldError(string) chromedp.Action[chromedp.Void] {
	return waitJS(`[...document.querySelectorAll('dialog[open] .field-error, dialog[open] .form-error')].some((e) => !e.hidden && e.textContent !== '')`)
}

// fieldErrors are the visible messages of the open dialog: beside which
// field ("" for the form's own place), and what they say.
func fieldErrors(t testing.TB, b *browser) map[string]string {
	t.Helper()
	return js[map[string]string](t, b, `(() => {
		const out = {};
		for (const e of document.querySelectorAll('dialog[open] .field-error')) if (!e.hidden) out[e.closest('[data-field]').dataset.field] = e.textContent;
		const f = document.querySelector('dialog[open] .form-error');
		if (f && !f.hidden) out[''] = f.textContent;
		return out;
	})()`)
}

// expectBeside checks that exactly one message shows, beside field, and
// that it says want, and that the field is marked invalid.
func expectBeside(t testing.TB, b *browser, field, want string) {
	t.Helper()
	errs := fieldErrors(t, b)
	if len(errs) != 1 || !strings.Contains(errs[field], want) {
		t.Errorf("messages %q, want one beside %q saying %q", errs, field, want)
	}
	if got := js[string](t, b, dialogField(field)+`.getAttribute('aria-invalid') || ''`); got != "true" {
		t.Errorf("field %s is not marked invalid (aria-invalid %q)", field, got)
	}
}

func TestBrowserForms(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	var first wire.MachineView
	e.call(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "form-01", MAC: "52:54:00:bb:00:01"}, &first)
	b := newBrowser(t, 1280, 800)
	b.signIn(t, e, e.admin)
	b.run(t, "shell", chromedp.WaitVisible(chromedp.CSS(`header.top`)))

	t.Run("add machine", func(t *testing.T) {
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/machines")}, openDialog(`#add-machine`)...)...)
		b.run(t, "bad name", setField("name", "Bad Name"), setField("mac", "52:54:00:bb:00:02"), submitDialog(), waitFieldError("name"))
		expectBeside(t, b, "name", `"Bad Name"`)
		b.run(t, "bad MAC", setField("name", "form-02"), setField("mac", "52:54:00:zz"), submitDialog(), waitFieldError("mac"))
		expectBeside(t, b, "mac", "MAC")
		b.run(t, "good", setField("mac", "52:54:00:bb:00:02"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null && location.hash.startsWith('#/machines/m-')`),
			waitJS(`document.querySelector('main h1')?.textContent.startsWith('form-02')`))
		var list wire.MachineList
		e.call(t, "GET", "/api/v1/machines?q=form-02", nil, &list)
		if len(list.Machines) != 1 || list.Machines[0].BootMAC != "52:54:00:bb:00:02" {
			t.Fatalf("the API lists %+v, want form-02 with its boot MAC", list.Machines)
		}
	})

	t.Run("BMC", func(t *testing.T) {
		const secret = "Form-bmc-Secret-47"
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/machines/" + first.ID)}, openDialog(`#edit-bmc`)...)...)
		b.run(t, "no address", setField("driver", "ipmi"), setField("address", ""), setField("user", "admin"), setField("password", secret),
			submitDialog(), waitFieldError("address"))
		expectBeside(t, b, "address", "address is required")
		b.run(t, "with a credential in the address", setField("address", "admin:x@10.0.40.12"), submitDialog(),
			waitJS(`document.querySelector('dialog[open] [data-field=address] .field-error').textContent.includes('user@host')`))
		expectBeside(t, b, "address", "must not carry a user or password")
		b.run(t, "save", setField("address", "10.0.40.12:623"), setField("settings", "cipher=17"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`document.querySelector('#bmc')?.textContent.includes('10.0.40.12:623') && document.querySelector('#bmc').textContent.includes('sealed')`))
		var m wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+first.ID, nil, &m)
		if m.BMC == nil || m.BMC.Driver != "ipmi" || m.BMC.Address != "10.0.40.12:623" || m.BMC.User != "admin" || !m.BMC.HasPassword || m.BMC.Settings["cipher"] != "17" {
			t.Fatalf("the API shows BMC %+v, want what the form saved", m.BMC)
		}
		// Open it again: everything but the password comes back.
		b.run(t, "reopen", openDialog(`#edit-bmc`)...)
		if got := js[string](t, b, dialogField("address")+`.value`); got != "10.0.40.12:623" {
			t.Errorf("address field %q", got)
		}
		if got := js[string](t, b, dialogField("password")+`.value`); got != "" {
			t.Errorf("the password field holds %q: it must stay empty", got)
		}
		if got := js[string](t, b, dialogField("password")+`.type`); got != "password" {
			t.Errorf("the password field is of type %q", got)
		}
		if html := js[string](t, b, `document.documentElement.outerHTML`); strings.Contains(html, secret) {
			t.Error("the BMC password is in the page")
		}
		b.run(t, "cancel", chromedp.Click(chromedp.CSS(`dialog[open] form .buttons button[type=button]`)), waitJS(`document.querySelector('dialog[open]') === null`))

		b.run(t, "clear", append(openDialog(`#clear-bmc`), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`document.querySelector('#bmc')?.textContent.includes('No BMC known')`))...)
		m = wire.MachineDetail{} // decoding into the old record would keep what the answer leaves out
		e.call(t, "GET", "/api/v1/machines/"+first.ID, nil, &m)
		if m.BMC != nil {
			t.Fatalf("after clearing (DELETE …/bmc), the API shows BMC %+v", m.BMC)
		}
		if js[bool](t, b, `document.querySelector('#clear-bmc') !== null`) {
			t.Error("a machine without a BMC still offers Clear BMC")
		}
	})

	t.Run("network model", func(t *testing.T) {
		b.run(t, "fabric", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/network")}, openDialog(`#add-fabric`)...)...)
		b.run(t, "bad fabric name", setField("name", "Hall B"), submitDialog(), waitFieldError("name"))
		expectBeside(t, b, "name", `"Hall B"`)
		b.run(t, "good fabric", setField("name", "hall-b"), submitDialog(), waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`[...document.querySelectorAll('#main table th')].some((th) => th.textContent === 'hall-b')`))

		b.run(t, "VLAN", openDialog(`#add-vlan`)...)
		b.run(t, "VID too big", setField("fabric", "hall-b"), setField("vid", "5000"), submitDialog(), waitFieldError("vid"))
		expectBeside(t, b, "vid", "4094")
		b.run(t, "DHCP without a node", setField("vid", "20"), setField("dhcp", "full"), submitDialog(), waitFieldError("servers"))
		expectBeside(t, b, "servers", "no node")
		b.run(t, "good VLAN", setField("servers", "ui1"), submitDialog(), waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`[...document.querySelectorAll('#main table th')].some((th) => th.textContent === 'hall-b / 20')`))
		var vl wire.VLANList
		e.call(t, "GET", "/api/v1/vlans", nil, &vl)
		var got *wire.VLAN
		for i := range vl.VLANs {
			if vl.VLANs[i].Fabric == "hall-b" && vl.VLANs[i].VID == 20 {
				got = &vl.VLANs[i]
			}
		}
		if got == nil || got.DHCP != "full" || len(got.Servers) != 1 || got.Servers[0].Node != "ui1" {
			t.Fatalf("the API shows VLAN %+v, want hall-b/20 with full DHCP served by ui1", got)
		}

		b.run(t, "subnet", openDialog(`#add-subnet`)...)
		b.run(t, "gateway outside", setField("cidr", "10.60.0.0/24"), setField("vlan", "hall-b/20"), setField("gateway", "10.61.0.1"),
			submitDialog(), waitFieldError("gateway"))
		expectBeside(t, b, "gateway", "10.61.0.1")
		b.run(t, "good subnet", setField("gateway", "10.60.0.1"), submitDialog(), waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`[...document.querySelectorAll('#main table a')].some((a) => a.textContent === '10.60.0.0/24')`))

		b.run(t, "range", chromedp.Navigate(e.ui.URL+"/ui/#/network/subnets/10.60.0.0/24"), waitJS(`document.querySelector('#add-range') !== null`))
		b.run(t, "open", openDialog(`#add-range`)...)
		b.run(t, "range outside", setField("kind", "static"), setField("first", "10.60.0.251"), setField("last", "10.60.1.5"), submitDialog(),
			waitFieldError("first"))
		expectBeside(t, b, "first", "10.60.0.0/24")
		b.run(t, "good range", setField("last", "10.60.0.254"), submitDialog(), waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`[...document.querySelectorAll('#main td')].some((td) => td.textContent === '10.60.0.254')`))
		b.run(t, "reserve", openDialog(`#reserve-ip`)...)
		b.run(t, "a free address", setField("ip", "10.60.0.5"), setField("name", "switch-1"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null || [...document.querySelectorAll('dialog[open] .field-error')].some((e) => !e.hidden)`))
		if js[bool](t, b, `document.querySelector('dialog[open]') !== null`) {
			t.Fatalf("reserving 10.60.0.1: %q", fieldErrors(t, b))
		}
		b.run(t, "reserved listed", waitJS(`[...document.querySelectorAll('#main td')].some((td) => td.textContent === 'switch-1')`))
	})

	b.checkConsole(t, `status of 400`, `status of 409`)
}
