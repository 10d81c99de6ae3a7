package operation

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"

	"github.com/infrakit/infrakit/internal/config"
)

// recordOutputs evaluates desired's outputs with the members the state
// records now and stores them in the state, under the lock the caller
// holds. An output that does not evaluate is left out (the command that
// shows the outputs reports why); the state is written only when the
// outputs changed, so stacks without outputs cost no write.
func (r *Runner) recordOutputs(ctx context.Context, desired *config.Stack) error {
	doc, err := r.store.Read(ctx)
	if err != nil {
		return err
	}
	var vals map[string]config.OutputValue
	refreshed := false
	if desired != nil && len(desired.Outputs) > 0 {
		obs := r.observedForOutputs(ctx, desired, doc)
		refreshed = refreshMembers(doc, obs)
		vals, _ = desired.EvalOutputs(obs)
	}
	for name, v := range vals {
		if !v.Value.IsWhollyKnown() {
			delete(vals, name) // nothing a state records is unknown; be safe
		}
	}
	if len(vals) == 0 {
		vals = nil
	}
	same, err := sameOutputs(doc.Outputs, vals)
	if err != nil || (same && !refreshed) {
		return err
	}
	doc.Outputs = vals
	if err := r.store.Write(ctx, doc); err != nil {
		return fmt.Errorf("write outputs: %w", err)
	}
	return nil
}

// observedForOutputs is the members of desired's groups as the providers
// describe them now (the state records a member when it is created, before
// it has an address), or as the state records them for a group that could
// not be listed.
func (r *Runner) observedForOutputs(ctx context.Context, desired *config.Stack, doc *state.Document) *config.Observed {
	obs := doc.Observed()
	needs := plan.Needs{Groups: map[string]plan.GroupNeed{}}
	for _, g := range desired.Groups {
		if st := doc.Groups[g.Name]; st != nil && st.Freed {
			continue
		}
		needs.Groups[g.Name] = plan.GroupNeed{Stack: desired.Name, Config: g, Desired: true}
	}
	world := plan.World{Members: map[string][]group.Member{}, Instances: map[string][]instance.Description{}, Failed: map[string]error{}}
	r.observeGroups(ctx, needs, nil, nil, &world)
	for name := range needs.Groups {
		if world.Failed[name] != nil {
			continue
		}
		ms := make([]config.ObservedMember, 0, len(world.Members[name]))
		for _, m := range world.Members[name] {
			ms = append(ms, config.ObservedMember{ID: string(m.ID), LogicalID: m.LogicalID, Address: m.Address, State: string(m.State)})
		}
		slices.SortFunc(ms, func(a, b config.ObservedMember) int {
			return cmp.Or(strings.Compare(a.LogicalID, b.LogicalID), strings.Compare(a.ID, b.ID))
		})
		obs.Members[name] = ms
	}
	return obs
}

// refreshMembers copies the address and state observed into the state's
// record of each member (recorded when it was created, before it ran), so
// that the console and a later output see what the outputs saw. It adds
// and removes no member: that is the executor's. It reports a change.
func refreshMembers(doc *state.Document, obs *config.Observed) bool {
	changed := false
	for name, g := range doc.Groups {
		seen := map[string]config.ObservedMember{}
		for _, m := range obs.Members[name] {
			seen[m.ID] = m
		}
		for i, in := range g.Instances {
			m, ok := seen[in.ID]
			if ok && (m.Address != in.Address || m.State != in.State) {
				g.Instances[i].Address, g.Instances[i].State = m.Address, m.State
				changed = true
			}
		}
	}
	return changed
}

// sameOutputs compares two sets of outputs by their JSON.
func sameOutputs(a, b map[string]config.OutputValue) (bool, error) {
	if len(a) != len(b) {
		return false, nil
	}
	ja, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, err
	}
	return string(ja) == string(jb), nil
}
