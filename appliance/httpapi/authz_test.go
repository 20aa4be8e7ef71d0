package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/httpapi"
	"github.com/rollcall/rollcall/appliance/nodetest"
)

// TestAuthzMatrix sends every route of the table with each kind of
// credential, in the header the route reads, and checks who gets in.
// Refused cells must change nothing.
func TestAuthzMatrix(t *testing.T) {
	n := nodetest.Start(t)

	admin, agent := n.Admin, n.Agent
	const wrong = "not-the-token-0123456789abcdef"
	boot := n.BootToken(t, "52:54:00:00:a0:01")
	forged := boot[:len(boot)-2] + "AA" // a boot token with a wrong MAC
	expired := n.MintBootToken(t, "52:54:00:00:a0:01", time.Now().Add(-2*boottoken.TTL), boottoken.TTL)

	// Columns: the credential, presented in the header its route kind reads
	// (an open route gets the admin form, and the agent header for agent).
	type column struct {
		name   string
		header func(kind httpapi.Auth) []string
	}
	headerFor := func(kind httpapi.Auth, tok string) []string {
		if kind == httpapi.AuthAgent || kind == httpapi.AuthBoot {
			return nodetest.AgentHeader(tok)
		}
		return nodetest.Bearer(tok)
	}
	columns := []column{
		{"no credential", func(httpapi.Auth) []string { return nil }},
		{"wrong token", func(k httpapi.Auth) []string { return headerFor(k, wrong) }},
		{"agent token", func(k httpapi.Auth) []string {
			if k == httpapi.AuthNone {
				return nodetest.AgentHeader(agent)
			}
			return headerFor(k, agent)
		}},
		{"admin token", func(k httpapi.Auth) []string { return headerFor(k, admin) }},
		{"boot token", func(k httpapi.Auth) []string { return headerFor(k, boot) }},
		{"forged boot token", func(k httpapi.Auth) []string { return headerFor(k, forged) }},
		{"expired boot token", func(k httpapi.Auth) []string { return headerFor(k, expired) }},
		// The right token in the other kind's header counts for nothing.
		{"right token, other header", func(k httpapi.Auth) []string {
			switch k {
			case httpapi.AuthAdmin:
				return nodetest.AgentHeader(admin)
			case httpapi.AuthAgent:
				return nodetest.Bearer(agent)
			case httpapi.AuthBoot:
				return nodetest.Bearer(boot)
			}
			return nil
		}},
	}
	// want says whether a column may pass for a route kind.
	admits := map[httpapi.Auth]map[string]bool{
		httpapi.AuthNone: {"no credential": true, "wrong token": true, "agent token": true, "admin token": true, "right token, other header": true,
			"boot token": true, "forged boot token": true, "expired boot token": true},
		httpapi.AuthAdmin: {"admin token": true},
		httpapi.AuthAgent: {"agent token": true, "boot token": true},
		httpapi.AuthBoot:  {"boot token": true},
	}
	// Bodies that pass decoding, so an admitted write reaches its handler.
	bodies := map[string]string{
		"POST /api/v1/enlist":             `{"serial": "AUTHZ0001", "boot_mac": "52:54:00:00:a0:01"}`,
		"POST /api/v1/commission":         `{"version": 1}`,
		"POST /api/v1/cluster/join-codes": `{"ttl": "5m"}`,
		"POST /api/v1/machines":           `{"name": "authz-1"}`,
	}

	for _, col := range columns {
		for _, rt := range n.API().Routes() {
			t.Run(col.name+"/"+rt.Method+" "+rt.Path, func(t *testing.T) {
				var body any
				if b, ok := bodies[rt.Method+" "+rt.Path]; ok {
					body = b
				}
				before := stateOf(n)
				r := n.Do(t, rt.Method, fillPath(rt.Path), body, col.header(rt.Auth)...)
				switch {
				case admits[rt.Auth][col.name]:
					if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
						t.Errorf("refused: %s", r)
					}
					if r.Status == http.StatusInternalServerError {
						t.Errorf("server error: %s", r)
					}
				default:
					if r.Status != http.StatusUnauthorized || r.ErrorCode() != "unauthorized" {
						t.Errorf("got %s, want 401 unauthorized", r)
					}
					if after := stateOf(n); after != before {
						t.Errorf("a refused request changed the store: %+v → %+v", before, after)
					}
				}
			})
		}
	}
}

// TestAdminHTTP checks rollcall.json admin_http on plain HTTP.
func TestAdminHTTP(t *testing.T) {
	tests := map[string]struct {
		config     string
		wantStatus int // for an admin route with the admin token
		wantCode   string
	}{
		"deny":     {`{"admin_http": "deny"}`, http.StatusForbidden, "https_required"},
		"loopback": {`{"admin_http": "loopback"}`, http.StatusOK, ""},
		"allow":    {`{"admin_http": "allow"}`, http.StatusOK, ""},
		"default":  {"", http.StatusOK, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := nodetest.StartWith(t, nodetest.Options{Config: tc.config})

			admin, agent := n.Admin, n.Agent
			for _, rt := range n.API().Routes() {
				if rt.Auth != httpapi.AuthAdmin || rt.Method != "GET" {
					continue
				}
				r := n.Do(t, "GET", fillPath(rt.Path), nil, nodetest.Bearer(admin)...)
				if tc.wantStatus == http.StatusForbidden {
					if r.Status != tc.wantStatus || r.ErrorCode() != tc.wantCode || !strings.Contains(r.ErrorMessage(), "HTTPS") {
						t.Errorf("GET %s = %s, want %d %s", rt.Path, r, tc.wantStatus, tc.wantCode)
					}
				} else if r.Status == http.StatusForbidden || r.Status == http.StatusUnauthorized {
					t.Errorf("GET %s = %s, want admitted", rt.Path, r)
				}
			}
			// A write is refused before it is decoded or applied.
			before := stateOf(n)
			r := n.Do(t, "POST", "/api/v1/machines", `{"name": "over-http"}`, nodetest.Bearer(admin)...)
			if tc.wantStatus == http.StatusForbidden {
				if r.Status != http.StatusForbidden || r.ErrorCode() != "https_required" {
					t.Errorf("POST /api/v1/machines = %s, want 403 https_required", r)
				}
				if after := stateOf(n); after != before {
					t.Errorf("a refused write changed the store: %+v → %+v", before, after)
				}
			} else if r.Status != http.StatusCreated {
				t.Errorf("POST /api/v1/machines = %s, want 201", r)
			}
			// Without a token, deny still says https_required (it is checked
			// first, so a token never crosses plain HTTP for nothing).
			if r := n.Do(t, "GET", "/api/v1/machines", nil); tc.wantStatus == http.StatusForbidden && r.Status != http.StatusForbidden {
				t.Errorf("without a token: %s, want 403", r)
			}
			// Open and agent routes are not admin routes.
			if r := n.Do(t, "GET", "/api/v1/health", nil); r.Status != http.StatusOK {
				t.Errorf("health = %s", r)
			}
			if r := n.Do(t, "POST", "/api/v1/enlist", `{"serial": "HTTP0001"}`, nodetest.AgentHeader(agent)...); r.Status != http.StatusOK {
				t.Errorf("enlist = %s", r)
			}
		})
	}
}

// fillPath fills a gin path's parameters: a well-formed machine ID that does
// not exist for :id, a name for anything else.
func fillPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		switch {
		case s == ":id":
			segs[i] = "m-000000000000"
		case strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*"):
			segs[i] = "ghost"
		}
	}
	return strings.Join(segs, "/")
}
