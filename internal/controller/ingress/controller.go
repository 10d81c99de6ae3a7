package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// DefaultParallelism bounds how many load balancers one ingress acts on at once.
const DefaultParallelism = 10

// Membership lists the members of the named groups by group name. An error
// means the membership is unknown, and no backend is changed.
type Membership func(ctx context.Context, groups []string) (map[string][]group.Member, error)

// Options configure a Controller. Zero values take the defaults.
type Options struct {
	// Members serves the controller.Controller verbs that are given no
	// membership (Plan and Commit). Nil makes their membership unknown, so
	// they change routes only. Sync and Preview take the membership as
	// arguments instead, because a watch pass has just observed the groups.
	Members Membership
	// Parallelism bounds the load balancers acted on at once (DefaultParallelism).
	Parallelism int
	Logger      hclog.Logger
}

func (o Options) withDefaults() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// Controller keeps the load balancers of one ingress block in step with it,
// through the load balancer SPI. One pass (Sync) lists each load balancer's
// routes and backends once, decides with Diff and acts: all new and
// re-addressed backends in one RegisterBackends call, routes one call each,
// all removed backends in one DeregisterBackends call. Load balancers are
// handled in parallel.
//
// It implements controller.Controller for its one ingress; specs carry a
// config.Ingress as Properties. Acting methods (Sync, Teardown, Commit,
// Destroy) are serialised; the others are safe at any time.
type Controller struct {
	lbs  map[string]loadbalancer.L4
	opts Options

	// acting serialises the methods that change load balancers.
	acting sync.Mutex

	mu      sync.Mutex
	ingress *config.Ingress
	freed   bool
	// checks are the health checks this controller configured, by load
	// balancer: the SPI cannot read one back, so this is how a long-lived
	// controller avoids configuring it on every pass.
	checks map[string]loadbalancer.HealthCheck
}

var _ controller.Controller = (*Controller)(nil)

// New returns the controller of ingress in, acting on the load balancers in
// lbs (by loadbalancer block name), which must hold every one its rules name.
// in is copied.
func New(in *config.Ingress, lbs map[string]loadbalancer.L4, opts Options) (*Controller, error) {
	if in == nil {
		return nil, errors.New("ingress controller: nil ingress")
	}
	c := &Controller{lbs: lbs, opts: opts.withDefaults(), ingress: copyIngress(in), checks: map[string]loadbalancer.HealthCheck{}}
	if err := c.check(in); err != nil {
		return nil, err
	}
	return c, nil
}

// check verifies that every load balancer in names is served.
func (c *Controller) check(in *config.Ingress) error {
	for _, r := range in.Rules {
		if c.lbs[r.LoadBalancer] == nil {
			return fmt.Errorf("ingress %q: no load balancer %q to act on", in.Name, r.LoadBalancer)
		}
	}
	return nil
}

func copyIngress(in *config.Ingress) *config.Ingress {
	out := *in
	out.Rules = make([]config.Rule, len(in.Rules))
	for i, r := range in.Rules {
		r.Groups = slices.Clone(r.Groups)
		r.Routes = slices.Clone(r.Routes)
		out.Rules[i] = r
	}
	return &out
}

// Name is the ingress's name.
func (c *Controller) Name() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ingress.Name
}

// Ingress returns a copy of the ingress configuration the controller enforces.
func (c *Controller) Ingress() *config.Ingress {
	c.mu.Lock()
	defer c.mu.Unlock()
	return copyIngress(c.ingress)
}

// Groups are the groups whose members the ingress's load balancers route to,
// without duplicates: the membership Sync needs.
func (c *Controller) Groups() []string { return groupsOf(c.Ingress()) }

func groupsOf(in *config.Ingress) []string {
	var out []string
	for _, r := range in.Rules {
		for _, g := range r.Groups {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// Freed reports whether Free was called and no Commit of Enforce has resumed
// management since.
func (c *Controller) Freed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.freed
}

// Observed is one load balancer as its provider lists it.
type Observed struct {
	LoadBalancer string
	Routes       []loadbalancer.Route
	Backends     []loadbalancer.Backend
}

// Observe lists the routes and backends of every load balancer of the
// ingress (in the order the rules first name them).
func (c *Controller) Observe(ctx context.Context) ([]Observed, error) {
	in := c.Ingress()
	desired := DesiredLBs(in)
	out := make([]Observed, len(desired))
	errs := make([]error, len(desired))
	c.each(ctx, len(desired), func(i int) {
		out[i], errs[i] = c.observe(ctx, in.Name, desired[i].LoadBalancer)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, ctx.Err()
}

func (c *Controller) observe(ctx context.Context, ingress, name string) (Observed, error) {
	o := Observed{LoadBalancer: name}
	l4 := c.lbs[name]
	if l4 == nil {
		return o, fmt.Errorf("ingress %q: no load balancer %q to act on", ingress, name)
	}
	var err error
	if o.Routes, err = l4.Routes(ctx); err != nil {
		return o, fmt.Errorf("ingress %q: load balancer %q: list routes: %w", ingress, name, err)
	}
	if o.Backends, err = l4.Backends(ctx); err != nil {
		return o, fmt.Errorf("ingress %q: load balancer %q: list backends: %w", ingress, name, err)
	}
	return o, nil
}

// each runs do(0..n-1) on at most Parallelism goroutines and returns when
// every started call has returned. Once ctx is done no further call starts.
func (c *Controller) each(ctx context.Context, n int, do func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c.opts.Parallelism, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				do(i)
			}
		}()
	}
	wg.Wait()
}

// Preview returns what Sync would do now with this membership, changing
// nothing: one Changes per load balancer, including those with none. Like
// Plan it leaves out the health check that Sync configures on a
// controller's first pass (see the package doc).
func (c *Controller) Preview(ctx context.Context, members map[string][]group.Member, known bool) ([]Changes, error) {
	in := c.Ingress()
	return c.forEachLB(ctx, in.Name, DesiredLBs(in), func(d DesiredLB, o Observed) (Changes, error) {
		return Diff(d, o.Routes, o.Backends, members, known), nil
	})
}

// forEachLB observes each load balancer of desired and calls do with it,
// with bounded parallelism, and returns do's results in order (a load
// balancer that could not be observed, or was not reached before ctx ended,
// has no changes) and every error joined.
func (c *Controller) forEachLB(ctx context.Context, ingress string, desired []DesiredLB, do func(DesiredLB, Observed) (Changes, error)) ([]Changes, error) {
	out := make([]Changes, len(desired))
	errs := make([]error, len(desired))
	for i, d := range desired {
		out[i] = Changes{LoadBalancer: d.LoadBalancer}
	}
	c.each(ctx, len(desired), func(i int) {
		o, err := c.observe(ctx, ingress, desired[i].LoadBalancer)
		if err != nil {
			errs[i] = err
			return
		}
		out[i], errs[i] = do(desired[i], o)
	})
	err := errors.Join(errs...)
	if err == nil {
		err = ctx.Err()
	}
	return out, err
}

// Sync is one pass: for each load balancer of the ingress it observes, diffs
// against the members (by group name; see Diff for known) and acts. It
// returns what it did, one Changes per load balancer; a call that failed is
// left out of them and its error is returned, joined with the others, after
// the rest is done. A freed controller does nothing.
func (c *Controller) Sync(ctx context.Context, members map[string][]group.Member, known bool) ([]Changes, error) {
	c.acting.Lock()
	defer c.acting.Unlock()
	if c.Freed() {
		return nil, nil
	}
	in := c.Ingress()
	return c.forEachLB(ctx, in.Name, DesiredLBs(in), func(d DesiredLB, o Observed) (Changes, error) {
		ch := Diff(d, o.Routes, o.Backends, members, known)
		if want := d.HealthCheck(); want != nil && ch.HealthCheck == nil && !c.configured(d.LoadBalancer, *want) {
			ch.HealthCheck = want
		}
		return c.act(ctx, in.Name, c.lbs[d.LoadBalancer], ch)
	})
}

// Teardown unpublishes every route and deregisters every backend of the
// ingress's load balancers (the load balancers are the ingress's own; see the
// package doc), and returns what it did. It needs no membership, so it works
// when the groups are gone or cannot be read.
func (c *Controller) Teardown(ctx context.Context) ([]Changes, error) {
	return c.Release(ctx, lbNames(c.Ingress()), nil, nil, true)
}

// Release takes the ingress's routes and backends off the named load
// balancers, which it lets go of (it left the stack, or no longer names
// them), keeping on each what remain (by load balancer name: the rules of
// the stack that still name it) wants; see Teardown for the decision and
// members and known. It returns what it did, one Changes per load
// balancer, as Sync does. Teardown is Release of every load balancer with
// nothing remaining.
func (c *Controller) Release(ctx context.Context, lbs []string, remain map[string]DesiredLB, members map[string][]group.Member, known bool) ([]Changes, error) {
	c.acting.Lock()
	defer c.acting.Unlock()
	return c.release(ctx, lbs, remain, members, known, true)
}

// PreviewRelease returns what Release would do now, changing nothing.
func (c *Controller) PreviewRelease(ctx context.Context, lbs []string, remain map[string]DesiredLB, members map[string][]group.Member, known bool) ([]Changes, error) {
	return c.release(ctx, lbs, remain, members, known, false)
}

func (c *Controller) release(ctx context.Context, lbs []string, remain map[string]DesiredLB, members map[string][]group.Member, known, acting bool) ([]Changes, error) {
	name := c.Name()
	desired := make([]DesiredLB, len(lbs))
	for i, lb := range lbs {
		d := remain[lb]
		d.LoadBalancer = lb
		desired[i] = d
	}
	return c.forEachLB(ctx, name, desired, func(d DesiredLB, o Observed) (Changes, error) {
		ch := Teardown(d, o.Routes, o.Backends, members, known)
		if !acting {
			return ch, nil
		}
		// The next sync that keeps the load balancer configures the health
		// check again.
		c.mu.Lock()
		delete(c.checks, d.LoadBalancer)
		c.mu.Unlock()
		return c.act(ctx, name, c.lbs[d.LoadBalancer], ch)
	})
}

func lbNames(in *config.Ingress) []string {
	ds := DesiredLBs(in)
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.LoadBalancer
	}
	return out
}

func (c *Controller) configured(lb string, hc loadbalancer.HealthCheck) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	have, ok := c.checks[lb]
	return ok && have == hc
}

// act carries out ch on one load balancer and returns what succeeded.
//
// The order keeps the load balancer serving: new backends are registered
// before routes change and removed backends are deregistered last, so a
// route never points at fewer backends than it must while members are
// replaced. A re-addressed backend is deregistered and registered again
// (in that order: the SPI keys backends by ID). A failed call does not stop
// independent ones; a republish whose unpublish failed is not published.
func (c *Controller) act(ctx context.Context, ingress string, l4 loadbalancer.L4, ch Changes) (Changes, error) {
	done := Changes{LoadBalancer: ch.LoadBalancer, BackendsHeld: ch.BackendsHeld}
	var errs []error
	fail := func(format string, args ...any) {
		args = append([]any{ingress, ch.LoadBalancer}, args...)
		errs = append(errs, fmt.Errorf("ingress %q: load balancer %q: "+format, args...))
	}
	stopped := func() bool {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			return true
		}
		return false
	}
	result := func() (Changes, error) { return done, errors.Join(errs...) }

	// 1. Backends in: new ones, and re-addressed ones (out, then in).
	register := slices.Clone(ch.Register)
	var readdressed []BackendChange
	if len(ch.Readdress) > 0 {
		old := make([]instance.ID, len(ch.Readdress))
		for i, b := range ch.Readdress {
			old[i] = b.Old.ID
		}
		if err := l4.DeregisterBackends(ctx, old); err != nil {
			fail("deregister %d re-addressed backend(s): %w", len(ch.Readdress), err)
		} else {
			readdressed = ch.Readdress
			for _, b := range readdressed {
				register = append(register, b.New)
			}
		}
	}
	if len(register) > 0 {
		if err := l4.RegisterBackends(ctx, register); err != nil {
			fail("register %d backend(s): %w", len(register), err)
		} else {
			done.Register, done.Readdress = ch.Register, readdressed
		}
	}

	// 2. Routes.
	for _, r := range ch.Unpublish {
		if stopped() {
			return result()
		}
		if err := l4.Unpublish(ctx, r.LoadBalancerPort); err != nil {
			fail("unpublish port %d: %w", r.LoadBalancerPort, err)
			continue
		}
		done.Unpublish = append(done.Unpublish, r)
	}
	for _, r := range ch.Republish {
		if stopped() {
			return result()
		}
		if err := l4.Unpublish(ctx, r.Old.LoadBalancerPort); err != nil {
			fail("republish port %d: unpublish: %w", r.Old.LoadBalancerPort, err)
			continue
		}
		if err := l4.Publish(ctx, r.New); err != nil {
			fail("republish port %d: publish: %w", r.New.LoadBalancerPort, err)
			done.Unpublish = append(done.Unpublish, r.Old)
			continue
		}
		done.Republish = append(done.Republish, r)
	}
	for _, r := range ch.Publish {
		if stopped() {
			return result()
		}
		if err := l4.Publish(ctx, r); err != nil {
			fail("publish port %d: %w", r.LoadBalancerPort, err)
			continue
		}
		done.Publish = append(done.Publish, r)
	}

	// 3. The health check, once the routes are there.
	if ch.HealthCheck != nil {
		if stopped() {
			return result()
		}
		if err := l4.ConfigureHealthCheck(ctx, *ch.HealthCheck); err != nil {
			fail("configure health check: %w", err)
		} else {
			hc := *ch.HealthCheck
			done.HealthCheck = &hc
			c.mu.Lock()
			c.checks[ch.LoadBalancer] = hc
			c.mu.Unlock()
		}
	}

	// 4. Backends out.
	if len(ch.Deregister) > 0 {
		if stopped() {
			return result()
		}
		if err := l4.DeregisterBackends(ctx, ids(ch.Deregister)); err != nil {
			fail("deregister %d backend(s): %w", len(ch.Deregister), err)
		} else {
			done.Deregister = ch.Deregister
		}
	}
	return result()
}

// The controller.Controller verbs, for the one ingress this controller is
// bound to. Specs carry the ingress's configuration (a config.Ingress) as
// Properties.

// Spec returns the spec of the ingress.
func (c *Controller) Spec(ctx context.Context) ([]controller.Spec, error) {
	s, err := c.spec()
	if err != nil {
		return nil, err
	}
	return []controller.Spec{s}, nil
}

func (c *Controller) spec() (controller.Spec, error) {
	return SpecOf(c.Ingress())
}

// SpecOf is the controller spec of an ingress block.
func SpecOf(in *config.Ingress) (controller.Spec, error) {
	props, err := json.Marshal(in)
	if err != nil {
		return controller.Spec{}, fmt.Errorf("ingress %q: encode spec: %w", in.Name, err)
	}
	return controller.Spec{
		Kind:       controller.KindIngress,
		Metadata:   controller.Metadata{Name: in.Name},
		Properties: props,
	}, nil
}

// ingressOf decodes an ingress spec and checks it is this controller's.
func (c *Controller) ingressOf(spec controller.Spec) (*config.Ingress, error) {
	name := c.Name()
	if spec.Kind != controller.KindIngress {
		return nil, fmt.Errorf("ingress %q: spec %s is not an ingress", name, spec)
	}
	var in config.Ingress
	if err := json.Unmarshal(spec.Properties, &in); err != nil {
		return nil, fmt.Errorf("ingress %q: decode spec: %w", name, err)
	}
	if in.Name == "" {
		in.Name = spec.Metadata.Name
	}
	if in.Name != name {
		return nil, fmt.Errorf("ingress %q: spec is for ingress %q", name, in.Name)
	}
	if err := c.check(&in); err != nil {
		return nil, err
	}
	return &in, nil
}

// members asks Options.Members about the groups of in.
func (c *Controller) members(ctx context.Context, in *config.Ingress) (map[string][]group.Member, bool) {
	if c.opts.Members == nil {
		return nil, false
	}
	m, err := c.opts.Members(ctx, groupsOf(in))
	if err != nil {
		c.opts.Logger.Warn("membership unknown; backends are left as they are", "ingress", in.Name, "error", err)
		return nil, false
	}
	return m, true
}

// Plan returns what Commit would do now, per load balancer in order: for
// Enforce the Diff against the membership from Options.Members; for Destroy
// the teardown.
func (c *Controller) Plan(ctx context.Context, op controller.Operation, spec controller.Spec) (controller.Change, error) {
	ch := controller.Change{Kind: controller.KindIngress, Name: c.Name(), Operation: op}
	in, err := c.ingressOf(spec)
	if err != nil {
		return ch, err
	}
	var changes []Changes
	switch op {
	case controller.Enforce:
		members, known := c.members(ctx, in)
		changes, err = c.forEachLB(ctx, in.Name, DesiredLBs(in), func(d DesiredLB, o Observed) (Changes, error) {
			return Diff(d, o.Routes, o.Backends, members, known), nil
		})
	case controller.Destroy:
		changes, err = c.forEachLB(ctx, in.Name, DesiredLBs(in), func(d DesiredLB, o Observed) (Changes, error) {
			return Teardown(DesiredLB{LoadBalancer: d.LoadBalancer}, o.Routes, o.Backends, nil, true), nil
		})
	default:
		return ch, fmt.Errorf("ingress %q: unknown operation %q", ch.Name, op)
	}
	for _, x := range changes {
		ch.Steps = append(ch.Steps, x.Steps()...)
	}
	return ch, err
}

// Commit enforces spec (which becomes the ingress's configuration and
// resumes a freed ingress) with the membership from Options.Members, or
// tears the ingress down, and returns the ingress as observed afterwards.
func (c *Controller) Commit(ctx context.Context, op controller.Operation, spec controller.Spec) (controller.Object, error) {
	in, err := c.ingressOf(spec)
	if err != nil {
		return controller.Object{}, err
	}
	switch op {
	case controller.Enforce:
		c.mu.Lock()
		c.ingress, c.freed = copyIngress(in), false
		c.mu.Unlock()
		members, known := c.members(ctx, in)
		_, err = c.Sync(ctx, members, known)
	case controller.Destroy:
		_, err = c.Teardown(ctx)
	default:
		return controller.Object{}, fmt.Errorf("ingress %q: unknown operation %q", in.Name, op)
	}
	obj, oerr := c.object(ctx)
	return obj, errors.Join(err, oerr)
}

// View is the JSON shape of a load balancer in Describe's Object.State:
// routes as `lb routes ls -json` prints them, and backends.
type View struct {
	LoadBalancer string         `json:"loadbalancer"`
	Routes       []config.Route `json:"routes"`
	Backends     []BackendView  `json:"backends"`
}

// BackendView is a backend in a View.
type BackendView struct {
	ID      instance.ID `json:"id"`
	Address string      `json:"address,omitempty"`
}

// ViewOf turns an observation into its JSON shape.
func ViewOf(o Observed) View {
	v := View{LoadBalancer: o.LoadBalancer, Routes: make([]config.Route, 0, len(o.Routes)), Backends: make([]BackendView, 0, len(o.Backends))}
	for _, r := range o.Routes {
		v.Routes = append(v.Routes, RouteView(r))
	}
	for _, b := range o.Backends {
		v.Backends = append(v.Backends, BackendView{ID: b.ID, Address: b.Address})
	}
	return v
}

func (c *Controller) object(ctx context.Context) (controller.Object, error) {
	spec, err := c.spec()
	if err != nil {
		return controller.Object{}, err
	}
	obs, err := c.Observe(ctx)
	if err != nil {
		return controller.Object{Spec: spec}, err
	}
	views := make([]View, len(obs))
	for i, o := range obs {
		views[i] = ViewOf(o)
	}
	state, err := json.Marshal(views)
	if err != nil {
		return controller.Object{Spec: spec}, fmt.Errorf("ingress %q: encode state: %w", spec.Metadata.Name, err)
	}
	return controller.Object{Spec: spec, State: state}, nil
}

func (c *Controller) selects(meta *controller.Metadata) bool {
	return meta == nil || meta.Name == c.Name()
}

// Describe observes the ingress's load balancers if meta selects it; the
// object's State is a JSON list of View.
func (c *Controller) Describe(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	obj, err := c.object(ctx)
	if err != nil {
		return nil, err
	}
	return []controller.Object{obj}, nil
}

// Free stops syncing the ingress and touches nothing: Sync does nothing
// until a Commit of Enforce resumes. Callers keep the mark (in state) too.
func (c *Controller) Free(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	c.mu.Lock()
	c.freed = true
	c.mu.Unlock()
	spec, err := c.spec()
	if err != nil {
		return nil, err
	}
	return []controller.Object{{Spec: spec}}, nil
}

// Destroy tears the ingress down (see Teardown) if meta selects it.
func (c *Controller) Destroy(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	_, err := c.Teardown(ctx)
	obj, oerr := c.object(ctx)
	return []controller.Object{obj}, errors.Join(err, oerr)
}

// Deregister takes the backends leaving out of the load balancers of the
// ingress that route to the group named groupName, and touches nothing
// else: no route, no health check, no other backend. It is how `watch`
// stops traffic to members of a group that are gone, terminating or about
// to be destroyed as soon as a pass sees them, without waiting for the rest
// of the pass (creating their replacements can take seconds) and without
// listing the ingress's other groups. The caller vouches that leaving are
// members of groupName that are not live, which is why no membership is
// needed: an ID of another group is never among them. Those that are not
// registered are skipped, and a load balancer with none of them gets no
// call. It returns what it did, one Changes per load balancer that had
// some; a freed controller does nothing.
func (c *Controller) Deregister(ctx context.Context, groupName string, leaving []instance.ID) ([]Changes, error) {
	if len(leaving) == 0 {
		return nil, nil
	}
	c.acting.Lock()
	defer c.acting.Unlock()
	if c.Freed() {
		return nil, nil
	}
	in := c.Ingress()
	var desired []DesiredLB
	for _, d := range DesiredLBs(in) {
		if slices.Contains(d.Groups, groupName) {
			desired = append(desired, d)
		}
	}
	out := make([]Changes, len(desired))
	errs := make([]error, len(desired))
	c.each(ctx, len(desired), func(i int) {
		name := desired[i].LoadBalancer
		out[i].LoadBalancer = name
		l4 := c.lbs[name]
		observed, err := l4.Backends(ctx)
		if err != nil {
			errs[i] = fmt.Errorf("ingress %q: load balancer %q: list backends: %w", in.Name, name, err)
			return
		}
		gone := Registered(observed, leaving)
		if len(gone) == 0 {
			return
		}
		if err := l4.DeregisterBackends(ctx, ids(gone)); err != nil {
			errs[i] = fmt.Errorf("ingress %q: load balancer %q: deregister %d backend(s): %w", in.Name, name, len(gone), err)
			return
		}
		out[i].Deregister = gone
	})
	done := slices.DeleteFunc(out, func(ch Changes) bool { return len(ch.Deregister) == 0 })
	err := errors.Join(errs...)
	if err == nil {
		err = ctx.Err()
	}
	return done, err
}
