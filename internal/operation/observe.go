package operation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// observe reads what a plan needs of the world (plan.NeedsOf): the load
// balancers and authorizers first, then the groups, so that a backend or
// an authorization found is never of a member made after the groups were
// listed. Groups served by the same instance plugin (provider key and
// type) of the same stack share one DescribeInstances by the stack's tag,
// split by the group tag here: a provider that lists by reading every
// object (the simulator reads one file per instance) then does so once,
// not once per group. A plugin serving a single group is asked by the
// group's own tags. Health is asked for the groups where withHealth says
// the plan depends on it. Up to Parallelism providers are asked at once.
// The groups in known are not listed: their descriptions are given
// (ObserveKnown).
func (r *Runner) observe(ctx context.Context, needs plan.Needs, withHealth func(plan.GroupNeed, []group.Member) bool,
	known map[string][]instance.Description) plan.World {
	world := plan.World{
		Members:       map[string][]group.Member{},
		Instances:     map[string][]instance.Description{},
		Failed:        map[string]error{},
		LoadBalancers: map[string]plan.LoadBalancerView{},
		Authorizers:   map[string]plan.AuthorizerView{},
	}
	var mu sync.Mutex
	eg := &errgroup.Group{}
	eg.SetLimit(r.opts.Parallelism)
	for _, lb := range needs.LoadBalancers {
		eg.Go(func() error {
			v := r.observeLB(ctx, lb)
			mu.Lock()
			world.LoadBalancers[plan.LBKey(lb.Provider, lb.Name)] = v
			mu.Unlock()
			return nil
		})
	}
	for _, t := range needs.Targets {
		eg.Go(func() error {
			v := r.observeTarget(ctx, t)
			mu.Lock()
			world.Authorizers[plan.TargetKey(t.Provider, t.Type)] = v
			mu.Unlock()
			return nil
		})
	}
	_ = eg.Wait()
	r.observeGroups(ctx, needs, withHealth, known, &world)
	return world
}

func (r *Runner) observeLB(ctx context.Context, lb *config.LoadBalancer) plan.LoadBalancerView {
	l4, err := r.bindings().LoadBalancer(ctx, lb.Provider, lb.Name)
	if err != nil {
		return plan.LoadBalancerView{Err: err}
	}
	routes, err := l4.Routes(ctx)
	if err != nil {
		return plan.LoadBalancerView{Err: fmt.Errorf("list routes: %w", err)}
	}
	backends, err := l4.Backends(ctx)
	if err != nil {
		return plan.LoadBalancerView{Err: fmt.Errorf("list backends: %w", err)}
	}
	return plan.LoadBalancerView{Routes: routes, Backends: backends}
}

func (r *Runner) observeTarget(ctx context.Context, t config.EnrollmentTarget) plan.AuthorizerView {
	auth, err := r.bindings().Authorizer(ctx, t.Provider, t.Type)
	if err != nil {
		return plan.AuthorizerView{Err: err}
	}
	as, err := auth.Describe(ctx)
	if err != nil {
		return plan.AuthorizerView{Err: fmt.Errorf("describe authorizations: %w", err)}
	}
	return plan.AuthorizerView{Authorizations: as}
}

// observeGroups lists the groups of needs into world; those in known
// (not needing properties) are not listed but taken from it.
func (r *Runner) observeGroups(ctx context.Context, needs plan.Needs, withHealth func(plan.GroupNeed, []group.Member) bool,
	known map[string][]instance.Description, world *plan.World) {
	type source struct {
		stack, provider, typ string
		props                bool
	}
	shared := map[source][]string{}
	given := map[string][]instance.Description{}
	for _, name := range slices.Sorted(maps.Keys(needs.Groups)) {
		need := needs.Groups[name]
		if need.Config == nil {
			world.Failed[name] = fmt.Errorf("group %q is in the state but its configuration is not, so its provider is unknown", name)
			continue
		}
		if descs, ok := known[name]; ok && !need.Properties {
			given[name] = descs
			continue
		}
		k := source{need.Stack, need.Config.Instance.Provider, need.Config.Instance.Type, need.Properties}
		shared[k] = append(shared[k], name)
	}
	var mu sync.Mutex
	record := func(name string, descs []instance.Description, err error) {
		var members []group.Member
		if err == nil {
			members, err = r.membersOf(ctx, needs.Groups[name], descs, withHealth)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			world.Failed[name] = err
		} else {
			world.Members[name], world.Instances[name] = members, descs
		}
	}
	eg := &errgroup.Group{}
	eg.SetLimit(r.opts.Parallelism)
	for name, descs := range given {
		eg.Go(func() error { record(name, descs, nil); return nil })
	}
	for src, names := range shared {
		eg.Go(func() error {
			lists, err := r.describeShared(ctx, src.stack, src.provider, src.typ, src.props, names, needs)
			for _, name := range names {
				record(name, lists[name], err)
			}
			return nil
		})
	}
	_ = eg.Wait()
}

// describeShared lists the members of the named groups, all served by one
// instance plugin, by group name. One group is described by its own tags.
func (r *Runner) describeShared(ctx context.Context, stack, providerKey, typ string, props bool, names []string, needs plan.Needs) (map[string][]instance.Description, error) {
	out := make(map[string][]instance.Description, len(names))
	if len(names) == 1 {
		g, err := r.instances(ctx, stack, needs.Groups[names[0]].Config)
		if err != nil {
			return nil, err
		}
		descs, err := g.Describe(ctx, props)
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
	descs, err := c.Instance(typ).DescribeInstances(ctx, map[string]string{tags.Stack: stack}, props)
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

// membersOf turns a group's listed members into the plan's members, with
// health when withHealth says the plan depends on it. The group's
// Instances remember the listing: the drains are made with it.
func (r *Runner) membersOf(ctx context.Context, need plan.GroupNeed, descs []instance.Description, withHealth func(plan.GroupNeed, []group.Member) bool) ([]group.Member, error) {
	g, err := r.instances(ctx, need.Stack, need.Config)
	if err != nil {
		return nil, err
	}
	members := g.ObserveFrom(ctx, descs, false)
	if withHealth != nil && withHealth(need, members) {
		members = g.ObserveFrom(ctx, descs, true)
	}
	return members, ctx.Err()
}

// The SPI clients of load balancers and authorizers, by their blocks.
func (r *Runner) loadBalancerClient(ctx context.Context, lb *config.LoadBalancer) (loadbalancer.L4, error) {
	return r.bindings().LoadBalancer(ctx, lb.Provider, lb.Name)
}

func (r *Runner) authorizerClient(ctx context.Context, t config.EnrollmentTarget) (nfs.Authorizer, error) {
	return r.bindings().Authorizer(ctx, t.Provider, t.Type)
}
