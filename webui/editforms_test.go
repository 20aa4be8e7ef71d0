package webui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The forms that change what is already there, against a real node:
// rename a machine, edit a VLAN, place one machine, resize a rack. Each
// refusal the API sends shows beside the field it concerns, the dialog
// stays open, and what is saved is what the API then answers.
func TestBrowserEditForms(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	var a, b2 wire.MachineView
	e.call(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "ed-01", MAC: "52:54:00:bc:00:01"}, &a)
	e.call(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "ed-02", MAC: "52:54:00:bc:00:02"}, &b2)
	b := newBrowser(t, 1280, 900)
	b.signIn(t, e, e.admin)
	b.run(t, "shell", chromedp.WaitVisible(chromedp.CSS(`header.top`)))

	t.Run("rename", func(t *testing.T) {
		// Opened by its name, the page moves to the machine's ID, so that
		// it keeps showing the machine through the rename.
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/machines/ed-01"),
			waitJS(`location.hash === '#/machines/` + a.ID + `'`)}, openDialog(`#rename`)...)...)
		if got := js[string](t, b, dialogField("name")+`.value`); got != "ed-01" {
			t.Errorf("the name field starts with %q, want the current name", got)
		}
		b.run(t, "not a DNS label", setField("name", "Ed 01"), submitDialog(), waitFieldError("name"))
		expectBeside(t, b, "name", `"Ed 01" must be a DNS label`)
		b.run(t, "taken", setField("name", "ed-02"), submitDialog(),
			waitJS(`document.querySelector('dialog[open] [data-field=name] .field-error')?.textContent.includes('taken')`))
		expectBeside(t, b, "name", `name "ed-02" is taken by machine `+b2.ID)
		b.run(t, "good", setField("name", "r12-n07"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`location.hash === '#/machines/`+a.ID+`'`),
			waitJS(`document.querySelector('main h1')?.textContent.startsWith('r12-n07')`))
		var d wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+a.ID, nil, &d)
		if d.Name != "r12-n07" || d.Events[len(d.Events)-1].Message != "renamed ed-01 → r12-n07" {
			t.Fatalf("the API shows name %q, last event %+v", d.Name, d.Events[len(d.Events)-1])
		}
		if code := e.call(t, "GET", "/api/v1/machines/ed-01", nil, &wire.ErrorReply{}); code != http.StatusNotFound {
			t.Errorf("the old name still answers %d", code)
		}
	})

	t.Run("VLAN", func(t *testing.T) {
		vid := 30
		e.call(t, "POST", "/api/v1/fabrics", wire.FabricRequest{Name: "hall-c"}, nil)
		e.call(t, "POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-c", VID: &vid, DHCP: "full", Servers: []wire.VLANServer{{Node: "ui1"}}}, nil)
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/network"),
			waitJS(`document.querySelector('button[aria-label="Edit VLAN hall-c / 30"]') !== null`)},
			openDialog(`button[aria-label="Edit VLAN hall-c / 30"]`)...)...)
		if got := js[string](t, b, dialogField("servers")+`.value`); got != "ui1" {
			t.Errorf("serving nodes start as %q", got)
		}
		b.run(t, "proxy DHCP served by nobody", setField("dhcp", "proxy"), setField("servers", ""), submitDialog(), waitFieldError("servers"))
		expectBeside(t, b, "servers", "no node")
		b.run(t, "an unknown node", setField("servers", "ui9"), submitDialog(),
			waitJS(`document.querySelector('dialog[open] [data-field=servers] .field-error')?.textContent.includes('ui9')`))
		expectBeside(t, b, "servers", "ui9")
		b.run(t, "save", setField("servers", "ui1"), setField("mtu", "9000"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null`))
		var vl wire.VLANList
		e.call(t, "GET", "/api/v1/vlans", nil, &vl)
		var got *wire.VLAN
		for i := range vl.VLANs {
			if vl.VLANs[i].Fabric == "hall-c" && vl.VLANs[i].VID == 30 {
				got = &vl.VLANs[i]
			}
		}
		if got == nil || got.DHCP != "proxy" || got.MTU != 9000 || len(got.Servers) != 1 || got.Servers[0].Node != "ui1" {
			t.Fatalf("the API shows VLAN %+v, want hall-c/30 proxy, MTU 9000, served by ui1", got)
		}
	})

	t.Run("location and rack", func(t *testing.T) {
		e.call(t, "PUT", "/api/v1/machines/"+b2.ID+"/location", wire.LocationRequest{Rack: "R5", Unit: 20, Height: 2}, nil)
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/machines/" + a.ID)}, openDialog(`#edit-location`)...)...)
		b.run(t, "onto ed-02", setField("rack", "R5"), setField("unit", "21"), submitDialog(), waitFieldError("unit"))
		expectBeside(t, b, "unit", "share a unit")
		b.run(t, "above it", setField("unit", "30"), setField("building", "B7"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`document.querySelector('#location')?.textContent.includes('U30')`))
		var d wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+a.ID, nil, &d)
		if d.Location.Rack != "R5" || d.Location.Unit != 30 || d.Location.Building != "B7" {
			t.Fatalf("the API shows location %+v", d.Location)
		}

		b.run(t, "rack page", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/racks/R5")}, openDialog(`#edit-rack`)...)...)
		b.run(t, "lower than a machine", setField("height", "25"), submitDialog(), waitFieldError("height"))
		expectBeside(t, b, "height", "U30")
		b.run(t, "taller", setField("height", "48"), submitDialog(), waitJS(`document.querySelector('dialog[open]') === null`))
		var r wire.RackDetail
		e.call(t, "GET", "/api/v1/racks/R5", nil, &r)
		if r.Height != 48 {
			t.Fatalf("the API shows rack %+v", r.Rack)
		}
	})

	if t.Failed() {
		t.Log(strings.Repeat("-", 20), "page:", b.text(t, "main"))
	}
	b.checkConsole(t, `status of 400`, `status of 409`)
}
