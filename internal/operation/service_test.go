package operation

import (
	"errors"
	"fmt"
	"testing"

	"github.com/infrakit/infrakit/internal/controller/group"
)

// stop-update marks the state; a plan shows the roll as stopped; the next
// apply clears the mark and rolls; the group view reports the progress.
func TestStopUpdateThenApplyResumes(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 3, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})

	if err := r.StopUpdate(ctx, "nope"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("StopUpdate of an unknown group: %v", err)
	}
	if err := r.StopUpdate(ctx, "miners"); err != nil {
		t.Fatal(err)
	}
	if !groupRecord(t, ctx, r, "miners").UpdateStopped {
		t.Fatal("StopUpdate did not mark the state")
	}
	if err := r.StopUpdate(ctx, "miners"); err != nil {
		t.Fatalf("a second StopUpdate: %v", err)
	}

	w.writeStack(fmt.Sprintf(stackTemplate, 3, "v2"))
	v, err := r.Group(ctx, "miners")
	if err != nil || !v.UpdateStopped || v.ConfigHash == "" {
		t.Fatalf("Group(miners) = %+v, %v; want stopped, with the stored config hash", v, err)
	}
	p, res := planAndApply(t, ctx, r, PlanMode{})
	var stopped bool
	for _, gc := range p.Groups {
		if gc.Group == "miners" {
			stopped = gc.UpdateStopped
		}
	}
	if !stopped || res.Rolled != 3 {
		t.Fatalf("apply after stop-update: plan stopped=%v, rolled %d; want the plan to say stopped and apply to roll 3", stopped, res.Rolled)
	}
	if groupRecord(t, ctx, r, "miners").UpdateStopped {
		t.Error("apply did not clear the stop-update mark")
	}
	v, err = r.Group(ctx, "miners")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range v.Instances {
		if m.ConfigHash != v.ConfigHash {
			t.Errorf("member %s has hash %s, the group %s", m.ID, m.ConfigHash, v.ConfigHash)
		}
	}
}

// The service surface: controllers built per pass through the runner's
// host, and a host reset that relaunches the providers from the lock file.
func TestServiceSurface(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 2, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})

	doc, err := r.StateStore().Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var events []group.Event
	ctrl, err := r.GroupController(ctx, doc.Stack.Name, doc.Stack.Group("miners"), nil, func(ev group.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	members, err := ctrl.Observe(ctx, true)
	if err != nil || len(members) != 2 {
		t.Fatalf("Observe: %d members, %v", len(members), err)
	}
	if _, err := ctrl.Execute(ctx, group.Decision{Create: []group.Create{{}}}); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Action != group.ActionCreate {
		t.Errorf("progress events %+v, want one create", events)
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
}
