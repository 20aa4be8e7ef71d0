package raftfsm

import (
	"fmt"
	"time"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
	"github.com/rollcall/rollcall/store/tagrule"
)

// The proposer's half of the tag commands: evaluating rules over the
// local store and writing the outcome into TagPut and AutoTagsSet. Apply
// never evaluates (see commands_tags.go); whoever evaluates, every node
// applies the same outcome.

// RuleTag is a tag's rule ready to evaluate.
type RuleTag struct {
	Name string
	// RuleIndex is the tag's store.Tag.RuleIndex (outcomes name it).
	RuleIndex uint64
	Rule      *tagrule.Rule
}

// MachineFailure is a rule that failed on one machine: which, and why.
type MachineFailure struct {
	Tag, Machine string
	Err          error
}

func (f MachineFailure) Error() string {
	return fmt.Sprintf("tag %s on machine %s: %v", f.Tag, f.Machine, f.Err)
}

func (f MachineFailure) Unwrap() error { return f.Err }

// TagMatches is one rule's outcome over a fleet.
type TagMatches struct {
	Tag     string
	Matches []string         // machines it matched, sorted
	Failed  []MachineFailure // machines it failed on, by machine
}

// RuleTags returns the stored tags that have a rule, parsed, by name. A
// stored rule that no longer parses (a Go release changed text/template)
// is not returned: it is in failed, with the reason, and its tag keeps the
// machines it had.
func RuleTags(tx *store.Tx) (rules []RuleTag, failed []error, err error) {
	tags, err := tx.Tags()
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tags {
		if t.Match == "" {
			continue
		}
		r, err := tagrule.Parse(t.Match)
		if err != nil {
			failed = append(failed, fmt.Errorf("tag %s: %w", t.Name, err))
			continue
		}
		rules = append(rules, RuleTag{Name: t.Name, RuleIndex: t.RuleIndex, Rule: r})
	}
	return rules, failed, nil
}

// storedFacts reads a machine's facts from its stored report (through the
// node's cache, when there is one); a machine without a report has none.
func storedFacts(tx *store.Tx, m store.Machine, cache *tagrule.FactsCache) func() (tagrule.Facts, error) {
	load := func() (tagrule.Facts, error) {
		doc, err := tx.Inventory(m.ID)
		if isNotFound(err) {
			return tagrule.Facts{}, nil
		}
		if err != nil {
			return tagrule.Facts{}, err
		}
		return tagrule.DecodeFacts(doc)
	}
	if cache == nil {
		return load
	}
	return func() (tagrule.Facts, error) { return cache.Facts(m, load) }
}

// MatchTags evaluates rules over every machine of tx, in ID order, and
// returns each rule's outcome, in the order of rules. A rule that fails
// on a machine is that machine's failure, not the walk's. cache, when not
// nil, keeps the machines' inventory facts between calls; the walk
// forgets the machines that are gone.
func MatchTags(tx *store.Tx, rules []RuleTag, cache *tagrule.FactsCache) ([]TagMatches, error) {
	return MatchTagsOver(tx, nil, rules, cache)
}

// MatchTagsOver is MatchTags over ms, every machine of tx as tx holds
// them in ID order, decoded already (the API's machine list cache keeps
// them: decoding 10,000 records is most of a rule's evaluation); nil ms
// reads them from tx.
func MatchTagsOver(tx *store.Tx, ms []store.Machine, rules []RuleTag, cache *tagrule.FactsCache) ([]TagMatches, error) {
	if ms == nil {
		var err error
		if ms, err = tx.Machines(store.MachineFilter{}); err != nil {
			return nil, err
		}
	}
	out := make([]TagMatches, len(rules))
	ev := newEvaluator(rules)
	for _, m := range ms {
		n := tagrule.NodeOf(m, storedFacts(tx, m, cache))
		for i, r := range rules {
			out[i].Tag = r.Name
			ok, err := ev.Eval(i, n)
			switch {
			case err != nil:
				out[i].Failed = append(out[i].Failed, MachineFailure{Tag: r.Name, Machine: m.ID, Err: err})
			case ok:
				out[i].Matches = append(out[i].Matches, m.ID)
			}
		}
	}
	for i, r := range rules {
		out[i].Tag = r.Name
	}
	if cache != nil {
		ids := make(map[string]bool, len(ms))
		for _, m := range ms {
			ids[m.ID] = true
		}
		cache.Retain(func(id string) bool { return ids[id] })
	}
	return out, nil
}

func newEvaluator(rules []RuleTag) *tagrule.Evaluator {
	parsed := make([]*tagrule.Rule, len(rules))
	for i, r := range rules {
		parsed[i] = r.Rule
	}
	return tagrule.NewEvaluator(parsed...)
}

// NewTagPut makes the command that saves tag: its rule parsed (a rule
// that does not parse is refused, with its line and column) and evaluated
// over every machine of tx. The failures are what the operator is told;
// the machines they name keep their tags.
func NewTagPut(tx *store.Tx, tag Tag, now time.Time, cache *tagrule.FactsCache) (*TagPut, []MachineFailure, error) {
	return NewTagPutOver(tx, nil, tag, now, cache)
}

// NewTagPutOver is NewTagPut evaluating over ms, as MatchTagsOver.
func NewTagPutOver(tx *store.Tx, ms []store.Machine, tag Tag, now time.Time, cache *tagrule.FactsCache) (*TagPut, []MachineFailure, error) {
	if err := store.CheckTag(tag.record()); err != nil {
		return nil, nil, err
	}
	c := &TagPut{Tag: tag, Now: now}
	if tag.Match == "" {
		return c, nil, nil
	}
	r, err := tagrule.Parse(tag.Match)
	if err != nil {
		return nil, nil, store.Errorf(store.ErrInvalid, "tag %s: %w", tag.Name, err)
	}
	c.Basis, _ = tx.Applied()
	res, err := MatchTagsOver(tx, ms, []RuleTag{{Name: tag.Name, Rule: r}}, cache)
	if err != nil {
		return nil, nil, err
	}
	c.Matches = res[0].Matches
	for _, f := range res[0].Failed {
		c.Failed = append(c.Failed, f.Machine)
	}
	return c, res[0].Failed, nil
}

// AutoTagsOf evaluates rules over the named machines as tx holds them, for
// the AutoTagsSet that follows what a TagPut left out (machines written
// after its Basis) or a change that rules read (a location, manual tags,
// a name).
func AutoTagsOf(tx *store.Tx, ids []string, rules []RuleTag, now time.Time, cache *tagrule.FactsCache) (*AutoTagsSet, []MachineFailure, error) {
	ms := make([]store.Machine, 0, len(ids))
	for _, id := range ids {
		m, err := tx.Machine(id)
		if err != nil {
			return nil, nil, err
		}
		ms = append(ms, m)
	}
	c, failed := autoTags(ms, rules, now, false, func(m store.Machine) func() (tagrule.Facts, error) {
		return storedFacts(tx, m, cache)
	})
	return c, failed, nil
}

// CommissionAutoTags is the AutoTagsSet to batch right after c in the
// same entry (NewBatch(c, set)): the stored rule tags evaluated over the
// machine as c leaves it (its summary; rep, the report c carries, for its
// facts) with the location and manual tags its record holds. It is nil
// when no tag has a rule: then nothing enters the log that a node older
// than tags would not know (see AutoTagsSet). The proposer resolves c's
// identity as Apply will; if the two differ (another commission came
// first), the set names a machine c did not write and Apply leaves it out.
func CommissionAutoTags(tx *store.Tx, c *Commission, rep *inventory.Report) (*AutoTagsSet, []error, error) {
	rules, failed, err := RuleTags(tx)
	if err != nil || len(rules) == 0 {
		return nil, failed, err
	}
	m, found, err := resolve(tx, c.Identity)
	if err != nil {
		return nil, failed, err
	}
	if !found {
		m = store.Machine{ID: c.NewID, State: store.StateNew}
	}
	if c.Identity.Serial != "" {
		m.Serial = c.Identity.Serial
	}
	m.Summary = c.Summary.record()
	facts := tagrule.FactsOf(rep)
	set, bad := autoTags([]store.Machine{m}, rules, c.Now, true, func(store.Machine) func() (tagrule.Facts, error) {
		return func() (tagrule.Facts, error) { return facts, nil }
	})
	for _, f := range bad {
		failed = append(failed, f)
	}
	return set, failed, nil
}

// autoTags evaluates rules over machines; sameEntry marks them as written
// by the command batched before the set.
func autoTags(ms []store.Machine, rules []RuleTag, now time.Time, sameEntry bool, facts func(store.Machine) func() (tagrule.Facts, error)) (*AutoTagsSet, []MachineFailure) {
	c := &AutoTagsSet{Now: now}
	var failed []MachineFailure
	ev := newEvaluator(rules)
	for _, m := range ms {
		mr := MachineRules{ID: m.ID, Rules: []RuleResult{}}
		if !sameEntry {
			mr.Index = m.Index
		}
		n := tagrule.NodeOf(m, facts(m))
		for i, r := range rules {
			ok, err := ev.Eval(i, n)
			if err != nil {
				failed = append(failed, MachineFailure{Tag: r.Name, Machine: m.ID, Err: err})
				continue
			}
			mr.Rules = append(mr.Rules, RuleResult{Tag: r.Name, RuleIndex: r.RuleIndex, Match: ok})
		}
		c.Machines = append(c.Machines, mr)
	}
	return c, failed
}

// WarmFacts loads into cache the inventory facts of the machines named
// that it does not hold for their current commissioning, so that a tag
// save finds them decoded (a rule over 10,000 machines otherwise decodes
// 10,000 reports, about 11 s). A machine gone or without a report is
// skipped. The node runs it after commissions (appliance/node).
func WarmFacts(tx *store.Tx, ids []string, cache *tagrule.FactsCache) error {
	for _, id := range ids {
		m, err := tx.Machine(id)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err := cache.Facts(m, storedFacts(tx, m, nil)); err != nil {
			return fmt.Errorf("machine %s: %w", m.ID, err)
		}
	}
	return nil
}
