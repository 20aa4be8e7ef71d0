package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/testenv"
	"github.com/rollcall/rollcall/webui"
)

// ---- a real node behind the page

// env is one appliance node and the page served in front of it: /api and
// /images go to the node, everything else to webui.Handler, as the
// appliance mounts it.
type env struct {
	node         *nodetest.Node
	admin, agent string
	ui           *httptest.Server
	// health, when set, answers GET /api/v1/health instead of the node.
	health http.HandlerFunc
}

func startEnv(t testing.TB) *env {
	t.Helper()
	return startEnvConfig(t, "")
}

// startEnvConfig is startEnv with the node's rollcall.json.
func startEnvConfig(t testing.TB, config string) *env {
	t.Helper()
	n := nodetest.StartWith(t, nodetest.Options{Name: "ui1", Config: config})
	e := &env{node: n, admin: n.Admin, agent: n.Agent}
	api, _ := url.Parse("http://" + n.HTTPAddr())
	proxy := httputil.NewSingleHostReverseProxy(api)
	page := webui.Handler()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/health", func(w http.ResponseWriter, r *http.Request) {
		if e.health != nil {
			e.health(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	mux.Handle("/api/", proxy)
	mux.Handle("/images/", proxy)
	mux.Handle("/ca.pem", proxy)
	mux.Handle("/", page)
	e.ui = httptest.NewServer(mux)
	t.Cleanup(e.ui.Close)
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(e.ui.URL + "/api/v1/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the node elected no leader within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return e
}

// call sends a request to the node as the admin (or, with agent, as the
// commissioning agent) and decodes the answer into out.
func (e *env) call(t testing.TB, method, path string, body any, out any, agent ...bool) int {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	header := nodetest.Bearer(e.admin)
	if len(agent) > 0 && agent[0] {
		tok := e.agent
		if raw != nil {
			// An agent acts with the boot token its boot script would hand
			// its boot MAC: minted here through the admin API.
			var id struct {
				BootMAC string `json:"boot_mac"`
			}
			json.Unmarshal(raw, &id)
			var reply wire.BootTokenReply
			if id.BootMAC == "" || e.call(t, "POST", "/api/v1/boot-tokens", wire.BootTokenRequest{MAC: id.BootMAC}, &reply) != http.StatusOK {
				t.Fatalf("%s %s: no boot token for boot_mac %q", method, path, id.BootMAC)
			}
			tok = reply.Token
		}
		header = nodetest.AgentHeader(tok)
	}
	var send any
	if raw != nil {
		send = raw
	}
	res := e.node.Do(t, method, path, send, header...)
	if res.Status >= 300 && out == nil {
		t.Fatalf("%s %s: %s", method, path, res)
	}
	if out != nil {
		if err := json.Unmarshal(res.Body, out); err != nil {
			t.Fatalf("%s %s: %d, decode %q: %v", method, path, res.Status, res.Body, err)
		}
	}
	return res.Status
}

// ---- the browser

// chromium finds the browser; without one the test is skipped, except in
// CI, where a missing browser is a broken set-up.
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Skip(t, "chromium is not installed (apt-get install chromium): the browser tests need it")
	return ""
}

// browser is one headless Chromium tab, recording what the page logs.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	// problems are console errors, uncaught exceptions and failed loads.
	problems []string
}

func newBrowser(t testing.TB, width, height int64, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(int(width), int(height)),
	)
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &browser{ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				b.mu.Unlock()
			}
		}
	}()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// checkConsole fails the test on anything the page logged as an error,
// except messages that match one of allowed (a wrong token's 401 is such an
// expected failure: the browser logs every failed load).
func (b *browser) checkConsole(t testing.TB, allowed ...string) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // let the last messages arrive
	b.mu.Lock()
	defer b.mu.Unlock()
next:
	for _, p := range b.problems {
		for _, a := range allowed {
			if regexp.MustCompile(a).MatchString(p) {
				continue next
			}
		}
		t.Errorf("the page logged an error: %s", p)
	}
	b.problems = nil
}

// run runs steps with a deadline, failing the test with what was being
// done.
func (b *browser) run(t testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until a JavaScript condition is true.
func waitJS(cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(pollTimeout))
}

// js evaluates an expression in the page.
func js[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the visible text of the first element matching sel.
func (b *browser) text(t testing.TB, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

func (b *browser) signIn(t testing.TB, e *env, tok string) {
	t.Helper()
	b.run(t, "sign in",
		chromedp.Navigate(e.ui.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tok),
		chromedp.Click(chromedp.CSS(`form.signin button[type=submit]`)),
	)
}

// screenshot writes a PNG of the viewport into dir.
func (b *browser) screenshot(t testing.TB, dir, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	time.Sleep(150 * time.Millisecond) // let a transition settle
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// shotsDir is where screenshots go: $ROLLCALL_SCREENSHOTS, else a fresh
// temporary directory that outlives the test so a person can look.
func shotsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("ROLLCALL_SCREENSHOTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "rollcall-webui-shots-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pollTimeout bounds every wait for the page: generous, because a loaded CI
// machine is slow, not because anything should take this long.
var pollTimeout = 60 * time.Second

func init() {
	if d, err := time.ParseDuration(os.Getenv("ROLLCALL_UI_WAIT")); err == nil {
		pollTimeout = d
	}
}
