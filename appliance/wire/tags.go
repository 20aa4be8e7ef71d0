package wire

import "time"

// Tags (issue 19, the spec's "Tags"): definitions, the machines that carry
// them, and what saving one did.

// TagRequest is POST /api/v1/tags (create) and PUT /api/v1/tags/{name}
// (replace: every field as given, an empty one cleared). On PUT, Name may be
// left out; given, it must be the path's.
type TagRequest struct {
	Name string `json:"name"`
	// Match is the rule: a Go template over .Node that prints true or
	// false ({{ gt .Node.GPUs 0 }}); empty for a manual tag.
	Match string `json:"match"`
	// CloudConfig is a #cloud-config document or a #! script, appended to
	// a deployment's user-data.
	CloudConfig string   `json:"cloud_config"`
	Overlays    []string `json:"overlays"`
	Layout      string   `json:"layout"`
	Comment     string   `json:"comment"`
}

// Tag is a tag definition as the API shows it.
type Tag struct {
	Name        string    `json:"name"`
	Match       string    `json:"match,omitempty"`
	CloudConfig string    `json:"cloud_config,omitempty"`
	Overlays    []string  `json:"overlays,omitempty"`
	Layout      string    `json:"layout,omitempty"`
	Comment     string    `json:"comment,omitempty"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
	// RuleIndex is the Raft index at which the rule last changed.
	RuleIndex uint64 `json:"rule_index,omitempty"`
	Index     uint64 `json:"index"`
	// Machines counts the machines that carry the tag, manually or by its
	// rule.
	Machines int `json:"machines"`
}

// TagList is GET /api/v1/tags, by name.
type TagList struct {
	Index uint64 `json:"index"` // the tags table's change index
	Tags  []Tag  `json:"tags"`
}

// TagDetail is GET /api/v1/tags/{name}: the tag and the machines that
// carry it.
type TagDetail struct {
	Tag
	MachineIDs []string `json:"machine_ids"` // sorted; manual and auto
	Manual     []string `json:"manual"`      // of those, the ones an operator tagged
}

// TagFailure is a machine the rule failed on: its tags stay as they were.
type TagFailure struct {
	Machine string `json:"machine"`
	Error   string `json:"error"`
}

// TagSaved answers POST /api/v1/tags and PUT /api/v1/tags/{name}.
type TagSaved struct {
	Tag   Tag    `json:"tag"`
	Index uint64 `json:"index"` // the Raft index of the save (or of its follow-up, the last)
	// Matched counts the machines the rule now matches (auto tags).
	Matched int `json:"matched"`
	// Failures are the machines the rule failed on, by machine.
	Failures []TagFailure `json:"failures"`
}

// MachineTagsRequest is POST /api/v1/machines/{id}/tags: manual tags to
// add and to take away. Every tag must exist.
type MachineTagsRequest struct {
	Add    []string `json:"add"`
	Remove []string `json:"remove"`
}
