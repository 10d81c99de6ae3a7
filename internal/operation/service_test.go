package operation

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// stop-update marks the state; a plan shows the roll as stopped; the next
// apply clears the mark and rolls; the group view reports the progress.
func TestStopUpdateThenApplyResumes(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 3, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	groups := r.Groups()
	planAndApply(t, ctx, r, PlanMode{})

	if err := groups.StopUpdate(ctx, "nope"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("StopUpdate of an unknown group: %v", err)
	}
	if err := groups.StopUpdate(ctx, "miners"); err != nil {
		t.Fatal(err)
	}
	if !groupRecord(t, ctx, r, "miners").UpdateStopped {
		t.Fatal("StopUpdate did not mark the state")
	}
	if err := groups.StopUpdate(ctx, "miners"); err != nil {
		t.Fatalf("a second StopUpdate: %v", err)
	}

	w.writeStack(fmt.Sprintf(stackTemplate, 3, "v2"))
	v, err := describeGroups(t, ctx, r, &controller.Metadata{Name: "miners"})
	if err != nil || !v[0].UpdateStopped || v[0].ConfigHash == "" {
		t.Fatalf("Describe(miners) = %+v, %v; want stopped, with the stored config hash", v, err)
	}
	p, res := planAndApply(t, ctx, r, PlanMode{})
	var stopped bool
	for _, gc := range p.Groups {
		if gc.Group == "miners" {
			stopped = gc.UpdateStopped
		}
	}
	if !stopped || res.Done.Roll != 3 || res.Done != p.Summary {
		t.Fatalf("apply after stop-update: plan stopped=%v, done %+v; want the plan to say stopped and apply to roll 3", stopped, res.Done)
	}
	if groupRecord(t, ctx, r, "miners").UpdateStopped {
		t.Error("apply did not clear the stop-update mark")
	}
	v, err = describeGroups(t, ctx, r, &controller.Metadata{Name: "miners"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range v[0].Instances {
		if m.ConfigHash != v[0].ConfigHash {
			t.Errorf("member %s has hash %s, the group %s", m.ID, m.ConfigHash, v[0].ConfigHash)
		}
	}
}

// The service surface: a group's Instances through the runner's host; a
// plan observed, computed and executed as a watch pass does (awaits
// deferred, progress reported); and a host reset that relaunches the
// providers from the lock file.
func TestServiceSurface(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 2, "v1"))
	var progress events
	r := w.runner(Options{Progress: progress.add})
	ctx := ctxT(t)
	doc, inst := appliedMiners(t, ctx, r)
	members, err := inst.Observe(ctx, true)
	if err != nil || len(members) != 2 {
		t.Fatalf("Observe: %d members, %v", len(members), err)
	}

	// A pass: one member more for miners, decided by the caller.
	unlock, err := r.StateStore().Lock(ctx, state.LockInfo{Operation: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	scope := plan.Scope{Groups: []string{"miners"}, Work: map[string]plan.GroupWork{"miners": {Create: []group.Create{{}}}}}
	world := r.Observe(ctx, plan.NeedsOf(doc.Stack, doc, scope), nil)
	if len(world.Members["miners"]) != 2 || len(world.Failed) != 0 {
		t.Fatalf("Observe: %+v", world)
	}
	p, err := plan.Compute(doc.Stack, doc, world, scope)
	if err != nil {
		t.Fatal(err)
	}
	rec := execute.NewStateRecorder(r.StateStore(), doc, p.Desired, time.Second, nil)
	progress.reset()
	res := r.Execute(ctx, p, doc.Stack, rec, func(o *execute.Options) { o.Defer = true })
	unlock()
	if res.Err != nil || res.Done != (plan.Counts{Add: 1}) || len(res.Made) != 1 {
		t.Fatalf("Execute: %+v, %v", res.Done, res.Err)
	}
	if evs := progress.of("group.miners", plan.StepProvision); len(evs) != 1 || evs[0].Instance == "" {
		t.Errorf("progress events %+v, want one provision naming its instance", progress.snapshot())
	}
	if n := len(recordedIDs(groupRecord(t, ctx, r, "miners"))); n != 3 || len(w.simulated()) != 5 {
		t.Fatalf("%d miners recorded, %d simulated; want 3 and 5", n, len(w.simulated()))
	}

	h, err := r.PluginHost()
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Client(ctx, "simulator")
	if err != nil {
		t.Fatal(err)
	}
	before := c.Pid()
	if err := r.ResetHost(); err != nil {
		t.Fatal(err)
	}
	if !c.Exited() {
		t.Error("ResetHost left the old provider running")
	}
	h, err = r.PluginHost()
	if err != nil {
		t.Fatal(err)
	}
	c, err = h.Client(ctx, "simulator")
	if err != nil || c.Pid() == before {
		t.Fatalf("after ResetHost: pid %d (was %d), %v", c.Pid(), before, err)
	}
	// The Instances made before the reset are made anew for the new process.
	again, err := r.Instances(ctx, doc.Stack.Name, doc.Stack.Group("miners"))
	if err != nil || again == inst {
		t.Fatalf("Instances after ResetHost: the same %v, %v; want new ones", again == inst, err)
	}
	if members, err := again.Observe(ctx, false); err != nil || len(members) != 3 {
		t.Fatalf("Observe after ResetHost: %d members, %v", len(members), err)
	}
}

// ObserveKnown takes a group's members from the descriptions it is given
// instead of listing them (here one of the two miners: what was given,
// not what the simulator lists), lists the groups it is given nothing
// for, and lists a group whose plan needs the members' properties anyway.
func TestObserveKnown(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 2, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	doc, inst := appliedMiners(t, ctx, r)
	descs, err := inst.Describe(ctx, false)
	if err != nil || len(descs) != 2 {
		t.Fatalf("Describe: %d miners, %v", len(descs), err)
	}
	known := map[string][]instance.Description{"miners": descs[:1]}
	needs := plan.NeedsOf(doc.Stack, doc, plan.Scope{Groups: []string{"miners", "db"}})

	world := r.ObserveKnown(ctx, needs, nil, known)
	if got := idsOfMembers(world.Members["miners"]); len(world.Failed) != 0 || len(got) != 1 || got[0] != descs[0].ID {
		t.Errorf("miners observed as %v (failed: %v); want the one given, %s", got, world.Failed, descs[0].ID)
	}
	if n := len(world.Members["db"]); n != 2 || len(world.Instances["miners"]) != 1 {
		t.Errorf("db observed with %d members, miners' instances %d; want db listed (2) and miners' given one", n, len(world.Instances["miners"]))
	}

	need := needs.Groups["miners"]
	need.Properties = true
	needs.Groups["miners"] = need
	world = r.ObserveKnown(ctx, needs, nil, known)
	if n := len(world.Members["miners"]); n != 2 {
		t.Errorf("miners observed with %d members when the plan needs their properties; want them listed (2)", n)
	}
}

func idsOfMembers(ms []group.Member) []instance.ID {
	out := make([]instance.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// appliedMiners applies the stack through r and returns the state it left
// and the miners' Instances.
func appliedMiners(t *testing.T, ctx context.Context, r *Runner) (*state.Document, *group.Instances) {
	t.Helper()
	planAndApply(t, ctx, r, PlanMode{})
	doc, err := r.StateStore().Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := r.Instances(ctx, doc.Stack.Name, doc.Stack.Group("miners"))
	if err != nil {
		t.Fatal(err)
	}
	return doc, inst
}
