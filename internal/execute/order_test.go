package execute

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A scale-down behind a load balancer: each leaving member is deregistered,
// then drained (after the drain delay), then destroyed, and the load
// balancer no longer has it when it is drained or destroyed. Both
// deregistrations are ready together, so they are one call.
func TestScaleDownDeregistersThenDrainsThenDestroys(t *testing.T) {
	f := newFixture(t, stackOf(3, "v1", "", lbIngress), nil)
	f.apply()
	f.setStack(stackOf(1, "v1", `drain_delay = "50ms"`, lbIngress))
	p := f.plan(plan.Scope{})
	leaving := stepsOf(p, plan.StepDestroy)
	if len(leaving) != 2 {
		t.Fatalf("plan destroys %d members, want 2:\n%v", len(leaving), p.Steps)
	}

	res := f.run(ctxT(t), p, Options{})
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkCounts(t, p, res)
	if res.Done != p.Summary {
		t.Errorf("done %+v, planned %+v", res.Done, p.Summary)
	}
	j := f.probe.entries()
	for _, s := range leaving {
		id := s.Instance
		checkOrder(t, j, "leaving "+string(id),
			eventOf(plan.StepDeregister, id), eventOf(plan.StepDrain, id), eventOf(plan.StepDestroy, id))
		for _, op := range []string{"drain", "destroy"} {
			if at := find(j, callOf("begin", op, id)); at < 0 || len(j[at].registered) > 0 {
				t.Errorf("%s of %s began while it was a backend of %v", op, id, j[at].registered)
			}
		}
	}
	if d := calls(j, "deregister"); len(d) != 1 || len(d[0].ids) != 2 {
		t.Errorf("deregistrations ready together took calls %v, want one of both", d)
	}

	live := f.live("simulator")
	backends := f.backends("lb1")
	if len(live) != 1 || !slices.Equal(slices.Sorted(maps.Keys(live)), slices.Sorted(maps.Keys(backends))) {
		t.Errorf("after the scale-down: live %v, backends %v", slices.Sorted(maps.Keys(live)), backends)
	}
	if got := f.doc.Groups["web"].Instances; len(got) != 1 || live[instance.ID(got[0].ID)].ID == "" {
		t.Errorf("state records %v, live %v", got, live)
	}
}

// A rolling update behind a load balancer is make before break: each new
// member is registered before the member it replaces is deregistered (the
// load balancer has it when the deregistration begins), the old one is
// drained and destroyed after, and the next batch starts only once the
// batch before it is destroyed.
func TestReplacementRegistersNewBeforeDeregisteringOld(t *testing.T) {
	f := newFixture(t, stackOf(2, "v1", "", lbIngress), nil)
	f.apply()
	f.setStack(stackOf(2, "v2", "", lbIngress))
	p := f.plan(plan.Scope{})
	var provisions []plan.Step
	for _, s := range stepsOf(p, plan.StepProvision) {
		if s.Replaces != "" {
			provisions = append(provisions, s)
		}
	}
	if len(provisions) != 2 || len(p.Groups) != 1 || len(p.Groups[0].Roll) != 2 {
		t.Fatalf("want a roll of 2 batches of 1, got %+v\n%v", p.Groups, p.Steps)
	}

	res := f.run(ctxT(t), p, Options{})
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkCounts(t, p, res)
	if res.Done != p.Summary || res.Done.Roll != 2 {
		t.Errorf("done %+v, planned %+v", res.Done, p.Summary)
	}
	j := f.probe.entries()
	var fresh []instance.ID
	for _, s := range provisions {
		old, made := s.Replaces, res.Made[s.ID].ID
		fresh = append(fresh, made)
		checkOrder(t, j, "replacing "+string(old)+" by "+string(made),
			eventOf(plan.StepAwait, made), eventOf(plan.StepRegister, made),
			eventOf(plan.StepDeregister, old), eventOf(plan.StepDrain, old), eventOf(plan.StepDestroy, old))
		if at := find(j, callOf("begin", "deregister", old)); at < 0 || !slices.Contains(j[at].registered, string(made)) {
			t.Errorf("%s was deregistered while its replacement %s was not a backend", old, made)
		}
		if at := find(j, callOf("begin", "destroy", old)); at < 0 || len(j[at].registered) > 0 {
			t.Errorf("%s was destroyed while still a backend", old)
		}
	}
	// The second provision call begins after the first batch's destroy.
	first := find(j, eventOf(plan.StepDestroy, provisions[0].Replaces))
	begins := 0
	for i, e := range j {
		if e.what == "begin" && e.op == "provision" {
			if begins++; begins == 2 && i < first {
				t.Errorf("the second batch began (%d) before the first was destroyed (%d)", i, first)
			}
		}
	}

	live := f.live("simulator")
	if got := slices.Sorted(maps.Keys(live)); !slices.Equal(got, slices.Sorted(slices.Values(fresh))) {
		t.Errorf("live %v, want the replacements %v", got, fresh)
	}
	if got := slices.Sorted(maps.Keys(f.backends("lb1"))); !slices.Equal(got, slices.Sorted(slices.Values(fresh))) {
		t.Errorf("backends %v, want the replacements %v", got, fresh)
	}
	var recorded []instance.ID
	for _, in := range f.doc.Groups["web"].Instances {
		recorded = append(recorded, instance.ID(in.ID))
		if in.ConfigHash != f.stack.Group("web").ConfigHash() {
			t.Errorf("state records %s with hash %q", in.ID, in.ConfigHash)
		}
	}
	if !slices.Equal(recorded, slices.Sorted(slices.Values(fresh))) {
		t.Errorf("state records %v, want %v", recorded, fresh)
	}
}

// nfsEnrollment authorizes each member of web at a second simulator.
const nfsEnrollment = `
provider "simulator" { alias = "nfs" }

enrollment "nfs" {
  source = group.web
  target {
    provider   = simulator.nfs
    type       = "disk"
    properties = { host = member.id, iops = 10 }
  }
}
`

// Members made are authorized once they run, with the target's properties
// rendered for them; a member leaving is revoked before it is drained and
// destroyed.
func TestEnrollmentAuthorizesNewAndRevokesLeaving(t *testing.T) {
	f := newFixture(t, stackOf(2, "v1", "", nfsEnrollment), nil)
	p := f.plan(plan.Scope{})
	res := f.run(ctxT(t), p, Options{})
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkCounts(t, p, res)
	if res.Done != p.Summary || res.Done.Authorize != 2 {
		t.Errorf("done %+v, planned %+v", res.Done, p.Summary)
	}
	auths, err := f.clients["simulator.nfs"].Authorizer("disk").Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	byMember := map[instance.ID]string{}
	for _, a := range auths {
		byMember[a.SourceID] = string(a.Properties)
	}
	for _, m := range res.Made {
		if !strings.Contains(byMember[m.ID], `"host":"`+string(m.ID)+`"`) {
			t.Errorf("%s authorized with %q", m.ID, byMember[m.ID])
		}
	}

	f.setStack(stackOf(1, "v1", "", nfsEnrollment))
	f.probe.reset()
	p = f.plan(plan.Scope{})
	revokes := stepsOf(p, plan.StepRevoke)
	leaving := stepsOf(p, plan.StepDestroy)
	if len(revokes) != 1 || len(leaving) != 1 {
		t.Fatalf("plan:\n%v", p.Steps)
	}
	res = f.run(ctxT(t), p, Options{})
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkCounts(t, p, res)
	j := f.probe.entries()
	id := leaving[0].Instance
	revoked := func(e entry) bool { return e.what == "event" && e.step == revokes[0].ID }
	checkOrder(t, j, "leaving "+string(id), revoked, eventOf(plan.StepDrain, id), eventOf(plan.StepDestroy, id))
	if auths, err = f.clients["simulator.nfs"].Authorizer("disk").Describe(ctxT(t)); err != nil || len(auths) != 1 || auths[0].SourceID == id {
		t.Errorf("authorizations left %v (%v), %s revoked", auths, err, id)
	}
}
