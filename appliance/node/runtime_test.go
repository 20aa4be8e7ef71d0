package node

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// LowerBackground sets every thread of the process, and the ones started
// after it, to nice ROLLCALL_BACKGROUND_NICE (default 5; 0 leaves them). It
// changes the whole process, so it runs in a child copy of this test.
func TestLowerBackground(t *testing.T) {
	if os.Getenv("RC_LOWER_BACKGROUND_CHILD") == "1" {
		LowerBackground()
		later := make(chan struct{})
		go func() { runtime.LockOSThread(); <-later }() // a thread started afterwards
		defer close(later)
		tasks, _ := os.ReadDir("/proc/self/task")
		var nices []string
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			nices = append(nices, strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[16])
		}
		fmt.Printf("NICES %s\n", strings.Join(nices, ","))
		return
	}
	for _, tc := range []struct{ env, want string }{{"", "5"}, {"ROLLCALL_BACKGROUND_NICE=9", "9"}, {"ROLLCALL_BACKGROUND_NICE=0", "0"}, {"ROLLCALL_BACKGROUND_NICE=banana", "5"}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestLowerBackground$")
		cmd.Env = append(os.Environ(), "RC_LOWER_BACKGROUND_CHILD=1", "ROLLCALL_BACKGROUND_NICE=")
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.env, err, out)
		}
		var line string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "NICES ") {
				line = strings.TrimPrefix(l, "NICES ")
			}
		}
		nices := strings.Split(line, ",")
		if line == "" || len(nices) < 2 {
			t.Fatalf("%s: no thread list in %q", tc.env, out)
		}
		for _, n := range nices {
			if _, err := strconv.Atoi(n); err != nil || n != tc.want {
				t.Errorf("%s: thread nice values %s, want all %s", tc.env, line, tc.want)
				break
			}
		}
	}
}
