package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/store"
)

// ctxAgentMAC holds the MAC of the boot token a request came with.
const ctxAgentMAC = "rollcall.agent_mac"

// ctxActor holds who an admin request is from: "token" (the admin token)
// or "admin:NAME" (an administrator's certificate).
const ctxActor = "rollcall.actor"

// actor is who an admin request is from ("" before requireAdmin).
func actor(c *gin.Context) string { return c.GetString(ctxActor) }

func (s *Server) middleware(a Auth) []gin.HandlerFunc {
	switch a {
	case AuthAdmin:
		return []gin.HandlerFunc{s.failer.Handle(s.requireAdmin)}
	case AuthAgent:
		return []gin.HandlerFunc{s.failer.Handle(s.requireAgent(false))}
	case AuthBoot:
		return []gin.HandlerFunc{s.failer.Handle(s.requireAgent(true))}
	case AuthJob:
		return []gin.HandlerFunc{s.failer.Handle(s.requireJob)}
	case AuthNode:
		return []gin.HandlerFunc{s.failer.Handle(s.requireNode)}
	}
	return nil
}

func unauthorized(msg string) error {
	return Errorf(http.StatusUnauthorized, "unauthorized", "%s", msg)
}

// requireAdmin admits a request over HTTPS with an administrator's client
// certificate (adminCertActor: checked at every request, so a revocation
// takes effect on the next one), or with Authorization: Bearer <admin
// token>: the cluster's token (checked against its replicated hash) or
// the configuration's admin_token. A certificate that is presented and
// refused fails the request with the reason, even with a token beside it.
// Plain HTTP is further limited by admin_http. A refusal aborts the chain
// (Fail), so the route's handler never runs.
func (s *Server) requireAdmin(c *gin.Context) error {
	if c.Request.TLS == nil {
		switch s.cfg.AdminHTTP {
		case "deny":
			return Errorf(http.StatusForbidden, "https_required", "the admin API is served over HTTPS only on this node (admin_http: deny)")
		case "loopback":
			if !isLoopback(c.Request.RemoteAddr) {
				return Errorf(http.StatusForbidden, "https_required", "plain HTTP admin access is allowed from this host only (admin_http: loopback); use HTTPS")
			}
		}
	}
	if tlsState := c.Request.TLS; tlsState != nil && len(tlsState.PeerCertificates) > 0 {
		who, err := s.adminCertActor(tlsState.PeerCertificates)
		if err != nil {
			s.log.Warn("admin request refused: client certificate", "remote", c.ClientIP(), "subject", store.Clip(tlsState.PeerCertificates[0].Subject.CommonName), "err", err)
			return unauthorized("client certificate refused: " + err.Error())
		}
		c.Set(ctxActor, who)
		return s.admitted(c)
	}
	scheme, tok, ok := strings.Cut(c.GetHeader("Authorization"), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer") // the scheme is case-insensitive (RFC 9110 §11.1)
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return unauthorized("admin token required (Authorization: Bearer <token>)")
	}
	if !s.tokenOK(tok, func(id store.ClusterIdentity) string { return id.AdminTokenHash }, s.cfg.AdminToken) {
		return unauthorized("wrong admin token")
	}
	c.Set(ctxActor, "token")
	return s.admitted(c)
}

// admitted runs an admitted admin request.
func (s *Server) admitted(c *gin.Context) error {
	withAudit(c)
	if c.Request.Method == http.MethodGet {
		if err := s.consistentWait(c); err != nil {
			return err
		}
	}
	c.Next()
	return nil
}

// requireAgent admits a commissioning agent: X-Rollcall-Token is a boot
// token (package boottoken), whose MAC the handlers then hold the request
// to, or, unless bootOnly, the cluster's shared agent token or
// rollcall.json's agent_token.
func (s *Server) requireAgent(bootOnly bool) Handler {
	return func(c *gin.Context) error {
		tok := c.GetHeader("X-Rollcall-Token")
		if tok == "" {
			return unauthorized("agent token required (X-Rollcall-Token)")
		}
		if strings.HasPrefix(tok, boottoken.Prefix) {
			mac, err := boottoken.Parse(s.cfg.Key, tok, time.Now())
			var exp *boottoken.ExpiredError
			switch {
			case errors.As(err, &exp):
				return Wrap(http.StatusUnauthorized, "unauthorized",
					"boot token expired at "+exp.At.UTC().Format(time.RFC3339)+": boot the machine again", err)
			case err != nil:
				return Wrap(http.StatusUnauthorized, "unauthorized", "wrong boot token", err)
			}
			c.Set(ctxAgentMAC, mac)
			c.Next()
			return nil
		}
		if !s.tokenOK(tok, func(id store.ClusterIdentity) string { return id.AgentTokenHash }, s.cfg.AgentToken) {
			return unauthorized("wrong agent token")
		}
		if bootOnly {
			return unauthorized("the shared agent token only enlists: this call needs the boot token the machine's boot script hands out (rollcall.token=)")
		}
		c.Next()
		return nil
	}
}

// agentMAC is the MAC of the boot token a request came with, "" for the
// shared agent token.
func agentMAC(c *gin.Context) string { return c.GetString(ctxAgentMAC) }

// tokenOK compares in constant time against the replicated hash and the
// configured token.
func (s *Server) tokenOK(tok string, hashOf func(store.ClusterIdentity) string, configured string) bool {
	sum := sha256.Sum256([]byte(tok))
	var id store.ClusterIdentity
	s.cfg.DB.View(func(tx *store.Tx) error {
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

// isLoopback reports whether a request's remote address is on this host.
func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
