package webui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The Doctor page against a real node: every check the API reports is a
// row with its status and what to do, the verdict says how many failed
// (a fresh node has no commissioning image: one fails), and "Run again"
// asks again.
func TestBrowserDoctor(t *testing.T) {
	chromium(t)
	e := startEnv(t)
	b := newBrowser(t, 1280, 900)
	b.signIn(t, e, e.admin)
	b.run(t, "doctor page", chromedp.Navigate(e.ui.URL+"/ui/#/doctor"), waitJS(`document.querySelector('.doctor-verdict') !== null`))
	rows := js[[]string](t, b, `[...document.querySelectorAll('table.data tbody tr')].map((r) => r.className + ' ' + r.textContent)`)
	var raft, image bool
	for _, r := range rows {
		raft = raft || strings.HasPrefix(r, "check-ok raft")
		image = image || strings.HasPrefix(r, "check-fail commissioning image") && strings.Contains(r, "rollcall image import")
	}
	if !raft || !image {
		t.Errorf("rows %q: want raft ok, and the commissioning image failing with what to do", rows)
	}
	if v := b.text(t, `.doctor-verdict`); !strings.Contains(v, "failed") {
		t.Errorf("verdict %q: a check failed", v)
	}
	b.run(t, "run again", chromedp.Click(`button.doctor-run`), waitJS(`document.querySelector('button.doctor-run').disabled === false && document.querySelector('.doctor-verdict') !== null`))
	b.screenshot(t, shotsDir(t), "doctor-1280")
	b.checkConsole(t)
}
