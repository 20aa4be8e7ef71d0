// Package redfishtest is a FAKE Redfish service for tests: it serves a DMTF
// published mockup (../shared/redfish-mockups, BSD 3-Clause) over HTTPS and
// adds, on purpose, the behaviour a mockup lacks and a real BMC has:
// actions that change state, ETags and If-Match (412, 428), sessions,
// busy answers (409, 503, vendor messages), 202 task monitors, reset types
// published only through ActionInfo, settings resources, and the vendor
// quirks the profiles describe. Each behaviour is a Config field; the
// vendor scenarios in the redfish tests say which document they follow.
//
// It is not a Redfish implementation and nothing outside tests should use
// it.
package redfishtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config selects the mockup and the behaviours to add.
type Config struct {
	Mockup         string // mockup directory (MockupDir finds the shared ones)
	User, Password string // default admin / secret

	SystemID            string // rename the mockup's system (System.Embedded.1, Self, 0, system, …)
	RootVendor          string // service root Vendor
	RootOem             string // an Oem key on the service root (Dell, Hpe, …)
	ManagerManufacturer string
	PowerState          string // initial PowerState (default the mockup's)
	BootMode            string // initial BootSourceOverrideMode (default the mockup's)

	NoSessions  bool // no Links.Sessions on the service root
	NoBasicAuth bool // refuse basic auth (session login only)

	ETagInBodyOnly bool // no ETag header, only @odata.etag
	RequireIfMatch bool // PATCH without If-Match answers 428
	StrongETagOnly bool // a weak If-Match (W/"…") answers 412

	ResetTypes     []string // replace the advertised reset types
	ActionInfoOnly bool     // advertise reset types only through @Redfish.ActionInfo
	NoSystemReset  bool     // the system has no Reset; the chassis has one
	OnceOnly       bool     // only Once/Disabled overrides; Continuous answers 400

	SettingsSuffix      string // pending boot settings live at <system>/<suffix>
	SettingsAnnotation  bool   // announce it with @Redfish.Settings on the system
	RejectBootMode      bool   // a PATCH carrying BootSourceOverrideMode answers 400
	Answer400AfterPatch bool   // apply a PATCH, then answer 400 anyway

	BusyPatches        int    // the first N PATCHes answer BusyStatus/BusyBody
	BusyActions        int    // the first N action POSTs answer BusyStatus/BusyBody
	BusyStatus         int    // default 503
	BusyBody           string // default a Base.1.x ServiceTemporarilyUnavailable error
	BusyRetryAfter     string // Retry-After on busy answers (default "0")
	ConflictAfterReset int    // requests after a reset that answer 409 "in progress"

	TaskPolls     int // >0: actions answer 202 and finish after N monitor polls
	OffAfterReads int // ForceOff takes effect after N reads of the system

	SystemLink string // replace the Systems collection's member link (to test unsafe links)

	Stall   bool // never answer (until the client gives up)
	Garbage bool // answer every request with 200 and not-JSON
}

// Request is one request the fake saw.
type Request struct {
	Method, Path  string
	IfMatch       string
	Authorization bool // a basic Authorization header was sent
	Token         string
	Body          string
}

// Server is the fake service.
type Server struct {
	cfg   Config
	srv   *httptest.Server
	mu    sync.Mutex
	res   map[string]map[string]any
	ver   map[string]int
	tok   map[string]bool
	reqs  []Request
	sys   string
	chas  string
	cert  tls.Certificate
	certs int

	busyPatches, busyActions, conflict, offReads int
	pending                                      map[string]any
	resets                                       []string
	tasks                                        map[string]*task
	sessionsCreated                              int
}

type task struct {
	polls int
	apply func()
	done  bool
}

// MockupDir finds a shared DMTF mockup: $ROLLCALL_SHARED/redfish-mockups/NAME,
// else shared/redfish-mockups/NAME in the working directory or any parent
// (the shared dir sits beside the clone in CI and at /work/shared here).
func MockupDir(name string) (string, error) {
	if s := os.Getenv("ROLLCALL_SHARED"); s != "" {
		p := filepath.Join(s, "redfish-mockups", name)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		return "", fmt.Errorf("mockup %s not in ROLLCALL_SHARED=%s", name, s)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "shared", "redfish-mockups", name)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("mockup %s: no shared/redfish-mockups above the working directory (set ROLLCALL_SHARED)", name)
		}
		dir = parent
	}
}

// New loads the mockup and starts the fake on 127.0.0.1 with a fresh
// self-signed certificate.
func New(cfg Config) (*Server, error) {
	if cfg.User == "" {
		cfg.User, cfg.Password = "admin", "secret"
	}
	if cfg.BusyStatus == 0 {
		cfg.BusyStatus = http.StatusServiceUnavailable
	}
	if cfg.BusyBody == "" {
		cfg.BusyBody = errorBody("Base.1.8.ServiceTemporarilyUnavailable", "The service is temporarily unavailable. Retry in 0 seconds.")
	}
	if cfg.BusyRetryAfter == "" {
		cfg.BusyRetryAfter = "0"
	}
	s := &Server{cfg: cfg, res: map[string]map[string]any{}, ver: map[string]int{}, tok: map[string]bool{}, tasks: map[string]*task{}}
	if err := s.load(); err != nil {
		return nil, err
	}
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	s.cert = cert
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point of some tests
	s.srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return &tls.Config{Certificates: []tls.Certificate{s.cert}}, nil
		},
	}
	s.srv.StartTLS()
	return s, nil
}

// URL is https://127.0.0.1:PORT.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the fake.
func (s *Server) Close() { s.srv.CloseClientConnections(); s.srv.Close() }

// SwapCertificate makes the fake show a new certificate, as a replaced BMC
// (or a man in the middle) would.
func (s *Server) SwapCertificate() error {
	c, err := selfSigned()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cert = c
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	return nil
}

// Requests returns what the fake saw, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// SawCredentials reports whether any request carried credentials: a basic
// Authorization header, a session token or a session login.
func (s *Server) SawCredentials() bool {
	for _, r := range s.Requests() {
		if r.Authorization || r.Token != "" || (r.Method == http.MethodPost && strings.Contains(r.Path, "/Sessions")) {
			return true
		}
	}
	return false
}

// SessionsCreated counts session logins.
func (s *Server) SessionsCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionsCreated
}

// SystemPath is the system resource's path.
func (s *Server) SystemPath() string { return s.sys }

// PowerState is the system's PowerState.
func (s *Server) PowerState() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return str(s.res[s.sys]["PowerState"])
}

// Boot returns the system's BootSourceOverride target, enabled and mode.
func (s *Server) Boot() (target, enabled, mode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := s.res[s.sys]["Boot"].(map[string]any)
	return str(b["BootSourceOverrideTarget"]), str(b["BootSourceOverrideEnabled"]), str(b["BootSourceOverrideMode"])
}

// Pending returns the Boot object waiting in the settings resource.
func (s *Server) Pending() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return nil
	}
	out := map[string]any{}
	for k, v := range s.pending {
		out[k] = v
	}
	return out
}

// Resets returns the reset types received, in order.
func (s *Server) Resets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.resets)
}

func str(v any) string { x, _ := v.(string); return x }

func (s *Server) load() error {
	if s.cfg.Mockup == "" {
		return errors.New("redfishtest: Config.Mockup is required")
	}
	var oldID string
	err := filepath.WalkDir(s.cfg.Mockup, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() || de.Name() != "index.json" {
			return nil
		}
		rel, _ := filepath.Rel(s.cfg.Mockup, filepath.Dir(p))
		key := "/redfish/v1"
		if rel != "." {
			key += "/" + filepath.ToSlash(rel)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil // the mockups carry a few non-resource files
		}
		s.res[key] = doc
		return nil
	})
	if err != nil {
		return err
	}
	coll := s.res["/redfish/v1/Systems"]
	members, _ := coll["Members"].([]any)
	if len(members) == 0 {
		return errors.New("redfishtest: mockup has no system")
	}
	s.sys = str(members[0].(map[string]any)["@odata.id"])
	oldID = s.sys[strings.LastIndex(s.sys, "/")+1:]
	if s.cfg.SystemID != "" && s.cfg.SystemID != oldID {
		// Rename by rewriting every document: links, ids and targets.
		renamed := map[string]map[string]any{}
		for k, doc := range s.res {
			b, _ := json.Marshal(doc)
			b = []byte(strings.ReplaceAll(string(b), "/Systems/"+oldID, "/Systems/"+s.cfg.SystemID))
			var d map[string]any
			_ = json.Unmarshal(b, &d)
			renamed[strings.ReplaceAll(k, "/Systems/"+oldID, "/Systems/"+s.cfg.SystemID)] = d
		}
		s.res = renamed
		s.sys = "/redfish/v1/Systems/" + s.cfg.SystemID
		s.res[s.sys]["Id"] = s.cfg.SystemID
	}
	if s.cfg.SystemLink != "" {
		s.res["/redfish/v1/Systems"]["Members"] = []any{map[string]any{"@odata.id": s.cfg.SystemLink}}
	}
	root := s.res["/redfish/v1"]
	if s.cfg.NoSessions {
		delete(root, "Links")
	}
	if s.cfg.RootVendor != "" {
		root["Vendor"] = s.cfg.RootVendor
	}
	if s.cfg.RootOem != "" {
		root["Oem"] = map[string]any{s.cfg.RootOem: map[string]any{}}
	}
	if s.cfg.ManagerManufacturer != "" {
		for k, doc := range s.res {
			if strings.HasPrefix(k, "/redfish/v1/Managers/") && strings.Count(k, "/") == 4 {
				doc["Manufacturer"] = s.cfg.ManagerManufacturer
			}
		}
	}
	sys := s.res[s.sys]
	if s.cfg.PowerState != "" {
		sys["PowerState"] = s.cfg.PowerState
	}
	boot, _ := sys["Boot"].(map[string]any)
	if s.cfg.BootMode != "" {
		boot["BootSourceOverrideMode"] = s.cfg.BootMode
	}
	if s.cfg.OnceOnly {
		boot["BootSourceOverrideEnabled@Redfish.AllowableValues"] = []any{"Once", "Disabled"}
	}
	actions, _ := sys["Actions"].(map[string]any)
	reset, _ := actions["#ComputerSystem.Reset"].(map[string]any)
	types := anyStrings(reset["ResetType@Redfish.AllowableValues"])
	if s.cfg.ResetTypes != nil {
		types = s.cfg.ResetTypes
		reset["ResetType@Redfish.AllowableValues"] = toAny(types)
	}
	if s.cfg.ActionInfoOnly {
		delete(reset, "ResetType@Redfish.AllowableValues")
		info := s.sys + "/ResetActionInfo"
		reset["@Redfish.ActionInfo"] = info
		s.res[info] = map[string]any{
			"@odata.id": info, "@odata.type": "#ActionInfo.v1_1_2.ActionInfo", "Id": "ResetActionInfo", "Name": "Reset Action Info",
			"Parameters": []any{map[string]any{"Name": "ResetType", "Required": true, "DataType": "String", "AllowableValues": toAny(types)}},
		}
	}
	if links, ok := sys["Links"].(map[string]any); ok {
		if ch, ok := links["Chassis"].([]any); ok && len(ch) > 0 {
			s.chas = str(ch[0].(map[string]any)["@odata.id"])
		}
	}
	if s.cfg.NoSystemReset {
		delete(actions, "#ComputerSystem.Reset")
		ch := s.res[s.chas]
		cha, _ := ch["Actions"].(map[string]any)
		if cha == nil {
			cha = map[string]any{}
			ch["Actions"] = cha
		}
		cha["#Chassis.Reset"] = map[string]any{
			"target":                            s.chas + "/Actions/Chassis.Reset",
			"ResetType@Redfish.AllowableValues": toAny(types),
		}
	}
	if s.cfg.SettingsSuffix != "" {
		sp := s.sys + "/" + s.cfg.SettingsSuffix
		s.res[sp] = map[string]any{"@odata.id": sp, "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "Id": s.cfg.SettingsSuffix, "Boot": map[string]any{}}
		if s.cfg.SettingsAnnotation {
			sys["@Redfish.Settings"] = map[string]any{
				"@odata.type":    "#Settings.v1_3_5.Settings",
				"SettingsObject": map[string]any{"@odata.id": sp},
			}
		}
	}
	return nil
}

func anyStrings(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, str(x))
	}
	return out
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func errorBody(id, msg string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"code": id, "message": msg,
		"@Message.ExtendedInfo": []any{map[string]any{"MessageId": id, "Message": msg}},
	}})
	return string(b)
}

func writeErr(w http.ResponseWriter, status int, id, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, errorBody(id, msg))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := Request{Method: r.Method, Path: r.URL.Path, IfMatch: r.Header.Get("If-Match"), Token: r.Header.Get("X-Auth-Token"), Body: string(body)}
	_, _, rec.Authorization = r.BasicAuth()
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()

	if s.cfg.Stall {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		return
	}
	if s.cfg.Garbage {
		_, _ = io.WriteString(w, "<html><body>Welcome to the web console</body></html>")
		return
	}
	p := strings.TrimSuffix(r.URL.Path, "/")
	if p == "/redfish" {
		writeJSON(w, http.StatusOK, map[string]any{"v1": "/redfish/v1/"}, "")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p == "/redfish/v1" && r.Method == http.MethodGet {
		s.writeResource(w, p)
		return
	}
	if p == "/redfish/v1/SessionService/Sessions" && r.Method == http.MethodPost {
		var login struct{ UserName, Password string }
		_ = json.Unmarshal(body, &login)
		if login.UserName != s.cfg.User || login.Password != s.cfg.Password {
			writeErr(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "Invalid username or password.")
			return
		}
		s.sessionsCreated++
		tok := fmt.Sprintf("tok-%d", s.sessionsCreated)
		s.tok[tok] = true
		loc := fmt.Sprintf("/redfish/v1/SessionService/Sessions/%d", s.sessionsCreated)
		w.Header().Set("X-Auth-Token", tok)
		w.Header().Set("Location", loc)
		writeJSON(w, http.StatusCreated, map[string]any{"@odata.id": loc, "Id": strconv.Itoa(s.sessionsCreated), "UserName": login.UserName}, "")
		return
	}
	if !s.authorised(r) {
		writeErr(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "There is no valid session established with the implementation.")
		return
	}
	if s.conflict > 0 {
		s.conflict--
		writeErr(w, http.StatusConflict, "Base.1.8.ResourceInUse", "A power operation is in progress; try again later.")
		return
	}
	switch r.Method {
	case http.MethodDelete:
		if strings.HasPrefix(p, "/redfish/v1/SessionService/Sessions/") {
			for t := range s.tok {
				if t == "tok-"+p[strings.LastIndex(p, "/")+1:] {
					delete(s.tok, t)
				}
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeErr(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", "DELETE not allowed")
	case http.MethodGet:
		if t, ok := s.tasks[p]; ok {
			s.pollTask(w, p, t)
			return
		}
		if p == s.sys && s.offReads > 0 {
			s.offReads--
			if s.offReads == 0 {
				s.res[s.sys]["PowerState"] = "Off"
			}
		}
		s.writeResource(w, p)
	case http.MethodPatch:
		s.patch(w, r, p, body)
	case http.MethodPost:
		s.action(w, p, body)
	default:
		writeErr(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", r.Method+" not allowed")
	}
}

func (s *Server) authorised(r *http.Request) bool {
	if t := r.Header.Get("X-Auth-Token"); t != "" {
		return s.tok[t]
	}
	if u, pw, ok := r.BasicAuth(); ok && !s.cfg.NoBasicAuth {
		return u == s.cfg.User && pw == s.cfg.Password
	}
	return false
}

func (s *Server) etag(p string) string { return fmt.Sprintf(`W/"%d"`, s.ver[p]+1) }

func (s *Server) writeResource(w http.ResponseWriter, p string) {
	doc, ok := s.res[p]
	if !ok {
		writeErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource at the URI "+p+" was not found.")
		return
	}
	out := map[string]any{}
	for k, v := range doc {
		out[k] = v
	}
	tag := s.etag(p)
	out["@odata.etag"] = tag
	if s.cfg.ETagInBodyOnly {
		tag = ""
	}
	writeJSON(w, http.StatusOK, out, tag)
}

func writeJSON(w http.ResponseWriter, status int, v any, etag string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OData-Version", "4.0")
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", s.cfg.BusyRetryAfter)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.cfg.BusyStatus)
	_, _ = io.WriteString(w, s.cfg.BusyBody)
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, p string, body []byte) {
	settings := s.cfg.SettingsSuffix != "" && p == s.sys+"/"+s.cfg.SettingsSuffix
	if p != s.sys && !settings {
		writeErr(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", "PATCH not allowed on "+p)
		return
	}
	if s.busyPatches < s.cfg.BusyPatches {
		s.busyPatches++
		s.busy(w)
		return
	}
	im := r.Header.Get("If-Match")
	switch {
	case im == "" && s.cfg.RequireIfMatch:
		writeErr(w, http.StatusPreconditionRequired, "Base.1.8.PreconditionRequired", "A precondition header or annotation is required to change the resource at "+p+".")
		return
	case im != "" && s.cfg.StrongETagOnly && strings.HasPrefix(im, "W/"):
		writeErr(w, http.StatusPreconditionFailed, "Base.1.8.PreconditionFailed", "Weak ETags are not accepted.")
		return
	case im != "" && im != "*" && strings.TrimPrefix(im, "W/") != strings.TrimPrefix(s.etag(p), "W/"):
		writeErr(w, http.StatusPreconditionFailed, "Base.1.8.PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource.")
		return
	}
	var req struct {
		Boot map[string]any `json:"Boot"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Boot == nil {
		writeErr(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "The request body submitted was malformed JSON or had no Boot.")
		return
	}
	if _, ok := req.Boot["BootSourceOverrideMode"]; ok && s.cfg.RejectBootMode {
		writeErr(w, http.StatusBadRequest, "Base.1.8.PropertyNotWritable", "The property BootSourceOverrideMode is a read only property and cannot be assigned a value.")
		return
	}
	if req.Boot["BootSourceOverrideEnabled"] == "Continuous" && s.cfg.OnceOnly {
		writeErr(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", "The value Continuous for the property BootSourceOverrideEnabled is not in the list of acceptable values.")
		return
	}
	sysBoot, _ := s.res[s.sys]["Boot"].(map[string]any)
	if t, ok := req.Boot["BootSourceOverrideTarget"]; ok {
		if al := anyStrings(sysBoot["BootSourceOverrideTarget@Redfish.AllowableValues"]); len(al) > 0 && !slices.Contains(al, str(t)) {
			writeErr(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", "target not allowed")
			return
		}
	}
	if settings {
		if s.pending == nil {
			s.pending = map[string]any{}
		}
		for k, v := range req.Boot {
			s.pending[k] = v
		}
		s.res[p]["Boot"] = s.pending
	} else {
		for k, v := range req.Boot {
			sysBoot[k] = v
		}
	}
	s.ver[p]++
	if s.cfg.Answer400AfterPatch {
		writeErr(w, http.StatusBadRequest, "Base.1.8.GeneralError", "A general error has occurred.")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) action(w http.ResponseWriter, p string, body []byte) {
	var target map[string]any
	var allowed []string
	if sa, ok := s.res[s.sys]["Actions"].(map[string]any)["#ComputerSystem.Reset"].(map[string]any); ok && str(sa["target"]) == p {
		target = sa
	}
	if s.chas != "" {
		if ca, ok := s.res[s.chas]["Actions"].(map[string]any); ok {
			if a, ok := ca["#Chassis.Reset"].(map[string]any); ok && str(a["target"]) == p {
				target = a
			}
		}
	}
	if target == nil {
		writeErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no action at "+p)
		return
	}
	allowed = anyStrings(target["ResetType@Redfish.AllowableValues"])
	if info := str(target["@Redfish.ActionInfo"]); info != "" {
		prm := s.res[info]["Parameters"].([]any)[0].(map[string]any)
		allowed = anyStrings(prm["AllowableValues"])
	}
	if s.busyActions < s.cfg.BusyActions {
		s.busyActions++
		s.busy(w)
		return
	}
	var req struct{ ResetType string }
	_ = json.Unmarshal(body, &req)
	if !slices.Contains(allowed, req.ResetType) {
		writeErr(w, http.StatusBadRequest, "Base.1.8.ActionParameterValueNotInList",
			fmt.Sprintf("The value %q for the parameter ResetType is not in the list of acceptable values.", req.ResetType))
		return
	}
	s.resets = append(s.resets, req.ResetType)
	apply := func() { s.applyReset(req.ResetType) }
	if s.cfg.TaskPolls > 0 {
		id := len(s.tasks) + 1
		mon := fmt.Sprintf("/redfish/v1/TaskService/TaskMonitors/%d", id)
		s.tasks[mon] = &task{polls: s.cfg.TaskPolls, apply: apply}
		w.Header().Set("Location", mon)
		w.Header().Set("Retry-After", "0")
		writeJSON(w, http.StatusAccepted, map[string]any{"@odata.id": fmt.Sprintf("/redfish/v1/TaskService/Tasks/%d", id), "TaskState": "Running"}, "")
		return
	}
	apply()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pollTask(w http.ResponseWriter, p string, t *task) {
	if t.polls > 0 {
		t.polls--
		w.Header().Set("Location", p)
		w.Header().Set("Retry-After", "0")
		writeJSON(w, http.StatusAccepted, map[string]any{"TaskState": "Running", "PercentComplete": 50}, "")
		return
	}
	if !t.done {
		t.done = true
		t.apply()
	}
	writeJSON(w, http.StatusOK, map[string]any{"@odata.type": "#Task.v1_7_0.Task", "TaskState": "Completed", "TaskStatus": "OK"}, "")
}

func (s *Server) applyReset(t string) {
	sys := s.res[s.sys]
	on := func() {
		sys["PowerState"] = "On"
		if s.pending != nil {
			// Pending settings apply when the host boots.
			boot := sys["Boot"].(map[string]any)
			for k, v := range s.pending {
				boot[k] = v
			}
			s.pending = nil
			s.res[s.sys+"/"+s.cfg.SettingsSuffix]["Boot"] = map[string]any{}
		}
	}
	switch t {
	case "On", "ForceOn":
		on()
	case "ForceOff", "GracefulShutdown":
		if s.cfg.OffAfterReads > 0 {
			s.offReads = s.cfg.OffAfterReads
		} else {
			sys["PowerState"] = "Off"
		}
	case "PushPowerButton":
		if sys["PowerState"] == "On" {
			sys["PowerState"] = "Off"
		} else {
			on()
		}
	case "ForceRestart", "GracefulRestart", "PowerCycle", "ForcePowerCycle":
		on()
	}
	s.ver[s.sys]++
	if s.chas != "" {
		s.res[s.chas]["PowerState"] = sys["PowerState"]
	}
	s.conflict = s.cfg.ConflictAfterReset
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "fake-bmc-" + base64.RawURLEncoding.EncodeToString(serial.Bytes())},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
