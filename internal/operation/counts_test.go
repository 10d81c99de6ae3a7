package operation

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
)

// For a sequence of stacks (create, scale up, scale down, roll, a rule
// moved to another load balancer, an enrollment removed, a route changed,
// destroy), the counts apply reports equal the plan's Summary field by
// field, and the world after apply is what the plan promised: the group's
// size, each load balancer's routes and backends (the members, on the load
// balancers the ingresses name, and nothing elsewhere), the authorizations
// (every running member), the record; and nothing is left to do.
func TestAppliedCountsEqualThePlan(t *testing.T) {
	steps := []struct {
		name  string
		stack followed
		want  plan.Counts
	}{
		{"create", followed{size: 3, apiLB: "lb2"}, plan.Counts{Add: 3, Publish: 2, Register: 6, Authorize: 3}},
		{"scale up", followed{size: 5, apiLB: "lb2"}, plan.Counts{Add: 2, Register: 4, Authorize: 2}},
		{"scale down", followed{size: 2, apiLB: "lb2"}, plan.Counts{Destroy: 3, Deregister: 6, Revoke: 3}},
		{"roll", followed{size: 2, apiLB: "lb2", note: "v2"}, plan.Counts{Roll: 2, Register: 4, Deregister: 4, Authorize: 2, Revoke: 2}},
		{"ingress removed", followed{size: 2, note: "v2"}, plan.Counts{Unpublish: 1, Deregister: 2}},
		{"rule moved", followed{size: 2, siteLB: "lb2", note: "v2"}, plan.Counts{Publish: 1, Register: 2, Unpublish: 1, Deregister: 2}},
		{"enrollment removed", followed{size: 2, siteLB: "lb2", note: "v2", noEnrollment: true}, plan.Counts{Revoke: 2}},
		{"route changed", followed{size: 2, siteLB: "lb2", note: "v2", noEnrollment: true, certificate: "c2"}, plan.Counts{Republish: 1}},
	}
	w := newWorkdir(t, steps[0].stack.hcl())
	r := w.runner(Options{})
	ctx := ctxT(t)
	for _, step := range steps {
		w.writeStack(step.stack.hcl())
		p, res := planAndApply(t, ctx, r, PlanMode{})
		if res.Done != p.Summary || p.Summary != step.want {
			t.Log(humanPlan(t, p))
			t.Fatalf("%s: planned %+v, done %+v; want both %+v", step.name, p.Summary, res.Done, step.want)
		}
		w.checkPromise(t, step.name, step.stack, r)
	}
	p, res := planAndApply(t, ctx, r, PlanMode{Destroy: true})
	if want := (plan.Counts{Destroy: 2, Unpublish: 1, Deregister: 2}); res.Done != p.Summary || p.Summary != want {
		t.Fatalf("destroy: planned %+v, done %+v; want both %+v", p.Summary, res.Done, want)
	}
	for _, lb := range []string{"lb1", "lb2"} {
		if ports, backends := w.lbFile(lb); len(ports)+len(backends) != 0 || len(w.simulated()) != 0 {
			t.Fatalf("after destroy: %s holds routes %v, backends %v; %d instances", lb, ports, backends, len(w.simulated()))
		}
	}
}

// Two ingresses naming one load balancer would undo each other's routes
// and backends on every apply (an ingress owns its load balancers), so
// the stack is refused when loaded, at the second ingress's rule.
func TestIngressesSharingALoadBalancerAreRefused(t *testing.T) {
	w := newWorkdir(t, followed{size: 2, apiLB: "lb2"}.hcl())
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	w.writeStack(followed{size: 2, apiLB: "lb2", siteLB: "lb2"}.hcl())
	_, _, diags := r.LoadStack(ctx)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Load balancer shared by ingresses") {
		t.Fatalf("a stack with two ingresses on lb2 loaded: %v", diags)
	}
}

// checkPromise checks the world against the followed stack f, as applied.
func (w *workdir) checkPromise(t *testing.T, when string, f followed, r *Runner) {
	t.Helper()
	members := w.simulated()
	if len(members) != f.size {
		t.Fatalf("%s: %d members, want %d", when, len(members), f.size)
	}
	if rec := recordedIDs(groupRecord(t, ctxT(t), r, "cattle")); !slices.Equal(rec, members) {
		t.Fatalf("%s: recorded %v, members %v", when, rec, members)
	}
	ports := map[string][]int{cmp.Or(f.siteLB, "lb1"): {443}}
	if f.apiLB != "" {
		ports[f.apiLB] = append(ports[f.apiLB], 80)
	}
	for _, lb := range []string{"lb1", "lb2"} {
		got, backends := w.lbFile(lb)
		want := ports[lb]
		slices.Sort(want)
		wantBackends := members
		if len(want) == 0 {
			wantBackends = nil
		}
		if !slices.Equal(got, want) || !slices.Equal(backends, wantBackends) {
			t.Fatalf("%s: %s holds routes %v and backends %v; want %v and %v", when, lb, got, backends, want, wantBackends)
		}
	}
	wantAuth := members
	if f.noEnrollment {
		wantAuth = nil
	}
	if got := w.authorized(); !slices.Equal(got, wantAuth) {
		t.Fatalf("%s: authorized %v, want %v", when, got, wantAuth)
	}
	checkNoChanges(t, r)
}

// followerSnapshot is which load balancers each member is a backend of,
// and which members are authorized.
type followerSnapshot struct {
	backends   map[string][]string // by load balancer
	authorized []string
}

func (w *workdir) followerSnapshot() followerSnapshot {
	s := followerSnapshot{backends: map[string][]string{}, authorized: w.authorized()}
	for _, lb := range []string{"lb1", "lb2"} {
		_, s.backends[lb] = w.lbFile(lb)
	}
	return s
}

// checkBreakAfterLeaving checks, from the executor's progress events, that
// each member in leaving was deregistered from every load balancer it was
// a backend of (before) and revoked, then drained, and destroyed only
// after all of that was done.
func checkBreakAfterLeaving(t *testing.T, evs []execute.Event, before followerSnapshot, leaving []string) {
	t.Helper()
	at := func(match func(execute.Event) bool) int {
		for i, ev := range evs {
			if ev.Status == execute.StatusDone && match(ev) {
				return i
			}
		}
		return -1
	}
	for _, id := range leaving {
		destroyed := at(func(ev execute.Event) bool { return ev.Step.Kind == plan.StepDestroy && string(ev.Step.Instance) == id })
		drained := at(func(ev execute.Event) bool { return ev.Step.Kind == plan.StepDrain && string(ev.Step.Instance) == id })
		if destroyed < 0 || drained < 0 || drained > destroyed {
			t.Fatalf("%s: drained at event %d, destroyed at %d: want both, the drain first", id, drained, destroyed)
		}
		for lb, ids := range before.backends {
			if !slices.Contains(ids, id) {
				continue
			}
			dereg := at(func(ev execute.Event) bool {
				return ev.Step.Kind == plan.StepDeregister && ev.Step.LoadBalancer == lb && string(ev.Step.Backend.ID) == id
			})
			if dereg < 0 || dereg > drained {
				t.Fatalf("%s: deregistered from %s at event %d, drained at %d: want the deregistration first", id, lb, dereg, drained)
			}
		}
		if slices.Contains(before.authorized, id) {
			revoked := at(func(ev execute.Event) bool {
				return ev.Step.Kind == plan.StepRevoke && string(enrollment.SourceOf(*ev.Step.Authorization)) == id
			})
			if revoked < 0 || revoked > drained {
				t.Fatalf("%s: revoked at event %d, drained at %d: want the revocation first", id, revoked, drained)
			}
		}
	}
}

// Destroying a group that two ingresses and an enrollment follow leaves no
// backend and no authorization of its members, and no member is destroyed
// while it is still registered or authorized: the simulator's load
// balancers and authorizations at the end, and the order of the executor's
// events, say so.
func TestGroupDestroyDeregistersAndRevokesBeforeDestroying(t *testing.T) {
	w := newWorkdir(t, followed{size: 4, apiLB: "lb2", drainDelay: "50ms"}.hcl())
	var progress events
	r := w.runner(Options{Progress: progress.add})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	members := w.simulated()
	before := w.followerSnapshot()
	if len(before.backends["lb1"]) != 4 || len(before.backends["lb2"]) != 4 || len(before.authorized) != 4 {
		t.Fatalf("before the destroy: %+v", before)
	}

	progress.reset()
	res := must(t, "Destroy")(r.Groups().Destroy(ctx, &controller.Metadata{Name: "cattle"}))
	if want := (plan.Counts{Destroy: 4, Deregister: 8, Revoke: 4}); res.Done != want || res.Plan.Summary != want {
		t.Fatalf("group destroy did %+v of %+v, want %+v", res.Done, res.Plan.Summary, want)
	}
	if n := len(w.simulated()); n != 0 {
		t.Fatalf("%d members left", n)
	}
	for _, lb := range []string{"lb1", "lb2"} {
		if _, backends := w.lbFile(lb); len(backends) != 0 {
			t.Errorf("%s still holds backends %v", lb, backends)
		}
	}
	if got := w.authorized(); len(got) != 0 {
		t.Errorf("authorizations left for %v", got)
	}
	checkBreakAfterLeaving(t, progress.snapshot(), before, members)
	if doc, _ := r.State(ctx); doc.Groups["cattle"] != nil || doc.Stack.Group("cattle") != nil {
		t.Fatal("the destroyed group is still in the state")
	}
}
