package execute

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
)

// run is one Run. Its fields are owned by the scheduling goroutine (the one
// that called run); workers and pollers get what they need in their job and
// answer on results.
type run struct {
	p     *plan.Plan
	steps []plan.Step
	b     Bindings
	rec   Recorder
	o     Options

	status []Status
	// waiting counts the dependencies of each step not ended yet; bad is
	// the status that an ended dependency passes on (skipped, deferred,
	// not-run), if any.
	waiting []int
	bad     []Status
	next    [][]plan.StepID
	endedAt []time.Time

	made map[plan.StepID]group.Member
	// described are the members provisions made that their provider
	// described running as it made them: their awaits need no listing.
	described map[plan.StepID]instance.Description
	// listed are the descriptions the awaits saw of the instances they
	// waited for, by await step: their address, their properties.
	listed map[plan.StepID]instance.Description

	queues  map[string][]plan.StepID // ready steps by provider
	batches map[batchKey][]plan.StepID
	// calling holds the batches with a call in flight: one at a time per
	// load balancer and kind, so that what becomes ready meanwhile (awaits
	// answered one by one) goes in the next call, not in a call each.
	calling  map[batchKey]bool
	inflight map[string]int
	running  int
	pending  int // steps not ended
	pollers  map[string]*poller
	stopping bool
	// awaitsLeft counts each group's awaits not readied yet.
	awaitsLeft map[string]int

	// results carry what jobs, pollers and delays report: a poller's
	// answers to one listing come together, so the registrations they
	// make ready go in one call.
	results chan []result
	// work feeds the workers (started with the first job).
	work chan work
	wg   sync.WaitGroup
	// stop ends the workers' and the pollers' loops when the run is over.
	stop chan struct{}

	total, done map[progressKey]int
	out         *Result
}

// batchKey is what steps must share to go in one call: registrations and
// deregistrations their load balancer, provisions their group.
type batchKey struct {
	kind                      plan.StepKind
	provider, balancer, group string
}

func batchKeyOf(s plan.Step) batchKey {
	if s.Kind == plan.StepProvision {
		return batchKey{kind: s.Kind, provider: s.Provider, group: s.Group}
	}
	return batchKey{kind: s.Kind, provider: s.Provider, balancer: s.LoadBalancer}
}

type progressKey struct {
	object string
	kind   plan.StepKind
}

// result is what a job or a poller reports about the steps it ran, or a
// delay that the steps may be queued now.
type result struct {
	ids []plan.StepID
	// slot is set by a job: it held a call slot, now free.
	slot bool
	// wake is set by a delay: the steps are queued, not ended.
	wake   bool
	err    error
	member group.Member // a provision's
	// desc is how an await's listing saw its instance, or how a
	// provision's provider described the instance it made.
	desc instance.Description
	stop error // a recorder error: the run stops
	// deferred is set for awaits a Defer run's look did not answer.
	deferred bool
}

func newRun(p *plan.Plan, b Bindings, rec Recorder, o Options) *run {
	n := len(p.Steps)
	r := &run{
		p: p, steps: p.Steps, b: b, rec: rec, o: o,
		status:    make([]Status, n),
		waiting:   make([]int, n),
		bad:       make([]Status, n),
		next:      make([][]plan.StepID, n),
		endedAt:   make([]time.Time, n),
		made:      map[plan.StepID]group.Member{},
		described: map[plan.StepID]instance.Description{},
		listed:    map[plan.StepID]instance.Description{},
		queues:    map[string][]plan.StepID{},
		batches:   map[batchKey][]plan.StepID{},
		calling:   map[batchKey]bool{},
		inflight:  map[string]int{},
		pollers:   map[string]*poller{},
		results:   make(chan []result, 64),
		stop:      make(chan struct{}),
		total:     map[progressKey]int{},
		done:      map[progressKey]int{},
		pending:   n,
		out:       &Result{Status: make([]Status, n), Made: map[plan.StepID]group.Member{}},
	}
	r.awaitsLeft = map[string]int{}
	for _, s := range p.Steps {
		r.total[progressKey{s.Object, s.Kind}]++
		if s.Kind == plan.StepAwait {
			r.awaitsLeft[s.Group]++
		}
		for _, d := range s.After {
			r.waiting[s.ID-1]++
			r.next[d-1] = append(r.next[d-1], s.ID)
		}
	}
	return r
}

func (r *run) run(ctx context.Context) *Result {
	defer func() {
		close(r.stop)
		r.wg.Wait()
	}()
	// The roots are collected before any is readied: readying one may end
	// it at once (a deferred await) and ready its dependents, which must
	// not be readied a second time here.
	var roots []plan.StepID
	for _, s := range r.steps {
		if r.waiting[s.ID-1] == 0 {
			roots = append(roots, s.ID)
		}
	}
	for _, id := range roots {
		r.ready(ctx, id)
	}
	for r.pending > 0 {
		if !r.stopping && ctx.Err() != nil {
			r.halt(ctx.Err())
		}
		if !r.stopping {
			r.dispatch(ctx)
		}
		if r.stopping && r.running == 0 {
			r.abandon()
			break
		}
		select {
		case rs := <-r.results:
			r.takeAll(ctx, rs)
		case <-ctx.Done():
			if !r.stopping {
				r.halt(ctx.Err())
			}
			// Keep taking results until the calls in flight are back.
			if r.running > 0 {
				r.takeAll(ctx, <-r.results)
			}
		}
	}
	if err := r.rec.Flush(context.WithoutCancel(ctx)); err != nil && r.out.Err == nil {
		r.out.Err = err
	}
	copy(r.out.Status, r.status)
	maps.Copy(r.out.Made, r.made)
	for i, st := range r.status {
		if st == StatusDone {
			r.out.Done.Count(r.steps[i])
		}
	}
	return r.out
}

// halt stops starting steps: the context ended, or the state could not be
// written.
func (r *run) halt(err error) {
	r.stopping = true
	if r.out.Err == nil {
		r.out.Err = err
	}
}

// abandon ends every step that has not ended as not run (those waiting
// for an await that was being polled included).
func (r *run) abandon() {
	for i, st := range r.status {
		if st == "" {
			r.status[i] = StatusNotRun
			r.pending--
		}
	}
}

// ready queues step id, or hands an await to its group's poller, or
// delays a drain, or ends it at once when a dependency passed on a bad
// status. Once the run stops nothing starts: a step readied then is left
// for abandon, which ends it not run.
func (r *run) ready(ctx context.Context, id plan.StepID) {
	if s := r.steps[id-1]; s.Kind == plan.StepAwait {
		defer r.awaitReadied(s)
	}
	if st := r.bad[id-1]; st != "" {
		r.end(ctx, []plan.StepID{id}, st, nil)
		return
	}
	if r.stopping {
		return
	}
	s := r.steps[id-1]
	switch s.Kind {
	case plan.StepAwait:
		if r.o.Defer && !r.o.Look {
			r.end(ctx, []plan.StepID{id}, StatusDeferred, nil)
			return
		}
		r.await(ctx, s)
	case plan.StepDrain:
		// A drain waiting for its delay holds no call slot: other steps
		// of its provider go on meanwhile.
		if at := drainAt(s, r.steps, r.status, r.endedAt); time.Now().Before(at) {
			r.delay(ctx, id, at)
			return
		}
		r.queue(id)
	default:
		r.queue(id)
	}
}

// queue puts a step that may start into its provider's queue, or a
// registration or deregistration into the batch of its load balancer.
func (r *run) queue(id plan.StepID) {
	s := r.steps[id-1]
	switch s.Kind {
	case plan.StepRegister, plan.StepDeregister, plan.StepProvision:
		k := batchKeyOf(s)
		r.batches[k] = append(r.batches[k], id)
	default:
		r.queues[s.Provider] = append(r.queues[s.Provider], id)
	}
}

// limit is how many calls provider may have in flight.
func (r *run) limit(provider string) int {
	if provider == "" {
		return r.o.Parallelism
	}
	if n := r.o.ProviderLimits[provider]; n > 0 {
		return min(n, r.o.Parallelism)
	}
	return r.o.Parallelism
}

// dispatch starts ready steps while slots are free: batches first, then the
// queues, the provider with the fewest calls in flight first.
func (r *run) dispatch(ctx context.Context) {
	for r.running < r.o.Parallelism {
		if !r.dispatchBatch(ctx) && !r.dispatchOne(ctx) {
			return
		}
	}
}

func (r *run) dispatchBatch(ctx context.Context) bool {
	for k, ids := range r.batches {
		if len(ids) == 0 || r.calling[k] || r.inflight[k.provider] >= r.limit(k.provider) {
			continue
		}
		n := min(len(ids), maxBatch)
		if k.kind == plan.StepProvision {
			// Provisions of a batch are made one after another: a share
			// of the ready ones per free call slot keeps the provider's
			// calls in flight as many as without batches.
			free := min(r.limit(k.provider)-r.inflight[k.provider], r.o.Parallelism-r.running)
			n = min(len(ids), maxProvisionBatch, (len(ids)+free-1)/free)
		} else {
			r.calling[k] = true
		}
		batch := slices.Clone(ids[:n])
		if n == len(ids) {
			delete(r.batches, k)
		} else {
			r.batches[k] = ids[n:]
		}
		r.start(ctx, k.provider, batch)
		return true
	}
	return false
}

func (r *run) dispatchOne(ctx context.Context) bool {
	best := ""
	found := false
	for provider, ids := range r.queues {
		if len(ids) == 0 || r.inflight[provider] >= r.limit(provider) {
			continue
		}
		if !found || r.inflight[provider] < r.inflight[best] {
			best, found = provider, true
		}
	}
	if !found {
		return false
	}
	id := r.queues[best][0]
	if r.queues[best] = r.queues[best][1:]; len(r.queues[best]) == 0 {
		delete(r.queues, best)
	}
	r.start(ctx, best, []plan.StepID{id})
	return true
}

// start runs a job (one step, or a batch of one kind on one load balancer)
// on a goroutine of its own.
func (r *run) start(ctx context.Context, provider string, ids []plan.StepID) {
	j := r.job(ids)
	r.running++
	r.inflight[provider]++
	if r.work == nil {
		r.startWorkers(ctx)
	}
	r.work <- work{j: j, ids: ids} // never blocks: at most Parallelism run
}

// work is one job handed to a worker.
type work struct {
	j   *job
	ids []plan.StepID
}

// startWorkers starts the run's Parallelism workers, which run jobs until
// the run is over (a pool rather than a goroutine per job: thousands of
// steps would each grow a new stack into the gRPC client).
func (r *run) startWorkers(ctx context.Context) {
	r.work = make(chan work, r.o.Parallelism)
	for range r.o.Parallelism {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for {
				select {
				case w := <-r.work:
					r.results <- w.j.results(ctx, w.ids)
				case <-r.stop:
					return
				}
			}
		}()
	}
}

func (r *run) takeAll(ctx context.Context, rs []result) {
	for _, res := range rs {
		r.take(ctx, res)
	}
}

// take ends the steps a result reports on (or, for a delay, queues them).
func (r *run) take(ctx context.Context, res result) {
	if res.slot {
		s := r.steps[res.ids[0]-1]
		provider := s.Provider
		if s.Kind == plan.StepRegister || s.Kind == plan.StepDeregister {
			delete(r.calling, batchKeyOf(s))
		}
		r.running--
		if r.inflight[provider]--; r.inflight[provider] == 0 {
			delete(r.inflight, provider)
		}
	}
	if res.wake {
		if !r.stopping {
			for _, id := range res.ids {
				r.queue(id)
			}
		}
		return
	}
	if res.stop != nil {
		r.halt(res.stop)
	}
	st := StatusDone
	switch {
	case res.err != nil:
		st = StatusFailed
	case res.deferred:
		st = StatusDeferred
	}
	for _, id := range res.ids {
		switch r.steps[id-1].Kind {
		case plan.StepProvision:
			if st == StatusDone {
				r.made[id] = res.member
				if res.desc.State == instance.StateRunning {
					r.described[id] = res.desc
				}
			}
		case plan.StepAwait:
			if st == StatusDone {
				r.listed[id] = res.desc
			}
		}
	}
	r.end(ctx, res.ids, st, res.err)
}

// end records that steps ended with st, reports them, and readies (or ends
// in turn) the steps that wait for them.
func (r *run) end(ctx context.Context, ids []plan.StepID, st Status, err error) {
	now := time.Now()
	var freed []plan.StepID
	for _, id := range ids {
		if r.status[id-1] != "" {
			continue
		}
		r.status[id-1], r.endedAt[id-1] = st, now
		r.pending--
		s := r.steps[id-1]
		inst := s.Instance
		if m, ok := r.made[id]; ok {
			inst = m.ID
		} else if s.Made != 0 {
			inst = r.made[s.Made].ID
		}
		if st == StatusFailed {
			r.out.Failed = append(r.out.Failed, Failure{Step: s, Instance: inst, Err: err})
		}
		r.progress(s, st, inst, err)
		pass := passOn(st)
		for _, n := range r.next[id-1] {
			if pass != "" && worse(pass, r.bad[n-1]) {
				r.bad[n-1] = pass
			}
			if r.waiting[n-1]--; r.waiting[n-1] == 0 {
				freed = append(freed, n)
			}
		}
	}
	for _, n := range freed {
		r.ready(ctx, n)
	}
}

// passOn is what a step that ended with st passes on to those waiting for
// it ("" when they may run).
func passOn(st Status) Status {
	switch st {
	case StatusDone:
		return ""
	case StatusFailed, StatusSkipped:
		return StatusSkipped
	}
	return st
}

// worse reports whether status a outranks b: skipped over not-run over
// deferred.
func worse(a, b Status) bool {
	rank := map[Status]int{"": 0, StatusDeferred: 1, StatusNotRun: 2, StatusSkipped: 3}
	return rank[a] > rank[b]
}

func (r *run) progress(s plan.Step, st Status, inst instance.ID, err error) {
	if r.o.Progress == nil || st == StatusNotRun || st == StatusDeferred {
		return
	}
	k := progressKey{s.Object, s.Kind}
	r.done[k]++
	r.o.Progress(Event{Step: s, Status: st, Instance: inst, Err: err, Done: r.done[k], Total: r.total[k]})
}
