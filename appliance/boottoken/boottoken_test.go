package boottoken_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/pki"
)

func TestMintAndParse(t *testing.T) {
	key, err := pki.NewMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := pki.NewMasterKey()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tok, exp, err := boottoken.Mint(key, "52-54-00-AA-00-01", now, boottoken.TTL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, boottoken.Prefix) || !exp.Equal(now.Add(boottoken.TTL)) {
		t.Fatalf("Mint = %q, %v", tok, exp)
	}
	tests := map[string]struct {
		key     boottoken.Key
		tok     string
		at      time.Time
		mac     string
		invalid bool
		expired bool
	}{
		"valid":           {key: key, tok: tok, at: now, mac: "52:54:00:aa:00:01"},
		"last second":     {key: key, tok: tok, at: exp.Add(-time.Second), mac: "52:54:00:aa:00:01"},
		"expired":         {key: key, tok: tok, at: exp, expired: true},
		"other key":       {key: other, tok: tok, at: now, invalid: true},
		"forged":          {key: key, tok: tok[:len(tok)-2] + "AA", at: now, invalid: true},
		"other MAC":       {key: key, tok: strings.Replace(tok, "525400aa0001", "525400aa0002", 1), at: now, invalid: true},
		"no prefix":       {key: key, tok: strings.TrimPrefix(tok, boottoken.Prefix), at: now, invalid: true},
		"shared token":    {key: key, tok: "rc_0123456789abcdef", at: now, invalid: true},
		"too long":        {key: key, tok: tok + strings.Repeat("a", 128), at: now, invalid: true},
		"bad signature":   {key: key, tok: tok[:strings.LastIndexByte(tok, '.')+1] + "!!", at: now, invalid: true},
		"only the prefix": {key: key, tok: boottoken.Prefix, at: now, invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mac, err := boottoken.Parse(tc.key, tc.tok, tc.at)
			var ee *boottoken.ExpiredError
			switch {
			case tc.invalid:
				if !errors.Is(err, boottoken.ErrInvalid) {
					t.Errorf("Parse = %q, %v; want ErrInvalid", mac, err)
				}
			case tc.expired:
				if !errors.As(err, &ee) || !ee.At.Equal(exp) {
					t.Errorf("Parse = %q, %v; want expired at %v", mac, err, exp)
				}
			case err != nil || mac != tc.mac:
				t.Errorf("Parse = %q, %v; want %s", mac, err, tc.mac)
			}
		})
	}
	for _, mac := range []string{"", "zz", "00:11:22:33:44:55:66:77"} {
		if _, _, err := boottoken.Mint(key, mac, now, boottoken.TTL); err == nil {
			t.Errorf("Mint(%q) made a token", mac)
		}
	}
}
