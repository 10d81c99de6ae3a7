package operation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

func (r *Runner) plan(ctx context.Context, st *config.Stack, mode PlanMode) (*plan.Plan, error) {
	// The lock gives a consistent picture: no apply or watch pass changes
	// the world while it is observed.
	unlock, err := r.lock(ctx, "plan")
	if err != nil {
		return nil, err
	}
	defer unlock()
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	desired := st
	if mode.Destroy {
		desired = destroyStack(st, doc)
	}
	if desired == nil {
		return nil, errors.New("plan: no stack: load the stack files first")
	}
	if !mode.Destroy {
		if d := checkStackName(st, doc); d != nil {
			return nil, hcl.Diagnostics{d}
		}
	}
	targets := observationTargets(desired, doc)
	start := time.Now()
	world := r.observe(ctx, targets, func(t target, members []group.Member) bool {
		return mode.Health || needsHealth(t, doc, members)
	})
	r.log.Debug("observed groups", "groups", len(targets), "failed", len(world.Failed), "took", time.Since(start))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := plan.Compute(desired, doc, world)
	if err != nil {
		return nil, err
	}
	r.planControllers(ctx, desired, doc, world, p)
	return p, ctx.Err()
}

// checkStackName is the diagnostic of stack files that name another stack
// than the one the state holds (nil when they agree, or the state holds
// nothing yet), at the stack block. infrakit finds what it made by the
// infrakit.stack tag: under a new name a plan would create every group
// anew and leave the old instances running, unmanaged by anything.
func checkStackName(st *config.Stack, doc *state.Document) *hcl.Diagnostic {
	if doc == nil || doc.Stack == nil || doc.Stack.Name == st.Name ||
		len(doc.Groups)+len(doc.Ingresses)+len(doc.Enrollments) == 0 {
		return nil
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Stack renamed",
		Detail: fmt.Sprintf("The state in this directory is stack %q, and what it made is tagged %s = %q; "+
			"these files declare stack %q. infrakit finds its instances by that tag, so under the new name "+
			"it would create every group anew and leave the old instances running, managed by nothing. "+
			"Set the name back to %q, or run \"infrakit destroy\" first to start the new stack from nothing.",
			doc.Stack.Name, tags.Stack, doc.Stack.Name, st.Name, doc.Stack.Name),
		Subject: st.DeclRange.Ptr(),
	}
}

// destroyStack is the desired stack of `infrakit destroy`: the stack as
// stored (or as loaded, when nothing is stored) without any group.
func destroyStack(loaded *config.Stack, doc *state.Document) *config.Stack {
	var base *config.Stack
	switch {
	case doc != nil && doc.Stack != nil:
		base = doc.Stack
	case loaded != nil:
		base = loaded
	default:
		return &config.Stack{}
	}
	out := *base
	out.Groups, out.Ingresses, out.Enrollments = nil, nil, nil
	return &out
}

// target is a group to observe: its configuration and the stack name its
// members are tagged with.
type target struct {
	stack string
	group *config.Group
	// desired is set when the group is in the desired stack (else it is
	// only in the state and will be destroyed or left free).
	desired bool
}

// observationTargets lists the groups a plan must observe: every group of
// the desired stack, then every group the state knows, by name. A group the
// state names without its configuration has no provider to ask; it gets a
// nil group (and is reported as not observable).
func observationTargets(desired *config.Stack, doc *state.Document) map[string]target {
	out := map[string]target{}
	for _, g := range desired.Groups {
		out[g.Name] = target{stack: desired.Name, group: g, desired: true}
	}
	if doc == nil {
		return out
	}
	if doc.Stack != nil {
		for _, g := range doc.Stack.Groups {
			if _, ok := out[g.Name]; !ok {
				out[g.Name] = target{stack: doc.Stack.Name, group: g}
			}
		}
	}
	for name := range doc.Groups {
		if _, ok := out[name]; !ok {
			out[name] = target{}
		}
	}
	return out
}

// needsHealth reports whether a group's plan depends on its members'
// health: a scale-down picks unhealthy members first, and a roll is paced by
// health. Groups not in the desired stack are destroyed whole.
func needsHealth(t target, doc *state.Document, members []group.Member) bool {
	if !t.desired {
		return false
	}
	if doc != nil {
		if st := doc.Groups[t.group.Name]; st != nil && st.Freed {
			return false // resuming: the plan lists what the first pass does
		}
	}
	d := group.DesiredFromConfig(t.group)
	dec := group.Decide(d, members)
	if len(dec.Roll) > 0 {
		return true
	}
	for _, x := range dec.Destroy {
		if x.Reason == group.ReasonScaleDown {
			return true
		}
	}
	return false
}

// observe lists the members of every target. Groups served by the same
// instance plugin (provider key and type) of the same stack share one
// DescribeInstances by the stack's tag, split by the group tag here: a
// provider that lists by reading every object (the simulator reads one file
// per instance) then does so once, not once per group. A plugin serving a
// single group is asked by the group's own tags. Health is asked for the
// groups where withHealth says the plan depends on it. Up to Parallelism
// plugins are asked at once.
func (r *Runner) observe(ctx context.Context, targets map[string]target, withHealth func(target, []group.Member) bool) plan.World {
	world := plan.World{Members: map[string][]group.Member{}, Failed: map[string]error{}}
	type source struct{ stack, provider, typ string }
	shared := map[source][]string{}
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		t := targets[name]
		if t.group == nil {
			world.Failed[name] = fmt.Errorf("group %q is in the state but its configuration is not, so its provider is unknown", name)
			continue
		}
		k := source{t.stack, t.group.Instance.Provider, t.group.Instance.Type}
		shared[k] = append(shared[k], name)
	}
	var mu sync.Mutex
	sem := make(chan struct{}, r.opts.Parallelism)
	var wg sync.WaitGroup
	for src, names := range shared {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			lists, err := r.describeShared(ctx, src.stack, src.provider, src.typ, names, targets)
			for _, name := range names {
				var members []group.Member
				gerr := err
				if gerr == nil {
					members, gerr = r.observeGroup(ctx, targets[name], lists[name], withHealth)
				}
				mu.Lock()
				if gerr != nil {
					world.Failed[name] = gerr
				} else {
					world.Members[name] = members
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return world
}

// describeShared lists the members of the named groups, all served by one
// instance plugin, by group name. One group is described by its own tags.
func (r *Runner) describeShared(ctx context.Context, stack, providerKey, typ string, names []string, targets map[string]target) (map[string][]instance.Description, error) {
	out := make(map[string][]instance.Description, len(names))
	if len(names) == 1 {
		ctrl, err := r.controllerFor(ctx, stack, targets[names[0]].group, nil)
		if err != nil {
			return nil, err
		}
		descs, _, err := ctrl.ObserveDescriptions(ctx, false)
		out[names[0]] = descs
		return out, err
	}
	h, err := r.hostFor()
	if err != nil {
		return nil, err
	}
	c, err := h.Client(ctx, providerKey)
	if err != nil {
		return nil, err
	}
	descs, err := c.Instance(typ).DescribeInstances(ctx, map[string]string{tags.Stack: stack}, false)
	if err != nil {
		return nil, fmt.Errorf("groups %s: describe instances: %w", strings.Join(names, ", "), err)
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	for _, d := range descs {
		if g := d.Tags[tags.Group]; want[g] {
			out[g] = append(out[g], d)
		}
	}
	return out, nil
}

// observeGroup turns a group's listed members into the plan's members, with
// health when withHealth says the plan depends on it.
func (r *Runner) observeGroup(ctx context.Context, t target, descs []instance.Description, withHealth func(target, []group.Member) bool) ([]group.Member, error) {
	ctrl, err := r.controllerFor(ctx, t.stack, t.group, nil)
	if err != nil {
		return nil, err
	}
	members := ctrl.ObserveFrom(ctx, descs, false)
	if withHealth != nil && withHealth(t, members) {
		members = ctrl.ObserveFrom(ctx, descs, true)
	}
	return members, ctx.Err()
}

// decide observes a group and decides what it needs, asking health only
// when the decision depends on it (see needsHealth) or the group replaces
// unhealthy members.
func decide(ctx context.Context, ctrl *group.Controller) ([]group.Member, group.Decision, error) {
	d := ctrl.Desired()
	descs, members, err := ctrl.ObserveDescriptions(ctx, d.ReplaceUnhealthy)
	if err != nil {
		return nil, group.Decision{}, err
	}
	dec := group.Decide(d, members)
	if !d.ReplaceUnhealthy && needsHealth(target{group: ctrl.Group(), desired: true}, nil, members) {
		members = ctrl.ObserveFrom(ctx, descs, true)
		dec = group.Decide(d, members)
	}
	return members, dec, ctx.Err()
}
