package plan

import (
	"fmt"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// IngressChange is what a plan does for one ingress block. The work itself
// is in the plan's steps whose Object is the ingress.
type IngressChange struct {
	Ingress string `json:"ingress"`
	Action  Action `json:"action"`
	// Held names the load balancers whose backends the plan leaves as they
	// are: the membership of a group they route to is unknown.
	Held []string `json:"held,omitempty"`
	// Released names the load balancers the ingress as applied named and
	// the stack no longer does (or whose loadbalancer block moved to
	// another provider): what it published and registered there is taken
	// down, keeping what other rules naming them want.
	Released []string `json:"released,omitempty"`
	// Pending names the load balancers whose teardown an earlier apply
	// could not finish (the state records it): this plan finishes it.
	Pending []string `json:"pending,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// ingressOptions say how much of an ingress to plan.
type ingressOptions struct {
	// full plans routes and every backend; otherwise only the backends of
	// the members of groups (the planned groups).
	full   bool
	groups map[string]bool
	// checked are load balancers whose health check must be configured
	// even when no route changes (watch's first sync of each).
	checked map[string]bool
}

// ingressSteps plans ingress in (of stack st) on each load balancer it
// names. It returns an error text when a load balancer could not be
// listed; that load balancer gets no step.
func (b *builder) ingressSteps(st *config.Stack, in *config.Ingress, world World, o ingressOptions) (held []string, errText string) {
	object := Address(KindIngress, in.Name)
	for _, d := range ingress.DesiredLBs(in) {
		groups := d.Groups
		if !o.full {
			groups = slices.DeleteFunc(slices.Clone(groups), func(g string) bool { return !o.groups[g] })
			if len(groups) == 0 {
				continue // not this plan's load balancer
			}
		}
		lb := st.LoadBalancer(d.LoadBalancer)
		if lb == nil {
			errText = fmt.Sprintf("load balancer %q is not declared in the stack", d.LoadBalancer)
			continue
		}
		key := LBKey(lb.Provider, lb.Name)
		obs, ok := world.LoadBalancers[key]
		switch {
		case !ok:
			errText = fmt.Sprintf("load balancer %q was not observed", lb.Name)
			continue
		case obs.Err != nil:
			errText = fmt.Sprintf("load balancer %q: %v", lb.Name, obs.Err)
			continue
		}
		at := lbAt{object: object, provider: lb.Provider, name: lb.Name, key: key}
		if o.full {
			b.routeSteps(at, d, obs, o.checked[key])
		}
		if slices.ContainsFunc(groups, func(g string) bool { return world.Failed[g] != nil }) {
			held = append(held, lb.Name)
			continue
		}
		b.backendSteps(at, groups, world, obs.Backends, o.full)
	}
	return held, errText
}

// lbAt is one load balancer acted on for one object.
type lbAt struct {
	object, provider, name, key string
}

func (at lbAt) step(kind StepKind) Step {
	return Step{Kind: kind, Object: at.object, Provider: at.provider, LoadBalancer: at.name}
}

// routeSteps publishes, republishes and unpublishes what the routes need
// (ingress.Diff), then configures the health check once they are there.
func (b *builder) routeSteps(at lbAt, d ingress.DesiredLB, obs LoadBalancerView, check bool) {
	ch := ingress.Diff(d, obs.Routes, nil, nil, false)
	var routes []StepID
	for _, r := range ch.Unpublish {
		routes = append(routes, b.unpublish(at, r))
	}
	for _, r := range ch.Republish {
		s := at.step(StepRepublish)
		s.Route, s.OldRoute = ptr(r.New), ptr(r.Old)
		routes = append(routes, b.add(s))
	}
	for _, r := range ch.Publish {
		s := at.step(StepPublish)
		s.Route = ptr(r)
		routes = append(routes, b.add(s))
	}
	hc := ch.HealthCheck
	if hc == nil && check {
		hc = d.HealthCheck()
	}
	if hc != nil {
		s := at.step(StepHealthCheck)
		s.HealthCheck = hc
		s.After = routes
		b.add(s)
	}
}

// backendSteps makes the backends of at the members of groups as the plan
// leaves them: what ingress.Diff decides for the members that stay (the
// running ones registered at their addresses, a re-addressed one
// registered again, what is no member deregistered — in a plan that does
// not cover the load balancer in full, only what is known as a member of
// groups), each pending member registered once it runs, and each member
// the plan provisions once it runs (replacements: once healthy). A member
// that leaves is deregistered before it is drained, and after the member
// replacing it is registered.
func (b *builder) backendSteps(at lbAt, groups []string, world World, observed []loadbalancer.Backend, full bool) {
	staying := make(map[string][]group.Member, len(groups))
	n := 0
	for _, g := range groups {
		n += len(world.Members[g]) + len(b.leaving[g])
	}
	ours := make(map[instance.ID]string, n) // IDs known as members of groups, by group
	for _, g := range groups {
		for _, m := range world.Members[g] {
			ours[m.ID] = g
		}
		for id := range b.leaving[g] {
			ours[id] = g
		}
		staying[g] = b.staying(g, world.Members[g])
	}
	ch := ingress.Diff(ingress.DesiredLB{LoadBalancer: at.name, Groups: groups}, nil, observed, staying, true)
	for _, r := range ch.Register {
		b.register(at, ours[r.ID], r, 0)
	}
	for _, r := range ch.Readdress {
		b.register(at, ours[r.New.ID], r.New, b.deregister(at, r.Old))
	}
	registered := make(map[instance.ID]bool, len(observed))
	for _, r := range observed {
		registered[r.ID] = true
	}
	for _, g := range groups {
		for _, m := range staying[g] {
			if m.ID != "" && ingress.Keeps(m) && !ingress.Serves(m) && !registered[m.ID] {
				b.registerAwaited(at, g, m)
			}
		}
		for _, a := range b.arrivals[g] {
			b.registerArrival(at, g, a)
		}
	}
	for _, r := range ch.Deregister {
		g, member := ours[r.ID]
		if !full && !member {
			continue // another group's backend: not this plan's to judge
		}
		dereg := b.deregister(at, r)
		if l := b.leaverOf(g, r.ID); l != nil {
			b.breaking(l, dereg)
			if l.by != nil && !l.pet {
				// Make before break. (A pet's replacement comes after
				// it is destroyed: it cannot be waited for.)
				b.after(dereg, b.registeredFor(at.key, l.by))
			}
		}
	}
}

// register registers backend r (of a running member of group g) on at,
// once, after the step before (a deregistration of its old address).
func (b *builder) register(at lbAt, g string, r loadbalancer.Backend, before StepID) {
	key := backendKey{lb: at.key, id: r.ID}
	if _, done := b.registered[key]; done {
		return
	}
	s := at.step(StepRegister)
	s.Group, s.Instance, s.Backend = g, r.ID, ptr(r)
	if before != 0 {
		s.After = []StepID{before}
	}
	b.registered[key] = b.add(s)
}

// registerAwaited registers pending member m of group g once it runs, at
// the address it is listed with then.
func (b *builder) registerAwaited(at lbAt, g string, m group.Member) {
	key := backendKey{lb: at.key, id: m.ID}
	if _, done := b.registered[key]; done {
		return
	}
	await := b.awaitMember(g, m.ID)
	s := at.step(StepRegister)
	s.Group, s.Instance, s.Awaited, s.After = g, m.ID, await, []StepID{await}
	b.registered[key] = b.add(s)
}

// registerArrival registers the member arrival a brings, once it runs.
func (b *builder) registerArrival(at lbAt, g string, a *arrival) {
	if a.provision == 0 {
		a.ready = append(a.ready, b.registered[backendKey{lb: at.key, id: a.id}])
		return
	}
	s := at.step(StepRegister)
	s.Group, s.Made, s.Awaited, s.After = g, a.provision, a.await, []StepID{a.running()}
	id := b.add(s)
	b.registered[backendKey{lb: at.key, made: a.provision}] = id
	a.ready = append(a.ready, id)
}

// awaitMember is the await of pending member id of group g (made once):
// what registering it and authorizing it wait for.
func (b *builder) awaitMember(g string, id instance.ID) StepID {
	key := g + "\x00" + string(id)
	if s, ok := b.awaits[key]; ok {
		return s
	}
	s := b.add(Step{Kind: StepAwait, Object: Address(KindGroup, g), Provider: b.providers[g], Group: g, Instance: id})
	b.awaits[key] = s
	return s
}

// breaking records that step id takes away part of what leaving member l
// has (a backend, an authorization): l is drained only after it, and it
// waits for what l's break waits for (the batch before l's, in a roll).
func (b *builder) breaking(l *leave, id StepID) {
	b.after(l.drain, id)
	for _, gate := range l.gates {
		b.later(id, gate)
	}
}

// unpublish adds the unpublishing of route r from at, once: the ingress
// that names a load balancer now and the one that let go of it may both
// want a route there gone.
func (b *builder) unpublish(at lbAt, r loadbalancer.Route) StepID {
	key := routeKey{lb: at.key, port: r.LoadBalancerPort}
	if id, done := b.unpublished[key]; done {
		return id
	}
	s := at.step(StepUnpublish)
	s.Route = ptr(r)
	id := b.add(s)
	b.unpublished[key] = id
	return id
}

// deregister adds the deregistration of backend r from at, once.
func (b *builder) deregister(at lbAt, r loadbalancer.Backend) StepID {
	key := backendKey{lb: at.key, id: r.ID}
	if id, done := b.deregistered[key]; done {
		return id
	}
	s := at.step(StepDeregister)
	s.Instance, s.Backend = r.ID, ptr(r)
	id := b.add(s)
	b.deregistered[key] = id
	return id
}

// registeredFor is the step registering arrival a on the load balancer
// keyed lb (zero when none: it is registered already, or not routed there).
func (b *builder) registeredFor(lb string, a *arrival) StepID {
	if a.provision != 0 {
		return b.registered[backendKey{lb: lb, made: a.provision}]
	}
	return b.registered[backendKey{lb: lb, id: a.id}]
}

// teardownLB takes off load balancer lb (of stack from) what ingress name
// has there and remain does not want: its routes, and its backends that
// are no live members of remain's groups (ingress.Teardown). It returns the
// steps; a member leaving is drained only once it is deregistered.
func (b *builder) teardownLB(object string, lb *config.LoadBalancer, remain ingress.DesiredLB, world World) ([]StepID, error) {
	key := LBKey(lb.Provider, lb.Name)
	obs, ok := world.LoadBalancers[key]
	switch {
	case !ok:
		return nil, fmt.Errorf("load balancer %q was not observed", lb.Name)
	case obs.Err != nil:
		return nil, fmt.Errorf("load balancer %q: %w", lb.Name, obs.Err)
	}
	members := map[string][]group.Member{}
	known := true
	for _, g := range remain.Groups {
		if world.Failed[g] != nil {
			known = false
		}
		members[g] = b.staying(g, world.Members[g])
	}
	ch := ingress.Teardown(remain, obs.Routes, obs.Backends, members, known)
	at := lbAt{object: object, provider: lb.Provider, name: lb.Name, key: key}
	var steps []StepID
	for _, r := range ch.Unpublish {
		steps = append(steps, b.unpublish(at, r))
	}
	for _, r := range ch.Deregister {
		id := b.deregister(at, r)
		steps = append(steps, id)
		if l := b.leaverOf("", r.ID); l != nil {
			b.breaking(l, id)
		}
	}
	return steps, nil
}

// staying are the members of group g that the plan keeps.
func (b *builder) staying(g string, members []group.Member) []group.Member {
	if len(b.leaving[g]) == 0 {
		return members
	}
	return slices.DeleteFunc(slices.Clone(members), func(m group.Member) bool { return b.leavingMember(g, m.ID) != nil })
}

// releases are the load balancers ingress name, as applied in previous,
// lets go of in desired (all of them when it left desired), and for each
// what the rules of desired still naming it want kept there (nothing when
// its loadbalancer block moved to another provider: the stored load
// balancer is then another one).
func releases(previous, desired *config.Stack, name string) ([]string, map[string]ingress.DesiredLB) {
	stored := previous.Ingress(name)
	if stored == nil {
		return nil, nil
	}
	moved := func(lb string) bool {
		a, b := previous.LoadBalancer(lb), desired.LoadBalancer(lb)
		return a != nil && b != nil && a.Provider != b.Provider
	}
	lbs := ingress.Released(stored, desired.Ingress(name), moved)
	remain := make(map[string]ingress.DesiredLB, len(lbs))
	for _, lb := range lbs {
		if desired.LoadBalancer(lb) != nil && !moved(lb) {
			remain[lb] = ingress.Wanted(lb, desired.Ingresses)
		} else {
			remain[lb] = ingress.DesiredLB{LoadBalancer: lb}
		}
	}
	return lbs, remain
}

// IngressPart is what ingress name, as applied in st, has to do with load
// balancer lb: a stack holding the ingress with only the rules naming lb,
// and lb's block. It is how a teardown is recorded until it is done.
func IngressPart(st *config.Stack, name, lb string) *config.Stack {
	part := &config.Stack{Name: st.Name}
	if in := st.Ingress(name); in != nil {
		cp := *in
		cp.Rules = slices.DeleteFunc(slices.Clone(in.Rules), func(r config.Rule) bool { return r.LoadBalancer != lb })
		part.Ingresses = []*config.Ingress{&cp}
	}
	if l := st.LoadBalancer(lb); l != nil {
		part.LoadBalancers = []*config.LoadBalancer{l}
	}
	return part
}

func ptr[T any](v T) *T { return &v }
