package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A pass acts the way apply does: its decision (plan.GroupWork) becomes a
// plan of the group and the followers of its members (plan.Compute with
// the pass's scope), which the executor runs with awaits deferred: a pass
// never waits for a new member to run. What the steps made and destroyed
// is recorded in the state by the pass, through the lease.

// act plans and executes the pass's decision, holding the state lease, and
// records the group's members. It returns the members created and
// destroyed.
func (s *service) act(ctx context.Context, t *term, gs *groupState, spec groupSpec, o observation, dn decision,
	live []state.Instance, res *passResult, log hclog.Logger) ([]group.Member, []instance.ID, error) {
	if err := t.lease.acquire(ctx, spec.lineage, spec.serial); err != nil {
		if errors.Is(err, errStale) {
			log.Debug("the state changed since this pass read it; passing again")
			res.stale = true
			return nil, nil, nil
		}
		if deposed(err) {
			log.Warn("not acting: this watch no longer leads", "error", err)
			res.deposed = true
		}
		return nil, nil, err
	}
	s.announce(gs, spec, dn, log)
	p, err := s.passPlan(ctx, spec, o, dn.work, log)
	if err != nil {
		t.lease.release()
		return nil, nil, err
	}
	a := &actions{group: gs.name, provider: spec.cfg.Instance.Provider, log: log, rec: s.rec,
		failed: func(method string, err error) { s.prov.failed(ctx, spec.cfg.Instance.Provider, method, err) }}
	r := s.runner.Execute(ctx, p, spec.doc.Stack, discard{}, func(eo *execute.Options) {
		eo.Defer = true
		eo.Progress = a.progress
		eo.Parallelism = s.opts.Parallelism
		eo.CallTimeout = s.opts.CallTimeout
	})
	for _, line := range followerLines(p, r) {
		s.log.Named("followers").Info(line, "group", gs.name)
		s.rec.Event(status.Event{Kind: EventSynced, Group: gs.name, Message: line})
	}
	created, destroyed := madeAndDestroyed(p, r)
	now := time.Now()
	s.track(gs, spec, p, r, now)
	gs.tracker.Issued(now, created, destroyed)
	final := applyActions(live, created, destroyed)
	serial, werr := t.lease.record(gs.name, final)
	t.lease.release()
	if werr == nil {
		gs.recorded, gs.recordedSerial = final, serial
	} else if deposed(werr) {
		// The fence refused the write: another watch leads now. What this
		// pass did is found again by its tags.
		log.Warn("state write refused: this watch no longer leads", "error", werr)
		res.deposed = true
	}
	return created, destroyed, errors.Join(r.Errors(), r.Err, werr)
}

// passPlan is the plan of a pass's work: the group's steps and its
// followers' for its members, the load balancers and authorizers observed
// now. When a follower cannot be observed, members are only added: none
// is taken away while a load balancer may still route to it.
func (s *service) passPlan(ctx context.Context, spec groupSpec, o observation, w plan.GroupWork, log hclog.Logger) (*plan.Plan, error) {
	name := spec.cfg.Name
	scope := plan.Scope{Groups: []string{name}, Work: map[string]plan.GroupWork{name: w}}
	world := plan.World{
		Members:   map[string][]group.Member{name: o.members},
		Instances: map[string][]instance.Description{name: o.descs},
		Failed:    map[string]error{},
	}
	if spec.followed {
		needs := plan.NeedsOf(spec.doc.Stack, spec.doc, scope)
		if needs.Groups[name].Properties {
			descs, err := o.inst.Describe(ctx, true)
			if err != nil {
				return nil, err
			}
			world.Instances[name] = descs
		}
		fw := s.runner.Observe(ctx, plan.Needs{LoadBalancers: needs.LoadBalancers, Targets: needs.Targets}, nil)
		world.LoadBalancers, world.Authorizers = fw.LoadBalancers, fw.Authorizers
	}
	p, err := plan.Compute(spec.doc.Stack, spec.doc, world, scope)
	if err != nil {
		return nil, err
	}
	if unknown := p.Unknown(); len(unknown) > 0 && (len(w.Destroy) > 0 || len(w.Finish) > 0) {
		log.Warn("a follower of the group cannot be observed: no member is taken away this pass", "followers", strings.Join(unknown, "; "))
		w.Destroy, w.Finish = nil, nil
		scope.Work[name] = w
		return plan.Compute(spec.doc.Stack, spec.doc, world, scope)
	}
	return p, nil
}

// discard is the recorder of a pass: the pass records the group's members
// itself once the steps are done (through the lease), and its plan's
// intent holds nothing that is not in the state already.
type discard struct{}

func (discard) Record(context.Context, []plan.StateChange) error     { return nil }
func (discard) Created(context.Context, string, group.Member) error  { return nil }
func (discard) Destroyed(context.Context, string, instance.ID) error { return nil }
func (discard) Flush(context.Context) error                          { return nil }

// madeAndDestroyed are the members a run's provisions made and its
// destroys destroyed.
func madeAndDestroyed(p *plan.Plan, r *execute.Result) ([]group.Member, []instance.ID) {
	var created []group.Member
	var destroyed []instance.ID
	for _, st := range p.Steps {
		if r.Status[st.ID-1] != execute.StatusDone {
			continue
		}
		switch st.Kind {
		case plan.StepProvision:
			created = append(created, r.Made[st.ID])
		case plan.StepDestroy:
			destroyed = append(destroyed, st.Instance)
		}
	}
	return created, destroyed
}

// track remembers the replacements the run provisioned: a cattle one
// until its new member is healthy and the old one is taken away, a pet
// until its new instance is healthy.
func (s *service) track(gs *groupState, spec groupSpec, p *plan.Plan, r *execute.Result, now time.Time) {
	pets := spec.cfg.Size == nil
	for _, st := range p.Steps {
		if st.Kind != plan.StepProvision || st.Replaces == "" || r.Status[st.ID-1] != execute.StatusDone {
			continue
		}
		rp := replacement{New: r.Made[st.ID].ID, LogicalID: st.LogicalID, Reason: instance.DestroyReason(st.Reason), Since: now}
		if !pets {
			rp.Old = st.Replaces
		}
		gs.inflight = append(gs.inflight, rp)
	}
}

// announce logs and records what a pass starts: the replacements of
// unhealthy members, the vanished members it re-creates, a roll batch.
func (s *service) announce(gs *groupState, spec groupSpec, dn decision, log hclog.Logger) {
	for _, r := range dn.work.Replace {
		if r.Reason == group.ReasonUnhealthy {
			msg := fmt.Sprintf("unhealthy past the %s grace", time.Duration(spec.cfg.Health.Grace))
			log.Info("replacing instance", "instance", r.Old, "reason", r.Reason)
			s.rec.Replacement(gs.name, r.Old, group.ReasonUnhealthy, msg)
		}
	}
	s.vanishedReplaced(gs, len(dn.work.Create), log)
	if len(dn.batch) == 0 {
		return
	}
	d := group.DesiredFromConfig(spec.cfg)
	if !gs.rolling {
		gs.rolling = true
		msg := fmt.Sprintf("rolling update started: out-of-date instances are replaced %d at a time at most (max_parallel %d, max_unavailable %d)",
			max(min(d.MaxParallel, d.MaxUnavailable), 1), max(d.MaxParallel, 1), max(d.MaxUnavailable, 1))
		log.Info(msg)
		s.rec.Event(status.Event{Kind: status.EventRollStarted, Group: gs.name, Message: msg})
	}
	for _, id := range dn.batch {
		log.Info("replacing instance", "instance", id, "reason", group.ReasonRollingUpdate)
		s.rec.Replacement(gs.name, id, group.ReasonRollingUpdate, "out of date: its configuration hash is not the group's")
	}
}

// actions turns the executor's progress into log lines and events.
type actions struct {
	group    string
	provider string
	log      hclog.Logger
	rec      *status.Recorder
	failed   func(method string, err error)
}

func (a *actions) progress(ev execute.Event) {
	s := ev.Step
	if ev.Status == execute.StatusFailed {
		a.log.Error("step failed", "step", s.Kind, "object", s.Object, "instance", ev.Instance, "error", ev.Err)
		a.rec.Event(status.Event{Kind: status.EventError, Group: a.group, Instance: ev.Instance, Provider: s.Provider, Message: errText(ev.Err)})
		switch s.Kind {
		case plan.StepProvision:
			a.failed("Provision", ev.Err)
		case plan.StepDestroy:
			a.failed("Destroy", ev.Err)
		}
		return
	}
	if ev.Status != execute.StatusDone {
		return
	}
	switch s.Kind {
	case plan.StepProvision:
		a.log.Info("created instance", "instance", ev.Instance, "logical_id", s.LogicalID)
		a.rec.Event(status.Event{Kind: status.EventCreated, Group: a.group, Instance: ev.Instance, Message: "provisioned"})
	case plan.StepDrain:
		// Scale-downs are left out: a large one would double its events
		// and push the ones operators look for out of the event ring.
		if s.Reason != string(group.ReasonScaleDown) {
			a.rec.Event(status.Event{Kind: status.EventDrained, Group: a.group, Instance: s.Instance, Reason: s.Reason,
				Message: "drained by every flavor before the destroy"})
		}
	case plan.StepDestroy:
		a.log.Info("destroyed instance", "instance", s.Instance, "reason", s.Reason)
		a.rec.Event(status.Event{Kind: status.EventDestroyed, Group: a.group, Instance: s.Instance, Reason: s.Reason,
			Message: "drained and destroyed"})
	}
}

// followerLines say, one per load balancer of an ingress and one per
// enrollment, what a run did to them ("ingress \"web\": lb1: 1 backend
// registered, 1 backend deregistered").
func followerLines(p *plan.Plan, r *execute.Result) []string {
	type tally struct{ published, unpublished, registered, deregistered, authorized, revoked int }
	var order []string
	by := map[string]*tally{}
	for _, st := range p.Steps {
		if r.Status[st.ID-1] != execute.StatusDone {
			continue
		}
		kind, name := plan.SplitObject(st.Object)
		var key string
		switch kind {
		case plan.KindIngress:
			key = fmt.Sprintf("ingress %q: %s", name, st.LoadBalancer)
		case plan.KindEnrollment:
			key = fmt.Sprintf("enrollment %q", name)
		default:
			continue
		}
		t := by[key]
		if t == nil {
			t = &tally{}
			by[key] = t
			order = append(order, key)
		}
		switch st.Kind {
		case plan.StepPublish, plan.StepRepublish:
			t.published++
		case plan.StepUnpublish:
			t.unpublished++
		case plan.StepRegister:
			t.registered++
		case plan.StepDeregister:
			t.deregistered++
		case plan.StepAuthorize:
			t.authorized++
		case plan.StepRevoke:
			t.revoked++
		}
	}
	lines := make([]string, 0, len(order))
	for _, key := range order {
		t := by[key]
		var parts []string
		for _, x := range []struct {
			n    int
			noun string
		}{{t.published, "route%s published"}, {t.unpublished, "route%s unpublished"}, {t.registered, "backend%s registered"},
			{t.deregistered, "backend%s deregistered"}, {t.authorized, "authorization%s made"}, {t.revoked, "authorization%s revoked"}} {
			if x.n > 0 {
				parts = append(parts, fmt.Sprintf("%d "+x.noun, x.n, pluralS(x.n)))
			}
		}
		if len(parts) > 0 {
			lines = append(lines, key+": "+strings.Join(parts, ", "))
		}
	}
	return slices.Clip(lines)
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
