package execute

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// An await waits until the instance a provision made (or a pending member
// the plan found) is listed running,
// and for a replacement until every flavor judges it healthy too. One
// poller per group serves all of the group's awaits: each listing (one
// DescribeInstances) answers every await it can, and health is asked only
// of the running instances whose awaits want it. The pause between
// listings starts at PollMin and doubles while nothing is answered, up to
// PollMax. An instance that was listed and is no longer, or that is
// terminating, fails its await; so does one not ready by its timeout.
//
// A listing costs the whole group, so while the plan's provisions still
// hand over new awaits, awaits no listing has seen yet wait for company: a
// listing is made for them once they number half the last listing (or
// PollMax after it). Listings then grow geometrically, and a group of n
// members is listed O(log n) times, not once per PollMin; the
// registrations they make ready go in fewer, larger calls too. Once the
// group's last await is handed over (pollerDone) the poller lists at once:
// no one waits for a pause at the end of an apply.

// awaitReq is one await handed to a poller.
type awaitReq struct {
	step     plan.Step
	id       instance.ID
	timeout  time.Duration
	deadline time.Time
	// known is how the provider described the instance, running, as it
	// made it: the first poll takes it instead of a listing (and asks only
	// health), later polls list. Such awaits still go through the poller,
	// which answers them in the same growing batches as listed ones: one
	// registration call per await would rewrite a load balancer per member.
	known *instance.Description
}

type poller struct {
	group string
	g     Group
	props bool
	o     Options

	mu    sync.Mutex
	queue []*awaitReq
	// last is set once the run will hand over no more awaits of the group.
	last bool
	wake chan struct{}

	// seen are the instances any listing of the poller showed (its loop
	// owns it): one of them no longer listed has vanished, even when it
	// was listed before its await was handed over.
	seen map[instance.ID]bool
}

// await hands an await to its group's poller, starting the poller first.
func (r *run) await(ctx context.Context, s plan.Step) {
	id := s.Instance
	if s.Made != 0 {
		m, ok := r.made[s.Made]
		if !ok {
			r.end(ctx, []plan.StepID{s.ID}, StatusFailed, fmt.Errorf("step %d: the instance of step %d was not made", s.ID, s.Made))
			return
		}
		id = m.ID
	}
	var known *instance.Description
	if d, ok := r.described[s.Made]; ok {
		known = &d
		delete(r.described, s.Made) // the await holds it now
	}
	p := r.poller(ctx, s, id)
	if p == nil {
		return
	}
	timeout := time.Duration(s.Timeout)
	if timeout <= 0 {
		timeout = r.o.AwaitTimeout
	}
	p.add(&awaitReq{step: s, id: id, timeout: timeout, deadline: time.Now().Add(timeout), known: known})
}

// poller is the poller of await s's group, started first if need be (nil
// when the group cannot be bound: s has then ended, failed).
func (r *run) poller(ctx context.Context, s plan.Step, id instance.ID) *poller {
	p := r.pollers[s.Group]
	if p == nil {
		g, err := r.b.Group(ctx, s.Group)
		if err != nil {
			r.end(ctx, []plan.StepID{s.ID}, StatusFailed, err)
			return nil
		}
		p = &poller{group: s.Group, g: g, props: r.needsProperties(s.Group), o: r.o, wake: make(chan struct{}, 1),
			seen: map[instance.ID]bool{}}
		r.pollers[s.Group] = p
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			p.loop(ctx, r.results, r.stop)
		}()
	}
	return p
}

// awaitReadied counts await s as readied (handed over, or ended because a
// dependency failed) and, with the last of its group, tells the group's
// poller that no more are coming.
func (r *run) awaitReadied(s plan.Step) {
	if r.awaitsLeft[s.Group]--; r.awaitsLeft[s.Group] > 0 {
		return
	}
	if p := r.pollers[s.Group]; p != nil {
		p.finish()
	}
}

// needsProperties reports whether an enrollment the plan authorizes the
// group's awaited members for renders member.properties.
func (r *run) needsProperties(groupName string) bool {
	for _, s := range r.steps {
		if s.Kind != plan.StepAuthorize || s.Group != groupName || s.Awaited == 0 {
			continue
		}
		if e := r.p.Desired.Enrollment(s.Enrollment); e != nil && enrollment.NeedsProperties(&e.Target) {
			return true
		}
	}
	return false
}

func (p *poller) add(req *awaitReq) {
	p.mu.Lock()
	p.queue = append(p.queue, req)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// finish says that no more awaits will be added.
func (p *poller) finish() {
	p.mu.Lock()
	p.last = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take returns the awaits added since the last take, and whether they
// are the last.
func (p *poller) take() ([]*awaitReq, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue = nil
	return q, p.last
}

// loop polls until stop is closed or ctx ends, answering on out.
func (p *poller) loop(ctx context.Context, out chan<- []result, stop <-chan struct{}) {
	if p.o.Defer && p.o.Look {
		p.look(ctx, out, stop)
		return
	}
	var (
		pending []*awaitReq
		// fresh counts the pending awaits no listing has seen yet.
		fresh, listed int
		last          bool
		pause         = p.o.PollMin
		// polled is when the last listing was made; next when the pause
		// after it ends.
		polled, next time.Time
	)
	for {
		reqs, done := p.take()
		pending, fresh, last = append(pending, reqs...), fresh+len(reqs), done
		at, wait := pollDue(time.Now(), p.o.PollMax, len(pending), fresh, listed, last, polled, next)
		if wait {
			if !p.sleep(ctx, stop, at) {
				return
			}
			continue
		}
		polled = time.Now()
		answered, n := p.poll(ctx, &pending, out, stop)
		if answered < 0 {
			return
		}
		fresh, listed = 0, n
		if answered > 0 {
			pause = p.o.PollMin
		} else {
			pause = min(2*pause, p.o.PollMax)
		}
		next = polled.Add(pause)
	}
}

// look is a Defer run's poller: it waits for the group's last await, lists
// the group once for all of them, and defers those the listing leaves
// waiting.
func (p *poller) look(ctx context.Context, out chan<- []result, stop <-chan struct{}) {
	var pending []*awaitReq
	for {
		reqs, last := p.take()
		pending = append(pending, reqs...)
		if last {
			break
		}
		if !p.sleep(ctx, stop, time.Time{}) {
			return
		}
	}
	if len(pending) == 0 {
		return
	}
	if answered, _ := p.poll(ctx, &pending, out, stop); answered < 0 || len(pending) == 0 {
		return
	}
	deferred := make([]result, len(pending))
	for i, req := range pending {
		deferred[i] = result{ids: []plan.StepID{req.step.ID}, deferred: true}
	}
	select {
	case out <- deferred:
	case <-stop:
	}
}

// pollDue says, at now, when the next listing is due: wait is false when it is
// due now; a zero at with wait means when an await is added. pending
// awaits are waiting, fresh of them seen by no listing yet; the last
// listing, made at polled, listed listed instances and its pause ends at
// next. Awaits a listing saw and left waiting (pending instances) are
// listed for again after the pause; awaits none saw yet, after the pause
// once they number half the last listing, at once when the group's last
// await is in (last), else pollMax after the last listing.
func pollDue(now time.Time, pollMax time.Duration, pending, fresh, listed int, last bool, polled, next time.Time) (at time.Time, wait bool) {
	switch {
	case pending == 0:
		return time.Time{}, true
	case last && fresh > 0:
		return time.Time{}, false
	case pending > fresh || 2*fresh >= listed:
		// Carried awaits follow the pause; so do fresh ones worth a listing.
	default:
		next = later(next, polled.Add(pollMax))
	}
	return next, now.Before(next)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sleep waits until at (forever when at is zero) or until an await is
// added; it returns false when the run is over.
func (p *poller) sleep(ctx context.Context, stop <-chan struct{}, at time.Time) bool {
	var timer <-chan time.Time
	if !at.IsZero() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
	case <-p.wake:
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
	return true
}

// poll lists the group once and answers the awaits it can, all in one
// message (the steps they make ready are then ready together); it returns
// how many it answered, or -1 when the run is over, and how many
// instances it listed.
func (p *poller) poll(ctx context.Context, pending *[]*awaitReq, out chan<- []result, stop <-chan struct{}) (int, int) {
	descs, listed, err := p.list(ctx, *pending)
	if ctx.Err() != nil {
		return -1, 0
	}
	byID := make(map[instance.ID]instance.Description, len(descs))
	for _, d := range descs {
		byID[d.ID] = d
	}
	var health map[instance.ID]flavor.Health
	if err == nil {
		var ask []instance.Description
		for _, req := range *pending {
			if d, ok := byID[req.id]; ok && req.step.Healthy && running(d) {
				ask = append(ask, d)
			}
		}
		if len(ask) > 0 {
			health = p.g.Health(ctx, ask)
		}
	}
	now := time.Now()
	var answers []result
	keep := (*pending)[:0]
	for _, req := range *pending {
		res, done := p.judge(req, byID, health, err, now)
		if !done {
			keep = append(keep, req)
			continue
		}
		res.ids = []plan.StepID{req.step.ID}
		answers = append(answers, res)
	}
	*pending = keep
	if err == nil && listed {
		for id := range byID {
			p.seen[id] = true
		}
	}
	if len(answers) == 0 {
		return 0, len(descs)
	}
	select {
	case out <- answers:
	case <-stop:
		return -1, 0
	}
	return len(answers), len(descs)
}

// list lists the group, or when every pending await knows how its
// instance was described as it was made, takes those descriptions. Either
// way each await's description is then forgotten: later polls list.
func (p *poller) list(ctx context.Context, pending []*awaitReq) (descs []instance.Description, listed bool, err error) {
	for _, req := range pending {
		if req.known == nil {
			for _, req := range pending {
				req.known = nil
			}
			descs, err = p.g.Describe(ctx, p.props)
			return descs, true, err
		}
	}
	descs = make([]instance.Description, len(pending))
	for i, req := range pending {
		descs[i], req.known = *req.known, nil
	}
	return descs, false, nil
}

// judge says whether req is answered by a listing (err: the listing
// failed), and how.
func (p *poller) judge(req *awaitReq, byID map[instance.ID]instance.Description, health map[instance.ID]flavor.Health, listErr error, now time.Time) (result, bool) {
	d, ok := byID[req.id]
	switch {
	case listErr == nil && ok && running(d) && (!req.step.Healthy || health[req.id] == flavor.HealthHealthy):
		return result{desc: d}, true
	case listErr == nil && ok && d.State == instance.StateTerminating:
		return result{err: fmt.Errorf("group %q: %s is terminating", p.group, req.id)}, true
	case listErr == nil && !ok && p.seen[req.id]:
		return result{err: fmt.Errorf("group %q: %s is no longer listed", p.group, req.id)}, true
	}
	if now.After(req.deadline) {
		what := "running"
		if req.step.Healthy {
			what = "running and healthy"
		}
		why := ""
		switch {
		case listErr != nil:
			why = fmt.Sprintf(": %v", listErr)
		case !ok:
			why = ": not listed by its provider"
		case req.step.Healthy:
			why = fmt.Sprintf(": %s, %s", stateOf(d), cmp.Or(health[req.id], flavor.HealthUnknown))
		default:
			why = fmt.Sprintf(": %s", stateOf(d))
		}
		return result{err: fmt.Errorf("group %q: %s not %s within %s%s", p.group, req.id, what, req.timeout, why)}, true
	}
	return result{}, false
}

// running reports whether d runs (a provider that reports no state is
// taken as running, as group.MembersFromDescriptions takes it).
func running(d instance.Description) bool {
	return d.State == instance.StateRunning || d.State == ""
}

func stateOf(d instance.Description) instance.State {
	if d.State == "" {
		return instance.StateRunning
	}
	return d.State
}
