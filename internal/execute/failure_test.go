package execute

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// twoGroups is group web at the simulator and group bad at a second
// simulator process, both behind lb1.
const twoGroups = `
stack "test" {}

provider "simulator" {}
provider "simulator" { alias = "broken" }
provider "vanilla" {}

group "web" {
  size = 2
  drain_delay = "0s"
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor {
    provider = vanilla
    type     = "vanilla"
  }
}

group "bad" {
  size = 2
  drain_delay = "0s"
  instance {
    provider = simulator.broken
    type     = "compute"
  }
  flavor {
    provider = vanilla
    type     = "vanilla"
  }
}

loadbalancer "lb1" { provider = simulator }

ingress "web" {
  rule {
    loadbalancer = loadbalancer.lb1
    groups       = [group.web, group.bad]
    route {
      lb_port  = 80
      port     = 8080
      protocol = "http"
    }
  }
}
`

// dependents are the steps that wait, directly or not, for any of ids.
func dependents(p *plan.Plan, ids map[plan.StepID]bool) map[plan.StepID]bool {
	out := map[plan.StepID]bool{}
	for changed := true; changed; {
		changed = false
		for _, s := range p.Steps {
			if out[s.ID] || ids[s.ID] {
				continue
			}
			for _, d := range s.After {
				if ids[d] || out[d] {
					out[s.ID], changed = true, true
					break
				}
			}
		}
	}
	return out
}

// Every provision of one provider fails: exactly those steps fail, exactly
// the steps depending on them are skipped (and reported), and every other
// step is done, the other group's members registered included.
func TestFailedStepSkipsExactlyItsDependents(t *testing.T) {
	f := newFixture(t, twoGroups, map[string][]string{"simulator.broken": {"INFRAKIT_SIMULATOR_FAILURE_RATE=1"}})
	p := f.plan(plan.Scope{})
	failing := map[plan.StepID]bool{}
	for _, s := range stepsOf(p, plan.StepProvision) {
		if s.Group == "bad" {
			failing[s.ID] = true
		}
	}
	skipped := dependents(p, failing)
	if len(failing) != 2 || len(skipped) == 0 {
		t.Fatalf("plan: %d failing provisions, %d dependents\n%v", len(failing), len(skipped), p.Steps)
	}

	res := f.run(ctxT(t), p, Options{})
	if res.Err != nil {
		t.Fatalf("failed steps alone must not fail the run: %v", res.Err)
	}
	checkCounts(t, p, res)
	skippedEvents := 0
	for _, e := range f.probe.entries() {
		if e.what == "event" && e.status == StatusSkipped {
			skippedEvents++
		}
	}
	if skippedEvents != len(skipped) {
		t.Errorf("%d skipped events for %d skipped steps", skippedEvents, len(skipped))
	}
	checkStatuses(t, p, res, func(s plan.Step) Status {
		switch {
		case failing[s.ID]:
			return StatusFailed
		case skipped[s.ID]:
			return StatusSkipped
		}
		return StatusDone
	})
	if len(res.Failed) != 2 {
		t.Errorf("failures %v, want the 2 provisions", res.Errors())
	}
	for _, fl := range res.Failed {
		if !failing[fl.Step.ID] || !strings.Contains(fl.Err.Error(), "simulated provision failure") {
			t.Errorf("failure %v", fl)
		}
	}
	var web []instance.ID
	for _, m := range res.Made {
		web = append(web, m.ID)
	}
	slices.Sort(web)
	if len(web) != 2 {
		t.Fatalf("made %v", web)
	}
	backends := f.backends("lb1")
	for _, id := range web {
		if backends[id] == "" {
			t.Errorf("%s of group web not registered: %v", id, backends)
		}
	}
	if len(backends) != 2 || len(f.live("simulator.broken")) != 0 {
		t.Errorf("backends %v, broken provider holds %v", backends, f.live("simulator.broken"))
	}
}

// A state that cannot be written fails the intent record and stops the
// run before any provider is called. As root a read-only directory does
// not stop a write, so the failure is a real one root cannot ignore: the
// state file's parent is a regular file.
func TestIntentWriteFailureStopsBeforeAnyCall(t *testing.T) {
	f := newFixture(t, stackOf(3, "v1", "", lbIngress), nil)
	p := f.plan(plan.Scope{})
	notDir := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := state.NewLocal(filepath.Join(notDir, "infrakit.state.json"))
	if err := store.Write(ctxT(t), state.NewDocument()); err == nil {
		t.Fatal("writing under a regular file succeeded: the test cannot make the state fail")
	}

	rec := NewStateRecorder(store, state.NewDocument(), p.Desired, time.Hour, nil)
	res := Run(ctxT(t), p, f, rec, Options{Progress: f.probe.event})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "record state") {
		t.Fatalf("run error %v, want the state write's", res.Err)
	}
	checkCounts(t, p, res)
	if res.Status[0] != StatusFailed || p.Steps[0].Kind != plan.StepRecord {
		t.Errorf("intent %s: %s", p.Steps[0], res.Status[0])
	}
	for _, s := range p.Steps[1:] {
		if st := res.Status[s.ID-1]; st != StatusSkipped && st != StatusNotRun {
			t.Errorf("step %s: %s after the intent failed", s, st)
		}
	}
	for _, e := range f.probe.entries() {
		if e.what == "begin" || e.what == "list" {
			t.Errorf("a provider was called: %+v", e)
		}
	}
	if len(f.live("simulator")) != 0 || len(f.backends("lb1")) != 0 {
		t.Errorf("the providers changed: %v %v", f.live("simulator"), f.backends("lb1"))
	}
}

// Cancelling mid-run: the calls in flight finish (their contexts are
// detached), nothing new starts, every instance made is in the state file
// read back, and the steps left are reported not run.
func TestCancelFinishesCallsInFlightAndStartsNothing(t *testing.T) {
	f := newFixture(t, stackOf(8, "v1", "", lbIngress), nil)
	p := f.plan(plan.Scope{})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	entered := make(chan struct{}, 100)
	gate := make(chan struct{})
	f.probe.setHooks(func(pr *probe) {
		pr.onCall = func(_, _ string, _ []instance.ID) {
			entered <- struct{}{}
			<-gate
		}
	})
	done := make(chan *Result, 1)
	go func() { done <- f.run(ctx, p, Options{Parallelism: 3}) }()
	for range 3 {
		select {
		case <-entered:
		case <-time.After(time.Minute):
			t.Fatal("3 calls never were in flight at once")
		}
	}
	cancel() // every slot is held by a call blocked in the gate
	close(gate)
	res := <-done

	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("run error %v, want context.Canceled", res.Err)
	}
	checkCounts(t, p, res)
	j := f.probe.entries()
	begun := 0
	for _, e := range j {
		if e.what == "begin" {
			begun++
		}
	}
	if begun != 3 {
		t.Errorf("%d calls began, want the 3 in flight when cancelled", begun)
	}
	if n := res.Count(StatusDone); n != 4 {
		t.Errorf("%d steps done, want the intent and the 3 calls", n)
	}
	if n := res.Count(StatusNotRun); n != len(p.Steps)-4 {
		t.Errorf("%d steps not run, want %d", n, len(p.Steps)-4)
	}
	live := f.live("simulator")
	var recorded []string
	for _, in := range f.doc.Groups["web"].Instances {
		recorded = append(recorded, in.ID)
	}
	if len(live) != len(res.Made) || len(recorded) != len(live) {
		t.Errorf("made %v, live %v, state records %v", res.Made, live, recorded)
	}
	for id := range live {
		if !slices.Contains(recorded, string(id)) {
			t.Errorf("%s was made and is not in the state file", id)
		}
	}
}

// Cancelling while a drain waits for its delay: the drain and the destroy
// after it never run, and the run returns without waiting out the delay.
// The plan is the scale-down's with a publish added after the
// deregistration: the drain is in its delay when the publish begins, and
// that call cancels.
func TestCancelDuringDrainDelay(t *testing.T) {
	f := newFixture(t, stackOf(2, "v1", "", lbIngress), nil)
	f.apply()
	f.setStack(stackOf(1, "v1", `drain_delay = "1000h"`, lbIngress))
	p := f.plan(plan.Scope{})
	leaving := stepsOf(p, plan.StepDestroy)[0].Instance
	dereg := stepsOf(p, plan.StepDeregister)[0]
	p.Steps = append(p.Steps, plan.Step{ID: plan.StepID(len(p.Steps) + 1), Kind: plan.StepPublish, Object: dereg.Object,
		Provider: dereg.Provider, LoadBalancer: dereg.LoadBalancer, After: []plan.StepID{dereg.ID},
		Route: &loadbalancer.Route{Port: 9090, Protocol: "http", LoadBalancerPort: 90, LoadBalancerProtocol: "http"}})
	if err := plan.Check(p.Steps); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	f.probe.setHooks(func(pr *probe) {
		pr.onCall = func(_, op string, _ []instance.ID) {
			if op == "publish" {
				cancel()
			}
		}
	})
	res := f.run(ctx, p, Options{})
	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("run error %v, want context.Canceled", res.Err)
	}
	checkCounts(t, p, res)
	checkStatuses(t, p, res, func(s plan.Step) Status {
		if s.Kind == plan.StepDrain || s.Kind == plan.StepDestroy {
			return StatusNotRun
		}
		return StatusDone
	})
	if _, ok := f.live("simulator")[leaving]; !ok {
		t.Errorf("%s was destroyed", leaving)
	}
	if _, ok := f.backends("lb1")[leaving]; ok {
		t.Errorf("%s still registered", leaving)
	}
	if got := len(f.doc.Groups["web"].Instances); got != 2 {
		t.Errorf("state records %d members, want both (none was destroyed)", got)
	}
}
