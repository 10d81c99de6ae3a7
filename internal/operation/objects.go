package operation

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// The controllers of ingresses and enrollments, and the verbs of load
// balancers. Describe asks the providers; the verbs that act plan and
// execute, as groups' do.

// followers is the controller of one kind of follower (ingresses or
// enrollments): the verbs are the same for both; what differs is where
// the blocks are in a stack (has, without, with, specOf) and what
// Describe asks.
type followers struct {
	r    *Runner
	kind string
}

var _ controller.Controller = followers{}

// stackFor returns the stack the object verbs read: the stored one when it
// has the object, else the stack files (read without providers).
func (r *Runner) stackFor(ctx context.Context, has func(*config.Stack) bool) (*config.Stack, *state.Document, error) {
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	if doc.Stack != nil && has(doc.Stack) {
		r.useProviders(doc.Stack)
		return doc.Stack, doc, nil
	}
	st, diags := config.LoadWith(r.opts.StackDir, r.opts.Inputs, r.opts.ExtraFiles...)
	if diags.HasErrors() || st == nil || !has(st) {
		return nil, doc, nil
	}
	r.useStackFiles(st)
	return st, doc, nil
}

func (r *Runner) lbBlock(ctx context.Context, name string) (*config.LoadBalancer, error) {
	st, _, err := r.stackFor(ctx, func(s *config.Stack) bool { return s.LoadBalancer(name) != nil })
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("load balancer %q is declared neither in the applied stack nor in the stack files", name)
	}
	return st.LoadBalancer(name), nil
}

// LoadBalancerRoutes asks a load balancer's provider for its routes.
func (r *Runner) LoadBalancerRoutes(ctx context.Context, name string) ([]loadbalancer.Route, error) {
	lb, err := r.lbBlock(ctx, name)
	if err != nil {
		return nil, err
	}
	l4, err := r.loadBalancerClient(ctx, lb)
	if err != nil {
		return nil, err
	}
	routes, err := l4.Routes(ctx)
	if err != nil {
		return nil, fmt.Errorf("load balancer %q: list routes: %w", name, err)
	}
	slices.SortFunc(routes, func(a, b loadbalancer.Route) int { return a.LoadBalancerPort - b.LoadBalancerPort })
	return routes, nil
}

// LoadBalancerBackends asks a load balancer's provider for its backends.
func (r *Runner) LoadBalancerBackends(ctx context.Context, name string) ([]loadbalancer.Backend, error) {
	lb, err := r.lbBlock(ctx, name)
	if err != nil {
		return nil, err
	}
	l4, err := r.loadBalancerClient(ctx, lb)
	if err != nil {
		return nil, err
	}
	bs, err := l4.Backends(ctx)
	if err != nil {
		return nil, fmt.Errorf("load balancer %q: list backends: %w", name, err)
	}
	slices.SortFunc(bs, func(a, b loadbalancer.Backend) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return bs, nil
}

// has reports whether st has the follower named.
func (c followers) has(st *config.Stack, name string) bool {
	if c.kind == controller.KindIngress {
		return st.Ingress(name) != nil
	}
	return st.Enrollment(name) != nil
}

func (c followers) without(st *config.Stack, name string) *config.Stack {
	out := *st
	if c.kind == controller.KindIngress {
		out.Ingresses = slices.DeleteFunc(slices.Clone(out.Ingresses), func(in *config.Ingress) bool { return in.Name == name })
	} else {
		out.Enrollments = slices.DeleteFunc(slices.Clone(out.Enrollments), func(e *config.Enrollment) bool { return e.Name == name })
	}
	return &out
}

// with is st with the block of spec in place of (or beside) name's.
func (c followers) with(st *config.Stack, name string, props json.RawMessage) (*config.Stack, error) {
	out := *st
	if c.kind == controller.KindIngress {
		var in config.Ingress
		if err := json.Unmarshal(props, &in); err != nil {
			return nil, fmt.Errorf("ingress %q: decode spec: %w", name, err)
		}
		out.Ingresses = replaceNamed(out.Ingresses, &in, func(x *config.Ingress) bool { return x.Name == name })
		return &out, nil
	}
	var e config.Enrollment
	if err := json.Unmarshal(props, &e); err != nil {
		return nil, fmt.Errorf("enrollment %q: decode spec: %w", name, err)
	}
	out.Enrollments = replaceNamed(out.Enrollments, &e, func(x *config.Enrollment) bool { return x.Name == name })
	return &out, nil
}

// replaceNamed is a copy of list with v in place of the element that is,
// or v appended.
func replaceNamed[T any](list []T, v T, is func(T) bool) []T {
	out := slices.Clone(list)
	if i := slices.IndexFunc(out, is); i >= 0 {
		out[i] = v
		return out
	}
	return append(out, v)
}

func (c followers) specOf(st *config.Stack, name string) controller.Spec {
	var block any = st.Enrollment(name)
	if c.kind == controller.KindIngress {
		block = st.Ingress(name)
	}
	props, _ := json.Marshal(block) // a stored block always encodes
	return controller.Spec{Kind: c.kind, Metadata: controller.Metadata{Name: name}, Properties: props}
}

func (c followers) records(doc *state.Document) map[string]*state.ControllerStatus {
	if c.kind == controller.KindIngress {
		return doc.Ingresses
	}
	return doc.Enrollments
}

// scope is the plan's scope of the follower named, resumed when freed:
// asking for a destroy or a commit of it is the approval.
func (c followers) scope(name string) plan.Scope {
	s := plan.Scope{Resume: []string{plan.Address(c.kind, name)}}
	if c.kind == controller.KindIngress {
		s.Ingresses = []string{name}
	} else {
		s.Enrollments = []string{name}
	}
	return s
}

// Describe observes the follower: an ingress's load balancers (Object.State
// is a list of ingress.View) or an enrollment's authorizations (an
// enrollment.View).
func (c followers) Describe(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if meta == nil {
		return nil, fmt.Errorf("%s describe: name the %s", c.kind, c.kind)
	}
	name := meta.Name
	st, doc, err := c.r.stackFor(ctx, func(s *config.Stack) bool { return c.has(s, name) })
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("%s %q is declared neither in the applied stack nor in the stack files", c.kind, name)
	}
	var view any
	if c.kind == controller.KindIngress {
		view, err = c.r.ingressView(ctx, st, name)
	} else {
		view, err = c.r.enrollmentView(ctx, st.Enrollment(name))
	}
	if err != nil {
		return nil, err
	}
	state, _ := json.Marshal(view)
	return []controller.Object{{Spec: c.specOf(st, name), Freed: freed(c.records(doc), name), State: state}}, nil
}

func (r *Runner) ingressView(ctx context.Context, st *config.Stack, name string) ([]ingress.View, error) {
	var views []ingress.View
	for _, d := range ingress.DesiredLBs(st.Ingress(name)) {
		lb := st.LoadBalancer(d.LoadBalancer)
		if lb == nil {
			return nil, fmt.Errorf("ingress %q: load balancer %q is not declared", name, d.LoadBalancer)
		}
		v := r.observeLB(ctx, lb)
		if v.Err != nil {
			return nil, fmt.Errorf("ingress %q: load balancer %q: %w", name, lb.Name, v.Err)
		}
		slices.SortFunc(v.Routes, func(a, b loadbalancer.Route) int { return a.LoadBalancerPort - b.LoadBalancerPort })
		slices.SortFunc(v.Backends, func(a, b loadbalancer.Backend) int { return cmp.Compare(a.ID, b.ID) })
		views = append(views, ingress.ViewOf(lb.Name, v.Routes, v.Backends))
	}
	return views, nil
}

func (r *Runner) enrollmentView(ctx context.Context, e *config.Enrollment) (enrollment.View, error) {
	v := r.observeTarget(ctx, e.Target)
	if v.Err != nil {
		return enrollment.View{}, fmt.Errorf("enrollment %q: %w", e.Name, v.Err)
	}
	var ours []nfs.Authorization
	for _, a := range v.Authorizations {
		if enrollment.Ours(e.Name, a) {
			ours = append(ours, a)
		}
	}
	slices.SortFunc(ours, func(a, b nfs.Authorization) int {
		return cmp.Or(cmp.Compare(enrollment.SourceOf(a), enrollment.SourceOf(b)), cmp.Compare(a.ID, b.ID))
	})
	return enrollment.ViewOf(e.Name, ours), nil
}

func freed(m map[string]*state.ControllerStatus, name string) bool {
	return m[name] != nil && m[name].Freed
}

// stored checks that the state's stack has the follower named.
func (c followers) stored(doc *state.Document, name string) error {
	if doc.Stack == nil || !c.has(doc.Stack, name) {
		return fmt.Errorf("%s %q is not in the state (apply the stack first)", c.kind, name)
	}
	return nil
}

// Free stops syncing the follower and touches nothing, unless it is an
// enrollment with destroy_on_free: then its authorizations are revoked. A
// later apply resumes it.
func (c followers) Free(ctx context.Context, meta *controller.Metadata) ([]controller.Object, *controller.Result, error) {
	if meta == nil {
		return nil, nil, fmt.Errorf("%s free: name the %s", c.kind, c.kind)
	}
	res, err := c.r.free(ctx, c.kind+" free", c.kind, meta.Name, func(doc *state.Document) error {
		return c.stored(doc, meta.Name)
	})
	if err != nil {
		return nil, res, err // no object claims a free that failed
	}
	return []controller.Object{{Spec: controller.Spec{Kind: c.kind, Metadata: *meta}, Freed: true}}, res, nil
}

// Destroy takes down what the follower made (an ingress's routes and
// backends, what other ingresses' rules want there staying; an
// enrollment's authorizations) and removes it from the state; a later
// apply of a stack that still declares it makes them again.
func (c followers) Destroy(ctx context.Context, meta *controller.Metadata) (*controller.Result, error) {
	if meta == nil {
		return nil, fmt.Errorf("%s destroy: name the %s", c.kind, c.kind)
	}
	_, res, err := c.r.act(ctx, c.kind+" destroy", false, func(doc *state.Document) (verb, error) {
		return c.destroyVerb(doc, meta.Name)
	})
	return res, err
}

func (c followers) destroyVerb(doc *state.Document, name string) (verb, error) {
	if err := c.stored(doc, name); err != nil {
		return verb{}, err
	}
	return verb{desired: c.without(doc.Stack, name), scope: c.scope(name)}, nil
}

// Plan is what Commit would do.
func (c followers) Plan(ctx context.Context, op controller.Operation, spec controller.Spec) (*plan.Plan, error) {
	p, _, err := c.r.act(ctx, c.kind+" plan", true, c.commitVerb(op, spec))
	return p, err
}

// Commit syncs the follower to spec (stored as its configuration), or
// destroys it.
func (c followers) Commit(ctx context.Context, op controller.Operation, spec controller.Spec) (*controller.Result, error) {
	_, res, err := c.r.act(ctx, c.kind+" commit", false, c.commitVerb(op, spec))
	return res, err
}

func (c followers) commitVerb(op controller.Operation, spec controller.Spec) func(*state.Document) (verb, error) {
	return func(doc *state.Document) (verb, error) {
		name := spec.Metadata.Name
		if op == controller.Destroy {
			return c.destroyVerb(doc, name)
		}
		if doc.Stack == nil {
			return verb{}, fmt.Errorf("%s %q: no stack is stored: apply one first", c.kind, name)
		}
		desired, err := c.with(doc.Stack, name, spec.Properties)
		if err != nil {
			return verb{}, err
		}
		return verb{desired: desired, scope: c.scope(name)}, nil
	}
}

// Spec returns the specs of the stored followers of this kind.
func (c followers) Spec(ctx context.Context) ([]controller.Spec, error) {
	doc, err := c.r.store.Read(ctx)
	if err != nil || doc.Stack == nil {
		return nil, err
	}
	var out []controller.Spec
	if c.kind == controller.KindIngress {
		for _, in := range doc.Stack.Ingresses {
			out = append(out, c.specOf(doc.Stack, in.Name))
		}
	} else {
		for _, e := range doc.Stack.Enrollments {
			out = append(out, c.specOf(doc.Stack, e.Name))
		}
	}
	return out, nil
}
