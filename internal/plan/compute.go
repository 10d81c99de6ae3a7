package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// groups plans the groups of the desired stack in stack order, then those
// only the state (or the world) knows, by name.
func (c *computation) groups() error {
	inStack := make(map[string]bool, len(c.desired.Groups))
	for i, g := range c.desired.Groups {
		if g == nil {
			return fmt.Errorf("plan: group %d of stack %q is nil", i, c.desired.Name)
		}
		if inStack[g.Name] {
			return fmt.Errorf("plan: group %q is declared twice", g.Name)
		}
		inStack[g.Name] = true
	}
	for _, g := range c.desired.Groups {
		if c.scope.plansGroup(c.doc, g.Name) {
			c.plan.Groups = append(c.plan.Groups, c.desiredGroup(g))
		}
	}
	gone := map[string]bool{}
	if c.doc.Stack != nil {
		for _, g := range c.doc.Stack.Groups {
			gone[g.Name] = true
		}
	}
	for _, m := range []map[string]*state.GroupStatus{c.doc.Groups} {
		for name := range m {
			gone[name] = true
		}
	}
	for name := range c.world.Members {
		gone[name] = true
	}
	for name := range c.world.Failed {
		gone[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(gone)) {
		if inStack[name] || !c.scope.hasGroup(name) {
			continue
		}
		if gc, ok := c.goneGroup(name); ok {
			c.plan.Groups = append(c.plan.Groups, gc)
		}
	}
	return nil
}

// desiredGroup plans a group of the desired stack.
func (c *computation) desiredGroup(g *config.Group) GroupChange {
	d := group.DesiredFromConfig(g)
	gc := GroupChange{Group: g.Name, ConfigHash: d.ConfigHash}
	st := c.doc.Groups[g.Name]
	if st != nil {
		gc.UpdateStopped = st.UpdateStopped
	}
	if err, failed := c.world.Failed[g.Name]; failed {
		gc.Action, gc.Error = ActionUnknown, errorText(err)
		return gc
	}
	object := Address(KindGroup, g.Name)
	members := c.world.Members[g.Name]
	w, ok := c.scope.Work[g.Name]
	if !ok {
		w, gc.RollWait = ApplyWork(d, members)
	}
	live := group.Live(members)
	gc.Before = len(live)
	gc.After = gc.Before + len(w.Create) - len(w.Destroy)
	gc.Create, gc.Destroy, gc.Replace, gc.Roll = w.Create, w.Destroy, w.Replace, w.Batches
	known := st != nil || (c.doc.Stack != nil && c.doc.Stack.Group(g.Name) != nil)
	switch {
	case st != nil && (st.Freed || st.Destroying):
		gc.Action, gc.WasDestroying = ActionResume, st.Destroying && !st.Freed
		c.intent.marks = append(c.intent.marks, StateChange{Kind: Resume, Object: object})
	case !known && gc.Before == 0:
		gc.Action = ActionCreate
	case len(w.Batches) > 0:
		gc.Action = ActionRoll
	case !w.Empty():
		gc.Action = ActionUpdate
	default:
		gc.Action = ActionNoOp
	}
	if st != nil && st.UpdateStopped && c.scope.All() {
		// This is the "next apply" a `group stop-update` holds the roll
		// until: the roll resumes, here and in watch.
		c.intent.marks = append(c.intent.marks, StateChange{Kind: ResumeUpdate, Object: object})
	}
	if !recordMatches(st, live, d) {
		c.intent.members = append(c.intent.members, StateChange{Kind: SetMembers, Object: object, Members: recordOf(live)})
	}
	c.b.groupSteps(g, members, w, followed(c.desired, c.doc, c.scope, g.Name))
	c.planned = append(c.planned, g.Name)
	return gc
}

// goneGroup plans a group that is not in the desired stack. ok is false when
// there is nothing to say about it (unknown to the state, no live members).
func (c *computation) goneGroup(name string) (gc GroupChange, ok bool) {
	gc = GroupChange{Group: name}
	st := c.doc.Groups[name]
	var cfg *config.Group
	if c.doc.Stack != nil {
		cfg = c.doc.Stack.Group(name)
	}
	live := group.Live(c.world.Members[name])
	known := st != nil || cfg != nil
	switch err, failed := c.world.Failed[name]; {
	case st != nil && st.Freed:
		gc.Action, gc.Before, gc.After = ActionFree, len(live), len(live)
		return gc, true
	case failed:
		gc.Action, gc.Error = ActionUnknown, errorText(err)
		return gc, true
	case !known && len(live) == 0:
		return gc, false
	case cfg == nil && len(live) > 0:
		gc.Action, gc.Error = ActionUnknown, fmt.Sprintf("group %q has live members but its configuration is not in the state, so its provider is unknown", name)
		return gc, true
	case cfg == nil:
		// Its members cannot be listed without a provider: none seen is
		// not none there.
		gc.Action, gc.Error = ActionUnknown, fmt.Sprintf("group %q is in the state but its configuration is not, so its provider is unknown", name)
		return gc, true
	}
	gc.Action, gc.Before = ActionDestroy, len(live)
	object := Address(KindGroup, name)
	if len(live) == 0 {
		c.intent.marks = append(c.intent.marks, StateChange{Kind: ForgetGroup, Object: object})
		return gc, true
	}
	if st == nil || !st.Destroying {
		c.intent.marks = append(c.intent.marks, StateChange{Kind: MarkDestroying, Object: object})
	}
	var w GroupWork
	for _, m := range live {
		w.Destroy = append(w.Destroy, group.Destroy{ID: m.ID, Reason: instance.ReasonTerminate})
	}
	gc.Destroy = w.Destroy
	c.b.groupSteps(cfg, c.world.Members[name], w, false)
	var destroys []StepID
	for _, l := range c.b.leaving[name] {
		destroys = append(destroys, l.destroy)
	}
	slices.Sort(destroys)
	c.b.add(Step{Kind: StepRecord, Object: object, Changes: []StateChange{{Kind: ForgetGroup, Object: object}}, After: destroys})
	c.planned = append(c.planned, name)
	return gc, true
}

// followed reports whether an ingress or enrollment of st that the plan
// syncs follows group name. A freed one counts in a full plan, which
// resumes it (and registers and authorizes the group's new members, once
// awaited), not in a scoped one, which leaves it alone.
func followed(st *config.Stack, doc *state.Document, scope Scope, name string) bool {
	skipped := func(m map[string]*state.ControllerStatus, name string) bool {
		return !scope.All() && isFreed(m, name)
	}
	for _, in := range st.Ingresses {
		if skipped(doc.Ingresses, in.Name) {
			continue
		}
		for _, r := range in.Rules {
			if slices.Contains(r.Groups, name) {
				return true
			}
		}
	}
	for _, e := range st.Enrollments {
		if e.Source == name && !skipped(doc.Enrollments, e.Name) {
			return true
		}
	}
	return false
}

func isFreed(m map[string]*state.ControllerStatus, name string) bool {
	return m[name] != nil && m[name].Freed
}

// recordMatches reports whether the record st of a group agrees with the
// live members observed: the same IDs, logical IDs and configuration
// hashes. A record that disagrees is replaced by the intent.
func recordMatches(st *state.GroupStatus, live []group.Member, d group.Desired) bool {
	var recorded []state.Instance
	if st != nil {
		recorded = make([]state.Instance, 0, len(st.Instances))
		for _, in := range st.Instances {
			if in.State != string(instance.StateTerminating) {
				recorded = append(recorded, in)
			}
		}
	}
	if len(recorded) != len(live) {
		return false
	}
	byID := make(map[string]state.Instance, len(recorded))
	for _, in := range recorded {
		byID[in.ID] = in
	}
	for _, m := range live {
		in, ok := byID[string(m.ID)]
		if !ok || in.LogicalID != m.LogicalID || in.ConfigHash != m.ConfigHash {
			return false
		}
	}
	return true
}

// recordOf is the record of live members.
func recordOf(live []group.Member) []state.Instance {
	out := make([]state.Instance, 0, len(live))
	for _, m := range live {
		out = append(out, state.Instance{ID: string(m.ID), LogicalID: m.LogicalID, ConfigHash: m.ConfigHash,
			State: string(m.State), Address: m.Address})
	}
	return out
}

// Fingerprint is a short digest of a group's live members (IDs, in order):
// two observations with the same one saw the same members.
func Fingerprint(members []group.Member) string {
	h := sha256.New()
	for _, m := range group.Live(members) {
		h.Write([]byte(m.ID))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func fingerprints(groups []string, world World) map[string]string {
	if len(groups) == 0 {
		return nil
	}
	out := make(map[string]string, len(groups))
	for _, g := range groups {
		out[g] = Fingerprint(world.Members[g])
	}
	return out
}

func errorText(err error) string {
	if err == nil {
		return "observation failed"
	}
	return err.Error()
}
