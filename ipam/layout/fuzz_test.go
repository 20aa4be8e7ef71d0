package layout_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/store"
)

// FuzzParse feeds the layout parser arbitrary bytes (seeds: the golden
// cases' layouts and testdata/fuzz/FuzzParse). A layout is refused as
// invalid with an operator's message, or it is accepted, encodes back to
// itself, and resolves against the example machine to a refusal with its
// reason or to a plan whose network-config is YAML.
//
//	go test ./ipam/layout -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, c := range planCases {
		if c.layout != "" {
			f.Add([]byte(c.layout))
		}
	}
	s := newSite(f)
	in := s.commission(gpuNode())
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := layout.Parse(b)
		if err != nil {
			if kindOf(err) != "invalid" || store.Public(err) == "" {
				t.Fatalf("a refusal of kind %s without an operator's message: %v", kindOf(err), err)
			}
			return
		}
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		if err := e.Encode(l); err != nil {
			t.Fatal(err)
		}
		again, err := layout.Parse(enc.Bytes())
		if err != nil {
			t.Fatalf("an accepted layout, encoded again, is refused: %v\n%s", err, enc.Bytes())
		}
		if d := cmp.Diff(l, again, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("an accepted layout does not encode back to itself:\n%s", d)
		}
		var p *layout.Plan
		err = s.DB.View(func(tx *store.Tx) (err error) {
			p, err = layout.Resolve(tx, in, "fuzz", l)
			return err
		})
		if err != nil {
			if k := kindOf(err); k != "invalid" && k != "conflict" || store.Public(err) == "" {
				t.Fatalf("resolve refused with %s and no operator's message: %v", k, err)
			}
			return
		}
		var doc map[string]any
		if err := yaml.Unmarshal(p.NetworkConfig(), &doc); err != nil {
			t.Fatalf("the network-config is not YAML: %v\n%s", err, p.NetworkConfig())
		}
		p.UdevRules()
	})
}
