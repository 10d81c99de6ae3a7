package watch

import (
	"context"
	"time"

	"github.com/infrakit/infrakit/internal/autoscale"
	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// The autoscaler: the leader evaluates each autoscaled group's checks every
// evaluation_interval (autoscale_eval.go queries them and decides, with the
// pure autoscale.Decide), records the decision (status, metrics, events),
// and when it changes the size writes the new size into the stored stack,
// through the state lease as a pass writes, fenced like every write of
// the leader. The group's next pass then converges to it the way it
// converges to a size `group scale` set: make before break, members
// deregistered and drained before they are destroyed.

// scaler is the loop's record of one autoscaled group. Only the loop
// touches it.
type scaler struct {
	// next is when the next evaluation is due; zero while this process
	// does not lead.
	next    time.Time
	running bool
	hist    autoscale.History
	// size is the stored size the last decision saw or set; another size
	// in the state (group scale -override, an apply) starts a cooldown.
	size int
	// epoch is the service epoch the history belongs to: a new leadership
	// starts afresh.
	epoch int
}

// scaleResult is one evaluation's outcome, back in the loop.
type scaleResult struct {
	name     string
	term     *term
	decision autoscale.Decision
	// decided is false when the evaluation was called off (the group
	// changed, the state was stale, the leadership ended).
	decided bool
	// doc is the state after a size change this evaluation wrote.
	doc *state.Document
	err error
}

// syncScaler keeps g's scaler in step with its configuration: created for
// a managed group with an autoscale block, dropped otherwise. A stored size
// the scaler did not set counts as a change, so the cooldown holds after
// `group scale -override` and after an apply.
func (s *service) syncScaler(g *groupSched, now time.Time) {
	cfg := g.spec.cfg
	if !g.spec.managed() || cfg.Autoscale == nil || cfg.Size == nil {
		g.scale = nil
		return
	}
	if g.scale == nil {
		g.scale = &scaler{size: *cfg.Size, epoch: -1}
	}
	if *cfg.Size != g.scale.size {
		g.scale.size = *cfg.Size
		g.scale.hist.LastChange = now
	}
}

// scheduleScaler starts a leadership's evaluations of g: the first one an
// interval from now, as a new leader observes for an interval before it
// judges health, with a history that holds the current size as if it had
// just been recommended, so that no scale-down follows a restart or a
// fail-over before the stabilization window has passed.
func (s *service) scheduleScaler(g *groupSched, now time.Time) {
	sc := g.scale
	if sc == nil || s.termFor(g.name) == nil {
		return
	}
	if sc.epoch != s.epoch {
		sc.epoch = s.epoch
		sc.hist = autoscale.History{
			Recommendations: []autoscale.Recommendation{{At: now, Desired: sc.size}},
			LastChange:      sc.hist.LastChange,
		}
		sc.next = time.Time{}
	}
	if sc.next.IsZero() && !sc.running {
		sc.next = now.Add(evaluationInterval(g.spec.cfg.Autoscale))
	}
}

func evaluationInterval(a *config.Autoscale) time.Duration {
	if a.EvaluationInterval <= 0 {
		return time.Duration(config.DefaultEvaluationInterval)
	}
	return time.Duration(a.EvaluationInterval)
}

// startScalers starts the evaluations due. Only a leader evaluates.
func (s *service) startScalers(passCtx context.Context, now time.Time) {
	if !s.acts() || passCtx.Err() != nil {
		return
	}
	for _, name := range s.names() {
		g := s.groups[name]
		if s.termFor(name) == nil {
			continue // in scale-out mode, another member's
		}
		s.scheduleScaler(g, now)
		sc := g.scale
		if sc == nil || sc.running || sc.next.After(now) || s.scaling >= cap(s.scaled) {
			continue
		}
		sc.running, sc.next = true, time.Time{}
		s.scaling++
		in := autoscale.Input{Policy: autoscale.PolicyFrom(g.spec.cfg.Autoscale), Current: sc.size, History: sc.hist}
		spec, t := g.spec, s.termFor(name)
		go func() {
			ctx, cancel := termContext(passCtx, t)
			defer cancel()
			r := s.evaluate(ctx, t, spec, in)
			r.name, r.term = spec.cfg.Name, t
			s.scaled <- r // never blocks: scaled holds as many as may run
		}()
	}
}

// nextScale is the earliest evaluation due, zero when none is.
func (s *service) nextScale() time.Time {
	var next time.Time
	for _, g := range s.groups {
		if sc := g.scale; sc != nil && !sc.next.IsZero() && (next.IsZero() || sc.next.Before(next)) {
			next = sc.next
		}
	}
	return next
}

// scaledDone takes an evaluation's result: it records the decision, keeps
// its history, schedules the next evaluation, and, when the size changed,
// takes the new state and passes the group at once.
func (s *service) scaledDone(ctx, passCtx context.Context, r scaleResult) {
	s.scaling--
	now := time.Now()
	g := s.groups[r.name]
	if r.err != nil {
		s.log.Warn("autoscale: evaluation failed", "group", r.name, "error", r.err)
		s.rec.Event(status.Event{Kind: status.EventError, Group: r.name, Message: "autoscale: " + r.err.Error()})
	}
	if g == nil || g.scale == nil {
		s.startDirty(passCtx)
		return
	}
	sc := g.scale
	sc.running = false
	if r.err != nil && deposed(r.err) {
		s.fenceRefused(ctx, r.term, r.err)
	}
	if r.decided && r.term == s.termFor(r.name) && sc.epoch == s.epoch {
		sc.hist = r.decision.History
		a := g.spec.cfg.Autoscale
		news := s.rec.Autoscaled(r.name, status.AutoscalePolicy{Min: a.Min, Max: a.Max, EvaluationInterval: evaluationInterval(a)}, r.decision)
		logf := s.log.Debug // a decision that repeats the last one is logged at debug
		if news {
			logf = s.log.Info
		}
		logf("autoscale: "+status.DecisionAction(r.decision), "group", r.name,
			"current", r.decision.Current, "desired", r.decision.Desired, "reason", r.decision.Reason)
		if r.doc != nil {
			sc.size = r.decision.Desired
		}
	}
	if r.doc != nil {
		s.setDoc(ctx, r.doc)
		s.sweep(passCtx, []string{r.name}, true)
	}
	if s.termFor(r.name) != nil && g.scale != nil {
		g.scale.next = now.Add(evaluationInterval(g.spec.cfg.Autoscale))
	}
	s.startDirty(passCtx)
}
