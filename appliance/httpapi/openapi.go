package httpapi

import (
	"encoding"
	"encoding/json"
	"net/http"
	"path"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
)

// openAPIVersion is the version of the document's API description, not of
// the OpenAPI format.
const openAPIVersion = "0.1"

// getOpenAPI serves the OpenAPI 3.1 document built from the route table.
func (s *Server) getOpenAPI(c *gin.Context) error {
	c.JSON(http.StatusOK, openAPIDocument(s.routes()))
	return nil
}

// openAPIDocument describes the routes as an OpenAPI 3.1 document. It is
// built from the same table as the router, so the two cannot drift apart
// (openapi_test.go checks it); request schemas come from the wire types the
// handlers decode (package wire), by reflection. Maps make the output deterministic: JSON
// encoding sorts their keys.
// readModeParams are the read modes every admin read takes (queries.go's
// minIndex; docs/consistency.md).
var readModeParams = []any{
	map[string]any{"name": "min_index", "in": "query", "required": false, "schema": map[string]any{"type": "integer", "minimum": 0},
		"description": "answer only once this node has applied this Raft index (the X-Rollcall-Index of an earlier answer): reads your own writes on any node (header X-Rollcall-Min-Index too)"},
	map[string]any{"name": "consistent", "in": "query", "required": false, "schema": map[string]any{"type": "string", "enum": []any{"1", "0", "true", "false"}},
		"description": "a linearizable read: the node waits for the leader's read index, so every write acknowledged before the request is in the answer; 503 no_leader without a quorum (header X-Rollcall-Consistent too)"},
}

func openAPIDocument(routes []Route) map[string]any {
	g := &schemaGen{schemas: map[string]any{}, names: map[reflect.Type]string{}, taken: map[string]reflect.Type{}}
	paths := map[string]any{}
	for _, r := range routes {
		p, params := openAPIPath(r.Path)
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		op := map[string]any{
			"summary":     r.Summary,
			"operationId": operationID(r.Method, r.Path),
			"security":    security(r.Auth),
			"responses": map[string]any{
				"200":     map[string]any{"description": "success"},
				"default": map[string]any{"$ref": "#/components/responses/Error"},
			},
		}
		ps := make([]any, 0, len(params)+2)
		for _, name := range params {
			ps = append(ps, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		if r.Method == "GET" && r.Auth == AuthAdmin {
			ps = append(ps, readModeParams...)
		}
		if len(ps) > 0 {
			op["parameters"] = ps
		}
		if r.Body != nil {
			op["requestBody"] = map[string]any{
				"content": map[string]any{
					"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(r.Body))},
				},
			}
		}
		item[strings.ToLower(r.Method)] = op
	}
	g.schemas["Error"] = map[string]any{
		"type":     "object",
		"required": []any{"error"},
		"properties": map[string]any{
			"error": map[string]any{
				"type":     "object",
				"required": []any{"code", "message"},
				"properties": map[string]any{
					"code":    map[string]any{"type": "string", "description": "stable, machine-readable (not_found, conflict, unauthorized, …)"},
					"message": map[string]any{"type": "string", "description": "for people"},
				},
			},
		},
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "Rollcall", "version": openAPIVersion},
		"paths":   paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"admin": map[string]any{"type": "http", "scheme": "bearer", "description": "the cluster admin token (DATA/admin.token) or rollcall.json admin_token"},
				"job":   map[string]any{"type": "apiKey", "in": "header", "name": "X-Rollcall-Job", "description": "a deploy or release job's token (rcj1.…: what the boot script hands the deploy agent as rollcall.job=), valid while the job is queued or running"},
				"node":  map[string]any{"type": "apiKey", "in": "header", "name": "X-Rollcall-Node", "description": "a stateless node's token (rcn1.…: what its boot script puts on the kernel command line as rollcall.node=), valid while the machine stays assigned as it was when it booted"},
				"agent": map[string]any{"type": "apiKey", "in": "header", "name": "X-Rollcall-Token", "description": "a boot token (rcb1.…: what the boot script hands one MAC as rollcall.token=, or POST /api/v1/boot-tokens), or for enlisting only the shared agent token (DATA/agent.token) or rollcall.json agent_token"},
			},
			"responses": map[string]any{
				"Error": map[string]any{
					"description": "an error",
					"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
				},
			},
			"schemas": g.schemas,
		},
	}
}

// openAPIPath turns gin's /a/:id/*rest into /a/{id}/{rest} and returns the
// parameter names in order.
func openAPIPath(ginPath string) (string, []string) {
	segs := strings.Split(ginPath, "/")
	var params []string
	for i, s := range segs {
		if len(s) > 1 && (s[0] == ':' || s[0] == '*') {
			params = append(params, s[1:])
			segs[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segs, "/"), params
}

// operationID is unique per method and path: GET /api/v1/machines/:id
// becomes get_api_v1_machines_id.
func operationID(method, ginPath string) string {
	id := strings.ToLower(method)
	for _, s := range strings.Split(ginPath, "/") {
		s = strings.TrimLeft(s, ":*")
		if s == "" {
			continue
		}
		id += "_" + strings.NewReplacer("-", "_", ".", "_").Replace(s)
	}
	return id
}

func security(a Auth) []any {
	switch a {
	case AuthAdmin:
		return []any{map[string]any{"admin": []any{}}}
	case AuthAgent, AuthBoot:
		return []any{map[string]any{"agent": []any{}}}
	case AuthJob:
		return []any{map[string]any{"job": []any{}}}
	case AuthNode:
		return []any{map[string]any{"node": []any{}}}
	}
	// An empty list overrides any top-level requirement: no credential.
	return []any{}
}

// schemaGen derives JSON Schemas (2020-12, as OpenAPI 3.1 uses) from Go
// types the way encoding/json reads them. Named structs go into
// components.schemas and are referenced, which also ends recursion.
type schemaGen struct {
	schemas map[string]any
	names   map[reflect.Type]string
	taken   map[string]reflect.Type
}

var (
	typeTime            = reflect.TypeFor[time.Time]()
	typeRawMessage      = reflect.TypeFor[json.RawMessage]()
	typeJSONUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	typeTextUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == typeTime:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == typeRawMessage:
		return map[string]any{}
	case implements(t, typeJSONUnmarshaler):
		return map[string]any{} // decodes itself: nothing to say
	case implements(t, typeTextUnmarshaler):
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name, ok := g.names[t]
		if !ok {
			name = g.nameFor(t)
			g.names[t] = name
			g.schemas[name] = map[string]any{} // placeholder: a self-reference resolves to it
			g.schemas[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	// Interfaces, and kinds encoding/json cannot encode: anything.
	return map[string]any{}
}

func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// publishedNames are the schema names the document has published for types
// whose Go names changed when the request types moved to package wire
// (bmcRequest became wire.BMCRequest): a client generated from an earlier
// document keeps its type names.
var publishedNames = map[reflect.Type]string{
	reflect.TypeFor[wire.BMCRequest]():  "BmcRequest",
	reflect.TypeFor[wire.VLANRequest](): "VlanRequest",
	reflect.TypeFor[wire.VLANUpdate]():  "VlanUpdate",
}

// nameFor is the type's name, capitalised, and qualified by its package
// when two packages use the same one (store.BMC and inventory.BMC).
func (g *schemaGen) nameFor(t reflect.Type) string {
	name := t.Name()
	if published, ok := publishedNames[t]; ok {
		name = published
	}
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i] // generic instance: the base name will do
	}
	// Schema names are public: capitalise unexported type names.
	name = upperFirst(name)
	if name == "Error" { // ours: the error shape
		name = "TypeError"
	}
	if other, ok := g.taken[name]; ok && other != t {
		name = upperFirst(path.Base(t.PkgPath())) + name
	}
	for other, ok := g.taken[name]; ok && other != t; other, ok = g.taken[name] {
		name += "_"
	}
	g.taken[name] = t
	return name
}

// object is a struct's schema. The API decodes with DisallowUnknownFields,
// so no other property is accepted; omitempty changes only what is sent,
// so it does not make a property more or less optional.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	g.fields(t, props, map[reflect.Type]bool{})
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

// fields adds t's JSON fields to props, promoting the fields of embedded
// structs; a field nearer the top shadows a deeper one, as in encoding/json.
func (g *schemaGen) fields(t reflect.Type, props map[string]any, visiting map[reflect.Type]bool) {
	if visiting[t] {
		return
	}
	visiting[t] = true
	defer delete(visiting, t)
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.schema(f.Type)
		if hasOption(opts, "string") {
			switch ft.Kind() {
			case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
				s = map[string]any{"type": "string"}
			}
		}
		props[name] = s
	}
	for _, et := range embedded {
		inner := map[string]any{}
		g.fields(et, inner, visiting)
		for k, v := range inner {
			if _, shadowed := props[k]; !shadowed {
				props[k] = v
			}
		}
	}
}

func upperFirst(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:]
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}
