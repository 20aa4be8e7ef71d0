package webui_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/testenv"
	"github.com/rollcall/rollcall/raftfsm/cluster"
)

// Chromium reads managed policies here; AutoSelectCertificateForUrls lets
// headless Chromium present a client certificate without a dialog.
const chromiumPolicies = "/etc/chromium/policies/managed"

// TestBrowserClientCertificate: with an administrator's .p12 imported
// (rollcall admin-cert request writes it), the web UI over HTTPS signs in
// by itself, without a token, and the Access page says who it is; once the
// certificate is revoked, the next load shows the sign-in page.
func TestBrowserClientCertificate(t *testing.T) {
	chromium(t)
	for _, tool := range []string{"certutil", "pk12util"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "%s is not installed (apt-get install libnss3-tools): the client-certificate test imports the .p12 with it", tool)
		}
	}
	if os.Geteuid() != 0 {
		testenv.Skip(t, "the client-certificate test writes a Chromium policy under %s: run it as root", chromiumPolicies)
	}
	n := nodetest.StartWith(t, nodetest.Options{Name: "ui1",
		RaftTune: func(c *cluster.Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
			c.VersionReportEvery = time.Second
		},
		Node: func(o *node.Options) { o.HTTPSAddr = "127.0.0.1:0" }})
	base := "https://" + n.HTTPSAddr()
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	nodetest.WaitFor(t, "the https listener", func() bool {
		r, err := insecure.Get(base + "/api/v1/health")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})

	// The administrator's certificate, as admin-cert request makes it.
	keyPEM, csrPEM, err := pki.NewKeyAndCSR("admin:ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(wire.AdminCertRequest{Name: "ada", CSR: string(csrPEM)})
	var issued wire.IssuedCert
	nodetest.WaitFor(t, "the admin certificate", func() bool {
		return n.Call(t, n.Admin, http.MethodPost, "/api/v1/admin-certs", string(body), &issued) == http.StatusCreated
	})
	p12, err := pki.EncodePKCS12([]byte(issued.PEM), keyPEM, []byte(issued.CAPEM), "test-p12")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	db := "sql:" + filepath.Join(home, ".pki", "nssdb")
	os.MkdirAll(filepath.Join(home, ".pki", "nssdb"), 0o700)
	os.WriteFile(filepath.Join(home, "ca.pem"), []byte(issued.CAPEM), 0o600)
	os.WriteFile(filepath.Join(home, "ada.p12"), p12, 0o600)
	for _, args := range [][]string{
		{"certutil", "-N", "-d", db, "--empty-password"},
		{"certutil", "-A", "-d", db, "-n", "rollcall-ca", "-t", "C,,", "-i", filepath.Join(home, "ca.pem")},
		{"pk12util", "-i", filepath.Join(home, "ada.p12"), "-d", db, "-W", "test-p12"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	policy, _ := json.Marshal(map[string]any{"AutoSelectCertificateForUrls": []string{`{"pattern":"` + base + `","filter":{}}`}})
	if err := os.MkdirAll(chromiumPolicies, 0o755); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(chromiumPolicies, "rollcall-test-client-cert.json")
	if err := os.WriteFile(policyFile, policy, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(policyFile) })

	b := newBrowser(t, 1280, 900, chromedp.Env("HOME="+home))
	b.run(t, "the web UI over https, signed in by the certificate",
		chromedp.Navigate(base+"/ui/#/access"),
		waitJS(`document.querySelector('.access-who') !== null && document.querySelector('.access-who').textContent.includes('admin:ada')`))
	if who := b.text(t, `.access-who`); !strings.Contains(who, "admin:ada (by certificate)") {
		t.Fatalf("access page says %q", who)
	}
	if js[bool](t, b, `document.getElementById('token') !== null`) {
		t.Fatal("the sign-in form showed although the certificate signed in")
	}
	rows := js[[]string](t, b, `[...document.querySelectorAll('tr.cert-admin')].map((r) => r.textContent)`)
	if len(rows) != 1 || !strings.Contains(rows[0], issued.Cert.Serial) || !strings.Contains(rows[0], "valid") {
		t.Fatalf("admin certificate rows %q", rows)
	}
	b.screenshot(t, shotsDir(t), "access-1280")

	// Revoked: the next load asks for a token.
	if code := n.Call(t, n.Admin, http.MethodDelete, "/api/v1/admin-certs/ada", "", nil); code != http.StatusOK {
		t.Fatalf("revoke: %d", code)
	}
	b.run(t, "reload after the revocation",
		chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`),
		chromedp.Navigate(base+"/ui/#/"),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("token")))
	b.checkConsole(t, "401")
}
