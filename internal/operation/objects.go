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

type (
	ingresses   struct{ r *Runner }
	enrollments struct{ r *Runner }
)

var (
	_ controller.Controller = ingresses{}
	_ controller.Controller = enrollments{}
)

// stackFor returns the stack the object verbs read: the stored one when it
// has the object, else the stack files (read without providers).
func (r *Runner) stackFor(ctx context.Context, has func(*config.Stack) bool) (*config.Stack, *state.Document, error) {
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	if doc.Stack != nil && has(doc.Stack) {
		return doc.Stack, doc, nil
	}
	st, diags := config.Load(r.opts.WorkDir, r.opts.ExtraFiles...)
	if diags.HasErrors() || st == nil || !has(st) {
		return nil, doc, nil
	}
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

// Describe asks the ingress's load balancers for their routes and backends.
// Object.State is a list of ingress.View.
func (c ingresses) Describe(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if meta == nil {
		return nil, fmt.Errorf("ingress describe: name the ingress")
	}
	name := meta.Name
	st, doc, err := c.r.stackFor(ctx, func(s *config.Stack) bool { return s.Ingress(name) != nil })
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("ingress %q is declared neither in the applied stack nor in the stack files", name)
	}
	var views []ingress.View
	for _, d := range ingress.DesiredLBs(st.Ingress(name)) {
		lb := st.LoadBalancer(d.LoadBalancer)
		if lb == nil {
			return nil, fmt.Errorf("ingress %q: load balancer %q is not declared", name, d.LoadBalancer)
		}
		v := c.r.observeLB(ctx, lb)
		if v.Err != nil {
			return nil, fmt.Errorf("ingress %q: load balancer %q: %w", name, lb.Name, v.Err)
		}
		slices.SortFunc(v.Routes, func(a, b loadbalancer.Route) int { return a.LoadBalancerPort - b.LoadBalancerPort })
		slices.SortFunc(v.Backends, func(a, b loadbalancer.Backend) int { return cmp.Compare(a.ID, b.ID) })
		views = append(views, ingress.ViewOf(lb.Name, v.Routes, v.Backends))
	}
	state, _ := json.Marshal(views)
	spec, _ := ingressSpec(st.Ingress(name))
	return []controller.Object{{Spec: spec, Freed: freed(doc.Ingresses, name), State: state}}, nil
}

func ingressSpec(in *config.Ingress) (controller.Spec, error) {
	props, err := json.Marshal(in)
	return controller.Spec{Kind: controller.KindIngress, Metadata: controller.Metadata{Name: in.Name}, Properties: props}, err
}

func freed(m map[string]*state.ControllerStatus, name string) bool {
	return m[name] != nil && m[name].Freed
}

// storedObject checks that the state's stack has an ingress or enrollment.
func storedObject(doc *state.Document, kind, name string) error {
	has := false
	if doc.Stack != nil {
		has = kind == controller.KindIngress && doc.Stack.Ingress(name) != nil ||
			kind == controller.KindEnrollment && doc.Stack.Enrollment(name) != nil
	}
	if !has {
		return fmt.Errorf("%s %q is not in the state (apply the stack first)", kind, name)
	}
	return nil
}

// Free stops syncing an ingress and touches nothing; a later apply resumes it.
func (c ingresses) Free(ctx context.Context, meta *controller.Metadata) ([]controller.Object, *controller.Result, error) {
	if meta == nil {
		return nil, nil, fmt.Errorf("ingress free: name the ingress")
	}
	res, err := c.r.free(ctx, "ingress free", controller.KindIngress, meta.Name, func(doc *state.Document) error {
		return storedObject(doc, controller.KindIngress, meta.Name)
	})
	if err != nil {
		return nil, res, err // no object claims a free that failed
	}
	return []controller.Object{{Spec: controller.Spec{Kind: controller.KindIngress, Metadata: *meta}, Freed: true}}, res, nil
}

// Destroy unpublishes the routes and deregisters the backends of an
// ingress's load balancers (what other ingresses' rules want there stays)
// and removes it from the state; a later apply of a stack that still
// declares it publishes it again.
func (c ingresses) Destroy(ctx context.Context, meta *controller.Metadata) (*controller.Result, error) {
	if meta == nil {
		return nil, fmt.Errorf("ingress destroy: name the ingress")
	}
	_, res, err := c.r.act(ctx, "ingress destroy", false, func(doc *state.Document) (verb, error) {
		return c.destroyVerb(doc, meta.Name)
	})
	return res, err
}

func (c ingresses) destroyVerb(doc *state.Document, name string) (verb, error) {
	if err := storedObject(doc, controller.KindIngress, name); err != nil {
		return verb{}, err
	}
	out := *doc.Stack
	out.Ingresses = slices.DeleteFunc(slices.Clone(out.Ingresses), func(in *config.Ingress) bool { return in.Name == name })
	// Asking for the destroy of a freed ingress is the approval.
	return verb{desired: &out, scope: plan.Scope{Ingresses: []string{name}, Resume: []string{plan.Address(plan.KindIngress, name)}}}, nil
}

// Plan is what Commit would do.
func (c ingresses) Plan(ctx context.Context, op controller.Operation, spec controller.Spec) (*plan.Plan, error) {
	p, _, err := c.r.act(ctx, "ingress plan", true, c.commitVerb(op, spec))
	return p, err
}

// Commit syncs the ingress to spec (stored as its configuration), or
// destroys it.
func (c ingresses) Commit(ctx context.Context, op controller.Operation, spec controller.Spec) (*controller.Result, error) {
	_, res, err := c.r.act(ctx, "ingress commit", false, c.commitVerb(op, spec))
	return res, err
}

func (c ingresses) commitVerb(op controller.Operation, spec controller.Spec) func(*state.Document) (verb, error) {
	return func(doc *state.Document) (verb, error) {
		name := spec.Metadata.Name
		if op == controller.Destroy {
			return c.destroyVerb(doc, name)
		}
		var in config.Ingress
		if err := json.Unmarshal(spec.Properties, &in); err != nil {
			return verb{}, fmt.Errorf("ingress %q: decode spec: %w", name, err)
		}
		if doc.Stack == nil {
			return verb{}, fmt.Errorf("ingress %q: no stack is stored: apply one first", name)
		}
		out := *doc.Stack
		out.Ingresses = slices.Clone(out.Ingresses)
		if i := slices.IndexFunc(out.Ingresses, func(x *config.Ingress) bool { return x.Name == name }); i >= 0 {
			out.Ingresses[i] = &in
		} else {
			out.Ingresses = append(out.Ingresses, &in)
		}
		return verb{desired: &out, scope: plan.Scope{Ingresses: []string{name}, Resume: []string{plan.Address(plan.KindIngress, name)}}}, nil
	}
}

// Spec returns the specs of the stored ingresses.
func (c ingresses) Spec(ctx context.Context) ([]controller.Spec, error) {
	doc, err := c.r.store.Read(ctx)
	if err != nil || doc.Stack == nil {
		return nil, err
	}
	var out []controller.Spec
	for _, in := range doc.Stack.Ingresses {
		s, err := ingressSpec(in)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Describe asks an enrollment's target for its authorizations. Object.State
// is an enrollment.View.
func (c enrollments) Describe(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if meta == nil {
		return nil, fmt.Errorf("enrollment describe: name the enrollment")
	}
	name := meta.Name
	st, doc, err := c.r.stackFor(ctx, func(s *config.Stack) bool { return s.Enrollment(name) != nil })
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("enrollment %q is declared neither in the applied stack nor in the stack files", name)
	}
	e := st.Enrollment(name)
	v := c.r.observeTarget(ctx, e.Target)
	if v.Err != nil {
		return nil, fmt.Errorf("enrollment %q: %w", name, v.Err)
	}
	var ours []nfs.Authorization
	for _, a := range v.Authorizations {
		if enrollment.Ours(name, a) {
			ours = append(ours, a)
		}
	}
	slices.SortFunc(ours, func(a, b nfs.Authorization) int {
		return cmp.Or(cmp.Compare(enrollment.SourceOf(a), enrollment.SourceOf(b)), cmp.Compare(a.ID, b.ID))
	})
	state, _ := json.Marshal(enrollment.ViewOf(name, ours))
	props, _ := json.Marshal(e)
	spec := controller.Spec{Kind: controller.KindEnrollment, Metadata: controller.Metadata{Name: name}, Properties: props}
	return []controller.Object{{Spec: spec, Freed: freed(doc.Enrollments, name), State: state}}, nil
}

// Free stops syncing an enrollment. It touches nothing, unless the
// enrollment has destroy_on_free: then its authorizations are revoked. A
// later apply resumes it.
func (c enrollments) Free(ctx context.Context, meta *controller.Metadata) ([]controller.Object, *controller.Result, error) {
	if meta == nil {
		return nil, nil, fmt.Errorf("enrollment free: name the enrollment")
	}
	res, err := c.r.free(ctx, "enrollment free", controller.KindEnrollment, meta.Name, func(doc *state.Document) error {
		return storedObject(doc, controller.KindEnrollment, meta.Name)
	})
	if err != nil {
		return nil, res, err // no object claims a free that failed
	}
	return []controller.Object{{Spec: controller.Spec{Kind: controller.KindEnrollment, Metadata: *meta}, Freed: true}}, res, nil
}

// Destroy revokes every authorization of an enrollment and removes it from
// the state (a later apply of a stack that still declares it authorizes the
// members again).
func (c enrollments) Destroy(ctx context.Context, meta *controller.Metadata) (*controller.Result, error) {
	if meta == nil {
		return nil, fmt.Errorf("enrollment destroy: name the enrollment")
	}
	_, res, err := c.r.act(ctx, "enrollment destroy", false, func(doc *state.Document) (verb, error) {
		return c.destroyVerb(doc, meta.Name)
	})
	return res, err
}

func (c enrollments) destroyVerb(doc *state.Document, name string) (verb, error) {
	if err := storedObject(doc, controller.KindEnrollment, name); err != nil {
		return verb{}, err
	}
	out := *doc.Stack
	out.Enrollments = slices.DeleteFunc(slices.Clone(out.Enrollments), func(e *config.Enrollment) bool { return e.Name == name })
	return verb{desired: &out, scope: plan.Scope{Enrollments: []string{name}, Resume: []string{plan.Address(plan.KindEnrollment, name)}}}, nil
}

// Plan is what Commit would do.
func (c enrollments) Plan(ctx context.Context, op controller.Operation, spec controller.Spec) (*plan.Plan, error) {
	p, _, err := c.r.act(ctx, "enrollment plan", true, c.commitVerb(op, spec))
	return p, err
}

// Commit syncs the enrollment to spec (stored as its configuration), or
// destroys it.
func (c enrollments) Commit(ctx context.Context, op controller.Operation, spec controller.Spec) (*controller.Result, error) {
	_, res, err := c.r.act(ctx, "enrollment commit", false, c.commitVerb(op, spec))
	return res, err
}

func (c enrollments) commitVerb(op controller.Operation, spec controller.Spec) func(*state.Document) (verb, error) {
	return func(doc *state.Document) (verb, error) {
		name := spec.Metadata.Name
		if op == controller.Destroy {
			return c.destroyVerb(doc, name)
		}
		var e config.Enrollment
		if err := json.Unmarshal(spec.Properties, &e); err != nil {
			return verb{}, fmt.Errorf("enrollment %q: decode spec: %w", name, err)
		}
		if doc.Stack == nil {
			return verb{}, fmt.Errorf("enrollment %q: no stack is stored: apply one first", name)
		}
		out := *doc.Stack
		out.Enrollments = slices.Clone(out.Enrollments)
		if i := slices.IndexFunc(out.Enrollments, func(x *config.Enrollment) bool { return x.Name == name }); i >= 0 {
			out.Enrollments[i] = &e
		} else {
			out.Enrollments = append(out.Enrollments, &e)
		}
		return verb{desired: &out, scope: plan.Scope{Enrollments: []string{name}, Resume: []string{plan.Address(plan.KindEnrollment, name)}}}, nil
	}
}

// Spec returns the specs of the stored enrollments.
func (c enrollments) Spec(ctx context.Context) ([]controller.Spec, error) {
	doc, err := c.r.store.Read(ctx)
	if err != nil || doc.Stack == nil {
		return nil, err
	}
	var out []controller.Spec
	for _, e := range doc.Stack.Enrollments {
		props, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		out = append(out, controller.Spec{Kind: controller.KindEnrollment, Metadata: controller.Metadata{Name: e.Name}, Properties: props})
	}
	return out, nil
}
