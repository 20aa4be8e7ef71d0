package cli

import (
	"strings"
	"testing"
)

// tui -dump renders one page of the console from a real node to stdout,
// and refuses a size it cannot read.
func TestTUIDump(t *testing.T) {
	startNode(t, nodeOptions{}).use(t)
	mustRun(t, "add", "-name", "dumped")
	out := mustRun(t, "tui", "-dump", "120x30", "-page", "machines", "-plain")
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 30 || !strings.Contains(out, "dumped") {
		t.Errorf("tui -dump 120x30 -page machines:\n%s", out)
	}
	if code, _, errs := run("tui", "-dump", "big"); code != 1 || !strings.Contains(errs, "WIDTHxHEIGHT") {
		t.Errorf("tui -dump big: exit %d, %q", code, errs)
	}
}
