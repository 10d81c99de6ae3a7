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
		s := at.step(StepUnpublish)
		s.Route = ptr(r)
		routes = append(routes, b.add(s))
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

// backendSteps makes the backends of at the live members of groups: it
// registers the running members that are not (and re-registers those whose
// address changed), registers each member the plan provisions once it
// runs, and deregisters what is no member (full) or what is a member of
// groups no longer (otherwise). A member that leaves is deregistered before
// it is drained, and after the member replacing it is registered.
func (b *builder) backendSteps(at lbAt, groups []string, world World, observed []loadbalancer.Backend, full bool) {
	registered := make(map[instance.ID]loadbalancer.Backend, len(observed))
	for _, r := range observed {
		if _, dup := registered[r.ID]; !dup {
			registered[r.ID] = r
		}
	}
	wanted := map[instance.ID]bool{}
	ours := map[instance.ID]string{} // IDs known as members of groups, by group
	for _, g := range groups {
		for _, m := range world.Members[g] {
			if m.ID == "" {
				continue
			}
			ours[m.ID] = g
			if m.State == instance.StateTerminating || b.leavingMember(g, m.ID) != nil {
				continue
			}
			wanted[m.ID] = true
			if m.State != instance.StateRunning {
				continue // a pending member is registered once it runs
			}
			b.registerMember(at, g, m, registered)
		}
		for id := range b.leaving[g] {
			ours[id] = g
		}
		for _, a := range b.arrivals[g] {
			if a.provision == 0 {
				a.ready = append(a.ready, b.registered[backendKey{lb: at.key, id: a.id}])
				continue
			}
			s := at.step(StepRegister)
			s.Group, s.Made, s.After = g, a.provision, []StepID{a.await}
			id := b.add(s)
			b.registered[backendKey{lb: at.key, made: a.provision}] = id
			a.ready = append(a.ready, id)
		}
	}
	for _, r := range observed {
		if wanted[r.ID] {
			continue
		}
		g, member := ours[r.ID]
		if !full && !member {
			continue // another group's backend: not this plan's to judge
		}
		dereg := b.deregister(at, r)
		if l := b.leavingMember(g, r.ID); member && l != nil {
			b.after(l.drain, dereg)
			if l.by != nil && !l.pet {
				// Make before break. (A pet's replacement comes after
				// it is destroyed: it cannot be waited for.)
				b.after(dereg, b.registeredFor(at.key, l.by))
			}
		}
	}
}

// registerMember registers a running member that is not registered, or
// re-registers one whose address changed (deregistered first: the SPI
// keys backends by ID).
func (b *builder) registerMember(at lbAt, g string, m group.Member, registered map[instance.ID]loadbalancer.Backend) {
	want := loadbalancer.Backend{ID: m.ID, Address: m.Address}
	have, ok := registered[m.ID]
	if ok && have.Address == want.Address {
		return
	}
	key := backendKey{lb: at.key, id: m.ID}
	if _, done := b.registered[key]; done {
		return
	}
	s := at.step(StepRegister)
	s.Group, s.Instance, s.Backend = g, m.ID, &want
	if ok {
		s.After = []StepID{b.deregister(at, have)}
	}
	b.registered[key] = b.add(s)
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
		s := at.step(StepUnpublish)
		s.Route = ptr(r)
		steps = append(steps, b.add(s))
	}
	for _, r := range ch.Deregister {
		id := b.deregister(at, r)
		steps = append(steps, id)
		for g := range b.leaving {
			if l := b.leavingMember(g, r.ID); l != nil {
				b.after(l.drain, id)
			}
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
