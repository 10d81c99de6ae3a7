package plan

import (
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/state"
)

// Needs is what Compute of a desired stack and scope reads of the world,
// so the caller observes that and nothing more.
type Needs struct {
	// Groups to list, by name, with the configuration to list them by (nil
	// when the state names a group without one: it cannot be listed).
	Groups map[string]GroupNeed
	// LoadBalancers to list (routes and backends).
	LoadBalancers []*config.LoadBalancer
	// Targets are the enrollment targets to list.
	Targets []config.EnrollmentTarget
}

// GroupNeed is one group to list.
type GroupNeed struct {
	// Stack is the stack name its members are tagged with.
	Stack string
	// Config is its configuration: the desired stack's, else the stored one.
	Config *config.Group
	// Planned is set when the plan acts on the group (else only its
	// followers read its members).
	Planned bool
	// Desired is set when the group is in the desired stack.
	Desired bool
	// Properties is set when an enrollment renders member.properties.
	Properties bool
}

// NeedsOf is what Compute(desired, doc, world, scope) reads.
func NeedsOf(desired *config.Stack, doc *state.Document, scope Scope) Needs {
	if doc == nil {
		doc = &state.Document{}
	}
	doc, _ = unfreed(doc, scope.Resume)
	n := Needs{Groups: map[string]GroupNeed{}}
	addGroup := func(name string, planned bool) {
		need := n.Groups[name]
		if g := desired.Group(name); g != nil {
			need.Stack, need.Config, need.Desired = desired.Name, g, true
		} else if doc.Stack != nil && doc.Stack.Group(name) != nil {
			need.Stack, need.Config = doc.Stack.Name, doc.Stack.Group(name)
		}
		need.Planned = need.Planned || planned
		n.Groups[name] = need
	}
	for _, g := range desired.Groups {
		if scope.plansGroup(doc, g.Name) {
			addGroup(g.Name, true)
		}
	}
	if scope.All() || scope.Groups != nil {
		if doc.Stack != nil {
			for _, g := range doc.Stack.Groups {
				if desired.Group(g.Name) == nil && scope.hasGroup(g.Name) {
					addGroup(g.Name, true)
				}
			}
		}
		for name := range doc.Groups {
			if _, ok := n.Groups[name]; !ok && desired.Group(name) == nil && scope.hasGroup(name) {
				addGroup(name, true)
			}
		}
	}
	n.followers(desired, doc, scope, addGroup)
	return n
}

// followers adds what the ingresses and enrollments of the plan read.
func (n *Needs) followers(desired *config.Stack, doc *state.Document, scope Scope, addGroup func(string, bool)) {
	scoped := scopedGroups(scope, doc)
	stored := doc.Stack
	if scope.Sync {
		stored = nil // a sync plans no teardown
	}
	n.ingresses(desired, doc, stored, scope, scoped, addGroup)
	n.enrollments(desired, doc, stored, scope, scoped, addGroup)
}

// ingresses adds the load balancers the plan's ingresses act on (their
// teardowns' too, unless stored is nil) and the groups they follow.
func (n *Needs) ingresses(desired *config.Stack, doc *state.Document, stored *config.Stack, scope Scope,
	scoped map[string]bool, addGroup func(string, bool)) {
	lbs := map[string]bool{}
	addLB := func(lb *config.LoadBalancer) {
		if lb != nil && !lbs[LBKey(lb.Provider, lb.Name)] {
			lbs[LBKey(lb.Provider, lb.Name)] = true
			n.LoadBalancers = append(n.LoadBalancers, lb)
		}
	}
	for _, in := range desired.Ingresses {
		full := scope.hasIngress(in.Name)
		if !full && !followsAny(ingressGroups(in), scoped) {
			continue
		}
		for _, r := range in.Rules {
			if !full && !slices.ContainsFunc(r.Groups, func(g string) bool { return scoped[g] }) {
				continue
			}
			addLB(desired.LoadBalancer(r.LoadBalancer))
			for _, g := range r.Groups {
				if full || scoped[g] {
					addGroup(g, false)
				}
			}
		}
		if full && stored != nil && stored.Ingress(in.Name) != nil {
			n.released(stored, desired, in.Name, addLB, addGroup)
		}
		if full && !scope.Sync {
			n.pendingLBs(doc.Ingresses[in.Name], desired, addLB, addGroup)
		}
	}
	if stored != nil {
		for _, in := range stored.Ingresses {
			if desired.Ingress(in.Name) == nil && scope.hasIngress(in.Name) {
				n.released(stored, desired, in.Name, addLB, addGroup)
			}
		}
	}
	for name, rec := range doc.Ingresses {
		if desired.Ingress(name) == nil && scope.hasIngress(name) && !scope.Sync {
			n.pendingLBs(rec, desired, addLB, addGroup)
		}
	}
}

// enrollments adds the targets the plan's enrollments act on (their old
// and pending targets too, unless stored is nil) and their source groups.
func (n *Needs) enrollments(desired *config.Stack, doc *state.Document, stored *config.Stack, scope Scope,
	scoped map[string]bool, addGroup func(string, bool)) {
	targets := map[string]bool{}
	addTarget := func(t config.EnrollmentTarget) {
		if k := TargetKey(t.Provider, t.Type); !targets[k] {
			targets[k] = true
			n.Targets = append(n.Targets, t)
		}
	}
	for _, e := range desired.Enrollments {
		full := scope.hasEnrollment(e.Name)
		if !full && !scoped[e.Source] {
			continue
		}
		addTarget(e.Target)
		addGroup(e.Source, false)
		if enrollment.NeedsProperties(&e.Target) {
			need := n.Groups[e.Source]
			need.Properties = true
			n.Groups[e.Source] = need
		}
		if !full || scope.Sync {
			continue
		}
		if stored != nil && stored.Enrollment(e.Name) != nil {
			addTarget(stored.Enrollment(e.Name).Target)
		}
		n.pendingTargets(doc.Enrollments[e.Name], addTarget)
	}
	if stored != nil {
		for _, e := range stored.Enrollments {
			if desired.Enrollment(e.Name) == nil && scope.hasEnrollment(e.Name) {
				addTarget(e.Target)
			}
		}
	}
	for name, rec := range doc.Enrollments {
		if desired.Enrollment(name) == nil && scope.hasEnrollment(name) && !scope.Sync {
			n.pendingTargets(rec, addTarget)
		}
	}
}

// released adds the load balancers ingress name lets go of, at the
// providers the stored stack names, and the groups what remains wants.
func (n *Needs) released(stored, desired *config.Stack, name string, addLB func(*config.LoadBalancer), addGroup func(string, bool)) {
	lbs, remain := releases(stored, desired, name)
	for _, lb := range lbs {
		addLB(stored.LoadBalancer(lb))
		for _, g := range remain[lb].Groups {
			addGroup(g, false)
		}
	}
}

func (n *Needs) pendingLBs(rec *state.ControllerStatus, desired *config.Stack, addLB func(*config.LoadBalancer), addGroup func(string, bool)) {
	if rec == nil {
		return
	}
	for _, part := range rec.Pending {
		for _, lb := range part.LoadBalancers {
			addLB(lb)
			if d := desired.LoadBalancer(lb.Name); d != nil && d.Provider == lb.Provider {
				for _, rule := range rulesNaming(desired, lb.Name) {
					for _, g := range rule.Groups {
						addGroup(g, false)
					}
				}
			}
		}
	}
}

func (n *Needs) pendingTargets(rec *state.ControllerStatus, addTarget func(config.EnrollmentTarget)) {
	if rec == nil {
		return
	}
	for _, part := range rec.Pending {
		for _, e := range part.Enrollments {
			addTarget(e.Target)
		}
	}
}

func rulesNaming(st *config.Stack, lb string) []config.Rule {
	var out []config.Rule
	for _, in := range st.Ingresses {
		for _, r := range in.Rules {
			if r.LoadBalancer == lb {
				out = append(out, r)
			}
		}
	}
	return out
}
