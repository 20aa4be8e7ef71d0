package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	labfleet "github.com/rollcall/rollcall/lab/fleet"
)

// The client's stateless calls against a real in-process node: the
// profiles, the nodes, assign (refused for a missing profile, then made)
// and unassign, each answer read as the console shows it.
func TestClientStatelessAgainstANode(t *testing.T) {
	n := nodetest.Start(t)
	admin := nodetest.Bearer(n.Admin)
	rep := labfleet.Generate(3, 0)
	var m wire.CommissionReply
	n.Do(t, "POST", "/api/v1/commission", rep, nodetest.AgentHeader(n.BootToken(t, rep.BootMAC))...).Decode(t, &m)
	var files []wire.ImageFile
	for _, f := range []string{"kernel", "initrd", "squashfs"} {
		files = append(files, n.Upload(t, n.Admin, "compute", f, []byte("the "+f)))
	}
	if r := n.Do(t, "POST", "/api/v1/images", wire.ImageRequest{Name: "compute", Files: files}, admin...); r.Status != http.StatusCreated {
		t.Fatalf("image: %s", r)
	}
	hostname := wire.OverlayRequest{Files: []wire.OverlayFile{{Path: "system/etc/hostname.tmpl", Content: []byte("{{ .Node.Name }}\n")}}}
	if r := n.Do(t, "PUT", "/api/v1/overlays/base", hostname, admin...); r.Status != http.StatusCreated {
		t.Fatalf("overlay: %s", r)
	}
	if r := n.Do(t, "POST", "/api/v1/profiles/compute", wire.ProfileRequest{Image: "compute", Overlays: []string{"base"}, NameFormat: "cn%02d"}, admin...); r.Status != http.StatusCreated {
		t.Fatalf("profile: %s", r)
	}

	c, err := NewClient("http://"+n.HTTPAddr(), n.Admin, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ps, err := c.Profiles(ctx)
	if err != nil || len(ps) != 1 || ps[0].Name != "compute" || ps[0].NameFormat != "cn%02d" || ps[0].Nodes != 0 {
		t.Fatalf("Profiles = %+v, %v", ps, err)
	}
	if _, err := c.Do(ctx, Action{m.ID, "assign", "nosuch"}); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("assign to a missing profile: %v", err)
	}
	out, err := c.Do(ctx, Action{m.ID, "assign", "compute"})
	if err != nil || out != "node cn01 of compute; boots it on its next network boot" {
		t.Fatalf("assign = %q, %v", out, err)
	}
	l, err := c.StatelessNodes(ctx, 0, 0)
	if err != nil || len(l.Nodes) != 1 || l.Nodes[0].Machine != m.ID || l.Nodes[0].Name != "cn01" || l.Index == 0 {
		t.Fatalf("StatelessNodes = %+v, %v", l, err)
	}
	if again, err := c.Do(ctx, Action{m.ID, "assign", "compute"}); err != nil || again != out {
		t.Fatalf("assign twice = %q, %v; want the same node", again, err)
	}
	out, err = c.Do(ctx, Action{m.ID, "unassign", ""})
	if err != nil || out != "ready; was node cn01 of compute" {
		t.Fatalf("unassign = %q, %v", out, err)
	}
	if _, err := c.Do(ctx, Action{m.ID, "unassign", ""}); err == nil || !strings.Contains(err.Error(), "not assigned to a profile") {
		t.Fatalf("unassign twice: %v", err)
	}
	// A blocking query from before the unassign answers at once.
	again, err := c.StatelessNodes(ctx, l.Index, time.Minute)
	if err != nil || len(again.Nodes) != 0 || again.Index <= l.Index {
		t.Fatalf("StatelessNodes after unassign = %+v, %v", again, err)
	}
}
