package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// bareServer is a Server with only what its route table and router need:
// the document and the router, and no node behind them.
func bareServer(t *testing.T) *Server {
	t.Helper()
	s := &Server{cfg: Config{Metrics: prometheus.NewRegistry()}, log: slog.New(slog.DiscardHandler)}
	s.failer = Failer{Log: s.log}
	s.net = &netAPI{s: s}
	e, err := s.router()
	if err != nil {
		t.Fatal(err)
	}
	s.engine = e
	return s
}

// TestOpenAPIMatchesRouter fetches the document from the router over HTTP
// and checks it against the router in both directions, then checks its
// shape.
func TestOpenAPIMatchesRouter(t *testing.T) {
	s := bareServer(t)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/v1/openapi.json = %d (%s)", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var doc openAPIDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}

	routed := map[string]bool{}
	ginParam := regexp.MustCompile(`/[:*]([^/]+)`)
	for _, ri := range s.engine.Routes() {
		routed[ri.Method+" "+ginParam.ReplaceAllString(ri.Path, "/{$1}")] = true
	}
	documented := map[string]bool{}
	for p, item := range doc.Paths {
		for method := range item {
			documented[strings.ToUpper(method)+" "+p] = true
		}
	}
	for op := range routed {
		if !documented[op] {
			t.Errorf("%s is routed but not documented", op)
		}
	}
	for op := range documented {
		if !routed[op] {
			t.Errorf("%s is documented but not routed", op)
		}
	}
	if len(routed) != len(s.routes()) {
		t.Errorf("the router has %d routes, the table %d", len(routed), len(s.routes()))
	}
	checkOpenAPIShape(t, doc)
}

// openAPIDoc is the part of an OpenAPI 3.1 document the tests read.
type openAPIDoc struct {
	OpenAPI string `json:"openapi"`
	Info    struct {
		Title   string `json:"title"`
		Version string `json:"version"`
	} `json:"info"`
	Servers    []any                                  `json:"servers"`
	Paths      map[string]map[string]openAPIOperation `json:"paths"`
	Components struct {
		SecuritySchemes map[string]map[string]string `json:"securitySchemes"`
		Responses       map[string]map[string]any    `json:"responses"`
		Schemas         map[string]map[string]any    `json:"schemas"`
	} `json:"components"`
}

type openAPIOperation struct {
	Summary     string                       `json:"summary"`
	OperationID string                       `json:"operationId"`
	Security    *[]map[string][]string       `json:"security"`
	Parameters  []map[string]any             `json:"parameters"`
	RequestBody map[string]any               `json:"requestBody"`
	Responses   map[string]map[string]string `json:"responses"`
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

func checkOpenAPIShape(t *testing.T, doc openAPIDoc) {
	t.Helper()
	if doc.OpenAPI != "3.1.0" || doc.Info.Title != "Rollcall" || doc.Info.Version == "" || doc.Servers != nil {
		t.Errorf("openapi %q, info %+v, servers %v", doc.OpenAPI, doc.Info, doc.Servers)
	}
	if s := doc.Components.SecuritySchemes["admin"]; s["type"] != "http" || s["scheme"] != "bearer" {
		t.Errorf("admin scheme = %v", s)
	}
	if s := doc.Components.SecuritySchemes["agent"]; s["type"] != "apiKey" || s["in"] != "header" || s["name"] != "X-Rollcall-Token" {
		t.Errorf("agent scheme = %v", s)
	}
	if doc.Components.Responses["Error"] == nil || doc.Components.Schemas["Error"] == nil {
		t.Errorf("components lack the Error response or schema")
	}
	ids := map[string]string{}
	for p, item := range doc.Paths {
		if strings.Contains(p, ":") || strings.Contains(p, "*") {
			t.Errorf("%s: gin syntax in an OpenAPI path", p)
		}
		var inPath []string
		for _, m := range pathParam.FindAllStringSubmatch(p, -1) {
			inPath = append(inPath, m[1])
		}
		for method, op := range item {
			where := strings.ToUpper(method) + " " + p
			if op.Summary == "" {
				t.Errorf("%s: no summary", where)
			}
			if op.Responses["200"]["description"] == "" || op.Responses["default"]["$ref"] != "#/components/responses/Error" {
				t.Errorf("%s: responses = %v", where, op.Responses)
			}
			if op.Security == nil {
				t.Errorf("%s: no security (want [] for an open route)", where)
			} else {
				for _, req := range *op.Security {
					for scheme := range req {
						if doc.Components.SecuritySchemes[scheme] == nil {
							t.Errorf("%s: unknown security scheme %q", where, scheme)
						}
					}
				}
			}
			if other, dup := ids[op.OperationID]; dup || op.OperationID == "" {
				t.Errorf("%s: operationId %q (also %s)", where, op.OperationID, other)
			}
			ids[op.OperationID] = where
			var declared []string
			for _, prm := range op.Parameters {
				if prm["in"] != "path" {
					continue
				}
				declared = append(declared, prm["name"].(string))
				if prm["required"] != true || !reflect.DeepEqual(prm["schema"], map[string]any{"type": "string"}) {
					t.Errorf("%s: parameter %v", where, prm)
				}
			}
			sort.Strings(declared)
			want := append([]string(nil), inPath...)
			sort.Strings(want)
			if !reflect.DeepEqual(declared, want) {
				t.Errorf("%s: path parameters declared %v, want %v", where, declared, want)
			}
			if op.RequestBody != nil {
				schema, _ := op.RequestBody["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
				if resolveRef(doc, schema) == nil {
					t.Errorf("%s: request body schema %v does not resolve", where, schema)
				}
			}
		}
	}
	// Every $ref anywhere points at something.
	raw, _ := json.Marshal(doc.Components.Schemas)
	for _, m := range regexp.MustCompile(`"\$ref":"#/components/schemas/([^"]+)"`).FindAllStringSubmatch(string(raw), -1) {
		if doc.Components.Schemas[m[1]] == nil {
			t.Errorf("dangling $ref to %s", m[1])
		}
	}
}

func resolveRef(doc openAPIDoc, s map[string]any) map[string]any {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	return doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
}

// TestOpenAPIDocument checks the document built from the table, without a
// node: security per kind, request schemas from the body types.
func TestOpenAPIDocument(t *testing.T) {
	s := bareServer(t)
	b, err := json.Marshal(openAPIDocument(s.routes()))
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	checkOpenAPIShape(t, doc)
	b2, _ := json.Marshal(openAPIDocument(s.routes()))
	if string(b) != string(b2) {
		t.Errorf("two builds of the document differ")
	}
	// Schema names are public: the request types keep the names the
	// document has published (publishedNames), whatever their Go names.
	for _, name := range []string{"AllocateRequest", "BmcRequest", "BootTokenRequest", "BootdevRequest", "CreateMachineRequest",
		"EnlistRequest", "ExportRequest", "FabricRequest", "ImageFile", "ImageRequest", "JoinCodeRequest", "PowerRequest",
		"RangeRequest", "Report", "ReserveRequest", "SubnetRequest", "VLANServer", "VlanRequest", "VlanUpdate"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no schema %s", name)
		}
	}

	security := map[string]string{
		"GET /api/v1/health":                    "",
		"GET /metrics":                          "",
		"POST /api/v1/commission":               "agent",
		"GET /api/v1/machines/{id}":             "admin",
		"DELETE /api/v1/cluster/members/{name}": "admin",
	}
	for op, want := range security {
		method, p, _ := strings.Cut(op, " ")
		o, ok := doc.Paths[p][strings.ToLower(method)]
		if !ok || o.Security == nil {
			t.Errorf("%s: missing, or no security", op)
			continue
		}
		var got []string
		for _, req := range *o.Security {
			for k := range req {
				got = append(got, k)
			}
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s: security %v, want %q", op, got, want)
		}
	}

	// The machine body: a closed object of the request's fields.
	body := doc.Paths["/api/v1/machines"]["post"].RequestBody
	schema := resolveRef(doc, body["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any))
	wantMachine := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"name": map[string]any{"type": "string"},
			"mac":  map[string]any{"type": "string"},
			"macs": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		},
	}
	if !reflect.DeepEqual(schema, wantMachine) {
		t.Errorf("POST /api/v1/machines body schema = %v, want %v", schema, wantMachine)
	}
	if doc.Paths["/api/v1/machines"]["get"].RequestBody != nil {
		t.Errorf("GET /api/v1/machines has a request body")
	}

	// The inventory report: nested references, time, pointers.
	report := doc.Components.Schemas["Report"]
	props, _ := report["properties"].(map[string]any)
	checks := map[string]any{
		"version":   map[string]any{"type": "integer"},
		"collected": map[string]any{"type": "string", "format": "date-time"},
		"system":    map[string]any{"$ref": "#/components/schemas/System"},
		"bmc":       map[string]any{"$ref": "#/components/schemas/BMC"},
		"tpm":       map[string]any{"$ref": "#/components/schemas/TPM"},
		"dimms":     map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/DIMM"}},
		"memory":    map[string]any{"$ref": "#/components/schemas/Memory"},
	}
	for name, want := range checks {
		if !reflect.DeepEqual(props[name], want) {
			t.Errorf("Report.%s = %v, want %v", name, props[name], want)
		}
	}
	if report["additionalProperties"] != false {
		t.Errorf("Report is not closed: %v", report["additionalProperties"])
	}
	bmc := doc.Components.Schemas["BMC"]["properties"].(map[string]any)
	if !reflect.DeepEqual(bmc["password"], map[string]any{"type": "string"}) || !reflect.DeepEqual(bmc["errors"], map[string]any{"type": "array", "items": map[string]any{"type": "string"}}) {
		t.Errorf("BMC properties = %v", bmc)
	}
	if reflect.DeepEqual(doc.Components.Schemas["Report"], map[string]any{}) {
		t.Errorf("Report schema left as a placeholder")
	}
}

// TestSchemaOf covers the reflection rules on types the API does not use yet.
func TestSchemaOf(t *testing.T) {
	type node struct {
		Name     string  `json:"name"`
		Children []*node `json:"children,omitempty"`
		Parent   *node   `json:"parent"`
	}
	type base struct {
		ID      string `json:"id"`
		Shadow  int    `json:"shadow"`
		private int
	}
	type withEmbedded struct {
		base
		Shadow  string `json:"shadow"`
		Skipped string `json:"-"`
		NoTag   bool
		Count   uint16            `json:"count,string"`
		Raw     json.RawMessage   `json:"raw"`
		Blob    []byte            `json:"blob"`
		Labels  map[string]string `json:"labels"`
		Ratio   float64           `json:"ratio"`
		When    *time.Time        `json:"when"`
		Wait    time.Duration     `json:"wait"`
		Any     any               `json:"any"`
		Grid    [2][2]int         `json:"grid"`
	}
	g := &schemaGen{schemas: map[string]any{}, names: map[reflect.Type]string{}, taken: map[string]reflect.Type{}}
	if got := g.schema(reflect.TypeFor[*node]()); !reflect.DeepEqual(got, map[string]any{"$ref": "#/components/schemas/Node"}) {
		t.Errorf("recursive type = %v", got)
	}
	wantNode := map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
		"name":     map[string]any{"type": "string"},
		"children": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/Node"}},
		"parent":   map[string]any{"$ref": "#/components/schemas/Node"},
	}}
	if !reflect.DeepEqual(g.schemas["Node"], wantNode) {
		t.Errorf("node = %v", g.schemas["Node"])
	}
	g.schema(reflect.TypeFor[withEmbedded]())
	got := g.schemas["WithEmbedded"].(map[string]any)["properties"]
	want := map[string]any{
		"id":     map[string]any{"type": "string"},
		"shadow": map[string]any{"type": "string"},
		"NoTag":  map[string]any{"type": "boolean"},
		"count":  map[string]any{"type": "string"},
		"raw":    map[string]any{},
		"blob":   map[string]any{"type": "string", "contentEncoding": "base64"},
		"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		"ratio":  map[string]any{"type": "number"},
		"when":   map[string]any{"type": "string", "format": "date-time"},
		"wait":   map[string]any{"type": "integer"},
		"any":    map[string]any{},
		"grid":   map[string]any{"type": "array", "items": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("withEmbedded properties =\n%v\nwant\n%v", got, want)
	}

	// Two packages' types of one name get two schemas.
	g.schema(reflect.TypeFor[inventory.BMC]())
	g.schema(reflect.TypeFor[store.BMC]())
	inv, st := g.schemas["BMC"].(map[string]any), g.schemas["StoreBMC"].(map[string]any)
	if _, ok := inv["properties"].(map[string]any)["password"]; !ok {
		t.Errorf("BMC is not inventory.BMC: %v", inv)
	}
	if _, ok := st["properties"].(map[string]any)["password_sealed"]; !ok {
		t.Errorf("StoreBMC is not store.BMC: %v", st)
	}
}

func TestOpenAPIPath(t *testing.T) {
	tests := map[string]struct {
		path   string
		params []string
	}{
		"/api/v1/machines":            {"/api/v1/machines", nil},
		"/api/v1/machines/:id":        {"/api/v1/machines/{id}", []string{"id"}},
		"/api/v1/machines/:id/events": {"/api/v1/machines/{id}/events", []string{"id"}},
		"/a/:x/b/:y":                  {"/a/{x}/b/{y}", []string{"x", "y"}},
		"/files/*path":                {"/files/{path}", []string{"path"}},
	}
	for in, tc := range tests {
		p, params := openAPIPath(in)
		if p != tc.path || !reflect.DeepEqual(params, tc.params) {
			t.Errorf("openAPIPath(%q) = %q %v, want %q %v", in, p, params, tc.path, tc.params)
		}
	}
}
