package operation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Ingresses and enrollments follow group membership. Apply syncs them after
// the groups are applied (with the members as they are then) and tears down
// the ones that left the stack before any group is destroyed; the group
// verbs (scale, destroy-instances, destroy) sync the ones that follow the
// group once it has converged, so backends and authorizations are right
// when the command returns, with or without a running watch. Both first
// wait for the members they created to run when an enrollment follows
// their group (await.go). Plans preview them against the members as the
// plan leaves them (less those it destroys).

// ControllerResult counts what was done to load balancers and authorizers.
type ControllerResult struct {
	// Published counts routes published, those republished (unpublished
	// and published again with new settings) included; Republished counts
	// those.
	Published, Republished, Unpublished, Registered, Deregistered int
	Authorized, Revoked                                           int
	// Lines say, one per ingress load balancer or enrollment that changed,
	// what was done ("ingress \"test.com\": lb1: 1 route published, 1
	// route republished, 5 backends registered").
	Lines []string
}

// Empty reports whether nothing was done.
func (c ControllerResult) Empty() bool {
	return c.Published+c.Unpublished+c.Registered+c.Deregistered+c.Authorized+c.Revoked == 0
}

func (c *ControllerResult) addIngress(name string, chs []ingress.Changes) {
	for _, ch := range chs {
		pub, repub := len(ch.Publish), len(ch.Republish)
		unpub := len(ch.Unpublish)
		reg := len(ch.Register) + len(ch.Readdress)
		dereg := len(ch.Deregister)
		c.Published += pub + repub
		c.Republished += repub
		c.Unpublished += unpub
		c.Registered += reg
		c.Deregistered += dereg
		var parts []string
		for _, x := range []struct {
			n    int
			noun string
		}{{pub, "route%s published"}, {repub, "route%s republished"}, {unpub, "route%s unpublished"},
			{reg, "backend%s registered"}, {dereg, "backend%s deregistered"}} {
			if x.n > 0 {
				parts = append(parts, fmt.Sprintf("%d "+x.noun, x.n, pluralS(x.n)))
			}
		}
		if len(parts) > 0 {
			c.Lines = append(c.Lines, fmt.Sprintf("ingress %q: %s: %s", name, ch.LoadBalancer, strings.Join(parts, ", ")))
		}
	}
}

func (c *ControllerResult) addEnrollment(ch enrollment.Changes) { c.addEnrollmentAt(ch, "") }

// addEnrollmentAt adds what was done to an enrollment; where, when set,
// says at which target ("on the old target ...").
func (c *ControllerResult) addEnrollmentAt(ch enrollment.Changes, where string) {
	auth := len(ch.Authorize) + len(ch.Reauthorize)
	rev := len(ch.Revoke) + len(ch.Reauthorize)
	c.Authorized += auth
	c.Revoked += rev
	var parts []string
	if auth > 0 {
		parts = append(parts, fmt.Sprintf("%d authorization%s made", auth, pluralS(auth)))
	}
	if rev > 0 {
		parts = append(parts, fmt.Sprintf("%d authorization%s revoked", rev, pluralS(rev)))
	}
	if len(parts) > 0 {
		line := fmt.Sprintf("enrollment %q: %s", ch.Enrollment, strings.Join(parts, ", "))
		if where != "" {
			line += " " + where
		}
		c.Lines = append(c.Lines, line)
	}
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// loadBalancer is the SPI client of a loadbalancer block of st.
func (r *Runner) loadBalancer(ctx context.Context, st *config.Stack, name string) (loadbalancer.L4, error) {
	lb := st.LoadBalancer(name)
	if lb == nil {
		return nil, fmt.Errorf("load balancer %q is not declared in the stack", name)
	}
	h, err := r.hostFor()
	if err != nil {
		return nil, err
	}
	c, err := h.Client(ctx, lb.Provider)
	if err != nil {
		return nil, fmt.Errorf("load balancer %q: %w", name, err)
	}
	return c.LoadBalancer(name), nil
}

// ingressController builds the controller of in, with the load balancers of st.
func (r *Runner) ingressController(ctx context.Context, st *config.Stack, in *config.Ingress) (*ingress.Controller, error) {
	lbs := map[string]loadbalancer.L4{}
	for _, d := range ingress.DesiredLBs(in) {
		l4, err := r.loadBalancer(ctx, st, d.LoadBalancer)
		if err != nil {
			return nil, fmt.Errorf("ingress %q: %w", in.Name, err)
		}
		lbs[d.LoadBalancer] = l4
	}
	return ingress.New(in, lbs, ingress.Options{Parallelism: r.opts.Parallelism, Logger: r.log.Named("ingress")})
}

// membership is what sync passes know of the groups' members.
type membership struct {
	members map[string][]group.Member
	descs   map[string][]instance.Description
	failed  map[string]error
}

// observeMembers lists the members of the named groups, one
// DescribeInstances each (with properties for those in withProps). A group
// not in st has no configuration: when doc still records it, its members
// are unknown; otherwise it is gone and has none.
func (r *Runner) observeMembers(ctx context.Context, st *config.Stack, doc *state.Document, names []string, withProps map[string]bool) membership {
	m := membership{members: map[string][]group.Member{}, descs: map[string][]instance.Description{}, failed: map[string]error{}}
	for _, name := range names {
		if _, done := m.members[name]; done {
			continue
		}
		if _, done := m.failed[name]; done {
			continue
		}
		cfg := st.Group(name)
		if cfg == nil {
			if doc != nil && doc.Groups[name] != nil {
				m.failed[name] = fmt.Errorf("group %q: its configuration is not in the state, so its members cannot be listed", name)
			} else {
				m.members[name] = nil
			}
			continue
		}
		descs, err := r.describeGroup(ctx, st.Name, cfg, withProps[name])
		if err != nil {
			m.failed[name] = err
			continue
		}
		m.descs[name] = descs
		m.members[name] = group.MembersFromDescriptions(descs, nil)
	}
	return m
}

// describeGroup lists a group's instances by its tags.
func (r *Runner) describeGroup(ctx context.Context, stack string, g *config.Group, withProps bool) ([]instance.Description, error) {
	h, err := r.hostFor()
	if err != nil {
		return nil, err
	}
	c, err := h.Client(ctx, g.Instance.Provider)
	if err != nil {
		return nil, fmt.Errorf("group %q: %w", g.Name, err)
	}
	descs, err := c.Instance(g.Instance.Type).DescribeInstances(ctx, tags.GroupSelector(stack, g.Name), withProps)
	if err != nil {
		return nil, fmt.Errorf("group %q: describe instances: %w", g.Name, err)
	}
	return descs, nil
}

// ingressMembers picks the members of in's groups; known is false when any
// of them could not be listed.
func ingressMembers(in *config.Ingress, members map[string][]group.Member, failed map[string]error) (map[string][]group.Member, bool) {
	out := map[string][]group.Member{}
	for _, r := range in.Rules {
		for _, g := range r.Groups {
			if _, bad := failed[g]; bad {
				return nil, false
			}
			out[g] = members[g]
		}
	}
	return out, true
}

func ingressGroups(in *config.Ingress) []string {
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

func freed(m map[string]*state.ControllerStatus, name string) bool {
	return m[name] != nil && m[name].Freed
}

// planIngresses previews every ingress of desired and of the stored stack,
// with the members of world (less those the plan destroys). An ingress
// that no longer names a load balancer its stored version named (or that
// left the stack) shows that load balancer's teardown (releases).
func (r *Runner) planIngresses(ctx context.Context, desired *config.Stack, doc *state.Document, world plan.World, changed map[string]bool) []plan.IngressChange {
	var out []plan.IngressChange
	for _, in := range desired.Ingresses {
		c := plan.IngressChange{Ingress: in.Name, Action: plan.ActionNoOp}
		for _, g := range ingressGroups(in) {
			if changed[g] {
				c.FollowsGroups = append(c.FollowsGroups, g)
			}
		}
		ctrl, err := r.ingressController(ctx, desired, in)
		if err == nil {
			members, known := ingressMembers(in, world.Members, world.Failed)
			c.LoadBalancers, err = ctrl.Preview(ctx, members, known)
		}
		if err == nil && doc.Stack != nil && doc.Stack.Ingress(in.Name) != nil && !freed(doc.Ingresses, in.Name) {
			var released []ingress.Changes
			c.Released, released, err = r.previewRelease(ctx, doc.Stack, desired, in.Name, world)
			c.LoadBalancers = append(c.LoadBalancers, released...)
		}
		if err == nil && !freed(doc.Ingresses, in.Name) {
			err = r.previewPendingReleases(ctx, doc, desired, in.Name, world, &c)
		}
		switch {
		case err != nil:
			c.Action, c.Error, c.LoadBalancers = plan.ActionUnknown, err.Error(), nil
		case freed(doc.Ingresses, in.Name):
			c.Action = plan.ActionResume
		case doc.Stack == nil || doc.Stack.Ingress(in.Name) == nil:
			c.Action = plan.ActionCreate
		default:
			if r, b := c.Counts(); r+b > 0 || len(c.Pending) > 0 {
				c.Action = plan.ActionUpdate
			}
		}
		out = append(out, c)
	}
	// Those that left the stack, then those only pending teardowns remember.
	var gone []string
	if doc.Stack != nil {
		for _, in := range doc.Stack.Ingresses {
			if desired.Ingress(in.Name) == nil {
				gone = append(gone, in.Name)
			}
		}
	}
	gone = append(gone, pendingNames(doc.Ingresses, func(name string) bool {
		return desired.Ingress(name) != nil || doc.Stack != nil && doc.Stack.Ingress(name) != nil
	})...)
	for _, name := range gone {
		c := plan.IngressChange{Ingress: name, Action: plan.ActionDestroy}
		if freed(doc.Ingresses, name) {
			c.Action = plan.ActionFree
			out = append(out, c)
			continue
		}
		var err error
		if doc.Stack != nil && doc.Stack.Ingress(name) != nil {
			c.Released, c.LoadBalancers, err = r.previewRelease(ctx, doc.Stack, desired, name, world)
		}
		if err == nil {
			err = r.previewPendingReleases(ctx, doc, desired, name, world, &c)
		}
		if err != nil {
			c.Action, c.Error, c.LoadBalancers = plan.ActionUnknown, err.Error(), nil
		}
		out = append(out, c)
	}
	return out
}

// previewPendingReleases adds to c the preview of the pending teardowns
// recorded for ingress name (see pending.go).
func (r *Runner) previewPendingReleases(ctx context.Context, doc *state.Document, desired *config.Stack, name string, world plan.World, c *plan.IngressChange) error {
	for _, part := range pendingOf(doc.Ingresses, name) {
		lbs, chs, err := r.previewRelease(ctx, part, desired, name, world)
		if err != nil {
			return fmt.Errorf("teardown left by an earlier apply: %w", err)
		}
		c.Released = append(c.Released, lbs...)
		c.Pending = append(c.Pending, lbs...)
		c.LoadBalancers = append(c.LoadBalancers, chs...)
	}
	return nil
}

// releases are the load balancers that ingress name, as applied in
// previous, lets go of in desired (all of them when it left desired; see
// ingress.Released), and for each what the rules of desired that still
// name it want kept there (ingress.Wanted; nothing when its loadbalancer
// block moved to another provider, as the stored load balancer is then
// another one).
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
		}
	}
	return lbs, remain
}

// remainMembers picks, from an observation, the members of the groups
// that remain wants; known is false when any of them could not be listed.
func remainMembers(remain map[string]ingress.DesiredLB, members map[string][]group.Member, failed map[string]error) (map[string][]group.Member, bool) {
	out := map[string][]group.Member{}
	for _, d := range remain {
		for _, g := range d.Groups {
			if _, bad := failed[g]; bad {
				return nil, false
			}
			out[g] = members[g]
		}
	}
	return out, true
}

func remainGroups(remain map[string]ingress.DesiredLB) []string {
	var out []string
	for _, d := range remain {
		for _, g := range d.Groups {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// previewRelease previews the teardown of the load balancers ingress name
// lets go of (see releases), acting through the stored stack's load
// balancers, with the members of world.
func (r *Runner) previewRelease(ctx context.Context, previous, desired *config.Stack, name string, world plan.World) ([]string, []ingress.Changes, error) {
	lbs, remain := releases(previous, desired, name)
	if len(lbs) == 0 {
		return nil, nil, nil
	}
	ctrl, err := r.ingressController(ctx, previous, previous.Ingress(name))
	if err != nil {
		return lbs, nil, err
	}
	members, known := remainMembers(remain, world.Members, world.Failed)
	chs, err := ctrl.PreviewRelease(ctx, lbs, remain, members, known)
	return lbs, chs, err
}

// release tears down what ingress name, as applied in previous, has on the
// load balancers it lets go of in desired (see releases), after listing
// the members of the groups that the rules still naming them want. It
// returns the load balancers whose teardown failed, and why.
func (r *Runner) release(ctx context.Context, previous, desired *config.Stack, name string, res *ControllerResult) ([]string, error) {
	lbs, remain := releases(previous, desired, name)
	if len(lbs) == 0 {
		return nil, nil
	}
	ctrl, err := r.ingressController(ctx, previous, previous.Ingress(name))
	if err != nil {
		return lbs, err
	}
	var members map[string][]group.Member
	known := true
	if groups := remainGroups(remain); len(groups) > 0 {
		m := r.observeMembers(ctx, desired, nil, groups, nil)
		members, known = remainMembers(remain, m.members, m.failed)
	}
	// One load balancer at a time, so that those that failed are known.
	var failed []string
	var errs []error
	for _, lb := range lbs {
		done, err := ctrl.Release(ctx, []string{lb}, remain, members, known)
		res.addIngress(name, done)
		if err != nil {
			failed = append(failed, lb)
			errs = append(errs, err)
		}
	}
	return failed, errors.Join(errs...)
}

// planControllers adds the ingress and enrollment previews to p. They are
// made against the members as the plan leaves them: those it destroys
// (scale-down, destroyed groups) are left out, so their backends show as
// deregistered and their authorizations as revoked. Members it creates have
// no ID yet; the previews say that the followers follow the groups the plan
// changes (FollowsGroups).
func (r *Runner) planControllers(ctx context.Context, desired *config.Stack, doc *state.Document, world plan.World, p *plan.Plan) {
	if doc == nil {
		doc = state.NewDocument()
	}
	changed := p.ChangedGroups()
	destroyed := plannedDestroys(p)
	after := plan.World{Members: make(map[string][]group.Member, len(world.Members)), Failed: world.Failed}
	for name, members := range world.Members {
		after.Members[name] = slices.DeleteFunc(slices.Clone(members), func(m group.Member) bool { return destroyed[name][m.ID] })
	}
	p.AddControllers(r.planIngresses(ctx, desired, doc, after, changed), r.planEnrollments(ctx, desired, doc, after, destroyed, changed))
}

// plannedDestroys are the members p destroys, by group.
func plannedDestroys(p *plan.Plan) map[string]map[instance.ID]bool {
	out := map[string]map[instance.ID]bool{}
	for _, gc := range p.Groups {
		if !gc.Action.IsChange() || len(gc.Destroy) == 0 {
			continue
		}
		ids := make(map[instance.ID]bool, len(gc.Destroy))
		for _, d := range gc.Destroy {
			ids[d.ID] = true
		}
		out[gc.Group] = ids
	}
	return out
}

// teardownControllers tears down the ingresses and enrollments that left
// the stack, the load balancers the ingresses that stay no longer name, and
// the authorizations of enrollments whose target changed at their old
// target: apply does it before any group is destroyed, so no load balancer
// routes to, and no export admits, an instance being destroyed. What the
// desired stack's rules still want of a load balancer stays (releases).
// The teardowns earlier applies could not finish (the records' Pending)
// are retried first. A teardown that fails is recorded as pending (the
// stored stack no longer names what it acts on), and its error returned;
// one that succeeds clears its record, and the records of those that left
// the stack go with their last pending teardown. Freed ingresses and
// enrollments are left untouched, pending teardowns included.
func (r *Runner) teardownControllers(ctx context.Context, w *recorder, p *plan.Plan, previous *config.Stack, res *ApplyResult) []error {
	if previous == nil {
		previous = &config.Stack{}
	}
	w.mu.Lock()
	var ingresses, enrollments []string
	for _, in := range previous.Ingresses {
		ingresses = append(ingresses, in.Name)
	}
	ingresses = append(ingresses, pendingNames(w.doc.Ingresses, func(name string) bool { return previous.Ingress(name) != nil })...)
	for _, e := range previous.Enrollments {
		enrollments = append(enrollments, e.Name)
	}
	enrollments = append(enrollments, pendingNames(w.doc.Enrollments, func(name string) bool { return previous.Enrollment(name) != nil })...)
	freedIngress, pendingIngress := map[string]bool{}, map[string][]*config.Stack{}
	for _, name := range ingresses {
		freedIngress[name] = freed(w.doc.Ingresses, name)
		pendingIngress[name] = pendingOf(w.doc.Ingresses, name)
	}
	freedEnrollment, pendingEnrollment := map[string]bool{}, map[string][]*config.Stack{}
	for _, name := range enrollments {
		freedEnrollment[name] = freed(w.doc.Enrollments, name)
		pendingEnrollment[name] = pendingOf(w.doc.Enrollments, name)
	}
	w.mu.Unlock()
	var errs []error
	for _, name := range ingresses {
		if freedIngress[name] || ctx.Err() != nil {
			continue
		}
		var keep []*config.Stack
		releaseFrom := func(from *config.Stack) {
			failed, err := r.release(ctx, from, p.Desired, name, &res.Controllers)
			if err != nil {
				errs = append(errs, fmt.Errorf("ingress %q: the teardown of %s failed; the state keeps it and the next apply retries it: %w",
					name, strings.Join(failed, ", "), err))
			}
			for _, lb := range failed {
				keep = append(keep, ingressPart(from, name, lb))
			}
		}
		for _, part := range pendingIngress[name] {
			releaseFrom(part)
		}
		if previous.Ingress(name) != nil {
			releaseFrom(previous)
		}
		w.mu.Lock()
		if setPending(&w.doc.Ingresses, name, keep) {
			w.dirty = true
		}
		if p.Desired.Ingress(name) == nil && len(keep) == 0 && w.doc.Ingresses[name] != nil {
			delete(w.doc.Ingresses, name)
			w.dirty = true
		}
		w.mu.Unlock()
	}
	for _, name := range enrollments {
		if freedEnrollment[name] || ctx.Err() != nil {
			continue
		}
		var keep []*config.Stack
		for _, part := range pendingEnrollment[name] {
			if err := r.releaseTarget(ctx, part, p.Desired, name, &res.Controllers); err != nil {
				errs = append(errs, err)
				keep = append(keep, part)
			}
		}
		if previous.Enrollment(name) != nil {
			if err := r.releaseTarget(ctx, previous, p.Desired, name, &res.Controllers); err != nil {
				errs = append(errs, err)
				keep = append(keep, enrollmentPart(previous, name))
			}
		}
		w.mu.Lock()
		if setPending(&w.doc.Enrollments, name, keep) {
			w.dirty = true
		}
		if p.Desired.Enrollment(name) == nil && len(keep) == 0 && w.doc.Enrollments[name] != nil {
			delete(w.doc.Enrollments, name)
			w.dirty = true
		}
		w.mu.Unlock()
	}
	return errs
}

// syncControllers syncs every ingress and enrollment of the applied stack
// once the groups are applied, resuming freed ones (apply resumes what
// `free` stopped, as for groups). The members the groups just created that
// an enrollment follows are waited for until they run (see awaitRunning),
// so that they are authorized when apply returns.
func (r *Runner) syncControllers(ctx context.Context, w *recorder, p *plan.Plan, res *ApplyResult) []error {
	st := p.Desired
	if len(st.Ingresses) == 0 && len(st.Enrollments) == 0 || ctx.Err() != nil {
		return nil
	}
	w.mu.Lock()
	for _, in := range st.Ingresses {
		if freed(w.doc.Ingresses, in.Name) {
			resume(w.doc.Ingresses, in.Name)
			w.dirty = true
		}
	}
	for _, e := range st.Enrollments {
		if freed(w.doc.Enrollments, e.Name) {
			resume(w.doc.Enrollments, e.Name)
			w.dirty = true
		}
	}
	stored := w.doc.Stack
	w.mu.Unlock()
	if stored == nil {
		stored = st
	}
	var created []string
	for _, gc := range p.Groups {
		if len(gc.Create) > 0 || len(gc.Roll) > 0 {
			created = append(created, gc.Group)
		}
	}
	await := pendingRecorded(w, enrolled(stored, nil, created))
	return r.syncFollowing(ctx, stored, nil, Selection{All: true}, await, &res.Controllers)
}

// resume drops the record of a freed ingress or enrollment, keeping its
// pending teardowns (the next apply retries them).
func resume(m map[string]*state.ControllerStatus, name string) {
	if rec := keepPending(m, name, false); rec != nil {
		m[name] = rec
	} else {
		delete(m, name)
	}
}

// Selection picks ingresses and enrollments of a stack: every one (All),
// those named, and those that follow one of Groups.
type Selection struct {
	All         bool
	Groups      []string
	Ingresses   []string
	Enrollments []string
}

func (s Selection) picks(name string, named []string, groups []string) bool {
	if s.All || slices.Contains(named, name) {
		return true
	}
	for _, g := range groups {
		if slices.Contains(s.Groups, g) {
			return true
		}
	}
	return false
}

// syncFollowing syncs the ingresses and enrollments of st that are not
// freed in doc (nil: none is) and that sel picks, after one observation of
// the groups they need; members of await (by group) still pending are
// waited for first (awaitRunning).
func (r *Runner) syncFollowing(ctx context.Context, st *config.Stack, doc *state.Document, sel Selection, await map[string][]instance.ID, res *ControllerResult) []error {
	var ins []*config.Ingress
	var ens []*config.Enrollment
	var names []string
	withProps := map[string]bool{}
	for _, in := range st.Ingresses {
		if (doc == nil || !freed(doc.Ingresses, in.Name)) && sel.picks(in.Name, sel.Ingresses, ingressGroups(in)) {
			ins = append(ins, in)
			names = append(names, ingressGroups(in)...)
		}
	}
	for _, e := range st.Enrollments {
		if (doc == nil || !freed(doc.Enrollments, e.Name)) && sel.picks(e.Name, sel.Enrollments, []string{e.Source}) {
			ens = append(ens, e)
			names = append(names, e.Source)
			if enrollment.NeedsProperties(&e.Target) {
				withProps[e.Source] = true
			}
		}
	}
	if len(ins)+len(ens) == 0 {
		return nil
	}
	m := r.observeMembers(ctx, st, doc, names, withProps)
	var errs []error
	if err := r.awaitRunning(ctx, st, doc, &m, await, withProps); err != nil {
		errs = append(errs, err)
	}
	for _, in := range ins {
		if ctx.Err() != nil {
			break
		}
		ctrl, err := r.ingressController(ctx, st, in)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		members, known := ingressMembers(in, m.members, m.failed)
		done, err := ctrl.Sync(ctx, members, known)
		res.addIngress(in.Name, done)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range ens {
		if ctx.Err() != nil {
			break
		}
		ctrl, err := r.enrollmentController(ctx, st, e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, bad := m.failed[e.Source]
		source := enrollment.Membership{Instances: m.descs[e.Source], Want: enrollment.WantOf(st.Group(e.Source))}
		done, err := ctrl.Sync(ctx, source, !bad)
		res.addEnrollment(done)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	for name, err := range m.failed {
		if slices.Contains(names, name) {
			r.log.Warn("group membership unknown; its backends and authorizations are left as they are", "group", name, "error", err)
		}
	}
	return errs
}

// resync returns what the group verbs pass their outcome through: once the
// group has converged, the ingresses and enrollments that follow it are
// synced (under the same state lock), and what they did is added to res.
// Members the verb created are waited for until they run, when an
// enrollment follows the group (see awaitRunning).
func (o *groupOp) resync(ctx context.Context) func(*ApplyResult, error) (*ApplyResult, error) {
	return func(res *ApplyResult, err error) (*ApplyResult, error) {
		if ctx.Err() != nil || o.doc.Stack == nil {
			return res, err
		}
		if res == nil {
			res = &ApplyResult{}
		}
		name := o.cfg.Name
		var await map[string][]instance.ID
		o.mu.Lock()
		if len(o.created) > 0 && len(enrolled(o.doc.Stack, o.doc, []string{name})) > 0 {
			await = map[string][]instance.ID{name: slices.Clone(o.created)}
		}
		o.mu.Unlock()
		errs := o.r.syncFollowing(ctx, o.doc.Stack, o.doc, Selection{Groups: []string{name}}, await, &res.Controllers)
		return res, errors.Join(append([]error{err}, errs...)...)
	}
}

// The verbs of `infrakit lb`, `infrakit ingress` and `infrakit enrollment`.

// stackFor returns the stack the object verbs act on: the stored one when it
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

func (r *Runner) lbClient(ctx context.Context, name string) (loadbalancer.L4, error) {
	st, _, err := r.stackFor(ctx, func(s *config.Stack) bool { return s.LoadBalancer(name) != nil })
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("load balancer %q is declared neither in the applied stack nor in the stack files", name)
	}
	return r.loadBalancer(ctx, st, name)
}

// LoadBalancerRoutes asks a load balancer's provider for its routes.
func (r *Runner) LoadBalancerRoutes(ctx context.Context, name string) ([]loadbalancer.Route, error) {
	l4, err := r.lbClient(ctx, name)
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
	l4, err := r.lbClient(ctx, name)
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

// IngressView is an ingress as its load balancers report it now.
type IngressView struct {
	Name          string
	Freed         bool
	LoadBalancers []ingress.View
}

// DescribeIngress asks the ingress's load balancers for their routes and backends.
func (r *Runner) DescribeIngress(ctx context.Context, name string) (*IngressView, error) {
	st, doc, err := r.stackFor(ctx, func(s *config.Stack) bool { return s.Ingress(name) != nil })
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("ingress %q is declared neither in the applied stack nor in the stack files", name)
	}
	ctrl, err := r.ingressController(ctx, st, st.Ingress(name))
	if err != nil {
		return nil, err
	}
	obs, err := ctrl.Observe(ctx)
	if err != nil {
		return nil, err
	}
	v := &IngressView{Name: name, Freed: freed(doc.Ingresses, name)}
	for _, o := range obs {
		v.LoadBalancers = append(v.LoadBalancers, ingress.ViewOf(o))
	}
	return v, nil
}

// storedObject locks the state and finds a stored ingress or enrollment;
// unlock must be called.
func (r *Runner) storedObject(ctx context.Context, op, kind, name string, has func(*config.Stack) bool) (*state.Document, func() error, error) {
	unlock, err := r.lock(ctx, op)
	if err != nil {
		return nil, nil, err
	}
	doc, err := r.store.Read(ctx)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	if doc.Stack == nil || !has(doc.Stack) {
		unlock()
		return nil, nil, fmt.Errorf("%s %q is not in the state (apply the stack first)", kind, name)
	}
	return doc, unlock, nil
}

// FreeIngress stops syncing an ingress and touches nothing; a later apply resumes.
func (r *Runner) FreeIngress(ctx context.Context, name string) error {
	doc, unlock, err := r.storedObject(ctx, "ingress free", "ingress", name, func(s *config.Stack) bool { return s.Ingress(name) != nil })
	if err != nil {
		return err
	}
	defer unlock()
	if doc.Ingresses == nil {
		doc.Ingresses = map[string]*state.ControllerStatus{}
	}
	doc.Ingresses[name] = keepPending(doc.Ingresses, name, true)
	return r.store.Write(ctx, doc)
}

// DestroyIngress unpublishes the routes and deregisters the backends of an
// ingress's load balancers and removes it from the state (a later apply of a
// stack that still declares it publishes it again).
func (r *Runner) DestroyIngress(ctx context.Context, name string) (*ControllerResult, error) {
	doc, unlock, err := r.storedObject(ctx, "ingress destroy", "ingress", name, func(s *config.Stack) bool { return s.Ingress(name) != nil })
	if err != nil {
		return nil, err
	}
	defer unlock()
	ctrl, err := r.ingressController(ctx, doc.Stack, doc.Stack.Ingress(name))
	if err != nil {
		return nil, err
	}
	res := &ControllerResult{}
	done, err := ctrl.Teardown(ctx)
	res.addIngress(name, done)
	if err != nil {
		return res, err
	}
	out := *doc.Stack
	out.Ingresses = slices.DeleteFunc(slices.Clone(out.Ingresses), func(in *config.Ingress) bool { return in.Name == name })
	doc.Stack = &out
	resume(doc.Ingresses, name) // pending teardowns stay for apply to retry
	return res, r.store.Write(context.WithoutCancel(ctx), doc)
}

// SyncFollowers syncs the ingresses and enrollments of st that doc does not
// mark freed and that sel picks, after one DescribeInstances per group they
// need, and returns what was done. It is the sync `watch` runs for each
// follower every sync_interval, and for the followers of a group when its
// membership changed; the caller holds the state lock.
func (r *Runner) SyncFollowers(ctx context.Context, st *config.Stack, doc *state.Document, sel Selection) (ControllerResult, error) {
	var res ControllerResult
	if st == nil {
		return res, nil
	}
	errs := r.syncFollowing(ctx, st, doc, sel, nil, &res)
	return res, errors.Join(errs...)
}
