package appliance

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// getCA serves the cluster CA certificate over plain HTTP: agents and
// clients fetch it and accept it only by its SHA-256 fingerprint.
func (n *Node) getCA(c *gin.Context) {
	c.Data(http.StatusOK, "application/x-pem-file", n.caPEM)
}
