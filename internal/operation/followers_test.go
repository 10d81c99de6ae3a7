package operation

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
)

// followed is a stack of one cattle group behind ingress "site", whose
// rule publishes 443 on siteLB, and enrolled by "nfs" at target; with
// apiLB set, ingress "api" publishes port 80 on apiLB for the same group.
// Load balancers lb1 and lb2 are declared. Zero fields take the defaults
// of hcl.
type followed struct {
	size          int    // 3
	certificate   string // of site's route: "c1"
	destroyOnFree bool
	siteLB        string // "lb1"
	apiLB         string
	target        string // "simulator.nfs-auth"
	note          string // an instance property: changing it rolls the group
	drainDelay    string // "0s": the tests need no requests to finish
	noEnrollment  bool
}

// followerStack is the followed stack with the group's size, site's
// certificate and the enrollment's destroy_on_free.
func followerStack(size int, certificate string, destroyOnFree bool) string {
	return followed{size: size, certificate: certificate, destroyOnFree: destroyOnFree}.hcl()
}

// releaseStack is the followed stack with site on siteLB, api on apiLB
// ("": no api) and the enrollment at target.
func releaseStack(siteLB, apiLB, target string) string {
	return followed{siteLB: siteLB, apiLB: apiLB, target: target}.hcl()
}

func (f followed) hcl() string {
	f.size = cmp.Or(f.size, 3)
	f.certificate = cmp.Or(f.certificate, "c1")
	f.siteLB = cmp.Or(f.siteLB, "lb1")
	f.target = cmp.Or(f.target, "simulator.nfs-auth")
	f.note = cmp.Or(f.note, "v1")
	f.drainDelay = cmp.Or(f.drainDelay, "0s")
	api := ""
	if f.apiLB != "" {
		api = fmt.Sprintf(`
ingress "api" {
  rule {
    loadbalancer = loadbalancer.%s
    groups       = [group.cattle]
    route {
      lb_port = 80
      port    = 8080
    }
  }
}
`, f.apiLB)
	}
	enroll := fmt.Sprintf(`
enrollment "nfs" {
  source = group.cattle
  target {
    provider   = %s
    type       = "disk"
    properties = { host = member.id }
  }
  destroy_on_free = %v
}
`, f.target, f.destroyOnFree)
	if f.noEnrollment {
		enroll = ""
	}
	return fmt.Sprintf(`
stack "test" {}

provider "simulator" {}
provider "simulator" { alias = "nfs-auth" }
provider "vanilla" {}

group "cattle" {
  size        = %d
  drain_delay = %q
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = %q }
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo cattle"] }
  }
}

loadbalancer "lb1" { provider = simulator }
loadbalancer "lb2" { provider = simulator }

ingress "site" {
  rule {
    loadbalancer = loadbalancer.%s
    groups       = [group.cattle]
    route {
      lb_port     = 443
      lb_protocol = "https"
      port        = 8080
      protocol    = "http"
      certificate = %q
    }
  }
}
%s%s`, f.size, f.drainDelay, f.note, f.siteLB, f.certificate, api, enroll)
}

// checkFollowers fails the test unless lb1's backends and nfs's
// authorizations are exactly members.
func (w *workdir) checkFollowers(when string, members []string) {
	w.t.Helper()
	_, backends := w.lbFile("lb1")
	if authorized := w.authorized(); !slices.Equal(backends, members) || !slices.Equal(authorized, members) {
		w.t.Fatalf("%s: members %v, lb1's backends %v, authorized %v", when, members, backends, authorized)
	}
}

// With a provider that starts instances slowly, apply and `group scale`
// wait for the members they create to run before registering and
// authorizing them, so every member is a backend and authorized when they
// return, and the awaits are reported as steps.
func TestScaleWaitsForNewMembersToRun(t *testing.T) {
	w := newWorkdir(t, followerStack(2, "c1", false))
	var progress events
	r := w.runner(Options{HostEnv: []string{"INFRAKIT_SIMULATOR_PROVISION_DELAY=1s"}, Progress: progress.add})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	w.checkFollowers("after apply", w.simulated())
	if waits := progress.of("group.cattle", plan.StepAwait); len(waits) != 2 || waits[1].Done != 2 || waits[1].Total != 2 {
		t.Fatalf("apply's awaits: %+v", waits)
	}

	progress.reset()
	res := must(t, "SetSize 4")(r.Groups().SetSize(ctx, "cattle", 4, controller.ScaleOptions{}))
	w.checkFollowers("after scale", w.simulated())
	if res.Done.Add != 2 || res.Done.Authorize != 2 || res.Done.Register != 2 || res.Done != res.Plan.Summary {
		t.Fatalf("scale did %+v, planned %+v; want 2 added, registered and authorized", res.Done, res.Plan.Summary)
	}
	if waits := progress.of("group.cattle", plan.StepAwait); len(waits) != 2 || waits[1].Done != 2 || waits[1].Total != 2 {
		t.Fatalf("scale's awaits: %+v", waits)
	}

	// Scaling down waits for nothing.
	progress.reset()
	res = must(t, "SetSize 3")(r.Groups().SetSize(ctx, "cattle", 3, controller.ScaleOptions{}))
	if waits := progress.of("group.cattle", plan.StepAwait); len(waits) != 0 {
		t.Fatalf("a scale-down waited: %+v", waits)
	}
	if res.Done != (plan.Counts{Destroy: 1, Deregister: 1, Revoke: 1}) {
		t.Fatalf("scale-down did %+v", res.Done)
	}
	w.checkFollowers("after scale-down", w.simulated())
}

// When created members do not run within the await timeout, their awaits
// fail naming them, their backends and authorizations are skipped (nothing
// routes to a member that does not run), and the members are recorded.
func TestScaleSaysWhenNewMembersDoNotRunInTime(t *testing.T) {
	w := newWorkdir(t, followerStack(1, "c1", false))
	r := w.runner(Options{AwaitTimeout: 300 * time.Millisecond, HostEnv: []string{"INFRAKIT_SIMULATOR_PROVISION_DELAY=1h"}})
	ctx := ctxT(t)
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	checkAwaitsFailed(t, res.Failed, 1)
	if res.Skipped != 2 || res.Done.Add != 1 || res.Done.Register != 0 || res.Done.Authorize != 0 {
		t.Fatalf("apply did %+v, skipped %d; want 1 added, its register and authorize skipped", res.Done, res.Skipped)
	}
	res, err = r.Groups().SetSize(ctx, "cattle", 3, controller.ScaleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The member the apply made is still pending: the scale awaits it
	// too (its backend and authorization are still owed), beside the two
	// it makes.
	checkAwaitsFailed(t, res.Failed, 3)
	members := w.simulated()
	if got := recordedIDs(groupRecord(t, ctx, r, "cattle")); len(members) != 3 || !slices.Equal(got, members) {
		t.Fatalf("recorded %v, members %v", got, members)
	}
	if _, backends := w.lbFile("lb1"); len(backends) != 0 || len(w.authorized()) != 0 {
		t.Fatalf("backends %v, authorized %v: want none for members that do not run", backends, w.authorized())
	}
}

func checkAwaitsFailed(t *testing.T, failed []execute.Failure, n int) {
	t.Helper()
	if len(failed) != n {
		t.Fatalf("%d failures, want %d: %v", len(failed), n, failed)
	}
	for _, f := range failed {
		if f.Step.Kind != plan.StepAwait || f.Instance == "" ||
			!strings.Contains(f.Error(), string(f.Instance)+" not running within 300ms") {
			t.Errorf("failure %v, want an await naming the member", f)
		}
	}
}

// syncFollowers syncs ingress site and enrollment nfs as watch's follower
// sync does: a plan of Scope.Sync, executed through the service surface
// with awaits deferred (under the lock, recording to the state).
func syncFollowers(t *testing.T, r *Runner) plan.Counts {
	t.Helper()
	ctx := ctxT(t)
	unlock, err := r.StateStore().Lock(ctx, state.LockInfo{Operation: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	doc, err := r.StateStore().Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scope := plan.Scope{Ingresses: []string{"site"}, Enrollments: []string{"nfs"}, Sync: true}
	world := r.Observe(ctx, plan.NeedsOf(doc.Stack, doc, scope), nil)
	p, err := plan.Compute(doc.Stack, doc, world, scope)
	if err != nil {
		t.Fatal(err)
	}
	rec := execute.NewStateRecorder(r.StateStore(), doc, p.Desired, time.Second, nil)
	res := r.Execute(ctx, p, doc.Stack, rec, func(o *execute.Options) { o.Defer = true })
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("sync: %v %v", res.Err, res.Errors())
	}
	return res.Done
}

// A member that vanished keeps its authorization while the group runs
// fewer members than it wants, through any number of syncs (what watch's
// syncs do), but leaves the load balancers; scaling the group down to what
// runs revokes it.
func TestVanishedMemberAuthorizationHeldUntilScaledDown(t *testing.T) {
	w := newWorkdir(t, followerStack(3, "c1", false))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	members := w.simulated()
	gone := members[0]
	w.removeInstance(gone)
	if done := syncFollowers(t, r); done != (plan.Counts{Deregister: 1}) {
		t.Fatalf("first sync did %+v, want the vanished member deregistered only", done)
	}
	if done := syncFollowers(t, r); done != (plan.Counts{}) {
		t.Fatalf("second sync did %+v, want nothing", done)
	}
	if _, backends := w.lbFile("lb1"); !slices.Equal(backends, members[1:]) || !slices.Equal(w.authorized(), members) {
		t.Fatalf("after syncs: backends %v (want %v), authorized %v (want still %v)", backends, members[1:], w.authorized(), members)
	}
	// The plan of a scale-down to what runs shows the revocation.
	w.writeStack(followerStack(2, "c1", false))
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	if revoked := revokedFor(p, "enrollment.nfs"); !slices.Equal(revoked, []string{gone}) {
		t.Fatalf("the plan of the scale-down revokes %v, want %s", revoked, gone)
	}
	res := must(t, "SetSize 2")(r.Groups().SetSize(ctx, "cattle", 2, controller.ScaleOptions{}))
	if res.Done != (plan.Counts{Revoke: 1}) {
		t.Fatalf("scale-down did %+v, want one revocation", res.Done)
	}
	w.checkFollowers("after scaling down", members[1:])
}

// revokedFor are the members whose authorizations the plan's revoke steps
// of object revoke, sorted.
func revokedFor(p *plan.Plan, object string) []string {
	var out []string
	for _, s := range stepsOf(p, object, plan.StepRevoke) {
		out = append(out, string(enrollment.SourceOf(*s.Authorization)))
	}
	slices.Sort(out)
	return out
}

// stepsOf are the plan's steps of kind on object.
func stepsOf(p *plan.Plan, object string, kind plan.StepKind) []plan.Step {
	var out []plan.Step
	for _, s := range p.Steps {
		if s.Object == object && s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

func enrollmentChange(t *testing.T, p *plan.Plan, name string) plan.EnrollmentChange {
	t.Helper()
	for _, c := range p.Enrollments {
		if c.Enrollment == name {
			return c
		}
	}
	t.Fatalf("the plan has no enrollment %q", name)
	return plan.EnrollmentChange{}
}

func ingressChange(t *testing.T, p *plan.Plan, name string) plan.IngressChange {
	t.Helper()
	for _, c := range p.Ingresses {
		if c.Ingress == name {
			return c
		}
	}
	t.Fatalf("the plan has no ingress %q", name)
	return plan.IngressChange{}
}

// A plan deregisters and revokes the members it destroys, and only those.
// A route whose certificate changed is republished, and apply says so;
// destroy_on_free alone is an in-place update of the enrollment.
func TestPlanPreviewsFollowersAfterItsDestroys(t *testing.T) {
	w := newWorkdir(t, followerStack(4, "c1", false))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})

	w.writeStack(followerStack(1, "c2", true))
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	var destroyed []string
	for _, s := range stepsOf(p, "group.cattle", plan.StepDestroy) {
		destroyed = append(destroyed, string(s.Instance))
	}
	slices.Sort(destroyed)
	if len(destroyed) != 3 {
		t.Fatalf("the plan destroys %v, want 3 members", destroyed)
	}
	var deregistered []string
	for _, s := range stepsOf(p, "ingress.site", plan.StepDeregister) {
		deregistered = append(deregistered, string(s.Backend.ID))
	}
	slices.Sort(deregistered)
	if len(stepsOf(p, "ingress.site", plan.StepRepublish)) != 1 || !slices.Equal(deregistered, destroyed) {
		t.Fatalf("ingress steps: republish %v, deregister %v; want the route republished and %v deregistered",
			stepsOf(p, "ingress.site", plan.StepRepublish), deregistered, destroyed)
	}
	for _, s := range stepsOf(p, "enrollment.nfs", plan.StepRevoke) {
		if s.Reason != string(enrollment.ReasonMemberGone) {
			t.Errorf("revocation %v for %q", s, s.Reason)
		}
	}
	ec := enrollmentChange(t, p, "nfs")
	if revoked := revokedFor(p, "enrollment.nfs"); !slices.Equal(revoked, destroyed) || ec.Action != plan.ActionUpdate {
		t.Fatalf("enrollment %+v revokes %v, want %v revoked", ec, revoked, destroyed)
	}
	if want := []enrollment.Setting{{Attribute: "destroy_on_free", Old: "false", New: "true"}}; !slices.Equal(ec.Settings, want) {
		t.Fatalf("settings %+v, want %+v", ec.Settings, want)
	}

	res, err := r.Apply(ctx, p)
	if err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	if want := (plan.Counts{Destroy: 3, Republish: 1, Deregister: 3, Revoke: 3}); res.Done != want || p.Summary != want {
		t.Fatalf("apply did %+v of %+v, want %+v", res.Done, p.Summary, want)
	}
	if ports, _ := w.lbFile("lb1"); !slices.Equal(ports, []int{443}) {
		t.Fatalf("lb1 routes %v", ports)
	}
	w.checkFollowers("after the scale-down", w.simulated())

	// destroy_on_free alone: an in-place update with nothing to call.
	w.writeStack(followerStack(1, "c2", false))
	p, err = r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	ec = enrollmentChange(t, p, "nfs")
	if ec.Action != plan.ActionUpdate || len(ec.Settings) != 1 || p.Summary != (plan.Counts{}) || !p.HasChanges() {
		t.Fatalf("enrollment plan with destroy_on_free changed: %+v, summary %+v", ec, p.Summary)
	}
}

// Freeing an enrollment with destroy_on_free revokes its authorizations
// (the only free that touches anything); while it is free the group's
// verbs authorize nobody; apply resumes it and authorizes every member.
func TestFreeEnrollmentWithDestroyOnFreeRevokes(t *testing.T) {
	w := newWorkdir(t, followerStack(2, "c1", true))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	objs, res, err := r.Enrollments().Free(ctx, &controller.Metadata{Name: "nfs"})
	if err != nil || len(objs) != 1 || !objs[0].Freed || res.Done != (plan.Counts{Revoke: 2}) || res.Err() != nil {
		t.Fatalf("Free = %+v, %+v, %v; want 2 revoked", objs, res, err)
	}
	if got := w.authorized(); len(got) != 0 {
		t.Fatalf("authorized %v after the free", got)
	}
	if res := must(t, "SetSize 3")(r.Groups().SetSize(ctx, "cattle", 3, controller.ScaleOptions{})); res.Done.Authorize != 0 {
		t.Fatalf("SetSize authorized %d members of a freed enrollment", res.Done.Authorize)
	}
	w.writeStack(followerStack(3, "c1", true))
	if _, res := planAndApply(t, ctx, r, PlanMode{}); res.Done != (plan.Counts{Authorize: 3}) {
		t.Fatalf("the resuming apply did %+v, want 3 authorized", res.Done)
	}
	w.checkFollowers("after the resuming apply", w.simulated())
}
