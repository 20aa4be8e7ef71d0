package appliance

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/connlimit"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
)

// Header carrying the Raft index a response reflects; a client passes it
// back as ?min_index= (or X-Rollcall-Min-Index) to read its own write on
// any node.
const (
	headerIndex    = "X-Rollcall-Index"
	headerMinIndex = "X-Rollcall-Min-Index"
	maxBodyBytes   = 1 << 20
	maxWait        = 5 * time.Minute
	// maxWaiters bounds the blocking queries (?index=&wait=) one node
	// holds: the UI, consoles and -watch of a whole operations team, with
	// room; each holds a connection and, when woken, an answer.
	maxWaiters = 512
)

// apiError is what a client sees: a status, a stable code and a public
// message. The internal cause is logged, never sent.
type apiError struct {
	Status  int
	Code    string
	Message string
	cause   error
}

func (e *apiError) Error() string { return e.Message }

func badRequest(format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, a...)}
}

// publicError maps an error to what the API may say about it. Errors from
// the store and the state machine are written for operators (they name the
// record and the rule), so their text is passed on; anything unclassified
// becomes a generic 500 and its cause goes only to the log.
func publicError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	switch {
	case errors.Is(err, cluster.ErrNoLeader):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "no_leader", Message: "no leader; retry", cause: err}
	case errors.Is(err, cluster.ErrUnknownOutcome):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unknown_outcome", Message: cluster.ErrUnknownOutcome.Error(), cause: err}
	}
	status := map[string]int{
		"not_found": http.StatusNotFound, "conflict": http.StatusConflict, "invalid": http.StatusBadRequest,
		"forbidden": http.StatusForbidden, "transition": http.StatusConflict,
	}
	code := store.Code(err)
	if s, ok := status[code]; ok {
		// The store's messages end with the sentinel (": conflict"); the
		// code already says it.
		// "…: not found" reads well and stays.
		msg := err.Error()
		for _, s := range []string{": conflict", ": invalid", ": forbidden", ": transition not allowed"} {
			msg = strings.TrimSuffix(msg, s)
		}
		return &apiError{Status: s, Code: code, Message: msg, cause: err}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error (logged on the node)", cause: err}
}

func (n *Node) fail(c *gin.Context, err error) {
	ae := publicError(err)
	if ae.Status >= 500 {
		n.log.Error("request failed", "method", c.Request.Method, "route", c.FullPath(), "status", ae.Status, "err", err)
	}
	c.AbortWithStatusJSON(ae.Status, wire.ErrorReply{Error: wire.ErrorDetail{Code: ae.Code, Message: ae.Message}})
}

func (n *Node) serveHTTP() error {
	ln, err := net.Listen("tcp", n.opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", n.opts.HTTPAddr, err)
	}
	n.httpLn = ln
	n.api = n.router()
	n.http = &http.Server{Handler: n.api, ConnContext: limitSendBuffer}
	guarded, err := n.guard("api", n.http, ln)
	if err != nil {
		return err
	}
	n.sup.run("api", servePart(n.http, guarded, func(l net.Listener) error { return n.http.Serve(l) }))
	return nil
}

// servePart runs an HTTP server as a part: its end before the node stops
// is a failure.
func servePart(srv *http.Server, ln net.Listener, serve func(net.Listener) error) func(context.Context, *slog.Logger) error {
	return func(ctx context.Context, _ *slog.Logger) error {
		err := serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			// Only Close shuts a server down, and the node's context ends
			// with it: not a failure.
			<-ctx.Done()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return public("stopped listening on "+ln.Addr().String(), err)
	}
}

// guard puts one of the node's HTTP servers behind the limits every
// listener has (connlimit): header, idle, body-rate and write timeouts, and
// caps on connections per client and in total that close the longest-idle
// ones first, so no client, authenticated or not, can exhaust the node's
// descriptors or hold its handlers. srv.Handler must be set.
func (n *Node) guard(name string, srv *http.Server, ln net.Listener) (net.Listener, error) {
	if err := connlimit.ApplyTimeouts(srv, connlimit.Timeouts{}); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	l, err := connlimit.NewListener(ln, srv, connlimit.Limits{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n.reg.MustRegister(l.Collector(name))
	return l, nil
}

func (n *Node) router() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollcall_http_requests_total", Help: "API requests by route and status.",
	}, []string{"method", "route", "status"})
	n.reg.MustRegister(requests)
	r.Use(func(c *gin.Context) {
		defer func() {
			if p := recover(); p != nil {
				n.log.Error("panic in handler", "route", c.FullPath(), "panic", p)
				n.fail(c, fmt.Errorf("panic: %v", p))
			}
		}()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		requests.WithLabelValues(c.Request.Method, route, strconv.Itoa(c.Writer.Status())).Inc()
	})
	r.NoRoute(func(c *gin.Context) {
		n.fail(c, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint: " + c.Request.URL.Path})
	})
	r.NoMethod(func(c *gin.Context) {
		n.fail(c, &apiError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: c.Request.Method + " is not allowed on " + c.Request.URL.Path})
	})

	for _, rt := range n.routes() {
		handlers := append([]gin.HandlerFunc{}, rt.auth.middleware(n)...)
		r.Handle(rt.Method, rt.Path, append(handlers, rt.handler)...)
	}
	return r
}

// requireAdmin admits a request with Authorization: Bearer <admin token>:
// the cluster's token (checked against its replicated hash) or the
// configuration's admin_token. Plain HTTP is further limited by admin_http.
func (n *Node) requireAdmin(c *gin.Context) {
	if c.Request.TLS == nil {
		switch n.conf.AdminHTTP {
		case "deny":
			n.fail(c, &apiError{Status: http.StatusForbidden, Code: "https_required", Message: "the admin API is served over HTTPS only on this node (admin_http: deny)"})
			return
		case "loopback":
			if !isLoopback(c.Request.RemoteAddr) {
				n.fail(c, &apiError{Status: http.StatusForbidden, Code: "https_required", Message: "plain HTTP admin access is allowed from this host only (admin_http: loopback); use HTTPS"})
				return
			}
		}
	}
	scheme, tok, ok := strings.Cut(c.GetHeader("Authorization"), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer") // the scheme is case-insensitive (RFC 9110 §11.1)
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		n.fail(c, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "admin token required (Authorization: Bearer <token>)"})
		return
	}
	if !n.tokenOK(tok, func(id store.ClusterIdentity) string { return id.AdminTokenHash }, n.conf.AdminToken) {
		n.fail(c, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "wrong admin token"})
		return
	}
	c.Next()
}

// requireAgent admits a commissioning agent: X-Rollcall-Token is a boot
// token (boottoken.go), whose MAC the handlers then hold the request to, or,
// unless bootOnly, the cluster's shared agent token or rollcall.json's
// agent_token.
func (n *Node) requireAgent(bootOnly bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		tok := c.GetHeader("X-Rollcall-Token")
		if tok == "" {
			n.fail(c, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "agent token required (X-Rollcall-Token)"})
			return
		}
		if strings.HasPrefix(tok, boottoken.Prefix) {
			mac, err := boottoken.Parse(n.key, tok, time.Now())
			if err != nil {
				msg := "wrong boot token"
				var exp *boottoken.ExpiredError
				if errors.As(err, &exp) {
					msg = fmt.Sprintf("boot token expired at %s: boot the machine again", exp.At.UTC().Format(time.RFC3339))
				}
				n.fail(c, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg})
				return
			}
			c.Set(ctxAgentMAC, mac)
			c.Next()
			return
		}
		if !n.tokenOK(tok, func(id store.ClusterIdentity) string { return id.AgentTokenHash }, n.conf.AgentToken) {
			n.fail(c, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "wrong agent token"})
			return
		}
		if bootOnly {
			n.fail(c, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "the shared agent token only enlists: this call needs the boot token the machine's boot script hands out (rollcall.token=)"})
			return
		}
		c.Next()
	}
}

// tokenOK compares in constant time against the replicated hash and the
// configured token.
func (n *Node) tokenOK(tok string, hashOf func(store.ClusterIdentity) string, configured string) bool {
	sum := sha256.Sum256([]byte(tok))
	var id store.ClusterIdentity
	n.db.View(func(tx *store.Tx) error {
		id, _ = tx.Identity()
		return nil
	})
	ok := false
	if want, err := hex.DecodeString(hashOf(id)); err == nil && len(want) == len(sum) {
		ok = subtle.ConstantTimeCompare(sum[:], want) == 1
	}
	if configured != "" {
		c := sha256.Sum256([]byte(configured))
		ok = ok || subtle.ConstantTimeCompare(sum[:], c[:]) == 1
	}
	return ok
}

// decodeBody reads a JSON body of at most limit bytes, rejecting unknown
// fields and trailing data.
func decodeBody(c *gin.Context, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("request body is larger than the %d bytes allowed", limit)}
		}
		return badRequest("cannot read request body")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return badRequest("request body is not valid JSON (at byte %d)", se.Offset)
		case errors.As(err, &te) && te.Field == "":
			return badRequest("request body must be a JSON object, not %s", te.Value)
		case errors.As(err, &te):
			return badRequest("field %q must be %s, not %s", te.Field, jsonKind(te.Type), te.Value)
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty; a JSON object is required")
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return badRequest("%s", strings.TrimPrefix(err.Error(), "json: "))
		}
		return badRequest("request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	// More() is false before a stray '}' or ']': ask for one more token.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("request body has data after the JSON object")
	}
	return nil
}

// minIndex waits, for a read, until this node has applied the index the
// client asks for (?min_index= or X-Rollcall-Min-Index).
func (n *Node) minIndex(c *gin.Context) error {
	v := c.Query("min_index")
	if v == "" {
		v = c.GetHeader(headerMinIndex)
	}
	if v == "" {
		return nil
	}
	idx, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return badRequest("min_index must be a non-negative integer")
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	if err := n.cluster.FSM().WaitApplied(ctx, idx); err != nil {
		return &apiError{Status: http.StatusServiceUnavailable, Code: "behind", Message: fmt.Sprintf("this node has not reached index %d yet; retry", idx)}
	}
	return nil
}

// blockingQuery implements ?index=N&wait=D: it returns once the table's
// change index is past N, or after D (default 30s, at most 5 min).
func (n *Node) blockingQuery(c *gin.Context, table string) error {
	v := c.Query("index")
	if v == "" {
		return nil
	}
	after, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return badRequest("index must be a non-negative integer")
	}
	wait := 30 * time.Second
	if w := c.Query("wait"); w != "" {
		if wait, err = time.ParseDuration(w); err != nil || wait < 0 {
			return badRequest("wait must be a duration such as 30s or 2m")
		}
	}
	wait = min(wait, maxWait)
	if n.waiters.Add(1) > maxWaiters {
		n.waiters.Add(-1)
		c.Header("Retry-After", "5")
		return &apiError{Status: http.StatusTooManyRequests, Code: "too_many_watchers", Message: fmt.Sprintf("this node holds %d blocking queries already; retry in a few seconds", maxWaiters)}
	}
	defer n.waiters.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		ch := n.db.WatchTables(table)
		var cur uint64
		n.db.View(func(tx *store.Tx) error { cur = tx.TableIndex(table); return nil })
		if cur > after {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-c.Request.Context().Done():
			return c.Request.Context().Err()
		}
	}
}

func (n *Node) getHealth(c *gin.Context) {
	leader, _ := n.cluster.Leader()
	st := n.cluster.LocalStatus()
	// Healthy: a leader is known and this node holds the cluster identity
	// (a new cluster records it right after its first election).
	var hasIdentity bool
	n.db.View(func(tx *store.Tx) error { _, err := tx.Identity(); hasIdentity = err == nil; return nil })
	// and this node is not far behind the leader: a node catching up
	// serves old answers (a machine's boot, a lease) as if they were current.
	ok := leader != "" && hasIdentity
	answer := wire.Health{Node: n.opts.Name, Leader: leader, State: st.State, AppliedIndex: st.Applied}
	if st.Diverged != "" {
		ok, answer.Reason = false, st.Diverged
	}
	if ok {
		lag, err := n.cluster.Lag(c.Request.Context(), 500*time.Millisecond)
		switch {
		case err != nil:
			ok, answer.LagError = false, "cannot tell how far behind the leader this node is"
			n.log.Debug("health: lag unknown", "err", err)
		case lag > maxHealthLag:
			ok, answer.Lag = false, &lag
			answer.Reason = fmt.Sprintf("catching up: %d entries behind the leader (healthy within %d)", lag, maxHealthLag)
		default:
			answer.Lag = &lag
		}
	}
	// Every part and how it fares; one that provisioning needs and that
	// failed (DHCP cannot bind port 67, say) makes the node unhealthy.
	parts := n.sup.status()
	for _, p := range parts {
		if p.State == "failed" && (p.Name == "dhcp" || p.Name == "tftp" || p.Name == "api") {
			ok = false
			if answer.Reason == "" {
				answer.Reason = p.Name + ": " + p.Error
			}
		}
	}
	answer.Parts = convert(parts, wirePart)
	answer.OK = ok
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, answer)
}

// maxHealthLag is how many entries behind the leader a node may be and
// still call itself healthy: a moment of DHCP load on a follower.
const maxHealthLag = 1000

// jsonKind names what a Go type accepts in JSON terms, for messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON type"
}
