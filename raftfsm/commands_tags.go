package raftfsm

import (
	"errors"
	"slices"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Tags (issue 19). A rule's outcome is always in the command: the
// proposer evaluates (tags.go), Apply only checks and writes. Apply never
// runs a template: evaluating over a fleet reads every inventory, which
// would stall the log, and a Go release that parsed or printed a rule
// differently would make nodes of two versions disagree.
//
// An evaluation names what it saw, so that one made against older state
// is left out rather than applied: a TagPut names the applied index it
// read the machines at (Basis), an AutoTagsSet each machine's Index and
// each rule's RuleIndex. What is left out keeps the tags it had; the
// proposer evaluates those machines again (AutoTagsOf) and proposes the
// outcome.

// maxCommandMachines bounds the machines one command names: ten times the
// 10,000-machine fleet the benchmarks run. A face acting on more splits.
const maxCommandMachines = 100_000

// TagPut creates or replaces a tag, with the outcome of its rule over the
// fleet as the proposer evaluated it.
type TagPut struct {
	Tag Tag       `json:"tag"`
	Now time.Time `json:"now"`
	// Basis is the applied index the proposer evaluated the rule at; 0
	// for a manual tag (no rule). A machine written after it is left as
	// it was: the evaluation did not see it as it is.
	Basis uint64 `json:"basis,omitempty"`
	// Matches are the machines the rule matched, sorted: after Apply,
	// exactly those (of the ones not written since Basis, and not in
	// Failed) carry the tag as an auto tag.
	Matches []string `json:"matches,omitempty"`
	// Failed are the machines the rule failed on, sorted (the proposer
	// tells the operator which and why): their auto tags stay as they
	// were.
	Failed []string `json:"failed,omitempty"`
}

// TagDelete removes a tag from every machine (manual and auto) and
// forgets it.
type TagDelete struct {
	Name string    `json:"name"`
	Now  time.Time `json:"now"`
}

// MachineTags gives machines manual tags and takes others away. The tags
// must exist: `rollcall tags add NAME` creates one, so a typo is refused
// instead of becoming a tag.
type MachineTags struct {
	Machines []string  `json:"machines"`
	Add      []string  `json:"add,omitempty"`
	Remove   []string  `json:"remove,omitempty"`
	Now      time.Time `json:"now"`
}

// AutoTagsSet records rules' outcomes on some machines: the proposer
// batches one after each Commission (CommissionAutoTags), in the same log
// entry, so a machine leaves commissioning with its auto tags; and after a
// TagPut, for the machines it had to leave out (AutoTagsOf).
//
// It is not ignorable (FlagIgnorable): it writes replicated state, and a
// node that skipped it would hold other tags than its peers (which the
// state check would report as a diverged copy). A node too old to know it
// stops instead, as for any new command. Proposers only batch one when a
// rule tag exists, which takes a TagPut that every node applied: until
// tags are used, commissioning writes what it always did, and a rolling
// upgrade can commission machines throughout.
type AutoTagsSet struct {
	Machines []MachineRules `json:"machines"`
	Now      time.Time      `json:"now"`
}

// MachineRules are the rules' outcomes on one machine.
type MachineRules struct {
	ID string `json:"id"`
	// Index is the machine's Index when the rules saw it; 0 for a
	// machine the command before this one in the same entry writes (a
	// Commission, whose index the proposer cannot know). An outcome for
	// a machine at another index is left out.
	Index uint64       `json:"index,omitempty"`
	Rules []RuleResult `json:"rules"`
}

// RuleResult is one rule's outcome. A rule that failed on the machine is
// not listed: its tag stays as it was.
type RuleResult struct {
	Tag string `json:"tag"`
	// RuleIndex is the tag's RuleIndex when it was evaluated: an outcome
	// of a rule that has changed since is left out.
	RuleIndex uint64 `json:"rule_index"`
	Match     bool   `json:"match,omitempty"`
}

func (*TagPut) Type() Type          { return TypeTagPut }
func (*TagDelete) Type() Type       { return TypeTagDelete }
func (*MachineTags) Type() Type     { return TypeMachineTags }
func (*AutoTagsSet) Type() Type     { return TypeAutoTagsSet }
func (*TagPut) Version() uint8      { return 1 }
func (*TagDelete) Version() uint8   { return 1 }
func (*MachineTags) Version() uint8 { return 1 }
func (*AutoTagsSet) Version() uint8 { return 1 }
func tagCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeTagPut:      {"tag-put", 1, func() Command { return &TagPut{} }},
		TypeTagDelete:   {"tag-delete", 1, func() Command { return &TagDelete{} }},
		TypeMachineTags: {"machine-tags", 1, func() Command { return &MachineTags{} }},
		TypeAutoTagsSet: {"auto-tags-set", 1, func() Command { return &AutoTagsSet{} }},
	}
}

// checkMachineIDs checks a list of machine IDs: well formed, each once,
// at most maxCommandMachines, sorted when sorted is asked.
func checkMachineIDs(what string, ids []string, sorted bool) error {
	if len(ids) > maxCommandMachines {
		return store.Errorf(store.ErrInvalid, "%s: %d machines is more than the %d one command may name", what, len(ids), maxCommandMachines)
	}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if !store.ValidMachineID(id) {
			return store.Errorf(store.ErrInvalid, "%s: machine id %q", what, id)
		}
		if seen[id] {
			return store.Errorf(store.ErrInvalid, "%s: machine %s is named twice", what, id)
		}
		seen[id] = true
		if sorted && i > 0 && ids[i-1] > id {
			return store.Errorf(store.ErrInvalid, "%s: machines are not sorted (%s after %s)", what, id, ids[i-1])
		}
	}
	return nil
}

// setTag adds name to a sorted list or takes it out; changed says whether
// the list changed. The list it returns is a new one when it changed.
func setTag(list []string, name string, on bool) ([]string, bool) {
	i, found := slices.BinarySearch(list, name)
	switch {
	case on && !found:
		return slices.Insert(slices.Clone(list), i, name), true
	case !on && found:
		out := slices.Delete(slices.Clone(list), i, i+1)
		if len(out) == 0 {
			out = nil
		}
		return out, true
	}
	return list, false
}

// change is a machine as read and as it is to be written.
type change struct{ old, new store.Machine }

// changes collects the machines a command rewrites; each is read once.
type changes map[string]*change

// read returns the machine to change, read once per command.
func (cs changes) read(tx *store.Tx, id string) (*store.Machine, error) {
	if c, ok := cs[id]; ok {
		return &c.new, nil
	}
	m, err := tx.Machine(id)
	if err != nil {
		return nil, err
	}
	c := &change{old: m, new: m}
	cs[id] = c
	return &c.new, nil
}

// write writes the machines that changed, in ID order, stamped with now.
func (cs changes) write(tx *store.Tx, now time.Time) error {
	for _, id := range sortedIDs(cs) {
		c := cs[id]
		if sameTagsAndPlace(c.old, c.new) {
			continue
		}
		c.new.UpdatedAt = now
		if err := tx.ReplaceMachine(c.old, c.new); err != nil {
			return err
		}
	}
	return nil
}

// sameTagsAndPlace: the fields these commands change are as they were.
func sameTagsAndPlace(a, b store.Machine) bool {
	return slices.Equal(a.Tags, b.Tags) && slices.Equal(a.AutoTags, b.AutoTags) && a.Location == b.Location
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// check is everything TagPut may refuse, without a machine read: the
// leader's Precheck runs only it, since a dry run of the whole apply
// would hold the store's write lock while it rewrote 10,000 machines. It
// returns the tag as Apply writes it.
func (c *TagPut) check(tx *store.Tx) (store.Tag, error) {
	tag := c.Tag.record()
	if err := store.CheckTag(tag); err != nil {
		return tag, err
	}
	old, err := tx.Tag(tag.Name)
	exists := err == nil
	if err != nil && !isNotFound(err) {
		return tag, err
	}
	if tag.Layout != "" {
		if _, err := tx.Layout(tag.Layout); isNotFound(err) {
			return tag, store.Errorf(store.ErrInvalid, "tag %s names layout %s, which does not exist (rollcall layout add %s FILE.json)", tag.Name, tag.Layout, tag.Layout)
		} else if err != nil {
			return tag, err
		}
	}
	if !exists && tx.CountTags() >= store.MaxTagDefinitions {
		return tag, store.Errorf(store.ErrConflict, "%d tags exist, the most there may be: remove one first", store.MaxTagDefinitions)
	}
	if tag.Match == "" {
		if c.Basis != 0 || len(c.Matches) > 0 || len(c.Failed) > 0 {
			return tag, store.Errorf(store.ErrInvalid, "tag %s has no rule, so no machines it matched", tag.Name)
		}
	} else if c.Basis == 0 || c.Basis >= tx.Index {
		return tag, store.Errorf(store.ErrInvalid, "tag %s: the rule was evaluated at index %d, which is not before this entry (%d)", tag.Name, c.Basis, tx.Index)
	}
	if err := checkMachineIDs("tag "+tag.Name+" matches", c.Matches, true); err != nil {
		return tag, err
	}
	if err := checkMachineIDs("tag "+tag.Name+" failures", c.Failed, true); err != nil {
		return tag, err
	}
	// Both lists are sorted: a machine in both meets itself in a merge.
	for i, j := 0, 0; i < len(c.Matches) && j < len(c.Failed); {
		switch {
		case c.Matches[i] == c.Failed[j]:
			return tag, store.Errorf(store.ErrInvalid, "tag %s: machine %s both matched and failed", tag.Name, c.Matches[i])
		case c.Matches[i] < c.Failed[j]:
			i++
		default:
			j++
		}
	}
	tag.Created, tag.Updated = c.Now, c.Now
	if exists {
		tag.Created = old.Created
	}
	switch {
	case tag.Match == "":
		tag.RuleIndex = 0
	case exists && old.Match == tag.Match:
		tag.RuleIndex = old.RuleIndex
	default:
		tag.RuleIndex = tx.Index
	}
	return tag, nil
}

func (c *TagPut) apply(tx *store.Tx) error {
	tag, err := c.check(tx)
	if err != nil {
		return err
	}
	failed := make(map[string]bool, len(c.Failed))
	for _, id := range c.Failed {
		failed[id] = true
	}

	// Every machine that carries the tag now, and every one that matched:
	// each ends with the tag exactly when it matched, unless it failed or
	// was written after the evaluation.
	cs := changes{}
	matched := make(map[string]bool, len(c.Matches))
	for _, id := range c.Matches {
		matched[id] = true
	}
	consider := func(id string, on bool) error {
		if failed[id] {
			return nil
		}
		m, err := cs.read(tx, id)
		if isNotFound(err) {
			return nil // deleted since the evaluation: it carries nothing
		}
		if err != nil {
			return err
		}
		if tag.Match != "" && m.Index > c.Basis {
			return nil
		}
		m.AutoTags, _ = setTag(m.AutoTags, tag.Name, on)
		return nil
	}
	for _, id := range tx.MachineIDsByTag(tag.Name) {
		if !matched[id] {
			if err := consider(id, false); err != nil {
				return err
			}
		}
	}
	for _, id := range c.Matches {
		if err := consider(id, true); err != nil {
			return err
		}
	}
	if err := tx.PutTag(tag); err != nil {
		return err
	}
	return cs.write(tx, c.Now)
}

// check: as TagPut's, the refusal without the writes.
func (c *TagDelete) check(tx *store.Tx) error {
	_, err := tx.Tag(c.Name)
	return err
}

func (c *TagDelete) apply(tx *store.Tx) error {
	if err := c.check(tx); err != nil {
		return err
	}
	cs := changes{}
	for _, id := range tx.MachineIDsByTag(c.Name) {
		m, err := cs.read(tx, id)
		if err != nil {
			return err
		}
		m.Tags, _ = setTag(m.Tags, c.Name, false)
		m.AutoTags, _ = setTag(m.AutoTags, c.Name, false)
	}
	if err := tx.DeleteTag(c.Name); err != nil {
		return err
	}
	return cs.write(tx, c.Now)
}

func (c *MachineTags) apply(tx *store.Tx) error {
	if len(c.Machines) == 0 {
		return store.Errorf(store.ErrInvalid, "name the machines to tag")
	}
	if len(c.Add) == 0 && len(c.Remove) == 0 {
		return store.Errorf(store.ErrInvalid, "name a tag to add (+tag) or to remove (-tag)")
	}
	if err := checkMachineIDs("tag machines", c.Machines, false); err != nil {
		return err
	}
	for _, list := range [][]string{c.Add, c.Remove} {
		if len(list) > store.MaxManualTags {
			return store.Errorf(store.ErrInvalid, "%d tags is more than the %d a machine may carry", len(list), store.MaxManualTags)
		}
		for _, name := range list {
			if err := store.ValidTagName(name); err != nil {
				return err
			}
			if _, err := tx.Tag(name); isNotFound(err) {
				return store.Errorf(store.ErrNotFound, "tag %q does not exist: create it first (rollcall tags add %s)", name, name)
			} else if err != nil {
				return err
			}
		}
	}
	for _, name := range c.Add {
		if slices.Contains(c.Remove, name) {
			return store.Errorf(store.ErrInvalid, "tag %s is both added and removed", name)
		}
	}
	cs := changes{}
	for _, id := range c.Machines {
		m, err := cs.read(tx, id)
		if err != nil {
			return err
		}
		for _, name := range c.Add {
			m.Tags, _ = setTag(m.Tags, name, true)
		}
		for _, name := range c.Remove {
			m.Tags, _ = setTag(m.Tags, name, false)
		}
		if len(m.Tags) > store.MaxManualTags {
			return store.Errorf(store.ErrInvalid, "machine %s would carry %d tags, more than the %d allowed", id, len(m.Tags), store.MaxManualTags)
		}
	}
	return cs.write(tx, c.Now)
}

// maxAutoTagOutcomes bounds one AutoTagsSet: machines × rules, so a
// command stays far below the cluster's forwarding limit however it is
// made up.
const maxAutoTagOutcomes = 1 << 18

func (c *AutoTagsSet) apply(tx *store.Tx) error {
	ids := make([]string, len(c.Machines))
	total := 0
	for i, mr := range c.Machines {
		ids[i] = mr.ID
		if len(mr.Rules) > store.MaxTagDefinitions {
			return store.Errorf(store.ErrInvalid, "machine %s: %d rule outcomes, more than the %d tags there can be", mr.ID, len(mr.Rules), store.MaxTagDefinitions)
		}
		if total += len(mr.Rules); total > maxAutoTagOutcomes {
			return store.Errorf(store.ErrInvalid, "auto tags: more than %d rule outcomes in one command; split it", maxAutoTagOutcomes)
		}
		seen := map[string]bool{}
		for _, r := range mr.Rules {
			if err := store.ValidTagName(r.Tag); err != nil {
				return err
			}
			if seen[r.Tag] {
				return store.Errorf(store.ErrInvalid, "machine %s: tag %s has two outcomes", mr.ID, r.Tag)
			}
			seen[r.Tag] = true
		}
	}
	if err := checkMachineIDs("auto tags", ids, false); err != nil {
		return err
	}
	rules := map[string]store.Tag{}
	ruleOf := func(name string) (store.Tag, bool, error) {
		if t, ok := rules[name]; ok {
			return t, t.Match != "", nil
		}
		t, err := tx.Tag(name)
		if err != nil && !isNotFound(err) {
			return t, false, err
		}
		rules[name] = t // the zero Tag for one deleted since: no rule
		return t, t.Match != "", nil
	}
	cs := changes{}
	for _, mr := range c.Machines {
		m, err := cs.read(tx, mr.ID)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if (mr.Index == 0 && m.Index != tx.Index) || (mr.Index != 0 && m.Index != mr.Index) {
			continue // not the machine the rules saw
		}
		for _, r := range mr.Rules {
			t, isRule, err := ruleOf(r.Tag)
			if err != nil {
				return err
			}
			if !isRule || t.RuleIndex != r.RuleIndex {
				continue // deleted, made manual, or changed since
			}
			m.AutoTags, _ = setTag(m.AutoTags, r.Tag, r.Match)
		}
	}
	return cs.write(tx, c.Now)
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
