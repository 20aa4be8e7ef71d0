package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
)

// TestNoSecretInLogsOrAnswers runs a two-node cluster through the paths
// that handle secrets (a join, tokens right and wrong, a BMC password and
// a power action that fails on it, a boot token), then reads every GET
// route of the OpenAPI document; and greps both nodes' debug logs and
// every answer for each secret the run used, in the encodings it could
// take (issue 23: no key, token or BMC password in any log, answer or
// error). The answers made to hand a secret out (a join code's creation,
// a boot token's minting) are the only ones allowed to carry it.
func TestNoSecretInLogsOrAnswers(t *testing.T) {
	logs := &nodetest.LogBuffer{}
	nodes := nodetest.StartCluster(t, 2, nodetest.Options{Log: logs})
	n1, n2 := nodes[0], nodes[1]
	admin := n1.Admin

	var mu sync.Mutex
	var answers []string // every answer's status line, headers and body
	record := func(what string, r nodetest.Response) {
		mu.Lock()
		defer mu.Unlock()
		var h strings.Builder
		for k, vs := range r.Header {
			h.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
		}
		answers = append(answers, what+"\n"+h.String()+string(r.Body))
	}
	do := func(n *nodetest.Node, method, path string, body any, header ...string) nodetest.Response {
		t.Helper()
		r := n.Do(t, method, path, body, header...)
		record(method+" "+path, r)
		return r
	}

	// The secrets: the cluster's tokens, a join code, a BMC password,
	// the master key and the nodes' private keys.
	const bmcPassword = "Bmc-Pa55-never-shown-7d1c"
	secrets := map[string]string{"admin token": admin, "agent token": n1.Agent, "bmc password": bmcPassword}
	var jc wire.JoinCodeView
	r := n1.Do(t, "POST", "/api/v1/cluster/join-codes", `{"ttl":"10m"}`, nodetest.Bearer(admin)...) // hands the code out: not recorded
	if r.Status != http.StatusCreated {
		t.Fatalf("join code: %s", r)
	}
	r.Decode(t, &jc)
	secrets["join code"] = jc.Code
	// The control: the grep below finds a secret where one is.
	if len(jc.Code) < 12 || !strings.Contains(string(r.Body), jc.Code) {
		t.Fatalf("the join code's own answer does not carry it: %s", r)
	}
	key := n1.Key(t)
	secrets["master key (hex)"] = hex.EncodeToString(key[:])
	secrets["master key (base64)"] = base64.StdEncoding.EncodeToString(key[:])
	secrets["master key (base64url)"] = base64.RawURLEncoding.EncodeToString(key[:])
	if raw, err := os.ReadFile(filepath.Join(n1.Dir, "master.key")); err == nil && len(strings.TrimSpace(string(raw))) >= 16 {
		secrets["master key file"] = strings.TrimSpace(string(raw))
	}
	keys := 0
	for _, n := range nodes {
		filepath.Walk(n.Dir, func(path string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() || fi.Size() > 1<<20 {
				return nil
			}
			b, _ := os.ReadFile(path)
			for rest := b; ; {
				var blk *pem.Block
				if blk, rest = pem.Decode(rest); blk == nil {
					break
				}
				if strings.Contains(blk.Type, "PRIVATE KEY") {
					// A line's worth of the key's base64, from its middle:
					// the start of a PEM body is the same for every key of
					// a kind.
					body := base64.StdEncoding.EncodeToString(blk.Bytes)
					secrets["private key in "+filepath.Base(path)] = body[len(body)/2 : len(body)/2+48]
					keys++
				}
			}
			return nil
		})
	}
	if keys == 0 {
		t.Fatal("no private key found in the nodes' data directories: the test would check none")
	}

	// A machine with a BMC whose password is the secret; a power action
	// that fails on it (nothing listens there) and leaves errors behind.
	if r := do(n1, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "vault", MAC: "52:54:00:00:5e:01"}, nodetest.Bearer(admin)...); r.Status != http.StatusCreated {
		t.Fatalf("add: %s", r)
	}
	id := machineByName(t, n1, "vault").ID
	if r := do(n1, "PUT", "/api/v1/machines/"+id+"/bmc", wire.BMCRequest{Driver: "ipmi", Address: "127.0.0.1:1", User: "admin", Password: bmcPassword}, nodetest.Bearer(admin)...); r.Status != http.StatusOK {
		t.Fatalf("bmc: %s", r)
	}
	for _, action := range []string{"status", "on"} {
		do(n1, "POST", "/api/v1/machines/"+id+"/power", wire.PowerRequest{Action: action}, nodetest.Bearer(admin)...)
	}
	// The same password again on the follower, and a BMC request the
	// API refuses with the password in it.
	do(n2, "PUT", "/api/v1/machines/"+id+"/bmc", wire.BMCRequest{Driver: "ipmi", Address: "127.0.0.1:1", User: "admin", Password: bmcPassword}, nodetest.Bearer(admin)...)
	do(n1, "PUT", "/api/v1/machines/"+id+"/bmc", wire.BMCRequest{Driver: "no-such-driver", Address: "::bad::", User: "admin", Password: bmcPassword}, nodetest.Bearer(admin)...)
	do(n1, "PUT", "/api/v1/machines/"+id+"/bmc", `{"driver":"ipmi","password":"`+bmcPassword+`","unknown":1`, nodetest.Bearer(admin)...)

	// Tokens one character off, in every place a token goes: a server
	// that echoed or logged what it was given would show the real one.
	for _, n := range nodes {
		do(n, "GET", "/api/v1/machines", nil, nodetest.Bearer(admin+"x")...)
		do(n, "GET", "/api/v1/machines", nil, nodetest.Bearer("x"+admin)...)
		do(n, "POST", "/api/v1/enlist", `{"macs":["52:54:00:00:5e:02"]}`, nodetest.AgentHeader(n1.Agent+"x")...)
		do(n, "GET", "/api/v1/stateless/self", nil, "X-Rollcall-Node", admin)
	}
	// A boot token minted, used and used wrong.
	mac := "52:54:00:00:5e:03"
	tok := n1.BootToken(t, mac)
	secrets["boot token"] = tok
	do(n1, "GET", "/api/v1/bmc-hint?macs="+mac, nil, nodetest.AgentHeader(tok)...)
	do(n2, "GET", "/api/v1/bmc-hint?macs=52:54:00:00:5e:04", nil, nodetest.AgentHeader(tok)...)
	do(n1, "POST", "/api/v1/commission", `{"not":"an inventory"}`, nodetest.AgentHeader(tok)...)

	// Let the failed power action land, then read everything there is.
	time.Sleep(500 * time.Millisecond)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	r = do(n1, "GET", "/api/v1/openapi.json", nil)
	if err := json.Unmarshal(r.Body, &doc); err != nil || len(doc.Paths) == 0 {
		t.Fatalf("openapi: %v (%d paths)", err, len(doc.Paths))
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	gets := 0
	for path, ops := range doc.Paths {
		if _, ok := ops["get"]; !ok {
			continue
		}
		p := param.ReplaceAllString(path, id)
		for _, n := range nodes {
			// A watch or a blocking query answers at once without an index;
			// a stream is cut after a moment: what came by then is checked.
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			resp, err := n.Send(ctx, "GET", p, nil, nodetest.Bearer(admin)...)
			cancel()
			if err == nil {
				record("GET "+p, resp)
				gets++
			}
		}
	}
	if gets < 20 {
		t.Fatalf("only %d GET answers read: the sweep checked too little", gets)
	}

	log := logs.String()
	if len(log) == 0 {
		t.Fatal("the nodes logged nothing: the test would check no log")
	}
	for what, s := range secrets {
		if len(s) < 12 {
			t.Fatalf("secret %s is %d characters: too short to grep for", what, len(s))
		}
		if i := strings.Index(log, s); i >= 0 {
			t.Errorf("the %s is in the log: …%s…", what, clipAround(log, i, len(s)))
		}
		for _, a := range answers {
			if i := strings.Index(a, s); i >= 0 {
				t.Errorf("the %s is in an answer to %s: …%s…", what, strings.SplitN(a, "\n", 2)[0], clipAround(a, i, len(s)))
			}
		}
	}
	t.Logf("%d secrets (%d private keys) grepped for in %d answers and %d KB of log", len(secrets), keys, len(answers), len(log)>>10)
}

// clipAround is the text around a match, the match itself masked.
func clipAround(s string, i, n int) string {
	from, to := max(0, i-60), min(len(s), i+n+60)
	return s[from:i] + "<SECRET>" + s[i+n:to]
}
