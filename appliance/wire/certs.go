package wire

import "time"

// AdminCertRequest is POST /api/v1/admin-certs: an administrator's CSR
// (made by `rollcall admin-cert request NAME`, whose key never leaves the
// client). The certificate names admin:NAME and may only authenticate a
// client.
type AdminCertRequest struct {
	Name string `json:"name"`
	CSR  string `json:"csr"` // PEM
}

// ServiceCertRequest is POST /api/v1/ca/issue: a server certificate (and
// with Client, a client one too) for another service, `rollcall ca issue`.
type ServiceCertRequest struct {
	Name   string   `json:"name"`
	Hosts  []string `json:"hosts"`
	Client bool     `json:"client,omitempty"`
	CSR    string   `json:"csr"` // PEM
}

// IntermediateRequest is POST /api/v1/ca/intermediates: a name-constrained
// intermediate CA one level below the root, `rollcall ca intermediate`.
type IntermediateRequest struct {
	Name   string   `json:"name"`
	Permit []string `json:"permit"` // DNS domains and CIDRs
	CSR    string   `json:"csr"`    // PEM
}

// IssuedCert answers a certificate request: the certificate, the CA that
// signed it and its record.
type IssuedCert struct {
	Cert  CertView `json:"cert"`
	PEM   string   `json:"pem"`
	CAPEM string   `json:"ca_pem"`
	Index uint64   `json:"index"`
}

// CertView is one certificate the cluster CA issued and recorded.
type CertView struct {
	Serial      string    `json:"serial"` // lower-case hex
	Kind        string    `json:"kind"`   // node, admin, service, intermediate
	Name        string    `json:"name"`
	NotAfter    time.Time `json:"not_after"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	Hosts       []string  `json:"hosts,omitempty"`
	Permit      []string  `json:"permit,omitempty"`
	Issued      time.Time `json:"issued"`
	IssuedBy    string    `json:"issued_by,omitempty"`
	Revoked     time.Time `json:"revoked,omitzero"`
	RevokedBy   string    `json:"revoked_by,omitempty"`
	// State is valid, revoked or expired (at the answer's time).
	State string `json:"state"`
}

// CertList answers GET /api/v1/admin-certs and /api/v1/ca/certificates.
type CertList struct {
	Certificates []CertView `json:"certificates"`
}

// CertsRevoked answers a revocation.
type CertsRevoked struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Revoked int    `json:"revoked"`
	Index   uint64 `json:"index"`
}

// WhoAmI answers GET /api/v1/whoami: who the API takes the caller for.
type WhoAmI struct {
	Actor string `json:"actor"` // "token" or "admin:NAME"
	Via   string `json:"via"`   // "token" or "certificate"
}

// AuditEvent is one administrator's action the cluster applied.
type AuditEvent struct {
	Seq     uint64    `json:"seq"`
	Index   uint64    `json:"index"`
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"` // "token" or "admin:NAME"
	From    string    `json:"from,omitempty"`
	Node    string    `json:"node,omitempty"`
	Action  string    `json:"action"` // method and route
	Target  string    `json:"target,omitempty"`
	Command string    `json:"command"`
	Outcome string    `json:"outcome"` // "ok" or the error
}

// AuditLog answers GET /api/v1/audit, newest first; Next is the before=
// of the next page (0: none).
type AuditLog struct {
	Events []AuditEvent `json:"events"`
	Next   uint64       `json:"next,omitempty"`
}
