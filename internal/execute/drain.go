package execute

import (
	"context"
	"time"

	"github.com/infrakit/infrakit/internal/plan"
)

// A member leaving a load balancer is drained only once its group's
// drain_delay has passed since it was deregistered, so that the requests
// the load balancer still had in flight to it finish. The wait is a timer,
// not a call: the drain is queued when it fires, and meanwhile its call
// slot serves other steps.

// drainAt is when drain step s may start: its DrainDelay after the latest
// of the deregistrations it waits for that were done (endedAt holds when
// each step ended), so that requests in flight through those load
// balancers finish first. It is the zero time when s waits for none.
func drainAt(s plan.Step, steps []plan.Step, status []Status, endedAt []time.Time) time.Time {
	var at time.Time
	for _, d := range s.After {
		if steps[d-1].Kind != plan.StepDeregister || status[d-1] != StatusDone {
			continue
		}
		if t := endedAt[d-1].Add(time.Duration(s.DrainDelay)); t.After(at) {
			at = t
		}
	}
	return at
}

// delay queues step id at time at, unless the run ends first (the step
// then ends not run).
func (r *run) delay(ctx context.Context, id plan.StepID, at time.Time) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-r.stop:
			return
		}
		select {
		case r.results <- []result{{ids: []plan.StepID{id}, wake: true}}:
		case <-r.stop:
		}
	}()
}
