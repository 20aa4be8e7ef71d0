package wire

import "time"

// BootTokenRequest is POST /api/v1/boot-tokens: an operator mints the token
// a boot script would hand one MAC, for an agent started another way.
type BootTokenRequest struct {
	MAC string `json:"mac"`
	TTL string `json:"ttl,omitempty"` // a duration, default 6h, at most 24h
}

// BootTokenReply is a freshly minted boot token.
type BootTokenReply struct {
	MAC     string    `json:"mac"`
	Token   string    `json:"token"` // rcb1.…, for X-Rollcall-Token
	Expires time.Time `json:"expires"`
}
