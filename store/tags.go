package store

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Tags single out machines (issue 19, the spec's "Tags"): a name, and
// optionally a match rule (a Go template over the machine, package
// store/tagrule), a cloud-config fragment, overlays and a layout. A
// machine carries a tag when an operator gave it (Machine.Tags) or when the
// rule matched it (Machine.AutoTags); rules never touch the manual list.
// The state machine checks what a tag holds (CheckTag) but never evaluates
// a rule: the proposer does, and the outcome travels in the command.

var bucketTags = []byte("tags") // tag name → Tag

// TableTags names the tag table for blocking queries and exports.
const TableTags = "tags"

// Limits on a tag, so that a record (and the command that carries it)
// stays small whatever an operator pastes in.
const (
	// MaxCloudConfig bounds a tag's cloud-config fragment: the NVIDIA
	// driver fragment the spec ships is about 2 KiB; a fragment that
	// writes files belongs in an image or an overlay past this.
	MaxCloudConfig = 64 << 10
	// MaxMatch bounds a match rule's text (store/tagrule parses within it).
	MaxMatch = 4 << 10
	// MaxTagComment bounds a comment.
	MaxTagComment = 1024
	// MaxOverlays bounds a tag's overlays.
	MaxOverlays = 16
	// MaxTagDefinitions bounds how many tags exist: every rule tag is
	// evaluated at each commissioning, and a machine may carry them all.
	MaxTagDefinitions = 1024
	// MaxManualTags bounds the manual tags of one machine.
	MaxManualTags = 64
)

// Tag is a tag definition.
type Tag struct {
	Name string `json:"name"`
	// Match is the rule (a Go template over .Node that prints true or
	// false); empty for a manual tag.
	Match string `json:"match,omitempty"`
	// CloudConfig is appended to a deployment's user-data as a MIME part:
	// a #cloud-config document, or a #! script.
	CloudConfig string `json:"cloud_config,omitempty"`
	// Overlays are applied after a stateless node's profile's (later work).
	Overlays []string `json:"overlays,omitempty"`
	// Layout names the interface layout of the tagged machines (later
	// work: the name is kept, not yet checked against layouts).
	Layout  string    `json:"layout,omitempty"`
	Comment string    `json:"comment,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// RuleIndex is the Raft index at which Match last changed: an
	// evaluation made against another rule text names another index, and
	// the state machine leaves its outcome out (raftfsm.AutoTagsSet).
	RuleIndex uint64 `json:"rule_index,omitempty"`
	// Index is the Raft index of the command that last changed the record.
	Index uint64 `json:"index"`
}

// ValidTagName checks a tag name: a machine name's rule (a DNS label),
// since `tag:NAME` stands wherever a machine is named.
func ValidTagName(s string) error {
	if !namePattern.MatchString(s) || ValidMachineID(s) {
		return Errorf(ErrInvalid, "tag name %q must be a DNS label: lowercase letters, digits and '-', 1 to 63 characters, not of the form of a machine ID", Clip(s))
	}
	return nil
}

// CheckTag checks what a tag definition holds, bounds and forms only. A
// rule's syntax is the proposer's to check (store/tagrule): the state
// machine must not depend on a parser that another Go release may change.
func CheckTag(t Tag) error {
	if err := ValidTagName(t.Name); err != nil {
		return err
	}
	if len(t.Match) > MaxMatch || !utf8.ValidString(t.Match) {
		return Errorf(ErrInvalid, "tag %s: the match rule must be UTF-8 text of at most %d bytes", t.Name, MaxMatch)
	}
	if len(t.CloudConfig) > MaxCloudConfig || !utf8.ValidString(t.CloudConfig) {
		return Errorf(ErrInvalid, "tag %s: the cloud-config fragment must be UTF-8 text of at most %d KiB", t.Name, MaxCloudConfig>>10)
	}
	if t.CloudConfig != "" && !strings.HasPrefix(t.CloudConfig, "#cloud-config") && !strings.HasPrefix(t.CloudConfig, "#!") {
		return Errorf(ErrInvalid, "tag %s: a cloud-config fragment starts with #cloud-config (a document merged into user-data) or #! (a script)", t.Name)
	}
	if len(t.Comment) > MaxTagComment || !utf8.ValidString(t.Comment) {
		return Errorf(ErrInvalid, "tag %s: the comment must be UTF-8 text of at most %d bytes", t.Name, MaxTagComment)
	}
	if len(t.Overlays) > MaxOverlays {
		return Errorf(ErrInvalid, "tag %s: %d overlays is more than the %d allowed", t.Name, len(t.Overlays), MaxOverlays)
	}
	for i, o := range t.Overlays {
		if !imageNamePattern.MatchString(o) || slices.Contains(t.Overlays[:i], o) {
			return Errorf(ErrInvalid, "tag %s: overlay %q must be a lowercase name (letters, digits, '.', '_', '-'), listed once", t.Name, Clip(o))
		}
	}
	if t.Layout != "" && !imageNamePattern.MatchString(t.Layout) {
		return Errorf(ErrInvalid, "tag %s: layout %q must be a lowercase name (letters, digits, '.', '_', '-')", t.Name, Clip(t.Layout))
	}
	return nil
}

// Clip shortens a value quoted back in a refusal to 64 bytes, on a rune
// boundary: refused input can be any size, the message stays short.
func Clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Tag returns one tag definition.
func (t *Tx) Tag(name string) (Tag, error) { return getNamed[Tag](t, bucketTags, "tag", name) }

// Tags lists tag definitions by name.
func (t *Tx) Tags() ([]Tag, error) { return listNamed[Tag](t, bucketTags) }

// CountTags returns the number of tag definitions.
func (t *Tx) CountTags() int {
	if b := t.tx.Bucket(bucketTags); b != nil {
		return b.Stats().KeyN
	}
	return 0
}

// PutTag writes a tag definition (its machines are the caller's to write).
func (t *Tx) PutTag(tag Tag) error {
	tag.Index = t.Index
	return t.putNamed(bucketTags, TableTags, tag.Name, tag)
}

// DeleteTag removes a tag definition (the caller takes it off its
// machines first).
func (t *Tx) DeleteTag(name string) error {
	return t.deleteNamed(bucketTags, TableTags, "tag", name)
}

// Tags and racks are records keyed by name in a bucket made on first use
// (see bucketMachineByTag), each change logged under the table's name.

func getNamed[T any](t *Tx, bucket []byte, kind, name string) (T, error) {
	var v T
	if t.tx.Bucket(bucket) == nil {
		return v, Errorf(ErrNotFound, "%s %q", kind, name)
	}
	if err := t.getJSON(bucket, name, &v); err != nil {
		if isNotFound(err) {
			return v, Errorf(ErrNotFound, "%s %q", kind, name)
		}
		return v, err
	}
	return v, nil
}

func listNamed[T any](t *Tx, bucket []byte) ([]T, error) {
	if t.tx.Bucket(bucket) == nil {
		return nil, nil
	}
	var out []T
	err := forEachJSON(t, bucket, "", func(_ string, v *T) error {
		out = append(out, *v)
		return nil
	})
	return out, err
}

func (t *Tx) putNamed(bucket []byte, table, name string, v any) error {
	if err := t.ensureBuckets(bucket); err != nil {
		return err
	}
	if err := t.putJSON(bucket, name, v); err != nil {
		return err
	}
	if err := t.logChange(table, name, OpPut); err != nil {
		return err
	}
	return t.touch(table)
}

func (t *Tx) deleteNamed(bucket []byte, table, kind, name string) error {
	if !t.write {
		return ErrReadOnly
	}
	if t.tx.Bucket(bucket) == nil || t.tx.Bucket(bucket).Get([]byte(name)) == nil {
		return Errorf(ErrNotFound, "%s %q", kind, name)
	}
	if err := t.del(bucket, name); err != nil {
		return err
	}
	if err := t.logChange(table, name, OpDelete); err != nil {
		return err
	}
	return t.touch(table)
}

// MachineIDsByTag returns, sorted, the machines that carry the tag,
// manually or by its rule.
func (t *Tx) MachineIDsByTag(name string) []string { return t.lookup(bucketMachineByTag, name) }

// MachinesByTag returns, sorted by ID, the machines that carry the tag,
// manually or by its rule, through the tag index.
func (t *Tx) MachinesByTag(name string) ([]Machine, error) {
	return t.machinesByID(t.MachineIDsByTag(name))
}

func (t *Tx) machinesByID(ids []string) ([]Machine, error) {
	out := make([]Machine, 0, len(ids))
	for _, id := range ids {
		m, err := t.Machine(id)
		if err != nil {
			return nil, fmt.Errorf("index names %s: %w", id, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// HasTag reports whether a machine carries a tag, manually or by its rule.
func (m Machine) HasTag(name string) bool {
	return slices.Contains(m.Tags, name) || slices.Contains(m.AutoTags, name)
}
