package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// maxHealthLag is how many entries behind the leader a node may be and
// still call itself healthy: a moment of DHCP load on a follower.
const maxHealthLag = 1000

func (s *Server) getHealth(c *gin.Context) error {
	leader, _ := s.cfg.Cluster.Leader()
	st := s.cfg.Cluster.LocalStatus()
	// Healthy: a leader is known and this node holds the cluster identity
	// (a new cluster records it right after its first election).
	var hasIdentity bool
	s.cfg.DB.View(func(tx *store.Tx) error { _, err := tx.Identity(); hasIdentity = err == nil; return nil })
	// and this node is not far behind the leader: a node catching up
	// serves old answers (a machine's boot, a lease) as if they were current.
	ok := leader != "" && hasIdentity
	answer := wire.Health{Node: s.cfg.Name, Leader: leader, State: st.State, AppliedIndex: st.Applied}
	if st.Diverged != "" {
		ok, answer.Reason = false, st.Diverged
	}
	if ok {
		lag, err := s.cfg.Cluster.Lag(c.Request.Context(), 500*time.Millisecond)
		switch {
		case err != nil:
			ok, answer.LagError = false, "cannot tell how far behind the leader this node is"
			s.log.Debug("health: lag unknown", "err", err)
		case lag > maxHealthLag:
			ok, answer.Lag = false, &lag
			answer.Reason = fmt.Sprintf("catching up: %d entries behind the leader (healthy within %d)", lag, maxHealthLag)
		default:
			answer.Lag = &lag
		}
	}
	// Every part and how it fares; one that provisioning needs and that
	// failed (DHCP cannot bind port 67, say) makes the node unhealthy.
	parts := s.cfg.Parts()
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
	return nil
}

// getCA serves the cluster CA certificate over plain HTTP: agents and
// clients fetch it and accept it only by its SHA-256 fingerprint.
func (s *Server) getCA(c *gin.Context) error {
	c.Data(http.StatusOK, "application/x-pem-file", s.caBundle())
	return nil
}

// caBundle is the roots this node trusts in PEM, the current one first.
func (s *Server) caBundle() []byte { return s.cfg.Trust().BundlePEM() }
