package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/console"
)

// Finding 8: a serial with NUL, newline and terminal escapes reached
// `rollcall list` raw. Whatever the store holds, the CLI and the console
// print no control character from it.
func TestNoControlCharactersReachTheTerminal(t *testing.T) {
	hostile := "S\x00N\r\x1b]0;pwned\x07\x1b[2J\u009b31m\u0085end"
	for _, chunk := range []int{1, 2, 3, len(hostile)} {
		var out bytes.Buffer
		w := &printableWriter{w: &out}
		for i := 0; i < len(hostile); i += chunk {
			w.Write([]byte(hostile[i:min(i+chunk, len(hostile))]))
		}
		w.Write([]byte("\tok\n"))
		got := out.String()
		if strings.ContainsAny(got, "\x00\r\x1b\x07\u009b\u0085") || !strings.HasSuffix(got, "end\tok\n") {
			t.Errorf("chunks of %d: %q", chunk, got)
		}
	}
	if got := console.Printable(hostile); strings.ContainsAny(got, "\x00\r\x1b\x07\u009b\u0085") {
		t.Errorf("console: %q", got)
	}
	// UTF-8 text that is not a control passes whole.
	var out bytes.Buffer
	(&printableWriter{w: &out}).Write([]byte("Überprüfung ½ 東京"))
	if out.String() != "Überprüfung ½ 東京" {
		t.Errorf("text changed: %q", out.String())
	}
}
