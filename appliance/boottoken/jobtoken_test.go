package boottoken_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/pki"
)

func TestJobToken(t *testing.T) {
	key, _ := pki.NewMasterKey()
	other, _ := pki.NewMasterKey()
	const id = "j-0000019ad5a1c0de"
	tok, err := boottoken.MintJob(key, id)
	if err != nil || !strings.HasPrefix(tok, boottoken.JobPrefix) {
		t.Fatalf("MintJob = %q, %v", tok, err)
	}
	again, _ := boottoken.MintJob(key, id)
	if again != tok {
		t.Fatalf("a job's token is derived, so every node renders the same: %q, %q", tok, again)
	}
	if got, err := boottoken.ParseJob(key, tok); err != nil || got != id {
		t.Fatalf("ParseJob = %q, %v", got, err)
	}
	boot, _, _ := boottoken.Mint(key, "52:54:00:aa:00:01", time.Now(), time.Hour)
	for name, bad := range map[string]string{
		"other key":    mint(t, other, id),
		"other job":    strings.Replace(tok, "c0de", "c0df", 1),
		"forged":       tok[:len(tok)-2] + "AA",
		"a boot token": boot,
		"boot as job":  boottoken.JobPrefix + strings.TrimPrefix(boot, boottoken.Prefix),
		"prefix only":  boottoken.JobPrefix,
		"too long":     tok + strings.Repeat("a", 128),
		"not an ID":    mint(t, key, id)[:5] + "../etc" + tok[len(boottoken.JobPrefix)+len(id):],
		"empty":        "",
		"no signature": boottoken.JobPrefix + id,
		"bad base64":   boottoken.JobPrefix + id + ".!!",
	} {
		if got, err := boottoken.ParseJob(key, bad); !errors.Is(err, boottoken.ErrInvalid) {
			t.Errorf("%s: ParseJob = %q, %v; want ErrInvalid", name, got, err)
		}
	}
	if _, err := boottoken.Parse(key, tok, time.Now()); !errors.Is(err, boottoken.ErrInvalid) {
		t.Errorf("a job token passed as a boot token: %v", err)
	}
	if _, err := boottoken.MintJob(key, "m-0123456789ab"); err == nil {
		t.Error("minted a token for a machine ID")
	}
}

func mint(t *testing.T, k boottoken.Key, id string) string {
	tok, err := boottoken.MintJob(k, id)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
