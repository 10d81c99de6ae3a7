package operation

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
)

// pendingOf are the teardowns the state keeps for one ingress or
// enrollment.
func pendingOf(m map[string]*state.ControllerStatus, name string) []*config.Stack {
	if m[name] == nil {
		return nil
	}
	return m[name].Pending
}

// pendingLBs are the load balancers whose teardowns the state keeps for
// ingress name.
func pendingLBs(t *testing.T, r *Runner, name string) []string {
	t.Helper()
	doc, err := r.State(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, part := range pendingOf(doc.Ingresses, name) {
		for _, lb := range part.LoadBalancers {
			out = append(out, lb.Name)
		}
	}
	return out
}

// A load balancer's teardown that fails (lb1 cannot be read) is kept in the
// state: apply fails naming it, the next plan shows it again, and once lb1
// answers an apply tears it down and clears the record. Both an ingress
// that moves off lb1 and one that leaves the stack.
func TestFailedReleaseIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name, next string
		action     plan.Action
	}{
		{"moved", releaseStack("lb2", "", "simulator.nfs-auth"), plan.ActionUpdate},
		{"destroyed", strings.Replace(releaseStack("lb2", "", "simulator.nfs-auth"), `ingress "site"`, `ingress "other"`, 1), plan.ActionDestroy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			w := newWorkdir(t, releaseStack("lb1", "", "simulator.nfs-auth"))
			r := w.runner(Options{})
			planAndApply(t, ctx, r, PlanMode{})

			w.writeStack(tc.next)
			p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
			if err != nil {
				t.Fatal(err)
			}
			repair := w.breakLB("lb1")
			res, err := r.Apply(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failed) == 0 || !strings.Contains(res.Err().Error(), "ingress.site") || !strings.Contains(res.Err().Error(), `load balancer "lb1"`) {
				t.Fatalf("apply with lb1 failing: %v, want failures naming ingress site and lb1", res.Err())
			}
			for _, f := range res.Failed {
				if f.Step.Object != "ingress.site" || f.Step.LoadBalancer != "lb1" {
					t.Errorf("failure %v, want only lb1's teardown to fail", f)
				}
			}
			if got := pendingLBs(t, r, "site"); !slices.Equal(got, []string{"lb1"}) {
				t.Fatalf("the state keeps teardowns of %v, want lb1", got)
			}
			// Still failing: the plan says so (the teardown cannot be previewed).
			p, err = r.Plan(ctx, load(t, ctx, r), PlanMode{})
			if err != nil {
				t.Fatal(err)
			}
			if ic := ingressChange(t, p, "site"); ic.Action != plan.ActionUnknown || !strings.Contains(ic.Error, "lb1") {
				t.Fatalf("plan with lb1 failing: %+v", ic)
			}

			repair()
			p, err = r.Plan(ctx, load(t, ctx, r), PlanMode{})
			if err != nil {
				t.Fatal(err)
			}
			ic := ingressChange(t, p, "site")
			if ic.Action != tc.action || !slices.Equal(ic.Pending, []string{"lb1"}) || !p.HasChanges() {
				t.Fatalf("plan after repair: %+v", ic)
			}
			human := humanPlan(t, p)
			for _, want := range []string{"- route lb1:443 https -> 8080 http (certificate c1)", "- 3 backends on lb1", "# lb1: an earlier apply could not finish"} {
				if !strings.Contains(human, want) {
					t.Errorf("the plan lacks %q:\n%s", want, human)
				}
			}
			res = must(t, "Apply")(r.Apply(ctx, p))
			if want := (plan.Counts{Unpublish: 1, Deregister: 3}); res.Done != want || p.Summary != want {
				t.Fatalf("apply did %+v of %+v, want %+v", res.Done, p.Summary, want)
			}
			if ports, n := lbHolds(t, r, "lb1"); len(ports) != 0 || n != 0 {
				t.Fatalf("lb1 still holds routes %v and %d backends", ports, n)
			}
			if got := pendingLBs(t, r, "site"); len(got) != 0 {
				t.Fatalf("the state still keeps teardowns of %v", got)
			}
			checkNoChanges(t, r)
		})
	}
}

// An enrollment that leaves the stack while its authorizer fails (the
// simulator cannot list the authorizations) keeps its revocations in the
// state; once the authorizer answers, the next apply revokes them.
func TestFailedRevocationIsRetried(t *testing.T) {
	ctx := ctxT(t)
	stack := releaseStack("lb1", "", "simulator.nfs-auth")
	w := newWorkdir(t, stack)
	r := w.runner(Options{})
	planAndApply(t, ctx, r, PlanMode{})
	if n := len(authorizationIDs(t, r)); n != 3 {
		t.Fatalf("%d authorizations, want 3", n)
	}
	w.writeStack(stack[:strings.Index(stack, `enrollment "nfs"`)])
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(w.dir, ".infrakit", "simulator", "authorizations", "disk")
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 3 || !strings.Contains(res.Err().Error(), `enrollment "nfs"`) {
		t.Fatalf("apply with the authorizer failing: %v, want the 3 revocations of enrollment nfs to fail", res.Err())
	}
	doc, err := r.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if parts := pendingOf(doc.Enrollments, "nfs"); len(parts) != 1 || parts[0].Enrollment("nfs") == nil {
		t.Fatalf("the state keeps %v, want the enrollment's revocations", parts)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	p, err = r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	ec := enrollmentChange(t, p, "nfs")
	if ec.Action != plan.ActionDestroy || len(ec.Pending) != 1 || len(stepsOf(p, "enrollment.nfs", plan.StepRevoke)) != 3 {
		t.Fatalf("plan after repair: %+v", ec)
	}
	if human := humanPlan(t, p); !strings.Contains(human, `- 3 authorizations revoked on simulator.nfs-auth "disk"`) {
		t.Errorf("the plan does not show the revocations:\n%s", human)
	}
	res = must(t, "Apply")(r.Apply(ctx, p))
	if want := (plan.Counts{Revoke: 3}); res.Done != want || p.Summary != want {
		t.Fatalf("apply did %+v of %+v, want %+v", res.Done, p.Summary, want)
	}
	doc, err = r.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Enrollments["nfs"] != nil {
		t.Fatalf("the state still keeps %+v", doc.Enrollments["nfs"])
	}
	checkNoChanges(t, r)
}
