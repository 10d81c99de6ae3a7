package watch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/heal"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/instance"
)

// groupSpec is a group as the state holds it when a pass starts: what the
// pass enforces, and the serial it was read at (acting is refused if
// another process wrote the state since).
type groupSpec struct {
	stack string
	// cfg is the group's configuration; nil when it left the stack.
	cfg                  *config.Group
	freed, updateStopped bool
	lineage              string
	serial               uint64
	// recorded are the members the state records.
	recorded []state.Instance
	// doc is the state the spec was read from: the stack the pass plans
	// against (its ingresses and enrollments).
	doc *state.Document
	// followed: an ingress or enrollment (not freed) follows the group.
	followed bool
}

// managed reports whether watch reconciles the group.
func (g groupSpec) managed() bool { return g.cfg != nil && !g.freed }

// groupState is what a group's passes remember from one to the next. Only
// the group's pass in flight touches it (the loop never runs two passes of
// one group at once, and hands it over through channels).
type groupState struct {
	name    string
	tracker *heal.Tracker
	// cfgKey identifies the configuration last enforced: when an apply
	// changes it, a roll in progress is planned again.
	cfgKey string
	// inflight are the replacements in flight (a rolling update's, and
	// heals of unhealthy cattle): provisioned, not yet finished.
	inflight []replacement
	// rolling is set from the first batch of a roll to its end.
	rolling bool
	// halted says why the roll waits for the next apply (a replacement
	// that never turned healthy); "" when it may go on.
	halted    string
	stopNoted bool
	// vanished are members gone out of band whose replacement is owed, for
	// the "replaced" events.
	vanished    []instance.ID
	brakeReason string
	// recorded are the members the state holds for the group, as of
	// recordedLineage/recordedSerial.
	recorded        []state.Instance
	recordedLineage string
	recordedSerial  uint64
	// seen are the live members the last pass listed, with their state
	// and address, to tell when one joins or changes (seenAny: a pass
	// listed them).
	seen    map[instance.ID]memberKey
	seenAny bool
	// idle counts the follow-up passes in a row that did nothing.
	idle int
	// lastErr is the last pass's error, so a repeated one is one event.
	lastErr string
}

func newGroupState(name string, start time.Time) *groupState {
	return &groupState{name: name, tracker: heal.NewTracker(name, heal.Policy{}, start)}
}

// passResult is what a pass tells the loop.
type passResult struct {
	name   string
	sweeps []*sweep
	err    error
	// stale: another process wrote the state since the pass read it; the
	// pass did nothing and the group must be passed again on a fresh read.
	stale bool
	// relist: the group's members changed between the pass's listing and
	// its taking the lock; it did nothing and the group is passed again.
	relist bool
	// followUp, when positive, asks for another pass that soon.
	followUp time.Duration
	// acted: the pass created or destroyed members, so the ingresses and
	// enrollments that follow the group are synced.
	acted bool
	// joined: the pass listed a live member the previous one did not, or
	// one whose state or address changed (a replacement now running), so
	// they are synced too.
	joined bool
	// again: the pass made members that ingresses or enrollments follow
	// and left their awaits for later; the group is passed again at once,
	// and that pass registers and authorizes those already running (a
	// heal's latency), instead of waiting for their events and the sync.
	again bool
	// term is the leadership the pass acted for (nil: a follower's
	// observe-only pass); deposed says it found that leadership gone (a
	// fenced write, a failed verification): the loop stops acting at once.
	term    *term
	deposed bool
	// listed is when a full pass began listing the group (zero: none did),
	// and members how many it listed. covered: the pass left the group
	// settled (no follow-up, brake or unhealthy member waits on a clock)
	// and its provider's events announce every change a listing would
	// find, its health being the instances' state (relist.go).
	listed  time.Time
	members int
	covered bool
}

// configure brings the group's memory up to the spec: a new configuration
// (an apply) re-plans a roll in progress and lifts a halt.
func (s *service) configure(gs *groupState, spec groupSpec, now time.Time, log hclog.Logger) {
	key := configKey(spec.cfg)
	if key != gs.cfgKey {
		if gs.cfgKey != "" && (gs.rolling || rollingInFlight(gs.inflight) > 0) {
			msg := "the applied configuration changed; the rolling update is planned again from it"
			log.Info(msg)
			s.rec.Event(status.Event{Kind: status.EventRollStopped, Group: gs.name, Message: msg})
		}
		// The roll's replacements are planned again; the heals of
		// unhealthy members go on (their old members stay on their way
		// out, and their new ones are rolled like any other).
		heals := slices.DeleteFunc(gs.inflight, isRolling)
		gs.cfgKey, gs.inflight, gs.rolling, gs.halted, gs.stopNoted = key, heals, false, "", false
	}
	if !spec.updateStopped {
		gs.stopNoted = false
	}
	p := heal.PolicyFromConfig(spec.cfg.Health)
	// A create may take the whole call timeout to return an ID; give the
	// provider as long again to list it.
	p.ExpectTimeout = 2 * s.opts.CallTimeout
	// Health sampled by a process that just started is not trusted for one
	// interval.
	p.Quiet = s.opts.Interval
	p.BrakeSettle = s.opts.BrakeSettle
	gs.tracker.SetPolicy(p)
	if spec.lineage != gs.recordedLineage || spec.serial > gs.recordedSerial {
		gs.recorded, gs.recordedLineage, gs.recordedSerial = spec.recorded, spec.lineage, spec.serial
	}
}

func configKey(g *config.Group) string {
	b, err := json.Marshal(g)
	if err != nil {
		return g.ConfigHash() // cannot happen: the state encoded it
	}
	return string(b)
}

// pass reconciles one group once: observe (with health when it matters),
// let the self-healing policy adjust what Decide sees, decide, trim the
// decision by the brake and the replacement budget, then plan and execute
// (act.go), holding the state lease, and record the members in the state.
// full passes ask every member's health; passes started by a provider
// event ask it only when the decision depends on it.
func (s *service) pass(ctx context.Context, t *term, gs *groupState, spec groupSpec, full bool) passResult {
	start := time.Now()
	cfg := spec.cfg
	log := s.log.With("group", gs.name)
	s.configure(gs, spec, start, log)
	d := group.DesiredFromConfig(cfg)
	rep := status.GroupReport{Name: gs.name, Desired: d, Start: start, Rolling: status.Rolling{Stopped: spec.updateStopped}}
	res := passResult{name: gs.name}
	report := func(err error) passResult {
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("pass failed", "error", err)
			res.err = err
			rep.Err = err
			// A failing provider fails every pass: one event per new error.
			if msg := err.Error(); msg != gs.lastErr {
				gs.lastErr = msg
				s.rec.Event(status.Event{Kind: status.EventError, Group: gs.name, Provider: cfg.Instance.Provider, Message: msg})
			}
		case err == nil:
			gs.lastErr = ""
		}
		rep.Duration = time.Since(start)
		s.rec.SetGroup(rep)
		return res
	}
	o, held, err := s.observeGroup(ctx, t, gs, spec, d, full, &res, log)
	if err != nil || ctx.Err() != nil || res.stale {
		if held {
			t.lease.release()
		}
		return report(err) // shutting down: a partial observation is no observation
	}
	dn := s.decide(gs, spec, d, o, log)
	res.joined = dn.joined
	rep.Rolling.Outdated = dn.outdated + outdatedInFlight(gs.inflight)
	rep.Rolling.Wait = dn.rs.Wait
	rep.Braked, rep.BrakeReason = o.adj.Braked, gs.brakeReason
	bst := gs.tracker.Status(o.now)
	rep.BrakeReleaseAt, rep.BrakeRateLimit = bst.ReleaseAt, bst.RateLimit
	// The status counts what the provider listed (health within the grace
	// shown as unknown, as Decide saw it); creates not listed yet are
	// Expected.
	rep.Members = listedOnly(o.adj.Members, o.members)
	live := recordOf(o.adj.Members)
	// A member that joined a followed group is registered and authorized
	// by this pass's plan, not only by the sync after it.
	acting := !dn.work.Empty() || !sameMembers(live, gs.recorded) || dn.joined
	var created []group.Member
	var destroyed []instance.ID
	if acting && ctx.Err() == nil { // shutting down: start nothing new
		s.listings.drop(gs.name) // what it makes and destroys outdates it
		created, destroyed, err = s.act(ctx, t, gs, spec, o, dn, live, &res, log, held)
	} else {
		s.leaveAlone(t, gs, o, held, acting)
	}
	// A replacement whose old member was not taken away (the pass did not
	// act, or left it to a later pass) stays in flight: its next pass
	// finishes it.
	kept := unfinished(dn.finished, destroyed)
	gs.inflight = append(gs.inflight, kept...)
	if res.stale || res.relist {
		rep.Duration = time.Since(start)
		return res
	}
	s.finishRoll(gs, dn.outdated, log)
	rep.Members = markDestroyed(rep.Members, destroyed)
	rep.Rolling.Outdated += outdatedInFlight(kept)
	rep.Rolling.InFlight = rollingInFlight(gs.inflight)
	rep.Expected = gs.tracker.Status(o.now).Pending
	res.acted = len(created)+len(destroyed) > 0
	res.again = len(created) > 0 && spec.followed
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil // interrupted by the shutdown, which is not a failure
	}
	// A pass that acted, or saw a member join or change (a replacement now
	// running), is followed up soon: what it started is looked at again
	// before the follow-ups back off.
	res.followUp = s.followUp(gs, d, o.adj.Braked, acting || dn.moved, err != nil, o.now)
	res.coverage(gs, d, o, full, err)
	return report(err)
}

// leaveAlone ends a pass that does not act: it releases the lease it
// held, records what the pass knows destroyed, and, unless the pass only
// stopped for the shutdown, leaves its listing for the syncs.
func (s *service) leaveAlone(t *term, gs *groupState, o observation, held, acting bool) {
	if held {
		t.lease.release()
	}
	s.acting.setDestroying(gs.name, destroyingOf(o, nil))
	if !acting {
		s.listings.set(gs.name, o.descs, o.listed)
	}
}

// coverage sets what the loop's interval schedule needs of the pass
// (relist.go): when a full pass listed the group and how many, and whether
// it is settled, with nothing a clock decides (a follow-up, the brake, an
// unhealthy member's grace or budget) and health its events announce.
func (r *passResult) coverage(gs *groupState, d group.Desired, o observation, full bool, err error) {
	if full {
		r.listed, r.members = o.listed, len(o.members)
	}
	r.covered = err == nil && r.followUp == 0 && !o.adj.Braked && gs.tracker.Status(o.now).Unhealthy == 0 &&
		(!d.ReplaceUnhealthy || !o.inst.AsksHealth())
}

// observation is what a pass saw of its group.
type observation struct {
	inst    *group.Instances
	descs   []instance.Description
	members []group.Member
	adj     heal.Adjusted
	// listed is when the listing began, now when it ended.
	listed, now time.Time
}

// observeGroup lists the group (with health when it matters) and lets the
// self-healing policy adjust what Decide sees. On the local state, a pass
// started by a provider event (not full) most likely acts: it takes the
// state lock before it lists (held), so that act need not list again
// under the lock (the heal's latency); it returns with res.stale set,
// holding nothing, when the state changed since the pass read it. With
// etcd a leader lists first and locks only to act: its lock is an etcd
// lease held by the fenced leader, kept as short as acting, so that a
// leader frozen mid-listing holds nothing the next leader waits for.
func (s *service) observeGroup(ctx context.Context, t *term, gs *groupState, spec groupSpec, d group.Desired, full bool,
	res *passResult, log hclog.Logger) (o observation, held bool, err error) {
	cfg := spec.cfg
	for _, key := range providerKeys(cfg) {
		if _, err := s.prov.client(ctx, key); err != nil {
			return o, false, fmt.Errorf("group %q: %w", gs.name, err)
		}
	}
	inst, err := s.runner.Instances(ctx, spec.stack, cfg)
	if err != nil {
		return o, false, err
	}
	if !full && s.ha == nil && s.so == nil {
		if err := s.takeLease(ctx, t, gs, spec, res, log); err != nil {
			return o, false, ignoreStale(err)
		}
		held = true
	}
	o.inst = inst
	withHealth := d.ReplaceUnhealthy && (full || len(gs.inflight) > 0 || gs.tracker.Status(time.Now()).Unhealthy > 0)
	o.listed = time.Now()
	o.descs, o.members, err = inst.ObserveDescriptions(ctx, withHealth)
	if err != nil {
		s.prov.failed(ctx, cfg.Instance.Provider, "DescribeInstances", err)
		return o, held, err
	}
	if !withHealth && healthMatters(d, o.members, gs, spec) {
		o.members = inst.ObserveFrom(ctx, o.descs, true)
	}
	o.now = time.Now()
	o.adj = gs.tracker.Adjust(o.now, d, o.members)
	return o, held, nil
}

// decision is what a pass decided to do to its group.
type decision struct {
	work plan.GroupWork
	// batch is the roll batch started now; rs how the roll stands.
	batch    []instance.ID
	rs       group.RollStatus
	outdated int
	// finished are the replacements finished now.
	finished []replacement
	// moved: the pass listed a live member the previous one did not, or
	// one whose state or address changed; joined: so, and an ingress or
	// enrollment follows the group.
	moved, joined bool
}

// decide reads the roll in flight, decides on the group as it is about to
// be, and trims the decision by the brake and the replacement budget.
func (s *service) decide(gs *groupState, spec groupSpec, d group.Desired, o observation, log hclog.Logger) decision {
	cfg := spec.cfg
	owed := gs.tracker.Status(o.now).Owed
	moved, seen := joinedMembers(gs.seen, o.members)
	moved = moved && gs.seenAny
	gs.seen, gs.seenAny = seen, true
	s.healEvents(gs, o.adj.Events, owed, log)
	if len(gs.vanished) > owed {
		gs.vanished = gs.vanished[len(gs.vanished)-owed:]
	}
	timeout := time.Duration(cfg.Update.HealthTimeout)
	if timeout <= 0 {
		timeout = time.Duration(config.DefaultUpdatePolicy().HealthTimeout)
	}
	rv := viewRoll(o.adj.Members, gs.inflight, o.now, timeout, !o.adj.Braked)
	gs.inflight = rv.Pending
	for _, r := range rv.TimedOut {
		if r.Reason == group.ReasonUnhealthy {
			log.Warn("replacement of an unhealthy instance not healthy in time; the group repairs itself from what runs",
				"instance", r.New, "replacing", r.Old, "health_timeout", timeout)
			continue
		}
		gs.halted = fmt.Sprintf("replacement %s was not healthy within %s (update.health_timeout); the rolling update waits for the next apply", r.New, timeout)
		log.Error("rolling update halted", "instance", r.New, "replacing", r.Old, "health_timeout", timeout)
		s.rec.Event(status.Event{Kind: status.EventRollStopped, Group: gs.name, Instance: r.New, Message: gs.halted})
	}
	dec := group.Decide(d, rv.Members)
	fdec, evs := gs.tracker.Filter(o.now, dec)
	s.healEvents(gs, evs, owed, log)
	dn := decision{outdated: len(dec.Roll), finished: rv.Finish, moved: moved, joined: moved && spec.followed}
	switch {
	case len(dec.Roll) == 0:
	case spec.updateStopped:
		dn.rs.Wait = "stopped by `infrakit group stop-update` until the next apply"
		if gs.rolling && !gs.stopNoted {
			log.Info("rolling update stopped by group stop-update")
			s.rec.Event(status.Event{Kind: status.EventRollStopped, Group: gs.name, Message: "halted by group stop-update; the group keeps its mix of old and new instances until the next apply"})
		}
		gs.stopNoted = true
	case gs.halted != "":
		dn.rs.Wait = gs.halted
	case o.adj.Braked:
		dn.rs.Wait = "replacement is paused by the mass-failure brake"
	case !fdec.Settled() || len(fdec.Roll) == 0:
		dn.rs.Wait = "the group is not settled yet: it is created, destroyed or healed first"
	default:
		dn.batch, dn.rs = nextBatch(d, rv)
	}
	dn.work = passWork(d, fdec, rv, dn.batch)
	if !o.adj.Braked {
		leaving := map[instance.ID]bool{}
		for _, x := range dn.work.Destroy {
			leaving[x.ID] = true
		}
		for _, r := range dn.work.Replace {
			leaving[r.Old] = true
		}
		for _, r := range dn.work.Finish {
			leaving[r.Old] = true
		}
		for _, id := range goneMembers(gs.recorded, o.members, rv.Members, leaving) {
			if !slices.ContainsFunc(gs.inflight, func(r replacement) bool { return r.Old == id }) {
				dn.work.Gone = append(dn.work.Gone, id)
			}
		}
	}
	return dn
}

// nextBatch is the roll batch to start now, on a group rv reads. None
// while replacements finish: the executor would make the new batch's
// members while it takes the finished ones' old members away, and the
// group would for a moment run more than size+max_parallel members.
func nextBatch(d group.Desired, rv rollView) ([]instance.ID, group.RollStatus) {
	if len(rv.Finish) > 0 {
		return nil, group.RollStatus{Wait: "replacements that turned healthy are finished first"}
	}
	return group.NextRollBatch(d, rv.Members)
}

// passWork is the plan work of a pass's decision: Decide's creates and
// destroys, with the destroys of unhealthy members made replacements (make
// before break for cattle; a pet is destroyed first), the roll batch
// started now, and the replacements finished now.
func passWork(d group.Desired, dec group.Decision, rv rollView, batch []instance.ID) plan.GroupWork {
	var w plan.GroupWork
	creates := slices.Clone(dec.Create)
	lids := make(map[instance.ID]string, len(rv.Members))
	for _, m := range rv.Members {
		lids[m.ID] = m.LogicalID
	}
	for _, x := range dec.Destroy {
		if x.Reason != group.ReasonUnhealthy {
			w.Destroy = append(w.Destroy, x)
			continue
		}
		lid := lids[x.ID]
		i := slices.IndexFunc(creates, func(c group.Create) bool { return c.LogicalID == lid })
		if i < 0 {
			w.Destroy = append(w.Destroy, x)
			continue
		}
		creates = slices.Delete(creates, i, i+1)
		w.Replace = append(w.Replace, plan.Replacement{Old: x.ID, LogicalID: lid, Reason: group.ReasonUnhealthy})
	}
	w.Create = creates
	for _, id := range batch {
		w.Replace = append(w.Replace, plan.Replacement{Old: id, LogicalID: lids[id], Reason: group.ReasonRollingUpdate})
	}
	for _, r := range rv.Finish {
		w.Finish = append(w.Finish, plan.Replacement{Old: r.Old, New: r.New, Reason: r.Reason})
	}
	return w
}

// followUp is how soon the group should be passed again, or 0 to wait for
// the interval or an event. Something in flight (a create not listed yet, a
// replacement waiting for health, a member unhealthy within its grace)
// asks for FollowUp, doubling while the passes find nothing to do (neither
// act nor see a member join or change), up to Interval. A failed pass
// waits for the interval; a braked group is listed again when its settle
// time ends (the confirming re-list), and one whose replacements the
// brake's release rate holds when the next may go, both within Interval.
func (s *service) followUp(gs *groupState, d group.Desired, braked, progressed, failed bool, now time.Time) time.Duration {
	st := gs.tracker.Status(now)
	if at := cmp.Or(st.ReleaseAt, st.RateFreesAt); !failed && !at.IsZero() {
		gs.idle = 0
		return min(max(at.Sub(now), s.opts.FollowUp), s.opts.Interval)
	}
	want := !braked && !failed && (progressed || len(gs.inflight) > 0 || st.Pending > 0 || st.Terminating > 0 ||
		(d.ReplaceUnhealthy && st.Unhealthy > 0 && st.BudgetFreesAt.IsZero()))
	if !want {
		gs.idle = 0
		return 0
	}
	if progressed {
		gs.idle = 0
	} else {
		gs.idle++
	}
	return min(s.opts.FollowUp<<min(gs.idle, 16), s.opts.Interval)
}
