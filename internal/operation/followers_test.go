package operation

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/plan"
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
	return fmt.Sprintf(`
stack "test" {}

provider "simulator" {}
provider "simulator" { alias = "nfs-auth" }
provider "vanilla" {}

group "cattle" {
  size = %d
  instance {
    provider   = simulator
    type       = "compute"
    properties = {}
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
%s
enrollment "nfs" {
  source = group.cattle
  target {
    provider   = %s
    type       = "disk"
    properties = { host = member.id }
  }
  destroy_on_free = %v
}
`, f.size, f.siteLB, f.certificate, api, f.target, f.destroyOnFree)
}

// progressLog collects progress events.
type progressLog struct {
	mu     sync.Mutex
	events []Progress
}

func (l *progressLog) add(p Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, p)
}

// waits are the wait events of group.
func (l *progressLog) waits(group string) []Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Progress
	for _, p := range l.events {
		if p.Action == ActionWait && p.Group == group {
			out = append(out, p)
		}
	}
	return out
}

// followersOf reads what lb1 and the enrollment nfs hold: backend IDs and
// authorized member IDs, sorted.
func followersOf(t *testing.T, r *Runner) (backends, authorized []string) {
	t.Helper()
	ctx := ctxT(t)
	bs, err := r.LoadBalancerBackends(ctx, "lb1")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		backends = append(backends, string(b.ID))
	}
	v, _, err := r.DescribeEnrollment(ctx, "nfs")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range v.Authorizations {
		authorized = append(authorized, string(a.SourceID))
	}
	slices.Sort(backends)
	slices.Sort(authorized)
	return backends, authorized
}

// With a provider that starts instances slowly, apply and `group scale`
// wait for the members they created to run before syncing the followers,
// so every member is authorized when they return (the enrollment
// authorizes running members only), and they say that they are waiting.
func TestScaleWaitsForNewMembersToRun(t *testing.T) {
	w := newWorkdir(t, followerStack(2, "c1", false))
	var progress progressLog
	r := w.runner(Options{HostEnv: []string{"INFRAKIT_SIMULATOR_PROVISION_DELAY=1s"}, Progress: progress.add})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	backends, authorized := followersOf(t, r)
	if members := w.simulated(); len(members) != 2 || !slices.Equal(backends, members) || !slices.Equal(authorized, members) {
		t.Fatalf("after apply: members %v, backends %v, authorized %v", members, backends, authorized)
	}
	if waits := progress.waits("cattle"); len(waits) == 0 || waits[len(waits)-1].Done != 2 || waits[len(waits)-1].Total != 2 {
		t.Fatalf("apply's wait progress: %+v", waits)
	}

	res, err := r.Scale(ctx, "cattle", 4)
	if err != nil {
		t.Fatal(err)
	}
	backends, authorized = followersOf(t, r)
	if members := w.simulated(); len(members) != 4 || !slices.Equal(backends, members) || !slices.Equal(authorized, members) {
		t.Fatalf("after scale: members %v, backends %v, authorized %v", members, backends, authorized)
	}
	if res.Controllers.Authorized != 2 {
		t.Fatalf("scale authorized %d, want 2: %+v", res.Controllers.Authorized, res.Controllers)
	}
	waits := progress.waits("cattle")
	if last := waits[len(waits)-1]; last.Done != 2 || last.Total != 2 {
		t.Fatalf("scale's wait progress: %+v", waits)
	}

	// Scaling down waits for nothing.
	before := len(progress.waits("cattle"))
	if _, err := r.Scale(ctx, "cattle", 3); err != nil {
		t.Fatal(err)
	}
	if len(progress.waits("cattle")) != before {
		t.Fatalf("a scale-down waited: %+v", progress.waits("cattle")[before:])
	}
	backends, authorized = followersOf(t, r)
	if members := w.simulated(); len(members) != 3 || !slices.Equal(backends, members) || !slices.Equal(authorized, members) {
		t.Fatalf("after scale-down: members %v, backends %v, authorized %v", members, backends, authorized)
	}
}

// When created members do not run within the wait, apply and `group scale`
// say so and which members are pending; the members are recorded, their
// backends registered, and nothing is authorized for them yet.
func TestScaleSaysWhenNewMembersDoNotRunInTime(t *testing.T) {
	saved := runningWait
	runningWait = 300 * time.Millisecond
	t.Cleanup(func() { runningWait = saved })
	w := newWorkdir(t, followerStack(1, "c1", false))
	r := w.runner(Options{HostEnv: []string{"INFRAKIT_SIMULATOR_PROVISION_DELAY=1h"}})
	ctx := ctxT(t)
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, p); err == nil || !strings.Contains(err.Error(), `group "cattle": 1 of 1 still pending`) {
		t.Fatalf("apply: %v", err)
	}
	_, err = r.Scale(ctx, "cattle", 3)
	if err == nil || !strings.Contains(err.Error(), `group "cattle": 2 of 2 still pending`) ||
		!strings.Contains(err.Error(), "recorded in the state") {
		t.Fatalf("scale: %v", err)
	}
	members := w.simulated()
	if got := recordedIDs(groupRecord(t, ctx, r, "cattle")); len(members) != 3 || !slices.Equal(got, members) {
		t.Fatalf("recorded %v, members %v", got, members)
	}
	backends, authorized := followersOf(t, r)
	if !slices.Equal(backends, members) || len(authorized) != 0 {
		t.Fatalf("backends %v (want the pending members %v), authorized %v (want none)", backends, members, authorized)
	}
}

// A member that vanished keeps its authorization while the group runs
// fewer members than it wants, through any number of syncs (what watch's
// syncs do); scaling the group down to what runs revokes it.
func TestVanishedMemberAuthorizationHeldUntilScaledDown(t *testing.T) {
	w := newWorkdir(t, followerStack(3, "c1", false))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	members := w.simulated()
	gone := members[0]
	if err := os.Remove(filepath.Join(w.dir, ".infrakit", "simulator", "instances", "compute", gone+".json")); err != nil {
		t.Fatal(err)
	}
	doc, err := r.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.SyncFollowers(ctx, doc.Stack, doc, Selection{All: true}); err != nil {
			t.Fatal(err)
		}
	}
	backends, authorized := followersOf(t, r)
	if !slices.Equal(backends, members[1:]) || !slices.Equal(authorized, members) {
		t.Fatalf("after syncs: backends %v (want %v), authorized %v (want still %v)", backends, members[1:], authorized, members)
	}
	// The plan of a scale-down to what runs shows the revocation.
	w.writeStack(followerStack(2, "c1", false))
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	if ec := enrollmentChange(t, p, "nfs"); len(ec.Changes.Revoke) != 1 || string(ec.Changes.Revoke[0].Authorization.SourceID) != gone {
		t.Fatalf("plan of the scale-down: %+v", ec)
	}
	res, err := r.Scale(ctx, "cattle", 2)
	if err != nil {
		t.Fatal(err)
	}
	backends, authorized = followersOf(t, r)
	if !slices.Equal(backends, members[1:]) || !slices.Equal(authorized, members[1:]) || res.Controllers.Revoked != 1 {
		t.Fatalf("after scaling down: backends %v, authorized %v, %+v", backends, authorized, res.Controllers)
	}
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

// A plan previews backends and authorizations against the members as it
// leaves them: the members it destroys are deregistered and revoked in the
// preview. A route whose certificate changed is republished, and apply
// says so; destroy_on_free alone is an in-place update of the enrollment.
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
	for _, gc := range p.Groups {
		for _, d := range gc.Destroy {
			destroyed = append(destroyed, string(d.ID))
		}
	}
	slices.Sort(destroyed)
	if len(destroyed) != 3 {
		t.Fatalf("the plan destroys %v, want 3 members", destroyed)
	}
	ic := ingressChange(t, p, "site")
	if len(ic.LoadBalancers) != 1 || len(ic.LoadBalancers[0].Republish) != 1 || !slices.Equal(backendIDs(ic), destroyed) {
		t.Fatalf("ingress preview %+v, want the route republished and %v deregistered", ic, destroyed)
	}
	ec := enrollmentChange(t, p, "nfs")
	var revoked []string
	for _, rv := range ec.Changes.Revoke {
		revoked = append(revoked, string(rv.Authorization.SourceID))
		if rv.Reason != enrollment.ReasonMemberGone {
			t.Errorf("revocation %+v", rv)
		}
	}
	slices.Sort(revoked)
	if !slices.Equal(revoked, destroyed) || ec.Action != plan.ActionUpdate {
		t.Fatalf("enrollment preview %+v, want %v revoked", ec, destroyed)
	}
	if want := []enrollment.Setting{{Attribute: "destroy_on_free", Old: "false", New: "true"}}; !slices.Equal(ec.Changes.Settings, want) {
		t.Fatalf("settings %+v, want %+v", ec.Changes.Settings, want)
	}

	res, err := r.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	cr := res.Controllers
	if cr.Republished != 1 || cr.Revoked != 3 || cr.Deregistered != 3 ||
		!slices.ContainsFunc(cr.Lines, func(l string) bool { return strings.Contains(l, "lb1: 1 route republished, 3 backends deregistered") }) {
		t.Fatalf("apply did %+v", cr)
	}

	// destroy_on_free alone: an in-place update with nothing to call.
	w.writeStack(followerStack(1, "c2", false))
	p, err = r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	ec = enrollmentChange(t, p, "nfs")
	if ec.Action != plan.ActionUpdate || ec.Count() != 0 || len(ec.Changes.Settings) != 1 {
		t.Fatalf("enrollment plan with destroy_on_free changed: %+v", ec)
	}
}

func backendIDs(c plan.IngressChange) []string {
	var out []string
	for _, lb := range c.LoadBalancers {
		for _, b := range lb.Deregister {
			out = append(out, string(b.ID))
		}
	}
	slices.Sort(out)
	return out
}
