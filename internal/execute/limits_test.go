package execute

import (
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
)

// limitedGroups are group web at the simulator, whose provider block
// allows 2 calls at once, and group api at a second simulator process
// without a limit of its own.
func limitedGroups(web, api int) string {
	return stackWith(`
provider "simulator" { parallelism = 2 }
provider "simulator" { alias = "other" }
provider "vanilla" {}
`, groupBlock("web", "simulator", web)+groupBlock("api", "simulator.other", api))
}

// barrier holds each provision until as many are in flight as a correct
// executor can have (so the peak reached is the limit, never by luck): the
// total in flight reaches min(parallelism, the sum over providers of
// min(limit, provisions not yet finished)). An executor that starts fewer
// fails the test after a generous bound instead of hanging.
type barrier struct {
	t           *testing.T
	parallelism int
	limits      map[string]int // 0: none but parallelism
	expected    map[string]int

	mu       sync.Mutex
	in       map[string]int
	finished map[string]int
	changed  chan struct{}
}

func newBarrier(t *testing.T, parallelism int, limits, expected map[string]int) *barrier {
	return &barrier{t: t, parallelism: parallelism, limits: limits, expected: expected,
		in: map[string]int{}, finished: map[string]int{}, changed: make(chan struct{})}
}

// notify wakes the waiters; the caller holds mu.
func (b *barrier) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *barrier) reached() bool {
	target, total := 0, 0
	for p, n := range b.expected {
		limit := b.limits[p]
		if limit == 0 {
			limit = b.parallelism
		}
		target += min(limit, n-b.finished[p])
		total += b.in[p]
	}
	return total >= min(b.parallelism, target)
}

func (b *barrier) enter(provider, op string, _ []instance.ID) {
	if op != "provision" {
		return
	}
	b.mu.Lock()
	b.in[provider]++
	b.notify()
	deadline := time.After(time.Minute)
	for !b.reached() {
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			b.t.Errorf("the executor never had as many provisions in flight as it may: %v in flight, %v finished", b.in, b.finished)
			return
		}
		b.mu.Lock()
	}
	b.mu.Unlock()
}

func (b *barrier) leave(provider, op string, _ error) {
	if op != "provision" {
		return
	}
	b.mu.Lock()
	b.in[provider]--
	b.finished[provider]++
	b.notify()
	b.mu.Unlock()
}

// Parallelism bounds the calls in flight, and a provider block's
// parallelism those to that provider: neither is exceeded, and both are
// reached. The limited provider has the most work, so once the other's is
// done only its limit holds it back. The scale-down to zero after (drains
// and destroys, counted against the group's provider) keeps them too.
func TestParallelismAndProviderLimitsNeverExceeded(t *testing.T) {
	const parallelism, web, api = 4, 8, 3
	f := newFixture(t, limitedGroups(web, api), nil)
	p := f.plan(plan.Scope{})
	// The limits from the provider blocks, as apply makes them.
	limits := map[string]int{}
	for _, pv := range f.stack.Providers {
		if pv.Parallelism > 0 {
			limits[pv.Key()] = pv.Parallelism
		}
	}
	if limits["simulator"] != 2 || len(limits) != 1 {
		t.Fatalf("limits %v", limits)
	}
	o := Options{Parallelism: parallelism, ProviderLimits: limits}
	b := newBarrier(t, parallelism, limits, map[string]int{"simulator": web, "simulator.other": api})
	f.probe.setHooks(func(pr *probe) { pr.onCall, pr.onDone = b.enter, b.leave })
	res := f.run(ctxT(t), p, o)
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkCounts(t, p, res)
	if res.Done != p.Summary || res.Done.Add != web+api {
		t.Errorf("done %+v, planned %+v", res.Done, p.Summary)
	}
	check := func(what string, exact bool) {
		t.Helper()
		pr := f.probe
		pr.mu.Lock()
		defer pr.mu.Unlock()
		if pr.peak["simulator"] > 2 || pr.peakAll > parallelism {
			t.Errorf("%s: peak %v, %d in all; limits simulator 2, parallelism %d", what, pr.peak, pr.peakAll, parallelism)
		}
		if exact && (pr.peak["simulator"] != 2 || pr.peakAll != parallelism) {
			t.Errorf("%s: peak %v, %d in all: the limits were never reached", what, pr.peak, pr.peakAll)
		}
	}
	check("creates", true)

	f.probe.reset()
	f.setStack(limitedGroups(0, 0))
	p = f.plan(plan.Scope{})
	res = f.run(ctxT(t), p, o)
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkCounts(t, p, res)
	if res.Done.Destroy != web+api || len(f.live("simulator"))+len(f.live("simulator.other")) != 0 {
		t.Errorf("done %+v; left %v %v", res.Done, f.live("simulator"), f.live("simulator.other"))
	}
	check("destroys", false)
}
