package cli

import (
	"os"
	"strings"
	"testing"
)

// ROLLCALL_CPUPROFILE and ROLLCALL_TRACE write their files over the run; a
// file that cannot be made is an error that names the variable.
func TestStartProfiles(t *testing.T) {
	dir := t.TempDir()
	prof, tr := dir+"/cpu.pprof", dir+"/run.trace"
	t.Setenv("ROLLCALL_CPUPROFILE", prof)
	t.Setenv("ROLLCALL_TRACE", tr)
	stop, err := startProfiles()
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for _, f := range []string{prof, tr} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (empty or missing)", f, err)
		}
	}
	t.Setenv("ROLLCALL_TRACE", dir+"/no/such/dir/run.trace")
	if stop, err := startProfiles(); err == nil || !strings.Contains(err.Error(), "ROLLCALL_TRACE") {
		if stop != nil {
			stop()
		}
		t.Errorf("a trace file in a missing directory: %v, want an error naming ROLLCALL_TRACE", err)
	}
	// The CPU profile started before the failure was stopped: a new one starts.
	t.Setenv("ROLLCALL_TRACE", "")
	stop, err = startProfiles()
	if err != nil {
		t.Fatalf("after a failed start: %v", err)
	}
	stop()
}
