package cli

import (
	"strings"
	"testing"
)

// The usage text is what `rollcall`, `rollcall help`, -h and --help print,
// and what an unknown verb prints after its error: the operator's index of
// every verb and flag.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, errs := run(args...)
		if code != 0 || errs != "" {
			t.Errorf("rollcall %s: exit %d, stderr %q", args[0], code, errs)
		}
		golden(t, "usage", out)
	}
	code, out, errs := run("frobnicate")
	if code != 2 || out != "" || errs != "rollcall: unknown command \"frobnicate\"\n\n"+usage {
		t.Errorf("unknown verb: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Exit statuses: 1 for a verb that fails, its error on stderr prefixed with
// the verb; 2 for -h on a verb.
func TestExitStatus(t *testing.T) {
	t.Setenv("ROLLCALL_URL", "")
	t.Setenv("ROLLCALL_TOKEN", "")
	t.Setenv("HOME", t.TempDir()) // no saved console config
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	cases := map[string]struct {
		args   []string
		code   int
		stderr string
	}{
		"no API":          {[]string{"list", "-data", t.TempDir()}, 1, "rollcall list: no API to talk to: set ROLLCALL_URL, or run on a node"},
		"verb's -h":       {[]string{"show", "-h"}, 2, ""},
		"usage of a verb": {[]string{"cluster"}, 1, "rollcall cluster: usage: rollcall cluster join-code|status|remove|repair|check"},
		"unknown sub":     {[]string{"image", "frob"}, 1, `rollcall image: unknown image command "frob" (import, list, rm)`},
		"bad log level":   {[]string{"serve", "-log-level", "loud"}, 1, `rollcall serve: -log-level: "loud" is not one of debug, info, warn, error`},
		"serve's args":    {[]string{"serve", "now"}, 1, "rollcall serve: unexpected arguments: now"},
	}
	for name, c := range cases {
		code, _, errs := run(c.args...)
		if code != c.code || !strings.HasPrefix(errs, c.stderr) {
			t.Errorf("%s: rollcall %s: exit %d, stderr %q; want %d, %q", name, strings.Join(c.args, " "), code, errs, c.code, c.stderr)
		}
	}
}

// keygen prints one fresh token a line.
func TestKeygen(t *testing.T) {
	a, b := mustRun(t, "keygen"), mustRun(t, "keygen")
	if !strings.HasSuffix(a, "\n") || strings.Count(a, "\n") != 1 || len(a) < 33 || a == b {
		t.Errorf("keygen: %q then %q; want two different tokens, one a line", a, b)
	}
}
