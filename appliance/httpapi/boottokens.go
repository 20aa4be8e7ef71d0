package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// postBootToken is POST /api/v1/boot-tokens: an operator mints the token a
// boot script would hand out, for an agent started another way (a USB
// stick, a lab script).
func (s *Server) postBootToken(c *gin.Context) error {
	var req wire.BootTokenRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	mac, err := store.NormalizeMAC(req.MAC)
	if err != nil {
		return err
	}
	ttl := boottoken.TTL
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 || ttl > 24*time.Hour {
			return BadRequest("ttl must be a duration between 1s and 24h, such as 6h")
		}
	}
	tok, exp, err := boottoken.Mint(s.cfg.Key, mac, time.Now(), ttl)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, wire.BootTokenReply{MAC: mac, Token: tok, Expires: exp})
	return nil
}
