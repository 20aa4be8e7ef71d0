package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/tagrule"
)

// Tags (issue 19): definitions, saved with their rule's outcome over the
// fleet (the proposer evaluates, raftfsm.NewTagPut; Apply only writes), and
// machines' manual tags. Auto tags follow what rules read: after a save,
// the machines the evaluation could not see as they are now, and after a
// change of a machine's manual tags or place, that machine, are evaluated
// again and the outcome proposed (followAutoTags).

func (s *Server) tagRoutes() []Route {
	return []Route{
		{"GET", "/api/v1/tags", AuthAdmin, "tag definitions, each with how many machines carry it (?index=&wait= ?min_index=)", nil, s.listTags},
		{"POST", "/api/v1/tags", AuthAdmin, "create a tag (409 if it exists); its rule is evaluated over every machine; answers the matches and the machines the rule failed on", wire.TagRequest{}, s.createTag},
		{"GET", "/api/v1/tags/:name", AuthAdmin, "a tag and the machines that carry it", nil, s.getTag},
		{"PUT", "/api/v1/tags/:name", AuthAdmin, "replace a tag (404 if none); its rule is evaluated again over every machine", wire.TagRequest{}, s.putTag},
		{"DELETE", "/api/v1/tags/:name", AuthAdmin, "take a tag off every machine and forget it", nil, s.deleteTag},
		{"POST", "/api/v1/machines/:id/tags", AuthAdmin, "add and remove manual tags of a machine (each tag must exist)", wire.MachineTagsRequest{}, s.postMachineTags},
	}
}

func (s *Server) listTags(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	if err := s.blockingQuery(c, store.TableTags); err != nil {
		return err
	}
	var l wire.TagList
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		l.Index = tx.TableIndex(store.TableTags)
		tags, err := tx.Tags()
		for _, t := range tags {
			v := wireTag(t)
			v.Machines = len(tx.MachineIDsByTag(t.Name))
			l.Tags = append(l.Tags, v)
		}
		return err
	}); err != nil {
		return err
	}
	l.Tags = nonNil(l.Tags)
	setIndex(c, l.Index)
	c.JSON(http.StatusOK, l)
	return nil
}

func (s *Server) getTag(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	var d wire.TagDetail
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		d, err = tagDetail(tx, c.Param("name"))
		return err
	}); err != nil {
		return err
	}
	setIndex(c, d.Index)
	c.JSON(http.StatusOK, d)
	return nil
}

func tagDetail(tx *store.Tx, name string) (wire.TagDetail, error) {
	t, err := tx.Tag(name)
	if err != nil {
		return wire.TagDetail{}, err
	}
	d := wire.TagDetail{Tag: wireTag(t), MachineIDs: nonNil(tx.MachineIDsByTag(name)), Manual: []string{}}
	d.Machines = len(d.MachineIDs)
	for _, id := range d.MachineIDs {
		m, err := tx.Machine(id)
		if err != nil {
			return d, err
		}
		if slices.Contains(m.Tags, name) {
			d.Manual = append(d.Manual, id)
		}
	}
	return d, nil
}

func (s *Server) createTag(c *gin.Context) error { return s.saveTag(c, true) }
func (s *Server) putTag(c *gin.Context) error    { return s.saveTag(c, false) }

// saveTag creates (POST) or replaces (PUT) a tag. Two creations of one
// name racing on two nodes both pass the existence check: the later
// replaces the earlier, as a PUT would.
func (s *Server) saveTag(c *gin.Context, create bool) error {
	var req wire.TagRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	name := req.Name
	if !create {
		if name != "" && name != c.Param("name") {
			return FieldError("name", "the body names tag %q, the path %q: a tag is not renamed (add the new one, then remove the old)", store.Clip(name), store.Clip(c.Param("name")))
		}
		name = c.Param("name")
	}
	if name == "" {
		return FieldError("name", "a tag needs a name")
	}
	if err := store.ValidTagName(name); err != nil {
		return FieldError("name", "%s", store.Public(err))
	}
	if req.Match != "" {
		if _, err := tagrule.Parse(req.Match); err != nil {
			return FieldError("match", "tag %s: the rule does not parse: %s", name, ruleErrorText(err))
		}
	}
	tag := raftfsm.Tag{Name: name, Match: req.Match, CloudConfig: req.CloudConfig, Overlays: req.Overlays, Layout: req.Layout, Comment: req.Comment}
	if err := s.minIndex(c); err != nil {
		return err
	}
	now := time.Now().UTC()
	var cmd *raftfsm.TagPut
	var failed []raftfsm.MachineFailure
	manual := map[string]bool{} // machines carrying the tag by hand
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		_, err := tx.Tag(name)
		switch {
		case create && err == nil:
			return Errorf(http.StatusConflict, "conflict", "tag %s exists: change it with rollcall tags set %s (PUT /api/v1/tags/%s)", name, name, name)
		case err != nil && !(create && errors.Is(err, store.ErrNotFound)):
			return err
		}
		ms, err := s.machines.machinesIn(tx)
		if err != nil {
			return err
		}
		if ms == nil {
			if ms, err = tx.Machines(store.MachineFilter{}); err != nil {
				return err
			}
		}
		for _, m := range ms {
			if slices.Contains(m.Tags, name) {
				manual[m.ID] = true
			}
		}
		cmd, failed, err = raftfsm.NewTagPutOver(tx, ms, tag, now, s.facts)
		return err
	}); err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		return err
	}
	last := idx
	if tag.Match != "" {
		more, at, err := s.followTagPut(c.Request.Context(), cmd, idx, now)
		if err != nil {
			return err
		}
		failed = append(failed, more...)
		last = max(last, at)
	}
	ans := wire.TagSaved{Index: last, Failures: []wire.TagFailure{}}
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		t, err := tx.Tag(name)
		if err != nil {
			return err
		}
		ans.Tag = wireTag(t)
		ans.Tag.Machines = len(tx.MachineIDsByTag(name))
		if tag.Match == "" {
			return nil
		}
		// Matched counts the carriers but those that carry the tag by
		// hand only (read before the save: a save does not change manual
		// tags): no record is read, so the answer does not wait for
		// 10,000 decodes.
		matched := make(map[string]bool, len(cmd.Matches))
		for _, id := range cmd.Matches {
			matched[id] = true
		}
		for _, id := range tx.MachineIDsByTag(name) {
			if !manual[id] || matched[id] {
				ans.Matched++
			}
		}
		return nil
	}); err != nil {
		return err
	}
	ans.Failures = s.tagFailures(failed)
	status := http.StatusOK
	if create {
		status = http.StatusCreated
	}
	setIndex(c, last)
	c.JSON(status, ans)
	return nil
}

// ruleErrorText is a rule's refusal as the operator reads it: tagrule's
// errors are written for them (where in the rule, and why).
func ruleErrorText(err error) string {
	var re *tagrule.Error
	if errors.As(err, &re) {
		return re.Error()
	}
	if p := store.Public(err); p != "" {
		return p
	}
	return "the rule could not be evaluated (logged on the node)"
}

// tagFailures are the machines a rule failed on, once each, by machine;
// a cause that is not a rule's own error is logged, not shown.
func (s *Server) tagFailures(failed []raftfsm.MachineFailure) []wire.TagFailure {
	out := []wire.TagFailure{}
	seen := map[string]bool{}
	for _, f := range failed {
		key := f.Tag + "\x00" + f.Machine
		if seen[key] {
			continue
		}
		seen[key] = true
		var re *tagrule.Error
		if !errors.As(f.Err, &re) && store.Public(f.Err) == "" {
			s.log.Warn("tag rule evaluation failed", "tag", f.Tag, "machine", f.Machine, "err", f.Err)
		}
		out = append(out, wire.TagFailure{Machine: f.Machine, Error: fmt.Sprintf("tag %s: %s", f.Tag, ruleErrorText(f.Err))})
	}
	slices.SortFunc(out, func(a, b wire.TagFailure) int {
		return cmp.Or(cmp.Compare(a.Machine, b.Machine), cmp.Compare(a.Error, b.Error))
	})
	return out
}

// followTagPut evaluates a saved rule again over the machines the TagPut
// left as they were because they were written after its evaluation (after
// cmd.Basis, before the put's own index), and proposes what changes.
func (s *Server) followTagPut(ctx context.Context, cmd *raftfsm.TagPut, idx uint64, now time.Time) ([]raftfsm.MachineFailure, uint64, error) {
	var ids []string
	var rule *raftfsm.RuleTag
	failed := map[string]bool{}
	for _, id := range cmd.Failed {
		failed[id] = true
	}
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		t, err := tx.Tag(cmd.Tag.Name)
		if err != nil || t.Match != cmd.Tag.Match {
			return err // changed again since: that save evaluated it
		}
		r, err := tagrule.Parse(t.Match)
		if err != nil {
			return err
		}
		rule = &raftfsm.RuleTag{Name: t.Name, RuleIndex: t.RuleIndex, Rule: r}
		seen := map[string]bool{}
		add := func(id string) {
			if seen[id] || failed[id] {
				return
			}
			seen[id] = true
			if m, err := tx.Machine(id); err == nil && m.Index != idx {
				ids = append(ids, id)
			}
		}
		changes, err := tx.Changes(cmd.Basis, 0)
		switch {
		case errors.Is(err, store.ErrChangesTruncated):
			ms, err := tx.Machines(store.MachineFilter{})
			if err != nil {
				return err
			}
			for _, m := range ms {
				if m.Index > cmd.Basis {
					add(m.ID)
				}
			}
		case err != nil:
			return err
		default:
			for _, ch := range changes {
				if ch.Table == store.TableMachines && ch.Index > cmd.Basis && ch.Index < idx {
					add(ch.Key)
				}
			}
		}
		return nil
	}); err != nil {
		return nil, 0, err
	}
	if rule == nil || len(ids) == 0 {
		return nil, 0, nil
	}
	slices.Sort(ids)
	return s.followAutoTags(ctx, ids, []raftfsm.RuleTag{*rule}, now)
}

// Bounds of one AutoTagsSet this node proposes: well inside the state
// machine's (raftfsm's 100,000 machines and 2^18 outcomes).
const (
	followMachines = 20_000
	followOutcomes = 1 << 16
)

// followAutoTags evaluates rules (nil: every stored rule) over the machines
// ids names as the local copy holds them, and proposes the outcomes that
// change a machine's auto tags, in as few AutoTagsSets as the bounds allow.
// It returns the machines a rule failed on and the index of the last
// command (0 when nothing changed). An outcome for a machine written again
// in the meantime is left out by the state machine: that write's proposer
// evaluates it.
func (s *Server) followAutoTags(ctx context.Context, ids []string, rules []raftfsm.RuleTag, now time.Time) ([]raftfsm.MachineFailure, uint64, error) {
	var set *raftfsm.AutoTagsSet
	var failed []raftfsm.MachineFailure
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		if rules == nil {
			var stale []error
			var err error
			if rules, stale, err = raftfsm.RuleTags(tx); err != nil {
				return err
			}
			for _, e := range stale {
				s.log.Warn("a stored tag rule no longer parses: its machines keep their tags", "err", e)
			}
		}
		if len(rules) == 0 {
			return nil
		}
		present := make([]string, 0, len(ids))
		byID := make(map[string]store.Machine, len(ids))
		for _, id := range ids {
			if m, err := tx.Machine(id); err == nil {
				present = append(present, id)
				byID[id] = m
			}
		}
		var err error
		set, failed, err = raftfsm.AutoTagsOf(tx, present, rules, now, s.facts)
		if err != nil {
			return err
		}
		// Only what changes a machine goes into the log.
		kept := set.Machines[:0]
		for _, mr := range set.Machines {
			m := byID[mr.ID]
			var changing []raftfsm.RuleResult
			for _, r := range mr.Rules {
				if slices.Contains(m.AutoTags, r.Tag) != r.Match {
					changing = append(changing, r)
				}
			}
			if len(changing) > 0 {
				mr.Rules = changing
				kept = append(kept, mr)
			}
		}
		set.Machines = kept
		return nil
	}); err != nil {
		return nil, 0, err
	}
	if set == nil || len(set.Machines) == 0 {
		return failed, 0, nil
	}
	var last uint64
	for start := 0; start < len(set.Machines); {
		end, outcomes := start, 0
		for end < len(set.Machines) && end-start < followMachines && outcomes+len(set.Machines[end].Rules) <= followOutcomes {
			outcomes += len(set.Machines[end].Rules)
			end++
		}
		idx, err := s.cfg.Cluster.Apply(ctx, &raftfsm.AutoTagsSet{Machines: set.Machines[start:end], Now: now})
		if err != nil {
			return failed, last, err
		}
		last, start = idx, end
	}
	return failed, last, nil
}

func (s *Server) deleteTag(c *gin.Context) error {
	name := c.Param("name")
	if err := store.ValidTagName(name); err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.TagDelete{Name: name, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.Deleted{Deleted: name})
	return nil
}

func (s *Server) postMachineTags(c *gin.Context) error {
	var req wire.MachineTagsRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if len(req.Add) == 0 && len(req.Remove) == 0 {
		return FieldError("add", "name a tag to add or to remove")
	}
	for _, list := range []struct {
		field string
		names []string
	}{{"add", req.Add}, {"remove", req.Remove}} {
		if len(list.names) > store.MaxManualTags {
			return FieldError(list.field, "%d tags is more than the %d a machine may carry", len(list.names), store.MaxManualTags)
		}
		for _, name := range list.names {
			if err := store.ValidTagName(name); err != nil {
				return FieldError(list.field, "%s", store.Public(err))
			}
		}
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	// As MAAS has it: a tag is made on purpose, so a typo is refused
	// instead of becoming a tag of its own.
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		for _, list := range []struct {
			field string
			names []string
		}{{"add", req.Add}, {"remove", req.Remove}} {
			for _, name := range list.names {
				if _, err := tx.Tag(name); errors.Is(err, store.ErrNotFound) {
					return FieldError(list.field, "no tag %s; create it with rollcall tags add %s", name, name)
				} else if err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	now := time.Now().UTC()
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.MachineTags{Machines: []string{m.ID}, Add: dedupe(req.Add), Remove: dedupe(req.Remove), Now: now})
	if err != nil {
		return err
	}
	// Rules may read a machine's tags.
	_, at, err := s.followAutoTags(c.Request.Context(), []string{m.ID}, nil, now)
	if err != nil {
		return err
	}
	return s.respondMachine(c, http.StatusOK, m.ID, max(idx, at))
}
