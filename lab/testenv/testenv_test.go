package testenv_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/lab/testenv"
)

// The rule is checked on the real testing package, not on a fake testing.TB:
// each case runs this test binary again, selecting TestHelper with the case
// name in RC_TESTENV_CASE and CI set or not, and reads the verdict go test
// prints. A helper that ends the test must end it: "after" is logged only
// when the helper returned.

const noSuchTool = "rollcall-no-such-tool"

var helpers = map[string]func(t *testing.T){
	"skip":     func(t *testing.T) { testenv.Skip(t, "the peer %s is gone", "ipmi_sim") },
	"fallback": func(t *testing.T) { testenv.Fallback(t, "no iPXE binaries: using %d stand-ins", 3) },
	"tool missing": func(t *testing.T) {
		testenv.NeedTool(t, "sh", noSuchTool+"-a", noSuchTool+"-b")
	},
	"tool present": func(t *testing.T) {
		if p := testenv.NeedTool(t, "sh"); len(p) != 1 || !strings.HasSuffix(p[0], "/sh") {
			t.Errorf("NeedTool(sh) = %q", p)
		}
	},
	"optional tool missing": func(t *testing.T) {
		if p, ok := testenv.LookTool(t, noSuchTool); ok || p != "" {
			t.Errorf("LookTool = %q, %v", p, ok)
		}
	},
	"optional tool present": func(t *testing.T) {
		if p, ok := testenv.LookTool(t, "sh"); !ok || !strings.HasSuffix(p, "/sh") {
			t.Errorf("LookTool(sh) = %q, %v", p, ok)
		}
	},
	"file missing": func(t *testing.T) {
		testenv.NeedFile(t, "UEFI firmware (Debian package ovmf)", "/nonexistent/OVMF.fd", "/nonexistent/qemu/OVMF.fd")
	},
	"file present": func(t *testing.T) {
		if p := testenv.NeedFile(t, "this binary", "/nonexistent", os.Args[0]); p != os.Args[0] {
			t.Errorf("NeedFile = %q, want %q", p, os.Args[0])
		}
	},
	"root": func(t *testing.T) { testenv.NeedRoot(t, "port 67") },
	"netns": func(t *testing.T) {
		testenv.NeedNetns(t, "veth pairs", noSuchTool)
	},
}

// TestHelper runs one helper when this binary is started by TestRule, and
// does nothing otherwise.
func TestHelper(t *testing.T) {
	name := os.Getenv("RC_TESTENV_CASE")
	if name == "" {
		return
	}
	helpers[name](t)
	t.Log("after")
}

type verdict struct {
	Result string // PASS, SKIP or FAIL
	After  bool   // the helper returned
}

func TestRule(t *testing.T) {
	root := os.Geteuid() == 0
	rootHand, rootCI := verdict{"SKIP", false}, verdict{"FAIL", false}
	rootMsg := "needs root (port 67)"
	netnsMsg := "needs root (network namespaces, veth pairs)"
	if root {
		rootHand, rootCI, rootMsg = verdict{"PASS", true}, verdict{"PASS", true}, ""
		netnsMsg = "needs " + noSuchTool + " (apt-get install " + noSuchTool + ")"
	}
	cases := map[string]struct {
		byHand verdict
		msg    string // in the output by hand and under CI alike
		inCI   verdict
	}{
		"skip":                  {verdict{"SKIP", false}, "the peer ipmi_sim is gone", verdict{"FAIL", false}},
		"fallback":              {verdict{"PASS", true}, "no iPXE binaries: using 3 stand-ins", verdict{"FAIL", false}},
		"tool missing":          {verdict{"SKIP", false}, "needs " + noSuchTool + "-a, " + noSuchTool + "-b (apt-get install " + noSuchTool + "-a " + noSuchTool + "-b)", verdict{"FAIL", false}},
		"tool present":          {verdict{"PASS", true}, "", verdict{"PASS", true}},
		"optional tool missing": {verdict{"PASS", true}, noSuchTool + " is not installed", verdict{"FAIL", false}},
		"optional tool present": {verdict{"PASS", true}, "", verdict{"PASS", true}},
		"file missing":          {verdict{"SKIP", false}, "needs UEFI firmware (Debian package ovmf): none of /nonexistent/OVMF.fd, /nonexistent/qemu/OVMF.fd", verdict{"FAIL", false}},
		"file present":          {verdict{"PASS", true}, "", verdict{"PASS", true}},
		"root":                  {rootHand, rootMsg, rootCI},
		"netns":                 {verdict{"SKIP", false}, netnsMsg, verdict{"FAIL", false}},
	}
	if len(cases) != len(helpers) {
		t.Fatalf("%d cases for %d helpers", len(cases), len(helpers))
	}
	result := regexp.MustCompile(`--- (PASS|SKIP|FAIL): TestHelper `)
	for name, c := range cases {
		for _, ci := range []bool{false, true} {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$", "-test.v", "-test.count=1")
			env := "CI="
			if ci {
				env = "CI=true"
			}
			cmd.Env = append(os.Environ(), "RC_TESTENV_CASE="+name, env)
			raw, _ := cmd.CombinedOutput() // the verdict is in the output
			out := string(raw)
			m := result.FindStringSubmatch(out)
			if m == nil {
				t.Errorf("%s, %s: no verdict in\n%s", name, env, out)
				continue
			}
			got := verdict{m[1], strings.Contains(out, ": after\n")}
			want := c.byHand
			if ci {
				want = c.inCI
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s, %s (-want +got):\n%s\n%s", name, env, diff, out)
			}
			if !strings.Contains(out, c.msg) {
				t.Errorf("%s, %s: output lacks %q:\n%s", name, env, c.msg, out)
			}
			if ci && got.Result == "FAIL" && !strings.Contains(out, "CI=true: a missing peer fails the test") {
				t.Errorf("%s, %s: a failure must say CI=true made it one:\n%s", name, env, out)
			}
		}
	}
}

func TestPackage(t *testing.T) {
	for name, want := range map[string]string{"perfdhcp": "kea-admin", "dnsmasq": "dnsmasq-base", "tftp": "tftp-hpa", "unknown-tool": "unknown-tool"} {
		if got := testenv.Package(name); got != want {
			t.Errorf("Package(%q) = %q, want %q", name, got, want)
		}
	}
}
