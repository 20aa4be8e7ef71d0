// Command testinit is /sbin/init of the stateless test image
// (lab/statelessimage): what a real image's systemd units do, in a few
// lines, with markers on the console that TestStatelessBoot reads. It
// applies the node's system overlay (rollcall-overlay apply system), says
// the hostname and the SSH host key's public half it was given, then runs
// rollcall-overlay watch (the runtime refresh, the heartbeat) for as long
// as the machine runs.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Marker starts every line the test reads.
const Marker = "RC-STATELESS"

const overlay = "/usr/local/sbin/rollcall-overlay"

func main() {
	var out io.Writer = os.Stdout
	if c, err := os.OpenFile("/dev/console", os.O_WRONLY, 0); err == nil {
		out = c
	}
	say := func(format string, a ...any) { fmt.Fprintf(out, Marker+" "+format+"\n", a...) }
	say("init pid=%d", os.Getpid())
	for try := 1; ; try++ {
		cmd := exec.Command(overlay, "apply", "system")
		cmd.Stdout, cmd.Stderr = out, out
		err := cmd.Run()
		if err == nil {
			break
		}
		say("apply system failed (try %d): %v", try, err)
		if try == 5 {
			break
		}
		time.Sleep(3 * time.Second)
	}
	host, _ := os.Hostname()
	say("hostname=%s", host)
	if b, err := os.ReadFile("/etc/ssh/ssh_host_ed25519_key.pub"); err == nil {
		say("hostkey=%s", strings.TrimSpace(string(b)))
	} else {
		say("hostkey missing: %v", err)
	}
	if st, err := os.Stat("/etc/ssh/ssh_host_ed25519_key"); err == nil {
		say("hostkey mode=%04o", st.Mode().Perm())
	}
	for {
		cmd := exec.Command(overlay, "watch")
		cmd.Stdout, cmd.Stderr = out, out
		err := cmd.Run()
		say("watch ended: %v; again in 5 s", err)
		time.Sleep(5 * time.Second)
	}
}
