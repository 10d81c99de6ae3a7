package watch

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A pass acts the way apply does: its decision (plan.GroupWork) becomes a
// plan of the group and the followers of its members (plan.Compute with
// the pass's scope), which the executor runs with awaits deferred after
// one look: a pass never waits for a new member to run. What the steps
// made and destroyed is recorded in the state by the pass, through the
// lease.

// act plans and executes the pass's decision, holding the state lease, and
// records the group's members. It returns the members created and
// destroyed. held says the pass took the lease before it listed the group
// (observeGroup); act releases it in any case.
func (s *service) act(ctx context.Context, t *term, gs *groupState, spec groupSpec, o observation, dn decision,
	live []state.Instance, res *passResult, log hclog.Logger, held bool) ([]group.Member, []instance.ID, error) {
	if !held {
		if err := s.takeLease(ctx, t, gs, spec, res, log); err != nil {
			return nil, nil, ignoreStale(err)
		}
	}
	release, err := s.acting.hold(ctx, []string{gs.name})
	if err != nil {
		t.lease.release()
		return nil, nil, err
	}
	// What the pass decided on was listed without the lock: another
	// process (a `group scale` since killed) may have made or destroyed
	// members meanwhile and recorded nothing. List again under the lock,
	// and act only on a listing that still holds. A listing made under
	// the lock holds.
	if !held {
		if relisted, err := o.inst.Describe(ctx, false); err != nil || !sameMembership(o.descs, relisted) {
			release()
			t.lease.release()
			if err == nil {
				log.Debug("the group's members changed since this pass listed them; passing again")
				res.relist = true
			}
			return nil, nil, err
		}
	}
	p, w, err := s.passPlan(ctx, spec, o, dn.work, log)
	if err != nil {
		release()
		t.lease.release()
		return nil, nil, err
	}
	s.announce(gs, spec, w, log)
	a := &actions{group: gs.name, provider: spec.cfg.Instance.Provider, log: log, rec: s.rec,
		failed: func(method string, err error) { s.prov.failed(ctx, spec.cfg.Instance.Provider, method, err) }}
	// The pass looks once for its new members (Look): one that runs at
	// once is registered and authorized now, not by the pass it asks for.
	// Not while a follower cannot be observed: a replacement found healthy
	// would then take its old member away.
	look := len(p.Unknown()) == 0
	r := s.runner.Execute(ctx, p, spec.doc.Stack, discard{}, func(eo *execute.Options) {
		eo.Defer, eo.Look = true, look
		eo.Progress = a.progress
		eo.Parallelism = s.opts.Parallelism
		eo.CallTimeout = s.opts.CallTimeout
		t.guard(eo)
	})
	if deposed(r.Errors()) {
		log.Warn("steps refused: this watch no longer leads", "error", r.Errors())
		res.deposed = true
	}
	for _, line := range followerLines(p, r) {
		s.log.Named("followers").Info(line, "group", gs.name)
		s.rec.Event(status.Event{Kind: EventSynced, Group: gs.name, Message: line})
	}
	created, destroyed := madeAndDestroyed(p, r)
	now := time.Now()
	s.track(gs, spec, p, r, now)
	gs.tracker.Issued(now, created, destroyed)
	s.acting.setDestroying(gs.name, destroyingOf(o, destroyed))
	release()
	final := applyActions(live, created, destroyed)
	serial, werr := t.lease.record(gs.name, final, t.fences()...)
	t.lease.release()
	if werr == nil {
		gs.recorded, gs.recordedSerial = final, serial
	} else if deposed(werr) {
		// The fence refused the write: another watch leads now. What this
		// pass did is found again by its tags.
		log.Warn("state write refused: this watch no longer leads or owns the group", "error", werr)
		res.deposed = true
		if errors.Is(werr, stateetcd.ErrFenced) {
			s.rec.FencedWriteRefused()
		}
	}
	return created, destroyed, errors.Join(r.Errors(), r.Err, werr)
}

// takeLease takes the state lease for a pass that read the state at spec's
// serial. It returns errStale (res.stale set) when another process wrote
// the state since, and marks res deposed when this watch no longer leads.
// Call t.lease.release after a nil error.
func (s *service) takeLease(ctx context.Context, t *term, gs *groupState, spec groupSpec, res *passResult, log hclog.Logger) error {
	err := t.acquireLease(ctx, gs, spec)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errStale):
		log.Debug("the state changed since this pass read it; passing again")
		res.stale = true
	case deposed(err):
		log.Warn("not acting: this watch no longer leads", "error", err)
		res.deposed = true
	}
	return err
}

// ignoreStale is err, or nil for errStale: a stale pass is passed again,
// which is no failure.
func ignoreStale(err error) error {
	if errors.Is(err, errStale) {
		return nil
	}
	return err
}

// passPlan is the plan of a pass's work, and the work it plans: the
// group's steps and its followers' for its members, the load balancers and
// authorizers observed now. When a follower cannot be observed, members
// are only added: none is taken away (destroyed, finished, or a pet
// replaced, which destroys the old one first) while a load balancer may
// still route to it or an authorization name it.
func (s *service) passPlan(ctx context.Context, spec groupSpec, o observation, w plan.GroupWork, log hclog.Logger) (*plan.Plan, plan.GroupWork, error) {
	name := spec.cfg.Name
	scope := plan.Scope{Groups: []string{name}, Work: map[string]plan.GroupWork{name: w}}
	world := plan.World{
		// The listing as the pass decided on it: a member this process
		// destroyed and the provider still lists is terminating, and is
		// not registered again.
		Members:   map[string][]group.Member{name: listedOnly(o.adj.Members, o.members)},
		Instances: map[string][]instance.Description{name: o.descs},
		Failed:    map[string]error{},
		Rendered:  &s.rendered,
	}
	if spec.followed {
		needs := plan.NeedsOf(spec.doc.Stack, spec.doc, scope)
		if needs.Groups[name].Properties {
			descs, err := o.inst.Describe(ctx, true)
			if err != nil {
				return nil, w, err
			}
			world.Instances[name] = descs
		}
		fw := s.runner.Observe(ctx, plan.Needs{LoadBalancers: needs.LoadBalancers, Targets: needs.Targets}, nil)
		world.LoadBalancers, world.Authorizers = fw.LoadBalancers, fw.Authorizers
	}
	p, err := plan.Compute(spec.doc.Stack, spec.doc, world, scope)
	if err != nil {
		return nil, w, err
	}
	pets := spec.cfg.Size == nil
	if unknown := p.Unknown(); len(unknown) > 0 && (len(w.Destroy) > 0 || len(w.Finish) > 0 || pets && len(w.Replace) > 0) {
		log.Warn("a follower of the group cannot be observed: no member is taken away this pass", "followers", strings.Join(unknown, "; "))
		w.Destroy, w.Finish = nil, nil
		if pets {
			w.Replace = nil
		}
		scope.Work[name] = w
		p, err = plan.Compute(spec.doc.Stack, spec.doc, world, scope)
	}
	return p, w, err
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
