package watch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/infrakit/infrakit/internal/state"
)

// groupSched is the loop's record of one group.
type groupSched struct {
	name string
	spec groupSpec
	// mem is the group's memory across passes; only its pass in flight
	// touches it.
	mem     *groupState
	running bool
	// dirty asks for a pass; full asks that it list every member's health.
	dirty, full bool
	// waiting are the sweeps this group's next pass completes.
	waiting []*sweep
	// due is when a follow-up pass is wanted (zero: none).
	due time.Time
	sub *subscription
	// scale is the group's autoscaler; nil without an autoscale block.
	scale *scaler
	// gone: the group left the stack while a pass was in flight.
	gone bool
	// again: the group's next or running pass was asked for at once by
	// one that made members (passResult.again); no sync starts before it
	// has passed (startFollowers).
	again bool
	// memEpoch is the service's epoch mem was made in; a pass in a later
	// one starts with a fresh memory.
	memEpoch int
	// listedAt is when the group's last full pass listed it, members how
	// many it listed, and covered whether its events announce every change
	// (passResult): the interval's ticks pass it by (relist.go).
	listedAt time.Time
	members  int
	covered  bool
}

// sweep is one pass as the status counts them: the passes of the groups
// one trigger (the interval, an event, the state changing) asked for. It is
// observed once every one of them has finished.
type sweep struct {
	start     time.Time
	remaining int
	errs      []error
}

// run starts the service's goroutines, runs the loop until ctx ends, then
// lets the passes in flight finish (within opts.Shutdown less the time
// Run needs after it) and stops everything it started.
func (s *service) run(ctx context.Context, doc *state.Document) {
	// Passes get a context of their own, cancelled only once the loop has
	// stopped: cancelling it lets their provider calls in flight finish and
	// what they did be recorded (group.Controller.Execute).
	passCtx, stopPasses := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPasses()

	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		pollState(ctx, s.store, s.serials, s.opts.StatePoll, doc, s.docs, s.log.Named("state"))
	}()
	s.setDoc(ctx, doc)
	if doc.Stack == nil {
		s.log.Warn("nothing is applied yet: waiting for `infrakit apply`")
	}
	if s.ha != nil {
		s.bg.Add(2)
		go func() {
			defer s.bg.Done()
			s.campaign(ctx)
		}()
		go func() {
			defer s.bg.Done()
			s.observeLeader(ctx)
		}()
	}
	if s.so != nil {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.member(ctx)
		}()
	}
	s.loop(ctx, passCtx)
	defer s.gc.restore()

	// Shutdown.
	stopPasses()
	deadline := time.NewTimer(max(s.opts.Shutdown-5*time.Second, time.Second))
	defer deadline.Stop()
	if s.active > 0 || s.fol.running || s.scaling > 0 {
		s.log.Info("stopping: waiting for the passes in flight", "passes", s.active, "sync", s.fol.running, "autoscale", s.scaling)
	}
	for s.active > 0 || s.fol.running || s.scaling > 0 {
		select {
		case r := <-s.done:
			s.finished(ctx, passCtx, r)
		case r := <-s.followed:
			s.followedDone(ctx, passCtx, r)
		case r := <-s.scaled:
			s.scaledDone(ctx, passCtx, r)
		case <-s.lostC():
			s.endTerm(s.lostReason())
		case a := <-s.soAcquired():
			s.acquire(ctx, passCtx, a) // starts nothing: passCtx is done
		case r := <-s.soReleasing():
			s.release(ctx, r)
		case <-deadline.C:
			s.log.Warn("stopping without waiting for the passes still in flight; the state holds what they recorded", "passes", s.active)
			s.active, s.fol.running, s.scaling = 0, false, 0
		}
		s.settle()
	}
	// Nothing acts any more: a leader resigns now, so that another watch
	// leads at once (the campaigner revokes the lease); a scale-out
	// member gives its objects back and leaves.
	s.endTerm("stopping")
	if s.so != nil {
		s.so.stop()
	}
	for _, g := range s.groups {
		if g.sub != nil {
			g.sub.cancel()
		}
	}
	s.bg.Wait()
}

func (s *service) loop(ctx, passCtx context.Context) {
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	follow := time.NewTimer(time.Hour)
	defer follow.Stop()
	s.sweep(passCtx, s.names(), true)
	for {
		s.arm(follow)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if due, ok := s.intervalDue(time.Now()); ok {
				s.sweep(passCtx, due, true)
			}
		case name := <-s.events:
			s.sweep(passCtx, []string{name}, false)
		case doc := <-s.docs:
			if s.so != nil && s.doc != nil && doc.Lineage == s.doc.Lineage && sameStack(doc.Stack, s.doc.Stack) {
				// Other members recorded their objects: nothing this
				// process enforces changed.
				s.setDoc(ctx, doc)
				break
			}
			s.log.Info("the state was changed by another command; passing with it", "serial", doc.Serial)
			s.setDoc(ctx, doc)
			s.sweep(passCtx, s.names(), true)
		case <-s.opts.Reload:
			s.reload(ctx)
			s.sweep(passCtx, s.names(), true)
		case r := <-s.done:
			s.finished(ctx, passCtx, r)
		case r := <-s.followed:
			s.followedDone(ctx, passCtx, r)
		case r := <-s.scaled:
			s.scaledDone(ctx, passCtx, r)
		case t := <-s.wonC():
			s.lead(ctx, passCtx, t)
		case a := <-s.soAcquired():
			s.acquire(ctx, passCtx, a)
		case r := <-s.soReleasing():
			s.release(ctx, r)
		case <-s.lostC():
			s.endTerm(s.lostReason())
		case <-follow.C:
			now := time.Now()
			var due []string
			for _, name := range s.names() {
				if g := s.groups[name]; !g.due.IsZero() && !g.due.After(now) {
					g.due = time.Time{}
					due = append(due, name)
				}
			}
			if len(due) > 0 {
				// Not when the timer was the sync's: an empty sweep
				// would count as a pass.
				s.sweep(passCtx, due, true)
			}
			if s.fol.every > 0 && !s.fol.due.After(now) {
				s.fol.due = now.Add(s.fol.every)
				s.wantFollowers(nil)
			}
		}
		s.settle()
		s.startFollowers(passCtx)
		s.startScalers(passCtx, time.Now())
		s.gc.set(s.active > 0 || s.fol.running || s.scaling > 0)
	}
}

// arm sets the follow-up timer to the earliest follow-up due, or the next
// sync of the ingresses and enrollments.
func (s *service) arm(t *time.Timer) {
	var next time.Time
	if s.fol.every > 0 {
		next = s.fol.due
	}
	for _, g := range s.groups {
		if !g.due.IsZero() && (next.IsZero() || g.due.Before(next)) {
			next = g.due
		}
	}
	if at := s.nextScale(); !at.IsZero() && s.acts() && (next.IsZero() || at.Before(next)) {
		next = at
	}
	if next.IsZero() {
		t.Stop()
		return
	}
	t.Reset(max(time.Until(next), 0))
}

func (s *service) names() []string { return slices.Sorted(maps.Keys(s.groups)) }

// sweep asks for a pass of each named group that watch manages and starts
// what it can. full passes list every member's health.
func (s *service) sweep(passCtx context.Context, names []string, full bool) {
	sw := &sweep{start: time.Now()}
	for _, name := range names {
		g := s.groups[name]
		if g == nil || !g.spec.managed() || !s.passes(name) {
			continue
		}
		sw.remaining++
		g.waiting = append(g.waiting, sw)
		g.dirty = true
		g.full = g.full || full
		if full {
			g.due = time.Time{} // this pass is the follow-up
		}
	}
	if sw.remaining == 0 && full {
		s.rec.ObservePass(sw.start, 0, nil) // nothing to manage is a pass too
	}
	s.startDirty(passCtx)
}

// startDirty starts the passes asked for, at most opts.Parallelism at once,
// never two of one group.
func (s *service) startDirty(passCtx context.Context) {
	if s.resetHost {
		if s.active > 0 || s.fol.running {
			return // the host is replaced once no pass uses it
		}
		s.replaceHost()
	}
	for _, name := range s.names() {
		if s.active >= s.opts.Parallelism || passCtx.Err() != nil {
			return
		}
		if g := s.groups[name]; g.dirty && !g.running && g.spec.managed() && s.passes(name) {
			s.start(passCtx, g)
		}
	}
}

func (s *service) start(passCtx context.Context, g *groupSched) {
	if g.memEpoch != s.epoch {
		// The leadership changed since the group's memory was made: a new
		// leader trusts no health it has not sampled for one interval,
		// and a follower remembers nothing of a past leadership.
		g.mem, g.memEpoch = newGroupState(g.name, time.Now()), s.epoch
	}
	g.running, g.dirty = true, false
	full, sweeps, spec, mem, t := g.full, g.waiting, g.spec, g.mem, s.termFor(g.name)
	g.full, g.waiting = false, nil
	s.active++
	s.log.Debug("pass starting", "group", g.name, "full", full, "active", s.active, "leader", t != nil)
	go func() {
		ctx, cancel := termContext(passCtx, t)
		defer cancel()
		var r passResult
		if t == nil {
			r = s.observe(ctx, mem, spec, full)
		} else {
			r = s.pass(ctx, t, mem, spec, full)
		}
		r.sweeps, r.term = sweeps, t
		s.done <- r // never blocks: done holds Parallelism results
	}()
}

// termContext is passCtx, also cancelled when the term t ends (nil: a
// follower's pass, which acts on nothing).
func termContext(passCtx context.Context, t *term) (context.Context, context.CancelFunc) {
	if t == nil || t.lead == nil && !t.scaleOut() {
		return passCtx, func() {}
	}
	ctx, cancel := context.WithCancel(passCtx)
	stop := context.AfterFunc(t.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// finished takes a pass's result: it completes the sweeps it was part of,
// schedules a follow-up, and starts what waits.
func (s *service) finished(ctx, passCtx context.Context, r passResult) {
	s.active--
	s.rec.GroupPassed(r.name)
	now := time.Now()
	s.log.Debug("pass finished", "group", r.name, "error", r.err, "stale", r.stale, "follow_up", r.followUp, "active", s.active)
	for _, sw := range r.sweeps {
		sw.remaining--
		if r.err != nil {
			sw.errs = append(sw.errs, r.err)
		}
		if sw.remaining == 0 {
			s.rec.ObservePass(sw.start, now.Sub(sw.start), errors.Join(sw.errs...))
		}
	}
	if r.deposed && r.term != nil && r.term == s.term {
		s.endTerm(fmt.Sprintf("group %q: %v", r.name, r.err))
	}
	if r.deposed {
		s.fenceRefused(ctx, r.term, r.err)
	}
	if !s.passes(r.name) {
		s.rec.ReleaseGroup(r.name) // its report is its next owner's
	}
	g := s.groups[r.name]
	// owed: this pass was asked for at once by one whose sync it stood
	// in for (below); that sync is still owed once no such pass follows.
	owed := false
	if g != nil {
		owed = g.again
		g.running, g.again = false, false
		if !r.listed.IsZero() {
			g.listedAt, g.members = r.listed, r.members
		}
		if !r.listed.IsZero() || !r.covered {
			g.covered = r.covered // a later full pass covers it again
		}
		switch {
		case g.gone:
			s.removeGroup(g)
		case r.stale:
			// Another command wrote the state since the pass read it:
			// read it now rather than at the poller's next look.
			if doc, err := readState(ctx, s.store); err == nil {
				s.setDoc(ctx, doc)
			}
			s.sweep(passCtx, s.names(), true)
		case r.relist:
			s.sweep(passCtx, []string{r.name}, true)
		case r.again && s.passes(r.name) && g.spec.managed():
			if !g.dirty {
				s.sweep(passCtx, []string{r.name}, false)
			}
			// Set only for a pass that will run: it is what clears it.
			g.again = g.dirty || g.running
		case r.followUp > 0 && !g.dirty:
			g.due = now.Add(r.followUp)
		}
	}
	if (r.acted || r.joined || owed) && (g == nil || !g.again) {
		// A pass that asked for another at once leaves the sync to it:
		// that pass registers and authorizes what it finds running, and
		// the sync follows it.
		s.wantFollowers([]string{r.name})
	}
	s.startDirty(passCtx)
}

// setDoc makes doc the desired state: groups that joined the stack get a
// schedule (and a subscription to their provider's events), groups that
// left it are forgotten, and the others take their new configuration at
// their next pass.
func (s *service) setDoc(ctx context.Context, doc *state.Document) {
	// A new document is a new stack for the followers, except in
	// scale-out mode, where the other members' records move the state
	// all the time: there only what the followers are synced against.
	if s.doc != doc && (s.so == nil || s.doc == nil || doc.Lineage != s.doc.Lineage || !sameStack(doc.Stack, s.doc.Stack) ||
		!reflect.DeepEqual(doc.Ingresses, s.doc.Ingresses) || !reflect.DeepEqual(doc.Enrollments, s.doc.Enrollments)) {
		s.stackGen++
	}
	s.doc = doc
	if s.so != nil && s.so.setObjects(objectsOf(doc)) {
		s.publishScaleOut()
	}
	// The applied provider blocks configure the providers (at their next
	// use), not the stack files: see operation.Options.KeepProviderConfig.
	s.runner.SetProviderConfigs(doc.Stack)
	want := map[string]groupSpec{}
	keys := map[string]bool{}
	if doc.Stack != nil {
		for _, p := range doc.Stack.Providers {
			keys[p.Key()] = true
		}
		for _, cfg := range doc.Stack.Groups {
			spec := groupSpec{stack: doc.Stack.Name, cfg: cfg, lineage: doc.Lineage, serial: doc.Serial,
				doc: doc, followed: followed(doc, cfg.Name)}
			if st := doc.Groups[cfg.Name]; st != nil {
				spec.freed, spec.updateStopped = st.Freed || st.Destroying, st.UpdateStopped
				spec.recorded = slices.Clone(st.Instances)
			}
			want[cfg.Name] = spec
		}
	}
	for name, g := range s.groups {
		if _, ok := want[name]; ok {
			continue
		}
		if g.running {
			g.gone, g.spec.cfg = true, nil
		} else {
			s.removeGroup(g)
		}
	}
	now := time.Now()
	for name, spec := range want {
		g := s.groups[name]
		if g == nil {
			g = &groupSched{name: name, mem: newGroupState(name, now)}
			s.groups[name] = g
		}
		if spec.freed && !g.spec.freed {
			s.log.Info("group is free: not managed until an apply resumes it", "group", name)
			s.rec.RemoveGroup(name)
		}
		g.spec, g.gone = spec, false
		s.syncScaler(g, now)
		s.resubscribe(ctx, g)
	}
	s.prov.forget(keys)
	if every := syncEvery(doc.Stack); every != s.fol.every {
		s.fol.every, s.fol.due = every, now
	}
	s.wantFollowers(nil) // the stack may have changed: sync it all
}

// resubscribe keeps g subscribed to its provider's events while watch
// manages it.
func (s *service) resubscribe(ctx context.Context, g *groupSched) {
	var src source
	if g.spec.managed() && s.passes(g.name) {
		src = source{stack: g.spec.stack, group: g.name, provider: g.spec.cfg.Instance.Provider, typ: g.spec.cfg.Instance.Type}
	}
	if g.sub != nil && g.sub.source == src {
		return
	}
	if g.sub != nil {
		g.sub.cancel() // its goroutine ends on its own; bg waits for it
		g.sub = nil
	}
	if src == (source{}) {
		return
	}
	g.sub = subscribe(ctx, &s.bg, src, s.prov, s.notify, s.log.Named("events"))
}

// notify is how a subscription asks for a pass of its group.
func (s *service) notify(ctx context.Context, name string) {
	select {
	case s.events <- name:
	case <-ctx.Done():
	}
}

func (s *service) removeGroup(g *groupSched) {
	if g.sub != nil {
		g.sub.cancel()
	}
	delete(s.groups, g.name)
	s.acting.setDestroying(g.name, nil)
	s.rec.RemoveGroup(g.name)
	s.log.Info("group left the stack; no longer watched", "group", g.name)
}
