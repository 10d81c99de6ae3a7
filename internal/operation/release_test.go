package operation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/internal/plan"
)

// lbHolds reads a load balancer's route ports and backend count from its provider.
func lbHolds(t *testing.T, r *Runner, lb string) (ports []int, backends int) {
	t.Helper()
	ctx := ctxT(t)
	routes, err := r.LoadBalancerRoutes(ctx, lb)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range routes {
		ports = append(ports, rt.LoadBalancerPort)
	}
	bs, err := r.LoadBalancerBackends(ctx, lb)
	if err != nil {
		t.Fatal(err)
	}
	return ports, len(bs)
}

func humanPlan(t *testing.T, p *plan.Plan) string {
	t.Helper()
	var b bytes.Buffer
	if err := plan.RenderHuman(&b, p, plan.HumanOptions{}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func checkNoChanges(t *testing.T, r *Runner) {
	t.Helper()
	ctx := ctxT(t)
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("a second plan has changes:\n%s", humanPlan(t, p))
	}
}

// An ingress rule moved from lb1 to lb2: the plan shows lb1's teardown, and
// apply takes the route and backends off lb1, which nothing manages any
// more. Moved back while ingress "api" takes lb2, only what api does not
// want goes from lb2.
func TestIngressReleasesALoadBalancer(t *testing.T) {
	ctx := ctxT(t)
	w := newWorkdir(t, releaseStack("lb1", "", "simulator.nfs-auth"))
	r := w.runner(Options{})
	planAndApply(t, ctx, r, PlanMode{})
	if ports, n := lbHolds(t, r, "lb1"); !slices.Equal(ports, []int{443}) || n != 3 {
		t.Fatalf("after the first apply lb1 holds routes %v and %d backends", ports, n)
	}

	w.writeStack(releaseStack("lb2", "", "simulator.nfs-auth"))
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	ic := ingressChange(t, p, "site")
	if ic.Action != plan.ActionUpdate || !slices.Equal(ic.Released, []string{"lb1"}) {
		t.Fatalf("ingress plan %+v", ic)
	}
	human := humanPlan(t, p)
	for _, want := range []string{"+ route lb2:443 https -> 8080 http (certificate c1)", "+ 3 backends on lb2",
		"- route lb1:443 https -> 8080 http (certificate c1)", "- 3 backends on lb1", "# lb1 no longer in the ingress"} {
		if !strings.Contains(human, want) {
			t.Errorf("the plan lacks %q:\n%s", want, human)
		}
	}
	res := must(t, "Apply")(r.Apply(ctx, p))
	if want := (plan.Counts{Publish: 1, Register: 3, Unpublish: 1, Deregister: 3}); res.Done != want || p.Summary != want {
		t.Fatalf("apply did %+v of %+v, want %+v", res.Done, p.Summary, want)
	}
	if ports, n := lbHolds(t, r, "lb1"); len(ports) != 0 || n != 0 {
		t.Fatalf("lb1 still holds routes %v and %d backends", ports, n)
	}
	if ports, n := lbHolds(t, r, "lb2"); !slices.Equal(ports, []int{443}) || n != 3 {
		t.Fatalf("lb2 holds routes %v and %d backends", ports, n)
	}
	checkNoChanges(t, r)

	// Back to lb1, while "api" takes lb2 for the same group on port 80:
	// site's route goes from lb2, the backends api wants stay.
	w.writeStack(releaseStack("lb1", "lb2", "simulator.nfs-auth"))
	p, err = r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	ic = ingressChange(t, p, "site")
	var released []string
	for _, s := range p.Steps {
		if s.Object != "ingress.site" || s.LoadBalancer != "lb2" {
			continue
		}
		if s.Kind != plan.StepUnpublish {
			t.Fatalf("site's teardown of lb2 has step %v, want its route's unpublish only", s)
		}
		released = append(released, fmt.Sprint(s.Route.LoadBalancerPort))
	}
	if !slices.Equal(ic.Released, []string{"lb2"}) || !slices.Equal(released, []string{"443"}) {
		t.Fatalf("ingress plan %+v unpublishes %v on lb2", ic, released)
	}
	must(t, "Apply")(r.Apply(ctx, p))
	if ports, n := lbHolds(t, r, "lb2"); !slices.Equal(ports, []int{80}) || n != 3 {
		t.Fatalf("lb2 holds routes %v and %d backends, want api's", ports, n)
	}
	if ports, n := lbHolds(t, r, "lb1"); !slices.Equal(ports, []int{443}) || n != 3 {
		t.Fatalf("lb1 holds routes %v and %d backends", ports, n)
	}
	checkNoChanges(t, r)

	// ingress describe asks its load balancers
	objs, err := r.Ingresses().Describe(ctx, &controller.Metadata{Name: "site"})
	if err != nil || len(objs) != 1 {
		t.Fatalf("Describe(site) = %+v, %v", objs, err)
	}
	var views []ingress.View
	if err := json.Unmarshal(objs[0].State, &views); err != nil {
		t.Fatal(err)
	}
	if len(views) != 1 || views[0].LoadBalancer != "lb1" || len(views[0].Routes) != 1 || views[0].Routes[0].LBPort != 443 ||
		len(views[0].Backends) != 3 {
		t.Fatalf("Describe(site) = %+v", views)
	}
}

// An enrollment whose target changes from simulator.nfs-auth to simulator:
// the plan shows the target change and what the old target loses. Both
// aliases are processes of one simulator on one directory, so the old
// target's authorizations are the new target's: none is revoked, none made,
// and the members keep theirs (same IDs). (Two stores, where the old one is
// emptied, are TestReleaseOldTarget in internal/controller/enrollment: the
// simulator serves one authorizer type, so a stack cannot name two stores.)
func TestEnrollmentTargetChanged(t *testing.T) {
	ctx := ctxT(t)
	w := newWorkdir(t, releaseStack("lb1", "", "simulator.nfs-auth"))
	r := w.runner(Options{})
	planAndApply(t, ctx, r, PlanMode{})
	before := authorizationIDs(t, r)
	if len(before) != 3 {
		t.Fatalf("authorizations %v, want 3", before)
	}

	w.writeStack(releaseStack("lb1", "", "simulator"))
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	ec := enrollmentChange(t, p, "nfs")
	if ec.Action != plan.ActionUpdate || ec.Retarget != `simulator.nfs-auth "disk"` || len(stepsOf(p, "enrollment.nfs", plan.StepRevoke)) != 0 ||
		p.Summary != (plan.Counts{}) {
		t.Fatalf("enrollment plan %+v, summary %+v", ec, p.Summary)
	}
	if human := humanPlan(t, p); !strings.Contains(human, `~ target = simulator.nfs-auth "disk" -> simulator "disk"`) {
		t.Fatalf("the plan does not show the target change:\n%s", human)
	}
	if res := must(t, "Apply")(r.Apply(ctx, p)); res.Done != (plan.Counts{}) {
		t.Fatalf("apply did %+v, want nothing revoked or made", res.Done)
	}
	if after := authorizationIDs(t, r); !slices.Equal(after, before) {
		t.Fatalf("authorizations %v, want %v kept", after, before)
	}
	checkNoChanges(t, r)
}

// authorizationIDs are the IDs of enrollment nfs's authorizations, as
// Enrollments().Describe asks its target for them.
func authorizationIDs(t *testing.T, r *Runner) []string {
	t.Helper()
	objs, err := r.Enrollments().Describe(ctxT(t), &controller.Metadata{Name: "nfs"})
	if err != nil || len(objs) != 1 {
		t.Fatalf("Describe(nfs) = %+v, %v", objs, err)
	}
	var v enrollment.View
	if err := json.Unmarshal(objs[0].State, &v); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range v.Authorizations {
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}
