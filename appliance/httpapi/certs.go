package httpapi

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Certificates the cluster CA issues on request, besides node
// certificates: administrators' client certificates (admin:NAME, client
// authentication only), certificates for other services and one level of
// name-constrained intermediates. Every one is recorded by serial before
// it is handed out (a CertPut), so it can be listed and revoked; an admin
// certificate the cluster has no record of is refused.
const (
	adminCertTTL        = 365 * 24 * time.Hour
	serviceCertTTL      = 365 * 24 * time.Hour
	intermediateCertTTL = 5 * 365 * 24 * time.Hour
	maxCertRequestBytes = 32 << 10
)

func (s *Server) certRoutes() []Route {
	return []Route{
		{"GET", "/api/v1/whoami", AuthAdmin, "who the API takes the caller for: the admin token, or an administrator's certificate (admin:NAME)", nil, s.getWhoAmI},
		{"POST", "/api/v1/admin-certs", AuthAdmin, "sign an administrator's CSR: a client certificate admin:NAME, recorded by serial", wire.AdminCertRequest{}, s.postAdminCert},
		{"GET", "/api/v1/admin-certs", AuthAdmin, "administrators' certificates with their state (valid, revoked, expired)", nil, s.listAdminCerts},
		{"DELETE", "/api/v1/admin-certs/:name", AuthAdmin, "revoke every certificate of an administrator (?serial= only that one); refused on the next request", nil, s.deleteAdminCert},
		{"GET", "/api/v1/ca/certificates", AuthAdmin, "every certificate the cluster CA recorded (?kind=node|admin|service|intermediate)", nil, s.listCerts},
		{"POST", "/api/v1/ca/issue", AuthAdmin, "sign a CSR for another service: server authentication for the hosts, client too with client", wire.ServiceCertRequest{}, s.postServiceCert},
		{"POST", "/api/v1/ca/intermediates", AuthAdmin, "sign a name-constrained intermediate CA (one level; permitted DNS domains and CIDRs)", wire.IntermediateRequest{}, s.postIntermediate},
		{"DELETE", "/api/v1/ca/certificates/:serial", AuthAdmin, "revoke one recorded certificate by serial", nil, s.deleteCert},
		{"POST", "/api/v1/ca/rotate", AuthAdmin, "make a new cluster root (yes: true); the old one stays trusted for the transition (default 720h) while every node re-issues its certificates", wire.CARotateRequest{}, s.postCARotate},
	}
}

func (s *Server) getWhoAmI(c *gin.Context) error {
	a := actor(c)
	via := "token"
	if strings.HasPrefix(a, pki.AdminPrefix) {
		via = "certificate"
	}
	c.JSON(http.StatusOK, wire.WhoAmI{Actor: a, Via: via})
	return nil
}

// openCA unseals the cluster CA for one signature.
func (s *Server) openCA() (*pki.CA, error) {
	if s.cfg.OpenCA == nil {
		return nil, Errorf(http.StatusServiceUnavailable, "no_ca", "this node cannot sign certificates")
	}
	ca, err := s.cfg.OpenCA()
	if err != nil {
		s.log.Error("cannot open the cluster CA", "err", err)
		return nil, Errorf(http.StatusServiceUnavailable, "no_ca", "this node cannot sign certificates right now")
	}
	return ca, nil
}

// issue signs with sign, records the certificate and answers with it. A
// refused CSR is a 400 naming the reason and takes no entry.
func (s *Server) issue(c *gin.Context, kind, name string, hosts, permit []string, sign func(*pki.CA, time.Time) ([]byte, error)) error {
	if err := pki.ValidCertName(name); err != nil {
		return BadRequest("%s", err.Error())
	}
	ca, err := s.openCA()
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	certPEM, err := sign(ca, now)
	if err != nil {
		s.log.Warn("certificate request refused", "kind", kind, "name", name, "by", actor(c), "remote", c.ClientIP(), "err", err)
		return Wrap(http.StatusBadRequest, "bad_csr", err.Error(), err)
	}
	leaf, err := pki.ParseCertPEM(certPEM)
	if err != nil {
		return err
	}
	rec := store.CertRecord{Serial: pki.SerialHex(leaf), Kind: kind, Name: name, NotAfter: leaf.NotAfter.UTC(),
		Fingerprint: pki.FingerprintHex(leaf), Hosts: hosts, Permit: permit, Issued: now, IssuedBy: actor(c)}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.CertPut{Cert: raftfsm.CertBody(rec), Now: now})
	if err != nil {
		return fmt.Errorf("the certificate could not be recorded, so it is not handed out: %w", err)
	}
	s.log.Info("certificate issued", "kind", kind, "name", name, "serial", rec.Serial, "by", actor(c), "remote", c.ClientIP())
	setIndex(c, idx)
	c.JSON(http.StatusCreated, wire.IssuedCert{Cert: wireCert(rec, now), PEM: string(certPEM), CAPEM: string(s.caBundle()), Index: idx})
	return nil
}

func (s *Server) postAdminCert(c *gin.Context) error {
	var req wire.AdminCertRequest
	if err := decodeBody(c, maxCertRequestBytes, &req); err != nil {
		return err
	}
	return s.issue(c, store.CertAdmin, req.Name, nil, nil, func(ca *pki.CA, now time.Time) ([]byte, error) {
		return ca.SignAdmin([]byte(req.CSR), req.Name, now, adminCertTTL)
	})
}

func (s *Server) postServiceCert(c *gin.Context) error {
	var req wire.ServiceCertRequest
	if err := decodeBody(c, maxCertRequestBytes, &req); err != nil {
		return err
	}
	if s.isNodeName(req.Name) {
		return BadRequest("service name %s is an appliance node's: a service certificate may not pose as a node", store.Clip(req.Name))
	}
	return s.issue(c, store.CertService, req.Name, req.Hosts, nil, func(ca *pki.CA, now time.Time) ([]byte, error) {
		return ca.SignService([]byte(req.CSR), req.Name, req.Hosts, req.Client, now, serviceCertTTL)
	})
}

func (s *Server) postIntermediate(c *gin.Context) error {
	var req wire.IntermediateRequest
	if err := decodeBody(c, maxCertRequestBytes, &req); err != nil {
		return err
	}
	return s.issue(c, store.CertIntermediate, req.Name, nil, req.Permit, func(ca *pki.CA, now time.Time) ([]byte, error) {
		return ca.SignIntermediate([]byte(req.CSR), req.Name, req.Permit, now, intermediateCertTTL)
	})
}

func (s *Server) isNodeName(name string) bool {
	known := false
	s.cfg.DB.View(func(tx *store.Tx) error {
		_, err := tx.Node(name)
		known = err == nil || tx.NodeRemoved(name)
		return nil
	})
	return known
}

func (s *Server) listAdminCerts(c *gin.Context) error { return s.answerCerts(c, store.CertAdmin) }

func (s *Server) listCerts(c *gin.Context) error {
	kind := c.Query("kind")
	switch kind {
	case "", store.CertNode, store.CertAdmin, store.CertService, store.CertIntermediate:
	default:
		return BadRequest("kind must be node, admin, service or intermediate")
	}
	return s.answerCerts(c, kind)
}

func (s *Server) answerCerts(c *gin.Context, kind string) error {
	var recs []store.CertRecord
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		recs, err = tx.Certs(kind)
		return err
	}); err != nil {
		return err
	}
	now := time.Now()
	out := wire.CertList{Certificates: make([]wire.CertView, 0, len(recs))}
	for _, r := range recs {
		out.Certificates = append(out.Certificates, wireCert(r, now))
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) deleteAdminCert(c *gin.Context) error {
	return s.revoke(c, store.CertAdmin, c.Param("name"), c.Query("serial"))
}

func (s *Server) deleteCert(c *gin.Context) error {
	serial := strings.ToLower(c.Param("serial"))
	var rec store.CertRecord
	var ok bool
	s.cfg.DB.View(func(tx *store.Tx) error { rec, ok = tx.Cert(serial); return nil })
	if !ok {
		return Errorf(http.StatusNotFound, "not_found", "no recorded certificate %s", store.Clip(serial))
	}
	return s.revoke(c, rec.Kind, rec.Name, serial)
}

func (s *Server) revoke(c *gin.Context, kind, name, serial string) error {
	n := s.unrevoked(kind, name, serial)
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.CertRevoke{Kind: kind, Name: name, Serial: serial, By: actor(c), Require: true, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	s.log.Info("certificates revoked", "kind", kind, "name", name, "serial", serial, "count", n, "by", actor(c), "remote", c.ClientIP())
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.CertsRevoked{Kind: kind, Name: name, Revoked: n, Index: idx})
	return nil
}

// unrevoked counts the certificates a revocation of kind, name (and
// serial, when set) would revoke.
func (s *Server) unrevoked(kind, name, serial string) int {
	n := 0
	s.cfg.DB.View(func(tx *store.Tx) error {
		recs, _ := tx.Certs(kind)
		for _, r := range recs {
			if r.Name == name && !r.IsRevoked() && (serial == "" || r.Serial == serial) {
				n++
			}
		}
		return nil
	})
	return n
}

// revokeNode revokes a removed node's certificates. A cluster whose gate
// has not opened the revocation yet (a rolling upgrade) still refuses the
// node by name; the note says so.
func (s *Server) revokeNode(c *gin.Context, name string) (int, string) {
	n := s.unrevoked(store.CertNode, name, "")
	_, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.CertRevoke{Kind: store.CertNode, Name: name, By: actor(c), Now: time.Now().UTC()})
	if err != nil {
		s.log.Warn("removed node's certificates not revoked by serial: it is still refused by name", "node", name, "err", err)
		return 0, "certificates not revoked by serial (" + err.Error() + "); the node is refused by name"
	}
	return n, ""
}

// adminCertActor checks the client certificate a request came with over
// HTTPS: signed by the cluster CA, valid now, for client authentication,
// named admin:NAME, recorded for that administrator and not revoked. It
// returns the actor, or an error that says why the certificate is refused.
func (s *Server) adminCertActor(chain []*x509.Certificate) (string, error) {
	leaf := chain[0]
	// Signed by a root itself (pki.Trust.Verify): below an intermediate,
	// a certificate could carry any common name (name constraints do not
	// cover it).
	if err := s.cfg.Trust().Verify(chain, x509.ExtKeyUsageClientAuth, time.Now()); err != nil {
		var inv x509.CertificateInvalidError
		switch {
		case errors.Is(err, pki.ErrBelowIntermediate):
			return "", errors.New("it is not signed by the cluster CA itself (an intermediate's certificate is no administrator's)")
		case errors.As(err, &inv) && inv.Reason == x509.Expired:
			return "", fmt.Errorf("it is outside its validity (%s to %s)", leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
		case errors.As(err, &inv) && inv.Reason == x509.IncompatibleUsage:
			return "", errors.New("it is not for client authentication")
		}
		return "", fmt.Errorf("it does not verify against the cluster CA: %v", err)
	}
	name, ok := strings.CutPrefix(leaf.Subject.CommonName, pki.AdminPrefix)
	if !ok || name == "" {
		return "", fmt.Errorf("%q is not an administrator's certificate (admin:NAME)", store.Clip(leaf.Subject.CommonName))
	}
	serial := pki.SerialHex(leaf)
	var rec store.CertRecord
	var known bool
	s.cfg.DB.View(func(tx *store.Tx) error { rec, known = tx.Cert(serial); return nil })
	switch {
	case !known:
		return "", fmt.Errorf("serial %s is not a certificate this cluster recorded", serial)
	case rec.Kind != store.CertAdmin || rec.Name != name:
		return "", fmt.Errorf("serial %s was issued to %s %s", serial, rec.Kind, rec.Name)
	case rec.IsRevoked():
		return "", fmt.Errorf("it was revoked at %s", rec.Revoked.UTC().Format(time.RFC3339))
	}
	return pki.AdminPrefix + name, nil
}

func wireCert(r store.CertRecord, now time.Time) wire.CertView {
	state := "valid"
	switch {
	case r.IsRevoked():
		state = "revoked"
	case now.After(r.NotAfter):
		state = "expired"
	}
	return wire.CertView{Serial: r.Serial, Kind: r.Kind, Name: r.Name, NotAfter: r.NotAfter, Fingerprint: r.Fingerprint,
		Hosts: r.Hosts, Permit: r.Permit, Issued: r.Issued, IssuedBy: r.IssuedBy, Revoked: r.Revoked, RevokedBy: r.RevokedBy, State: state}
}
