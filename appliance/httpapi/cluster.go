package httpapi

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
)

func (s *Server) getCluster(c *gin.Context) error {
	members, err := s.cfg.Cluster.Members(c.Request.Context(), 2*time.Second)
	if err != nil {
		return err
	}
	var nodes []store.Node
	var idx uint64
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		idx = tx.TableIndex(store.TableCluster)
		var err error
		nodes, err = tx.Nodes()
		return err
	}); err != nil {
		return err
	}
	leader, _ := s.cfg.Cluster.Leader()
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.ClusterView{Node: s.cfg.Name, Leader: leader, CAFingerprint: pki.FingerprintHex(s.cfg.Trust().Current), Members: convert(members, wireMember), Nodes: convert(nodes, wireNode)})
	return nil
}

func (s *Server) postJoinCode(c *gin.Context) error {
	req := wire.JoinCodeRequest{TTL: "60m"}
	if c.Request.ContentLength != 0 {
		if err := decodeBody(c, maxBodyBytes, &req); err != nil {
			return err
		}
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl < time.Minute || ttl > 7*24*time.Hour {
		return BadRequest("ttl must be a duration between 1m and 168h, such as 60m")
	}
	now := time.Now().UTC()
	code, err := pki.NewJoinCode(s.cfg.Cluster.Advertise(), pki.Fingerprint(s.cfg.Trust().Current), now.Add(ttl).Truncate(time.Second))
	if err != nil {
		return err
	}
	hash := code.SecretHash()
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.JoinCodeAdd{
		Code: raftfsm.JoinCode{SecretHash: hex.EncodeToString(hash[:]), Expires: code.Expires, CreatedBy: s.cfg.Name, Created: now},
		Now:  now,
	})
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusCreated, wire.JoinCodeView{Code: code.String(), Expires: code.Expires, Address: code.Addr})
	return nil
}

func (s *Server) deleteMember(c *gin.Context) error {
	name := c.Param("name")
	// Removal is idempotent: a node already out of the Raft configuration
	// but still on record (an earlier attempt whose answer was lost) is
	// finished, not refused.
	if err := s.cfg.Cluster.RemoveMember(c.Request.Context(), name); err != nil {
		known := false
		s.cfg.DB.View(func(tx *store.Tx) error {
			_, nerr := tx.Node(name)
			known = nerr == nil || tx.NodeRemoved(name)
			return nil
		})
		switch {
		case errors.Is(err, store.ErrNotFound) && known:
		case errors.Is(err, store.ErrNotFound), errors.Is(err, cluster.ErrNoLeader):
			return err
		default:
			// Not "no leader": the change may have been made; retrying is
			// safe (see above) but not automatic.
			return Wrap(http.StatusServiceUnavailable, "unknown_outcome", "could not confirm the removal; check rollcall cluster status and retry", err)
		}
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.NodeRemove{Name: name})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	revoked, note := s.revokeNode(c, name)
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.Removed{Removed: name, RevokedCertificates: revoked, Note: note})
	return nil
}

// postRepair is POST /api/v1/cluster/members/:name/repair: the named node
// rebuilds its store from the leader's (rollcall cluster repair).
func (s *Server) postRepair(c *gin.Context) error {
	name := c.Param("name")
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Minute)
	defer cancel()
	if err := s.cfg.Cluster.RepairMember(ctx, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Wrap(http.StatusNotFound, "not_found", "node "+store.Clip(name)+" is not a member", err)
		}
		return Wrap(http.StatusConflict, "repair_failed", "the repair did not finish; see the node's log and retry", err)
	}
	c.JSON(http.StatusOK, wire.Repaired{Node: name, AppliedIndex: s.cfg.Cluster.FSM().AppliedIndex()})
	return nil
}

// postCheck is POST /api/v1/cluster/check: a consistency check now.
func (s *Server) postCheck(c *gin.Context) error {
	idx, err := s.cfg.Cluster.CheckState(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, wire.CheckReply{Index: idx})
	return nil
}
