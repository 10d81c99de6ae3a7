package execute

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/plan"
)

// errNoLonger stands for a watch's lost leadership.
var errNoLonger = errors.New("no longer the leader")

// Before refuses the calls once the leadership is gone: the first
// provision is made, every later one fails with Before's error, and no
// provider call begins after the refusal.
func TestBeforeRefusesCalls(t *testing.T) {
	f := newFixture(t, stackOf(4, "v1", "", ""), nil)
	p := f.plan(plan.Scope{})
	var asked, allowed atomic.Int32
	res := f.run(ctxT(t), p, Options{Parallelism: 1, Before: func(ctx context.Context, s plan.Step) error {
		asked.Add(1)
		if s.Kind == plan.StepProvision && allowed.Add(1) > 1 {
			return errNoLonger
		}
		return nil
	}})
	checkCounts(t, p, res)
	provisions := stepsOf(p, plan.StepProvision)
	if len(provisions) != 4 || asked.Load() < 4 {
		t.Fatalf("%d provisions, Before asked %d times", len(provisions), asked.Load())
	}
	begun := 0
	for _, e := range f.probe.entries() {
		if e.what == "begin" && e.op == "provision" {
			begun++
		}
	}
	if begun != 1 || len(f.live("simulator")) != 1 {
		t.Errorf("%d provisions began and %d instances exist; want exactly the one Before allowed", begun, len(f.live("simulator")))
	}
	if len(res.Failed) != 3 {
		t.Fatalf("failures %v, want the 3 refused provisions", res.Errors())
	}
	for _, fl := range res.Failed {
		if !errors.Is(fl, errNoLonger) || fl.Step.Kind != plan.StepProvision {
			t.Errorf("failure %v, want a refused provision", fl)
		}
	}
}

// The calls in flight get a context that Abort's end cancels (with its
// cause), though Run's own cancellation would leave them be.
func TestAbortCancelsCallsInFlight(t *testing.T) {
	f := newFixture(t, stackOf(3, "v1", "", ""), nil)
	p := f.plan(plan.Scope{})
	abort, lose := context.WithCancelCause(ctxT(t))
	defer lose(nil)
	entered := make(chan struct{}, 10)
	var sawCause atomic.Int32
	done := make(chan *Result, 1)
	go func() {
		done <- f.run(abort, p, Options{Parallelism: 3, Abort: abort, Before: func(ctx context.Context, s plan.Step) error {
			entered <- struct{}{}
			select {
			case <-ctx.Done():
				if errors.Is(context.Cause(ctx), errNoLonger) {
					sawCause.Add(1)
				}
				return context.Cause(ctx)
			case <-time.After(time.Minute):
				return nil
			}
		}})
	}()
	for range 3 {
		select {
		case <-entered:
		case <-time.After(time.Minute):
			t.Fatal("3 calls never were in flight at once")
		}
	}
	lose(errNoLonger)
	var res *Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not return once its calls were aborted")
	}
	checkCounts(t, p, res)
	if sawCause.Load() != 3 {
		t.Errorf("%d of the 3 calls in flight saw the abort's cause", sawCause.Load())
	}
	if len(f.live("simulator")) != 0 || res.Count(StatusDone) != 1 {
		t.Errorf("%d instances exist and %d steps are done; want none but the intent", len(f.live("simulator")), res.Count(StatusDone))
	}
}
