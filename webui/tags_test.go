package webui_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The Tags page against a real node: a rule that does not parse is refused
// beside the rule, a rule that fails on a machine lists that machine, and a
// manual tag given from the machine page is what the API then shows.
func TestBrowserTags(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	var m wire.MachineView
	if code := e.call(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "tg-01", MAC: "52:54:00:dd:00:01"}, &m); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	b := newBrowser(t, 1280, 900)
	b.signIn(t, e, e.admin)
	b.run(t, "shell", chromedp.WaitVisible(chromedp.CSS(`header.top`)))

	t.Run("rule", func(t *testing.T) {
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/tags")}, openDialog(`#add-tag`)...)...)
		b.run(t, "a rule that does not parse", setField("name", "big"), setField("match", "{{ gt .Node.Disks "), submitDialog(), waitFieldError("match"))
		expectBeside(t, b, "match", "does not parse")
		// Parses, and fails on a machine without an inventory (no PCI
		// functions to index).
		b.run(t, "a rule that fails on a machine", setField("match", "{{ index .Node.PCIVendors 3 }}"), submitDialog(),
			waitJS(`document.querySelector('dialog[open]') === null`))
		b.run(t, "tag page", waitJS(`location.hash === '#/tags/big' && document.querySelector('[data-field=match] textarea') !== null`))
		var saved wire.TagDetail
		e.call(t, "GET", "/api/v1/tags/big", nil, &saved)
		if saved.Match == "" {
			t.Fatalf("the API shows tag %+v without its rule", saved)
		}
		if got := js[string](t, b, `document.querySelector('[data-field=match] textarea').value`); got != saved.Match {
			t.Errorf("the form shows rule %q, the API %q", got, saved.Match)
		}
		b.run(t, "failures", waitJS(`document.querySelector('#tag-failures') !== null`))
		if got := b.text(t, `#tag-failures`); !strings.Contains(got, "tg-01") || !strings.Contains(got, "one machine") {
			t.Errorf("the failures say %q, want tg-01 named", got)
		}
		// A rule that matches: saving it again from the page.
		b.run(t, "save a good rule", chromedp.Evaluate[chromedp.Void](`(() => { const el = document.querySelector('[data-field=match] textarea'); el.value = '{{ eq .Node.Name "tg-01" }}'; el.dispatchEvent(new Event('input')); })()`),
			chromedp.Click(chromedp.CSS(`#main form button[type=submit]`)),
			waitJS(`document.querySelector('.form-ok') !== null`),
			waitJS(`[...document.querySelectorAll('#main table a')].some((a) => a.textContent === 'tg-01')`))
		if js[bool](t, b, `document.querySelector('#tag-failures') !== null`) {
			t.Errorf("a rule that matches still shows failures: %q", b.text(t, `#tag-failures`))
		}
		var got wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+m.ID, nil, &got)
		if !slices.Contains(got.AutoTags, "big") {
			t.Errorf("tg-01's auto tags are %v, want big", got.AutoTags)
		}
	})

	t.Run("manual tag", func(t *testing.T) {
		e.call(t, "POST", "/api/v1/tags", wire.TagRequest{Name: "web", Comment: "front ends"}, nil)
		b.run(t, "open", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ui.URL + "/ui/#/machines/" + m.ID)}, openDialog(`#edit-tags`)...)...)
		b.run(t, "a tag that does not exist", setField("add", "nope"), submitDialog(), waitFieldError("add"))
		expectBeside(t, b, "add", "nope")
		b.run(t, "an existing one", setField("add", "web"), submitDialog(), waitJS(`document.querySelector('dialog[open]') === null`),
			waitJS(`[...document.querySelectorAll('#tags .chip-tag')].some((c) => c.textContent === 'web')`))
		var got wire.MachineDetail
		e.call(t, "GET", "/api/v1/machines/"+m.ID, nil, &got)
		if !slices.Contains(got.Tags, "web") {
			t.Errorf("tg-01's tags are %v, want web", got.Tags)
		}
		b.run(t, "tags list", chromedp.Navigate(e.ui.URL+"/ui/#/tags"), waitJS(`[...document.querySelectorAll('#main table a')].some((a) => a.textContent === 'web')`))
		if got := b.text(t, `#main table`); !strings.Contains(got, "manual") || !strings.Contains(got, "rule") {
			t.Errorf("the tags table says %q", got)
		}
		b.screenshot(t, shotsDir(t), fmt.Sprintf("tags-%d", 1280))
		checkNames(t, b, "tags")
	})

	b.checkConsole(t, `status of 400`)
}
