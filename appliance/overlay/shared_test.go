package overlay

import (
	"testing"
	"text/template"
)

// A template counts as the same for every node only when it cannot reach
// the node: not through .Node or $.Node, nor through the whole Data
// handed to a function, a variable or the output.
func TestNodeIndependent(t *testing.T) {
	for src, want := range map[string]bool{
		"plain text":                   true,
		"{{ .Vars.slurm_controller }}": true,
		"{{ range .Nodes }}{{ .Name }} {{ .IP }}{{ end }}":   true,
		"{{ with .Vars.x }}{{ . }}{{ end }}":                 true,
		"{{ range $i, $n := .Nodes }}{{ $n.Name }}{{ end }}": true,
		"{{ range .Nodes }}{{ $.Profile.Name }}{{ end }}":    true,
		"{{ .MungeKey }}":  true,
		"{{ .Node.Name }}": false,
		"{{ range .Nodes }}{{ $.Node.Name }}{{ end }}":        false,
		"{{ hasTag \"gpu\" .Node }}":                          false,
		"{{ . }}":                                             false,
		"{{ $d := . }}{{ $d.Vars }}":                          false,
		"{{ with . }}{{ .Vars }}{{ end }}":                    false,
		"{{ range .Nodes }}{{ $ }}{{ end }}":                  false,
		"{{ range .Nodes }}{{ else }}{{ . }}{{ end }}":        false,
		"{{ with .Vars.x }}{{ else }}{{ .Node.IP }}{{ end }}": false,
		"{{ (index .Nodes 0).Name }}{{ .Node }}":              false,
		"{{ if .Node.GPUs }}gpu{{ end }}":                     false,
	} {
		tm, err := template.New("t").Funcs(funcs).Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := nodeIndependent(tm.Tree.Root); got != want {
			t.Errorf("%s: node independent %v, want %v", src, got, want)
		}
	}
	files, err := Example("compute")
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	shared := map[string]bool{}
	for _, p := range parsed {
		if p.tmpl != nil {
			shared[p.source] = p.shared
		}
	}
	for src, want := range map[string]bool{
		"system/etc/slurm/slurm.conf.tmpl": true, "system/etc/hosts.tmpl": true, "runtime/etc/hosts.tmpl": true,
		"system/etc/hostname.tmpl": false, "system/etc/ssh/ssh_host_ed25519_key.tmpl": false,
	} {
		if got, ok := shared[src]; !ok || got != want {
			t.Errorf("example %s: shared %v (present %v), want %v", src, got, ok, want)
		}
	}
}
