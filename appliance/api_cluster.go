package appliance

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
)

func (n *Node) getCluster(c *gin.Context) {
	members, err := n.cluster.Members(c.Request.Context(), 2*time.Second)
	if err != nil {
		n.fail(c, err)
		return
	}
	var nodes []store.Node
	var idx uint64
	if err := n.db.View(func(tx *store.Tx) error {
		idx = tx.TableIndex(store.TableCluster)
		var err error
		nodes, err = tx.Nodes()
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	leader, _ := n.cluster.Leader()
	ca, _ := x509.ParseCertificate(n.caCert)
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, wire.ClusterView{Node: n.opts.Name, Leader: leader, CAFingerprint: pki.FingerprintHex(ca), Members: convert(members, wireMember), Nodes: convert(nodes, wireNode)})
}

func (n *Node) postJoinCode(c *gin.Context) {
	req := wire.JoinCodeRequest{TTL: "60m"}
	if c.Request.ContentLength != 0 {
		if err := decodeBody(c, maxBodyBytes, &req); err != nil {
			n.fail(c, err)
			return
		}
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl < time.Minute || ttl > 7*24*time.Hour {
		n.fail(c, badRequest("ttl must be a duration between 1m and 168h, such as 60m"))
		return
	}
	ca, err := x509.ParseCertificate(n.caCert)
	if err != nil {
		n.fail(c, err)
		return
	}
	now := time.Now().UTC()
	code, err := pki.NewJoinCode(n.cluster.Advertise(), pki.Fingerprint(ca), now.Add(ttl).Truncate(time.Second))
	if err != nil {
		n.fail(c, err)
		return
	}
	hash := code.SecretHash()
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.JoinCodeAdd{
		Code: raftfsm.JoinCode{SecretHash: hex.EncodeToString(hash[:]), Expires: code.Expires, CreatedBy: n.opts.Name, Created: now},
		Now:  now,
	})
	if err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusCreated, wire.JoinCodeView{Code: code.String(), Expires: code.Expires, Address: code.Addr})
}

func (n *Node) deleteMember(c *gin.Context) {
	name := c.Param("name")
	// Removal is idempotent: a node already out of the Raft configuration
	// but still on record (an earlier attempt whose answer was lost) is
	// finished, not refused.
	if err := n.cluster.RemoveMember(c.Request.Context(), name); err != nil {
		known := false
		n.db.View(func(tx *store.Tx) error {
			_, nerr := tx.Node(name)
			known = nerr == nil || tx.NodeRemoved(name)
			return nil
		})
		switch {
		case errors.Is(err, store.ErrNotFound) && known:
		case errors.Is(err, store.ErrNotFound), errors.Is(err, cluster.ErrNoLeader):
			n.fail(c, err)
			return
		default:
			// Not "no leader": the change may have been made; retrying is
			// safe (see above) but not automatic.
			n.fail(c, &apiError{Status: http.StatusServiceUnavailable, Code: "unknown_outcome", Message: "could not confirm the removal: " + err.Error() + "; check rollcall cluster status and retry", cause: err})
			return
		}
	}
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.NodeRemove{Name: name})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, wire.Removed{Removed: name})
}

// postRepair is POST /api/v1/cluster/members/:name/repair: the named node
// rebuilds its store from the leader's (rollcall cluster repair).
func (n *Node) postRepair(c *gin.Context) {
	name := c.Param("name")
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Minute)
	defer cancel()
	if err := n.cluster.RepairMember(ctx, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			n.fail(c, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "node " + clip(name) + " is not a member", cause: err})
			return
		}
		n.fail(c, &apiError{Status: http.StatusConflict, Code: "repair_failed", Message: "the repair did not finish; see the node's log and retry", cause: err})
		return
	}
	c.JSON(http.StatusOK, wire.Repaired{Node: name, AppliedIndex: n.cluster.FSM().AppliedIndex()})
}

// postCheck is POST /api/v1/cluster/check: a consistency check now.
func (n *Node) postCheck(c *gin.Context) {
	idx, err := n.cluster.CheckState(c.Request.Context())
	if err != nil {
		n.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, wire.CheckReply{Index: idx})
}
