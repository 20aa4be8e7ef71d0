package store

import (
	"errors"
	"fmt"
	"time"
)

// Interface layouts: a named JSON document that says how a machine's NICs
// become interfaces (package ipam/layout parses, checks and resolves it;
// the store keeps the operator's text as written, so that `layout show`
// gives back the file that was added).

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
	var l Layout
	if err := t.getJSON(bucketLayouts, name, &l); err != nil {
		if errors.Is(err, ErrNotFound) {
			return l, Errorf(ErrNotFound, "layout %q", name)
		}
		return l, fmt.Errorf("layout %q: %w", name, err)
	}
	return l, nil
}

// Layouts lists layouts by name.
func (t *Tx) Layouts() ([]Layout, error) {
	var out []Layout
	err := forEachJSON(t, bucketLayouts, "", func(_ string, l *Layout) error {
		out = append(out, *l)
		return nil
	})
	return out, err
}

// PutLayout writes a layout record.
func (t *Tx) PutLayout(l Layout) error {
	l.Index = t.Index
	if err := t.putJSON(bucketLayouts, l.Name, l); err != nil {
		return err
	}
	if err := t.logChange(TableLayouts, l.Name, OpPut); err != nil {
		return err
	}
	return t.touch(TableLayouts)
}

// DeleteLayout removes a layout record.
func (t *Tx) DeleteLayout(name string) error {
	if _, err := t.Layout(name); err != nil {
		return err
	}
	if err := t.del(bucketLayouts, name); err != nil {
		return err
	}
	if err := t.logChange(TableLayouts, name, OpDelete); err != nil {
		return err
	}
	return t.touch(TableLayouts)
}
