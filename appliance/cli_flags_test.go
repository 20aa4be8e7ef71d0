package appliance

import (
	"strings"
	"testing"
)

func TestFlagsFirstIn(t *testing.T) {
	fs := newNetFlags("x", "")
	fs.Bool("json", false, "")
	fs.String("node", "", "")
	got := strings.Join(flagsFirstIn(fs.FlagSet, []string{"hall-a", "-node", "n1", "0", "-json", "-data=/d", "-7", "-data", "/e"}), " ")
	if want := "-node n1 -json -data=/d -data /e -- hall-a 0 -7"; got != want {
		t.Errorf("flagsFirstIn = %q, want %q", got, want)
	}
}
