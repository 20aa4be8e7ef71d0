package appliance

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// getOpenAPI serves the OpenAPI 3.1 document built from the route table.
func (n *Node) getOpenAPI(c *gin.Context) {
	c.JSON(http.StatusOK, openAPIDocument(n.routes()))
}

// openAPIDocument is being written (see the helper's task); until then it
// lists paths and methods only.
func openAPIDocument(routes []route) map[string]any {
	paths := map[string]any{}
	for _, r := range routes {
		ops, _ := paths[r.Path].(map[string]any)
		if ops == nil {
			ops = map[string]any{}
			paths[r.Path] = ops
		}
		ops[lower(r.Method)] = map[string]any{"summary": r.Summary}
	}
	return map[string]any{"openapi": "3.1.0", "info": map[string]any{"title": "Rollcall", "version": "0.1"}, "paths": paths}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}
