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

// awaitReq is one await handed to a poller.
type awaitReq struct {
	step     plan.Step
	id       instance.ID
	timeout  time.Duration
	deadline time.Time
}

type poller struct {
	group string
	g     Group
	props bool
	o     Options

	mu    sync.Mutex
	queue []*awaitReq
	wake  chan struct{}

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
	p := r.pollers[s.Group]
	if p == nil {
		g, err := r.b.Group(ctx, s.Group)
		if err != nil {
			r.end(ctx, []plan.StepID{s.ID}, StatusFailed, err)
			return
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
	timeout := time.Duration(s.Timeout)
	if timeout <= 0 {
		timeout = r.o.AwaitTimeout
	}
	p.add(&awaitReq{step: s, id: id, timeout: timeout, deadline: time.Now().Add(timeout)})
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

func (p *poller) take() []*awaitReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue = nil
	return q
}

// loop polls until stop is closed or ctx ends, answering on out.
func (p *poller) loop(ctx context.Context, out chan<- []result, stop <-chan struct{}) {
	var pending []*awaitReq
	pause := p.o.PollMin
	for {
		pending = append(pending, p.take()...)
		if len(pending) == 0 {
			select {
			case <-p.wake:
				continue
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
		answered := p.poll(ctx, &pending, out, stop)
		if answered < 0 {
			return
		}
		if answered > 0 {
			pause = p.o.PollMin
		} else {
			pause = min(2*pause, p.o.PollMax)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// poll lists the group once and answers the awaits it can, all in one
// message (the steps they make ready are then ready together); it returns
// how many it answered, or -1 when the run is over.
func (p *poller) poll(ctx context.Context, pending *[]*awaitReq, out chan<- []result, stop <-chan struct{}) int {
	descs, err := p.g.Describe(ctx, p.props)
	if ctx.Err() != nil {
		return -1
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
	if err == nil {
		for id := range byID {
			p.seen[id] = true
		}
	}
	if len(answers) == 0 {
		return 0
	}
	select {
	case out <- answers:
	case <-stop:
		return -1
	}
	return len(answers)
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
