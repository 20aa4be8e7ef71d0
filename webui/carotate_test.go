package webui_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
)

// TestBrowserCARotation: the Access page shows the cluster CA as GET
// /api/v1/ca answers it; Rotate CA… asks first (Cancel changes nothing),
// then rotates with the transition picked, shows the new fingerprint and
// lists the replaced root as still trusted, as the API then answers.
func TestBrowserCARotation(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	b := newBrowser(t, 1280, 900)
	b.signIn(t, e, e.admin)

	var before wire.CAState
	if code := e.call(t, http.MethodGet, "/api/v1/ca", nil, &before); code != http.StatusOK || before.Fingerprint == "" {
		t.Fatalf("GET /api/v1/ca: %d %+v", code, before)
	}
	b.run(t, "access page",
		chromedp.Navigate(e.ui.URL+"/ui/#/access"),
		waitJS(`document.querySelector('.ca-fingerprint') !== null`),
		waitJS(`document.querySelector('button.rotate-ca') !== null && !document.querySelector('button.rotate-ca').hidden`))
	if got := b.text(t, `.ca-fingerprint`); got != "SHA256:"+before.Fingerprint {
		t.Fatalf("the page shows the CA fingerprint %q, GET /api/v1/ca %q", got, before.Fingerprint)
	}
	if ca := b.text(t, `.ca-state`); !strings.Contains(ca, before.Subject) || !strings.Contains(ca, "None: no rotation") {
		t.Errorf("CA section before any rotation: %q", ca)
	}

	// The rotation opens through the version gate a few seconds after the
	// node starts: wait until no member's gate holds it back.
	waitGate(t, e, "ca-rotate")

	// Cancel: nothing happens.
	b.run(t, "rotate, cancelled",
		chromedp.Click(chromedp.CSS(`button.rotate-ca`)),
		waitJS(`document.querySelector('dialog[open] form') !== null`))
	body := b.text(t, `dialog[open] .dialog-body`)
	for _, want := range []string{"SHA256:" + before.Fingerprint, "Every node re-issues its certificates", "must take the new CA before the transition ends"} {
		if !strings.Contains(body, want) {
			t.Errorf("the confirmation lacks %q: %q", want, body)
		}
	}
	if v := js[string](t, b, `document.querySelector('dialog[open] select[name=transition]').value`); v != "720h" {
		t.Errorf("default transition %q, want 720h", v)
	}
	b.screenshot(t, shotsDir(t), "ca-rotate-confirm-1280")
	b.run(t, "cancel",
		chromedp.Click(chromedp.CSS(`dialog[open] button[value=cancel]`)),
		waitJS(`document.querySelector('dialog[open]') === null`))
	var still wire.CAState
	e.call(t, http.MethodGet, "/api/v1/ca", nil, &still)
	if still.Fingerprint != before.Fingerprint || len(still.Previous) != 0 {
		t.Fatalf("a cancelled rotation changed the CA: %s, %d previous", still.Fingerprint, len(still.Previous))
	}

	// A refusal (a transition the API does not take, forged into the
	// choice) is shown on the page and changes nothing.
	b.run(t, "rotate, refused",
		chromedp.Click(chromedp.CSS(`button.rotate-ca`)),
		waitJS(`document.querySelector('dialog[open] form') !== null`),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('dialog[open] select[name=transition]'); s.options[s.selectedIndex].value = '5m'; })()`),
		chromedp.Click(chromedp.CSS(`dialog[open] button.danger`)),
		waitJS(`document.querySelector('.ca-notice .alert.error') !== null`))
	if got := b.text(t, `.ca-notice .alert.error`); !strings.Contains(got, "The CA was not rotated") || !strings.Contains(got, "transition must be a duration between 1h and 8760h") {
		t.Errorf("refusal shown as %q", got)
	}
	e.call(t, http.MethodGet, "/api/v1/ca", nil, &still)
	if still.Fingerprint != before.Fingerprint {
		t.Fatal("a refused rotation changed the CA")
	}

	// Confirmed, with a 7-day transition.
	b.run(t, "rotate",
		chromedp.Click(chromedp.CSS(`button.rotate-ca`)),
		waitJS(`document.querySelector('dialog[open] form') !== null`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('dialog[open] select[name=transition]').value = '168h'`),
		chromedp.Click(chromedp.CSS(`dialog[open] button.danger`)),
		// The refusal above is cleared as the request starts.
		waitJS(`document.querySelector('.ca-new-fingerprint') !== null || [...document.querySelectorAll('.ca-notice .alert.error')].some((e) => !e.textContent.includes('transition must be'))`))
	if js[bool](t, b, `document.querySelector('.ca-notice .alert.error') !== null`) {
		t.Fatalf("the rotation failed: %s", b.text(t, `.ca-notice .alert.error`))
	}
	rotated := time.Now()
	var after wire.CAState
	e.call(t, http.MethodGet, "/api/v1/ca", nil, &after)
	if after.Fingerprint == before.Fingerprint || len(after.Previous) != 1 || after.Previous[0].Fingerprint != before.Fingerprint {
		t.Fatalf("after the rotation GET /api/v1/ca: %s, previous %+v", after.Fingerprint, after.Previous)
	}
	if d := after.Previous[0].TrustedUntil.Sub(rotated); d < 167*time.Hour || d > 169*time.Hour {
		t.Errorf("the old root is trusted until %s: %s from now, want the 168h picked", after.Previous[0].TrustedUntil, d)
	}
	if after.RotatedBy != "token" {
		t.Errorf("rotated by %q, want token", after.RotatedBy)
	}
	checkRotated := func(what string) {
		t.Helper()
		if got := b.text(t, `.ca-fingerprint`); got != "SHA256:"+after.Fingerprint {
			t.Fatalf("%s: the page shows the CA fingerprint %q, GET /api/v1/ca %q", what, got, after.Fingerprint)
		}
		prev := js[[]string](t, b, `[...document.querySelectorAll('tr.ca-previous')].map((r) => r.textContent)`)
		if len(prev) != 1 || !strings.Contains(prev[0], "SHA256:"+before.Fingerprint) {
			t.Fatalf("%s: previous roots shown %q, want SHA256:%s", what, prev, before.Fingerprint)
		}
		if got := b.text(t, `.ca-rotated`); !strings.HasSuffix(got, "by token") {
			t.Errorf("%s: rotated %q", what, got)
		}
	}
	if got := b.text(t, `.ca-new-fingerprint`); got != "SHA256:"+after.Fingerprint {
		t.Fatalf("the page says the new fingerprint is %q, GET /api/v1/ca %q", got, after.Fingerprint)
	}
	checkRotated("after the rotation")
	b.screenshot(t, shotsDir(t), "ca-rotated-1280")

	// A fresh load reads the same from the node.
	b.run(t, "reload",
		chromedp.Navigate(e.ui.URL+"/ui/#/"),
		chromedp.Navigate(e.ui.URL+"/ui/#/access"),
		chromedp.Reload(),
		waitJS(`document.querySelector('tr.ca-previous') !== null`))
	checkRotated("after a reload")
	b.checkConsole(t, `status of 400 .*/api/v1/ca/rotate`) // the refusal above
}

// waitGate waits, up to two minutes, until no member of the cluster has
// the command named pending at its version gate.
func waitGate(t *testing.T, e *env, command string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var cv wire.ClusterView
		res := e.node.Do(t, http.MethodGet, "/api/v1/cluster", nil, nodetest.Bearer(e.admin)...)
		open := res.Status == http.StatusOK && json.Unmarshal(res.Body, &cv) == nil && len(cv.Members) > 0
		var pending []string
		for _, m := range cv.Members {
			if m.Status == nil {
				open = false
				continue
			}
			if m.Status.Gate != nil {
				pending = append(pending, m.Status.Gate.Pending...)
			}
		}
		if open && !slices.ContainsFunc(pending, func(p string) bool { return strings.HasPrefix(p, command+" ") }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still closed at the version gate after 2m (pending %q; GET /api/v1/cluster: %s)", command, pending, res)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
