package execute

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
)

// pendingForever keeps new simulator instances pending until a test says
// otherwise (by editing their files).
var pendingForever = map[string][]string{"simulator": {"INFRAKIT_SIMULATOR_PROVISION_DELAY=1000h"}}

// Creates behind a load balancer: each await resolves once its instance is
// listed running (never while it is pending), and the registrations the
// awaits answered by one listing make ready go in one RegisterBackends
// call, at the address the instance is listed with.
func TestAwaitsResolveWhenRunningAndRegisterTogether(t *testing.T) {
	f := newFixture(t, stackOf(4, "v1", "", lbIngress), pendingForever)
	p := f.plan(plan.Scope{})
	var once sync.Once
	f.probe.setHooks(func(pr *probe) {
		pr.onList = func(descs []instance.Description) {
			pending := 0
			for _, d := range descs {
				if d.State == instance.StatePending {
					pending++
				}
			}
			if pending < 4 {
				return
			}
			// Every await has seen its instance pending: start them all.
			once.Do(func() {
				for _, d := range descs {
					if err := f.setField("simulator", d.ID, "state", "running"); err != nil {
						t.Error(err)
					}
				}
			})
		}
	})
	res := f.run(ctxT(t), p, Options{})
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkCounts(t, p, res)
	if res.Done != p.Summary || res.Done.Add != 4 || res.Done.Register != 4 {
		t.Errorf("done %+v, planned %+v", res.Done, p.Summary)
	}

	j := f.probe.entries()
	listed := func(id instance.ID, st instance.State) func(entry) bool {
		return func(e entry) bool { return e.what == "list" && e.states[id] == st }
	}
	live := f.live("simulator")
	backends := f.backends("lb1")
	for _, m := range res.Made {
		checkOrder(t, j, "await of "+string(m.ID),
			listed(m.ID, instance.StatePending), listed(m.ID, instance.StateRunning), eventOf(plan.StepAwait, m.ID))
		if addr := live[m.ID].Address; addr == "" || backends[m.ID] != addr {
			t.Errorf("%s registered at %q, listed at %q", m.ID, backends[m.ID], addr)
		}
	}
	if regs := calls(j, "register"); len(regs) != 1 || len(regs[0].ids) != 4 {
		t.Errorf("registrations ready together took calls %v, want one of 4", regs)
	}
	// Progress counts the steps of one object and kind: 1 of 4 ... 4 of 4.
	n := 0
	for _, e := range j {
		if e.what == "event" && e.op == string(plan.StepRegister) {
			if n++; e.done != n || e.total != 4 {
				t.Errorf("register event %d says %d of %d", n, e.done, e.total)
			}
		}
	}
}

// An await fails when its instance is not running by the timeout, when it
// is no longer listed after it was, and when it is terminating; the
// registration waiting for it is skipped, the instance is kept (and
// recorded), and the run itself does not fail.
func TestAwaitFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fault is done to an instance the first time a listing shows it.
		fault   func(f *fixture, id instance.ID) error
		timeout time.Duration
		want    string
	}{
		{name: "timeout", timeout: 200 * time.Millisecond, want: "not running within 200ms"},
		{name: "vanished", want: "no longer listed",
			fault: func(f *fixture, id instance.ID) error { return f.removeInstance("simulator", id) }},
		{name: "terminating", want: "is terminating",
			fault: func(f *fixture, id instance.ID) error { return f.setField("simulator", id, "state", "terminating") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, stackOf(2, "v1", "", lbIngress), pendingForever)
			p := f.plan(plan.Scope{})
			var mu sync.Mutex
			seen := map[instance.ID]bool{}
			if tc.fault != nil {
				f.probe.setHooks(func(pr *probe) {
					pr.onList = func(descs []instance.Description) {
						mu.Lock()
						defer mu.Unlock()
						for _, d := range descs {
							if !seen[d.ID] {
								seen[d.ID] = true
								if err := tc.fault(f, d.ID); err != nil {
									t.Error(err)
								}
							}
						}
					}
				})
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 30 * time.Second // a generous bound: the fault must fail the await first
			}
			res := f.run(ctxT(t), p, Options{AwaitTimeout: timeout})
			if res.Err != nil {
				t.Fatalf("run: %v", res.Err)
			}
			checkCounts(t, p, res)
			if len(res.Failed) != 2 {
				t.Fatalf("failed %v, want both awaits", res.Errors())
			}
			for _, fl := range res.Failed {
				if fl.Step.Kind != plan.StepAwait || !strings.Contains(fl.Err.Error(), tc.want) {
					t.Errorf("failure %v, want an await failing with %q", fl, tc.want)
				}
			}
			checkStatuses(t, p, res, func(s plan.Step) Status {
				switch s.Kind {
				case plan.StepAwait:
					return StatusFailed
				case plan.StepRegister:
					return StatusSkipped
				}
				return StatusDone
			})
			if regs := calls(f.probe.entries(), "register"); len(regs) > 0 {
				t.Errorf("registered %v", regs)
			}
			if len(res.Made) != 2 || len(f.doc.Groups["web"].Instances) != 2 {
				t.Errorf("made %v, state records %v", res.Made, f.doc.Groups["web"].Instances)
			}
		})
	}
}

// In Defer mode an await is not waited for: it and what depends on it end
// deferred, without a listing or a call, and without a Progress event; the
// rest of the plan is done. With Look the group is listed once, when its
// awaits are all in, and those it leaves pending end the same way.
func TestDeferEndsAwaitsAndDependentsDeferred(t *testing.T) {
	for _, look := range []bool{false, true} {
		t.Run(map[bool]string{false: "defer", true: "look"}[look], func(t *testing.T) {
			f := newFixture(t, stackOf(2, "v1", "", lbIngress), pendingForever)
			p := f.plan(plan.Scope{})
			res := f.run(ctxT(t), p, Options{Defer: true, Look: look})
			if res.Err != nil || len(res.Failed) > 0 {
				t.Fatalf("run: %v %v", res.Err, res.Errors())
			}
			checkCounts(t, p, res)
			checkStatuses(t, p, res, func(s plan.Step) Status {
				if s.Kind == plan.StepAwait || s.Kind == plan.StepRegister {
					return StatusDeferred
				}
				return StatusDone
			})
			want := p.Summary
			want.Register = 0
			if res.Done != want {
				t.Errorf("done %+v, want %+v", res.Done, want)
			}
			lists := 0
			for _, e := range f.probe.entries() {
				if e.what == "list" {
					lists++
				}
				if (e.what == "begin" && e.op == "register") ||
					(e.what == "event" && (e.op == string(plan.StepAwait) || e.op == string(plan.StepRegister))) {
					t.Errorf("deferred work was done: %+v", e)
				}
			}
			if wantLists := map[bool]int{false: 0, true: 1}[look]; lists != wantLists {
				t.Errorf("the group was listed %d times, want %d", lists, wantLists)
			}
			if len(f.backends("lb1")) != 0 || len(f.live("simulator")) != 2 {
				t.Errorf("backends %v, live %v", f.backends("lb1"), f.live("simulator"))
			}
			if res.Count(StatusDeferred) != 4 || res.Errors() != nil {
				t.Errorf("deferred %d, errors %v", res.Count(StatusDeferred), res.Errors())
			}
		})
	}
}

// In Defer mode with Look, members that run as soon as they are made are
// registered by the same run; the simulator describes them running as it
// makes them, so no listing is needed at all.
func TestDeferRegistersMembersRunningAtOnce(t *testing.T) {
	f := newFixture(t, stackOf(3, "v1", "", lbIngress), nil)
	p := f.plan(plan.Scope{})
	res := f.run(ctxT(t), p, Options{Defer: true, Look: true})
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkStatuses(t, p, res, func(plan.Step) Status { return StatusDone })
	if res.Done != p.Summary {
		t.Errorf("done %+v, want %+v", res.Done, p.Summary)
	}
	if got := f.backends("lb1"); len(got) != 3 {
		t.Errorf("lb1 backends %v, want the 3 members", got)
	}
	lists := 0
	for _, e := range f.probe.entries() {
		if e.what == "list" {
			lists++
		}
	}
	if lists != 0 {
		t.Errorf("the group was listed %d times, want none", lists)
	}
}

// A replacement described running as it is made is asked only its health
// (no listing) before it takes its old member's place, in Defer mode with
// Look as in a plain run; one described pending is listed for.
func TestReplacementDescribedRunningIsAskedHealthOnly(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     Options
		env   map[string][]string
		lists int
	}{
		{"look", Options{Defer: true, Look: true}, nil, 0},
		{"wait", Options{}, nil, 0},
		{"pending", Options{PollMin: time.Millisecond, PollMax: 10 * time.Millisecond},
			map[string][]string{"simulator": {"INFRAKIT_SIMULATOR_PROVISION_DELAY=50ms"}}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, stackOf(1, "v1", "", lbIngress), c.env)
			f.apply()
			f.setStack(stackOf(1, "v2", "", lbIngress))
			p := f.plan(plan.Scope{})
			before := len(f.probe.entries())
			res := f.run(ctxT(t), p, c.o)
			if res.Err != nil || len(res.Failed) > 0 || res.Done != p.Summary || res.Done.Roll != 1 {
				t.Fatalf("run: %v %v, done %+v of %+v", res.Err, res.Errors(), res.Done, p.Summary)
			}
			made := res.Made[stepsOf(p, plan.StepProvision)[0].ID].ID
			lists, asked := 0, false
			for _, e := range f.probe.entries()[before:] {
				switch e.what {
				case "list":
					lists++
				case "health":
					asked = asked || slices.Contains(e.ids, made)
				}
			}
			if lists < c.lists || (c.lists == 0 && lists != 0) || !asked {
				t.Errorf("listed %d times (want %d), health of %s asked: %v", lists, c.lists, made, asked)
			}
			if got := slices.Collect(maps.Keys(f.backends("lb1"))); !slices.Equal(got, []instance.ID{made}) {
				t.Errorf("backends %v, want the replacement %s", got, made)
			}
		})
	}
}
