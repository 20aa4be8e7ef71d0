package console

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the console an API client: package appliance wires it,
// so importing appliance (or a service) here would be a cycle or a shortcut
// around the API.
func TestImports(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	allowed := []string{"github.com/rollcall/rollcall/store", "github.com/rollcall/rollcall/appliance/pki", "github.com/rollcall/rollcall/appliance/apiclient"}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, "github.com/rollcall/rollcall") {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || p == a || strings.HasPrefix(p, a+"/")
			}
			if !ok {
				t.Errorf("%s imports %s; the console may use only %v of this module", f, p, allowed)
			}
		}
	}
}
