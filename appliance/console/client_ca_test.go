package console

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
)

// The client's CA call against a real in-process node, before and after a
// rotation, and the Access page as it shows the answer: the current
// fingerprint, who rotated it, and the replaced root still trusted.
func TestClientCAAgainstANode(t *testing.T) {
	n := nodetest.Start(t)
	c, err := NewClient("http://"+n.HTTPAddr(), n.Admin, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := c.CA(ctx)
	if err != nil || len(before.Fingerprint) != 64 || before.PEM == "" || !before.Rotated.IsZero() || len(before.Previous) != 0 {
		t.Fatalf("CA before a rotation = %+v, %v", before, err)
	}

	// The rotation opens through the version gate a few seconds after the
	// node starts.
	var rotated wire.CAState
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := n.Do(t, http.MethodPost, "/api/v1/ca/rotate", wire.CARotateRequest{Yes: true, Transition: "48h"}, nodetest.Bearer(n.Admin)...)
		if r.Status == http.StatusCreated {
			r.Decode(t, &rotated)
			break
		}
		if r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("rotate: %s", r)
		}
		time.Sleep(250 * time.Millisecond)
	}
	after, err := c.CA(ctx)
	if err != nil || after.Fingerprint != rotated.Fingerprint || after.Fingerprint == before.Fingerprint || after.RotatedBy != "token" ||
		len(after.Previous) != 1 || after.Previous[0].Fingerprint != before.Fingerprint || after.Previous[0].TrustedUntil.IsZero() {
		t.Fatalf("CA after the rotation = %+v, %v", after, err)
	}

	var buf bytes.Buffer
	if err := Dump(&buf, 140, 40, "access", true, c); err != nil {
		t.Fatalf("Dump: %v\n%s", err, buf.String())
	}
	screen := buf.String()
	until := after.Previous[0].TrustedUntil.Local().Format("2006-01-02 15:04")
	for _, want := range []string{"fingerprint  SHA256:" + after.Fingerprint, "by token", "previous     trusted until " + until, "SHA256:" + before.Fingerprint} {
		if !strings.Contains(screen, want) {
			t.Errorf("the Access page lacks %q:\n%s", want, screen)
		}
	}
}
