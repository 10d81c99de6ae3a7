package execute

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
)

// The drain delay is time as the subject, but testing/synctest cannot run
// with the providers: a bubble's clock only moves while every goroutine in
// it is durably blocked, and go-plugin's goroutines reading the provider's
// pipes never are (a sleep in the bubble never returns). So the delay's
// computation is tested directly, and its timer in a bubble of its own.

// A drain starts its delay after the latest of the deregistrations it
// waits for that were done; its other dependencies do not delay it.
func TestDrainAtFollowsTheLatestDeregistration(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []plan.Step{
		{ID: 1, Kind: plan.StepDeregister},
		{ID: 2, Kind: plan.StepDeregister},
		{ID: 3, Kind: plan.StepRevoke},
		{ID: 4, Kind: plan.StepAwait},
		{ID: 5, Kind: plan.StepDeregister},
	}
	endedAt := []time.Time{t0, t0.Add(2 * time.Second), t0.Add(5 * time.Second), t0.Add(7 * time.Second), t0.Add(9 * time.Second)}
	status := []Status{StatusDone, StatusDone, StatusDone, StatusDone, StatusSkipped}
	delay := config.Duration(3 * time.Second)
	for _, tc := range []struct {
		name  string
		after []plan.StepID
		delay config.Duration
		want  time.Time
	}{
		{"the latest deregistration", []plan.StepID{1, 2, 3, 4}, delay, t0.Add(5 * time.Second)},
		{"one deregistration", []plan.StepID{1}, delay, t0.Add(3 * time.Second)},
		{"no delay", []plan.StepID{1, 2}, 0, t0.Add(2 * time.Second)},
		{"no deregistration", []plan.StepID{3, 4}, delay, time.Time{}},
		{"a deregistration not done", []plan.StepID{5}, delay, time.Time{}},
		{"nothing to wait for", nil, delay, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := plan.Step{ID: 6, Kind: plan.StepDrain, After: tc.after, DrainDelay: tc.delay}
			if got := drainAt(s, steps, status, endedAt); !got.Equal(tc.want) {
				t.Errorf("drainAt = %v, want %v", got, tc.want)
			}
		})
	}
}

// A delayed step is queued exactly when its time comes, and never once the
// run stops or its context ends.
func TestDelayQueuesWhenDue(t *testing.T) {
	newRun := func() *run { return &run{results: make(chan []result, 1), stop: make(chan struct{})} }
	synctest.Test(t, func(t *testing.T) {
		r := newRun()
		start := time.Now()
		r.delay(context.Background(), 7, start.Add(3*time.Second))
		time.Sleep(3*time.Second - time.Nanosecond)
		synctest.Wait()
		if len(r.results) != 0 {
			t.Fatal("queued before its time")
		}
		rs := <-r.results
		if len(rs) != 1 || !rs[0].wake || rs[0].ids[0] != 7 || time.Since(start) != 3*time.Second {
			t.Errorf("got %+v after %v", rs, time.Since(start))
		}
		r.wg.Wait()
	})
	synctest.Test(t, func(t *testing.T) {
		r := newRun()
		ctx, cancel := context.WithCancel(context.Background())
		r.delay(ctx, 7, time.Now().Add(time.Hour))
		cancel()
		r.wg.Wait() // the timer goroutine is gone without waiting the hour
		r2 := newRun()
		r2.delay(context.Background(), 8, time.Now().Add(time.Hour))
		close(r2.stop)
		r2.wg.Wait()
		if len(r.results)+len(r2.results) != 0 {
			t.Error("queued after the run ended")
		}
	})
}
