package store

import (
	"time"
)

// Interface layouts: a named JSON document that says how a machine's NICs
// become interfaces (package ipam/layout parses, checks and resolves it;
// the store keeps the operator's text as written, so that `layout show`
// gives back the file that was added).

// Made by the first layout written (putNamed), not at Open: a store with
// no layouts then holds the buckets an older node's does, and the two hash
// alike during a rolling upgrade.
var bucketLayouts = []byte("layouts")

// TableLayouts names the layout table for blocking queries.
const TableLayouts = "layouts"

// Layout is a named interface layout.
type Layout struct {
	Name    string    `json:"name"`
	JSON    string    `json:"json"`
	Comment string    `json:"comment,omitempty"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"`
}

// Layout returns one layout.
func (t *Tx) Layout(name string) (Layout, error) {
	return getNamed[Layout](t, bucketLayouts, "layout", name)
}

// Layouts lists layouts by name.
func (t *Tx) Layouts() ([]Layout, error) { return listNamed[Layout](t, bucketLayouts) }

// PutLayout writes a layout record.
func (t *Tx) PutLayout(l Layout) error {
	l.Index = t.Index
	return t.putNamed(bucketLayouts, TableLayouts, l.Name, l)
}

// DeleteLayout removes a layout record.
func (t *Tx) DeleteLayout(name string) error {
	return t.deleteNamed(bucketLayouts, TableLayouts, "layout", name)
}

// MachineIDsByLayout returns the machines an operator gave this layout
// (Machine.Layout; not the ones that have it through a tag).
func (t *Tx) MachineIDsByLayout(name string) []string {
	return t.lookup(bucketMachineByLayout, name)
}
