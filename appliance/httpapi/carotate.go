package httpapi

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// CA rotation: a new root replaces the current one, which stays trusted
// for a transition (default 30 days) while every node re-issues its
// certificates under the new root (package node, trust.go) and clients
// take the new bundle. The proposer makes the new key and the cross
// certificates; the command only records them (raftfsm.CARotate).
const (
	defaultCATransition = 30 * 24 * time.Hour
	minCATransition     = time.Hour
	maxCATransition     = 365 * 24 * time.Hour
)

// getCAView describes the cluster's roots (never a key): the current one
// and those still trusted after a rotation.
func (s *Server) getCAView(c *gin.Context) error {
	var id store.ClusterIdentity
	var idx uint64
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		idx = tx.TableIndex(store.TableCluster)
		var err error
		id, err = tx.Identity()
		return err
	}); err != nil {
		// Before bootstrap (or on a node still joining): what it holds.
		t := s.cfg.Trust()
		c.JSON(http.StatusOK, wire.CAState{CAView: wireCA(t.Current, t.CurrentPEM()), BundlePEM: string(t.BundlePEM())})
		return nil
	}
	st, err := caState(id, time.Now())
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, st)
	return nil
}

// caState describes the identity's roots at now.
func caState(id store.ClusterIdentity, now time.Time) (wire.CAState, error) {
	cur, err := pki.ParseCertPEM([]byte(id.CACertPEM))
	if err != nil {
		return wire.CAState{}, fmt.Errorf("the cluster CA certificate: %w", err)
	}
	st := wire.CAState{CAView: wireCA(cur, []byte(id.CACertPEM)), Rotated: id.Rotated, RotatedBy: id.RotatedBy, BundlePEM: id.CACertPEM}
	for _, p := range id.PreviousCAs {
		if !now.Before(p.Until) {
			continue
		}
		pc, err := pki.ParseCertPEM([]byte(p.CertPEM))
		if err != nil {
			return wire.CAState{}, fmt.Errorf("a previous CA certificate: %w", err)
		}
		st.Previous = append(st.Previous, wire.PreviousCA{CAView: wireCA(pc, []byte(p.CertPEM)), TrustedUntil: p.Until})
		st.BundlePEM += p.CertPEM
	}
	return st, nil
}

// postCARotate makes a new cluster root.
func (s *Server) postCARotate(c *gin.Context) error {
	var req wire.CARotateRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if !req.Yes {
		return BadRequest("a rotation re-issues every node's certificates and changes the CA clients check: confirm it with yes (rollcall ca rotate -yes)")
	}
	transition := defaultCATransition
	if req.Transition != "" {
		d, err := time.ParseDuration(req.Transition)
		if err != nil || d < minCATransition || d > maxCATransition {
			return BadRequest("transition must be a duration between 1h and 8760h, such as 720h")
		}
		transition = d
	}
	if s.cfg.OpenCA == nil {
		return Errorf(http.StatusServiceUnavailable, "no_ca", "this node cannot sign certificates")
	}
	var id store.ClusterIdentity
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		id, err = tx.Identity()
		return err
	}); err != nil {
		return err
	}
	now := time.Now().UTC()
	cmd, next, err := s.prepareRotation(id, transition, actor(c), now)
	if err != nil {
		s.log.Error("ca rotation not prepared", "err", err)
		return Errorf(http.StatusServiceUnavailable, "no_ca", "this node cannot prepare a rotation right now: %v", err)
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		return err
	}
	s.log.Info("cluster CA rotated", "fingerprint", pki.FingerprintHex(next), "by", actor(c), "remote", c.ClientIP(), "transition", transition.String())
	var after store.ClusterIdentity
	s.cfg.DB.View(func(tx *store.Tx) error { after, _ = tx.Identity(); return nil })
	if after.CACertPEM != cmd.CACertPEM { // applied elsewhere first: answer with what was written
		after.CACertPEM, after.PreviousCAs, after.Rotated, after.RotatedBy = cmd.CACertPEM, nil, now, actor(c)
		for _, p := range cmd.Previous {
			after.PreviousCAs = append(after.PreviousCAs, store.PreviousCA{CertPEM: p.CertPEM, Until: p.Until})
		}
	}
	st, err := caState(after, now)
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusCreated, st)
	return nil
}

// prepareRotation makes the new root and its key, sealed, and cross-signs
// it under the current root and each previous one still trusted (at most
// store.PreviousCAs, the newest kept).
func (s *Server) prepareRotation(id store.ClusterIdentity, transition time.Duration, by string, now time.Time) (*raftfsm.CARotate, *x509.Certificate, error) {
	old, err := s.cfg.OpenCA()
	if err != nil {
		return nil, nil, err
	}
	if old.Cert == nil || string(old.CertPEM) != id.CACertPEM {
		return nil, nil, fmt.Errorf("the CA this node opened is not the identity's")
	}
	next, err := pki.NewCA("Rollcall cluster CA "+now.Format("2006-01-02T15:04:05Z"), now)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := next.KeyPEM()
	if err != nil {
		return nil, nil, err
	}
	sealed, err := s.cfg.Key.Seal(keyPEM, []byte(pki.CAKeyAAD))
	if err != nil {
		return nil, nil, err
	}
	until := now.Add(transition)
	cross, err := old.CrossSign(next.Cert, now, until)
	if err != nil {
		return nil, nil, err
	}
	prev := []raftfsm.PreviousCA{{CertPEM: id.CACertPEM, SealedKey: id.SealedCAKey, CrossPEM: string(cross), Until: until}}
	for _, p := range id.PreviousCAs {
		if !now.Before(p.Until) || len(prev) == store.PreviousCAs {
			continue
		}
		k, err := s.cfg.Key.Open(p.SealedKey, []byte(pki.CAKeyAAD))
		if err != nil {
			return nil, nil, fmt.Errorf("a previous root's key: %w", err)
		}
		pca, err := pki.ParseCA([]byte(p.CertPEM), k)
		if err != nil {
			return nil, nil, fmt.Errorf("a previous root: %w", err)
		}
		x, err := pca.CrossSign(next.Cert, now, p.Until)
		if err != nil {
			return nil, nil, err
		}
		prev = append(prev, raftfsm.PreviousCA{CertPEM: p.CertPEM, SealedKey: p.SealedKey, CrossPEM: string(x), Until: p.Until})
	}
	return &raftfsm.CARotate{From: id.CACertPEM, CACertPEM: string(next.CertPEM), SealedCAKey: sealed, Previous: prev, By: by, Now: now}, next.Cert, nil
}
