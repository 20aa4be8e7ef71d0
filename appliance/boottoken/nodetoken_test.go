package boottoken_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/pki"
)

func TestNodeToken(t *testing.T) {
	key, _ := pki.NewMasterKey()
	other, _ := pki.NewMasterKey()
	const a, b = "m-00000000000a", "m-00000000000b"
	tok, err := boottoken.MintNode(key, a, 42)
	if err != nil || !strings.HasPrefix(tok, boottoken.NodePrefix+a+".42.") {
		t.Fatalf("MintNode = %q, %v", tok, err)
	}
	if again, _ := boottoken.MintNode(key, a, 42); again != tok {
		t.Fatalf("a node's token is derived, so every node renders the same: %q, %q", tok, again)
	}
	if m, g, err := boottoken.ParseNode(key, tok); err != nil || m != a || g != 42 {
		t.Fatalf("ParseNode = %q %d %v", m, g, err)
	}
	otherKey, _ := boottoken.MintNode(other, a, 42)
	job, _ := boottoken.MintJob(key, "j-0000019ad5a1c0de")
	sig := tok[strings.LastIndexByte(tok, '.'):]
	for name, bad := range map[string]string{
		"other key":        otherKey,
		"other machine":    strings.Replace(tok, a, b, 1),
		"other generation": strings.Replace(tok, ".42.", ".43.", 1),
		"leading zero":     strings.Replace(tok, ".42.", ".042.", 1),
		"generation 0":     boottoken.NodePrefix + a + ".0" + sig,
		"forged":           tok[:len(tok)-2] + "AA",
		"a job token":      job,
		"too long":         tok + strings.Repeat("a", 128),
		"extra part":       boottoken.NodePrefix + a + ".42.x" + sig,
		"not an ID":        boottoken.NodePrefix + "../etc.42" + sig,
		"prefix only":      boottoken.NodePrefix,
		"empty":            "",
		"bad base64":       boottoken.NodePrefix + a + ".42.!!",
	} {
		if m, g, err := boottoken.ParseNode(key, bad); !errors.Is(err, boottoken.ErrInvalid) {
			t.Errorf("%s: ParseNode = %q %d %v; want ErrInvalid", name, m, g, err)
		}
	}
	for _, bad := range []struct {
		m string
		g uint64
	}{{"x", 1}, {a, 0}} {
		if _, err := boottoken.MintNode(key, bad.m, bad.g); err == nil {
			t.Errorf("minted a token for %q generation %d", bad.m, bad.g)
		}
	}
}

// ParseNode takes whatever a booting machine sends: it never panics and
// accepts only what MintNode made.
func FuzzParseNode(f *testing.F) {
	key, _ := pki.NewMasterKey()
	tok, _ := boottoken.MintNode(key, "m-00000000000a", 7)
	for _, s := range []string{tok, "", boottoken.NodePrefix, boottoken.NodePrefix + "m-00000000000a.7.", tok + "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, g, err := boottoken.ParseNode(key, s)
		if err != nil {
			return
		}
		again, err := boottoken.MintNode(key, m, g)
		if err != nil || again != s {
			t.Fatalf("ParseNode accepted %q, which MintNode would write %q (%v)", s, again, err)
		}
	})
}
