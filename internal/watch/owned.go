package watch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/ownership"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// The loop's side of scale-out (scaleout.go): which objects it acts on,
// and the terms they act under.

// errNotOwner: the object's key no longer holds the fence this process
// acquired it with (released, expired, revoked).
var errNotOwner = errors.New("this watch no longer owns the object")

func groupObject(name string) ownership.Object {
	return ownership.Object{Kind: ownership.KindGroup, Name: name}
}

// groupName is o's name when it is a group ("" otherwise), for events.
func groupName(o ownership.Object) string {
	if o.Kind == ownership.KindGroup {
		return o.Name
	}
	return ""
}

func followerObject(fl follower) ownership.Object {
	return ownership.Object{Kind: fl.kind, Name: fl.name}
}

// termFor is the term group name's passes act under: the leadership's
// (or the lone watch's), or in scale-out mode the group's own while this
// process owns it; nil when it must not act.
func (s *service) termFor(name string) *term {
	if s.so == nil {
		return s.term
	}
	if t := s.so.owned[groupObject(name)]; t != nil && t.ctx.Err() == nil {
		return t
	}
	return nil
}

// acts reports whether this process acts on anything now.
func (s *service) acts() bool {
	if s.so != nil {
		return len(s.so.owned) > 0
	}
	return s.term != nil
}

// passes reports whether this process passes group name: every group,
// except in scale-out mode, where only its own.
func (s *service) passes(name string) bool {
	return s.so == nil || s.termFor(name) != nil
}

// soAcquired and soReleasing are the Balancer's hooks as the loop reads
// them; nil (never ready) out of scale-out mode.
func (s *service) soAcquired() <-chan acquiredObj {
	if s.so == nil {
		return nil
	}
	return s.so.acquired
}

func (s *service) soReleasing() <-chan releaseReq {
	if s.so == nil {
		return nil
	}
	return s.so.releasing
}

// acquire makes a the loop's: a group is passed at once, with a fresh
// self-healing memory (no health judged for one interval) and a fresh
// autoscale history; a follower is synced with the next sync.
func (s *service) acquire(ctx, passCtx context.Context, a acquiredObj) {
	so := s.so
	if old := so.owned[a.obj]; old != nil {
		old.cancel()
	}
	t := ownedTerm(so.backend.Client(), a)
	so.owned[a.obj] = t
	s.setHeld()
	s.rec.LeaseMoved(status.LeaseAcquired)
	s.log.Named("scale-out").Info("acquired: acting on it now", "object", a.obj.String(), "fence", a.fence.String())
	s.rec.Event(status.Event{Kind: status.EventLease, Group: groupName(a.obj), Message: "acquired " + a.obj.Kind + " " + a.obj.Name})
	if a.obj.Kind != ownership.KindGroup {
		s.fol.all = true
		s.wantFollowers(nil)
		return
	}
	g := s.groups[a.obj.Name]
	if g == nil {
		return // not in the stack this process read yet: setDoc adds it
	}
	g.memEpoch = -1 // a fresh memory at its first pass
	if g.scale != nil {
		g.scale.epoch, g.scale.next = -1, time.Time{}
	}
	s.resubscribe(ctx, g)
	s.sweep(passCtx, []string{g.name}, true)
}

// ownedTerm is the term of an object acquired: it ends when the session
// is lost (or the loop cancels it); its gate refuses each provider call
// once the session is in doubt, and verifies the fence with etcd.
func ownedTerm(cl *clientv3.Client, a acquiredObj) *term {
	ctx, cancel := context.WithCancel(a.sess.Context())
	fence := a.fence
	return &term{ctx: ctx, cancel: cancel, lease: a.lease, obj: a.obj, fence: fence,
		gate: &stepGate{standing: a.sess.Standing, gone: errNotOwner,
			verify: func(ctx context.Context) error { return verifyFences(ctx, cl, fence) }}}
}

// release stops acting on r.obj (the Balancer gives it up, or lost it)
// and closes r.done once nothing acts on it any more.
func (s *service) release(ctx context.Context, r releaseReq) {
	why := "handed over to another member"
	if t := s.so.owned[r.obj]; t != nil && t.ctx.Err() != nil {
		why = "the session was lost" // the Balancer says so after the fact
	}
	s.disown(ctx, r.obj, why)
	if s.busy(r.obj) {
		s.so.waiters[r.obj] = append(s.so.waiters[r.obj], r.done)
		return
	}
	close(r.done)
}

// disown stops acting on o: its term ends (what acts on it is cancelled,
// and its writes fail on the fence once the key is gone), no pass of it
// starts, and its status goes to its next owner.
func (s *service) disown(ctx context.Context, o ownership.Object, why string) {
	so := s.so
	t := so.owned[o]
	if t == nil {
		return
	}
	t.cancel()
	delete(so.owned, o)
	s.setHeld()
	s.rec.LeaseMoved(status.LeaseReleased)
	s.log.Named("scale-out").Info("stopped acting on it", "object", o.String(), "reason", why)
	s.rec.Event(status.Event{Kind: status.EventLease, Group: groupName(o), Message: "released " + o.Kind + " " + o.Name + ": " + why})
	if o.Kind != ownership.KindGroup {
		return
	}
	if g := s.groups[o.Name]; g != nil {
		g.dirty, g.full, g.due = false, false, time.Time{}
		s.dropWaiting(g)
		if g.scale != nil {
			g.scale.next, g.scale.epoch = time.Time{}, -1
		}
		s.resubscribe(ctx, g)
	}
	s.acting.setDestroying(o.Name, nil)
	s.rec.ReleaseGroup(o.Name)
}

// dropWaiting completes, for the status, the sweeps a group no longer
// passed was waiting to be part of.
func (s *service) dropWaiting(g *groupSched) {
	for _, sw := range g.waiting {
		sw.remaining--
		if sw.remaining == 0 {
			s.rec.ObservePass(sw.start, time.Since(sw.start), errors.Join(sw.errs...))
		}
	}
	g.waiting = nil
}

// busy reports whether a pass, an autoscale evaluation or a sync acts on o.
func (s *service) busy(o ownership.Object) bool {
	if o.Kind == ownership.KindGroup {
		g := s.groups[o.Name]
		return g != nil && (g.running || g.scale != nil && g.scale.running)
	}
	return s.fol.running && slices.ContainsFunc(s.fol.syncing, func(fl follower) bool { return followerObject(fl) == o })
}

// settle lets go the Releasing hooks whose objects nothing acts on now.
func (s *service) settle() {
	if s.so == nil {
		return
	}
	for o, done := range s.so.waiters {
		if s.busy(o) {
			continue
		}
		for _, c := range done {
			close(c)
		}
		delete(s.so.waiters, o)
	}
}

// setHeld publishes how many objects the loop holds.
func (s *service) setHeld() {
	mine := make(map[ownership.Object]bool, len(s.so.owned))
	for o := range s.so.owned {
		mine[o] = true
	}
	s.so.mu.Lock()
	s.so.mine = mine
	s.so.mu.Unlock()
	s.publishScaleOut()
}

// fenceRefused handles a write of term t that the fence refused (or a
// verification that found the object gone): it is counted, and in
// scale-out mode this process stops acting on the object at once (the
// Balancer takes it again, under a new fence, if it is still assigned
// here).
func (s *service) fenceRefused(ctx context.Context, t *term, err error) {
	if t == nil || !t.scaleOut() || !(errors.Is(err, stateetcd.ErrFenced) || errors.Is(err, errNotOwner)) {
		return
	}
	if s.so.owned[t.obj] == t {
		s.disown(ctx, t.obj, err.Error())
	}
}

// verifyFences confirms with etcd, in one round trip, that every fence
// still stands (its key exists with its create revision).
func verifyFences(ctx context.Context, cl *clientv3.Client, fences ...election.Fence) error {
	cmps := make([]clientv3.Cmp, len(fences))
	for i, f := range fences {
		cmps[i] = f.Cmp()
	}
	resp, err := cl.Txn(ctx).If(cmps...).Commit()
	if err != nil {
		return fmt.Errorf("verify ownership: %w", err)
	}
	if !resp.Succeeded {
		return errNotOwner
	}
	return nil
}

// syncTerm is the term of a sync of the followers fs, all owned: it ends
// when any of them is released, and its gate checks them all. Its cancel
// must be called once the sync is done.
func (s *service) syncTerm(fs []follower) *term {
	ctx, cancel := context.WithCancel(context.Background())
	var stops []func() bool
	var fences []election.Fence
	var first *term
	for _, fl := range fs {
		ot := s.so.owned[followerObject(fl)]
		if first == nil {
			first = ot
		}
		stops = append(stops, context.AfterFunc(ot.ctx, cancel))
		fences = append(fences, ot.fence)
	}
	cl := s.so.backend.Client()
	return &term{ctx: ctx, lease: first.lease,
		cancel: func() {
			for _, stop := range stops {
				stop()
			}
			cancel()
		},
		gate: &stepGate{standing: first.gate.standing, gone: errNotOwner,
			verify: func(ctx context.Context) error { return verifyFences(ctx, cl, fences...) }}}
}

// ownedFollowers are those of fs this process owns (all of them out of
// scale-out mode).
func (s *service) ownedFollowers(fs []follower) []follower {
	if s.so == nil {
		return fs
	}
	return slices.DeleteFunc(fs, func(fl follower) bool { return s.so.owned[followerObject(fl)] == nil })
}

// sameStack reports whether two states hold the same desired stack.
func sameStack(a, b *config.Stack) bool { return reflect.DeepEqual(a, b) }

// acquireLease joins the state lease for a pass of gs that read spec. In
// scale-out mode the state is stale for it only when the desired stack,
// the lineage or the group's own record changed since it was read (the
// other members record their groups all the time); the ownership is then
// verified with etcd.
func (t *term) acquireLease(ctx context.Context, gs *groupState, spec groupSpec) error {
	if !t.scaleOut() {
		return t.lease.acquire(ctx, spec.lineage, spec.serial)
	}
	recorded := gs.recorded
	return t.acquireVerified(ctx, func(doc *state.Document) bool { return groupStale(spec, recorded, doc) })
}

// groupStale is the scale-out staleness of a pass that read spec and
// believes the group's record is recorded: the state doc holds another
// lineage, another desired stack, or another record of the group (its
// members, or its freed and stop-update marks). Records of other groups
// do not count: the other members write theirs all the time.
func groupStale(spec groupSpec, recorded []state.Instance, doc *state.Document) bool {
	if doc.Lineage != spec.lineage || !sameStack(doc.Stack, spec.doc.Stack) {
		return true
	}
	var have []state.Instance
	freed, stopped := false, false
	if st := doc.Groups[spec.cfg.Name]; st != nil {
		have, freed, stopped = st.Instances, st.Freed || st.Destroying, st.UpdateStopped
	}
	return freed != spec.freed || stopped != spec.updateStopped || !slices.Equal(have, recorded)
}

// followersStale is the scale-out staleness of a sync planned from doc:
// now holds another lineage, stack, or record of ingresses or enrollments,
// or another record of a group they follow. That last is what keeps make
// before break across members: the group's owner acts (registers a
// replacement, deregisters and destroys a leaving member) under the state
// lock and records the group before it lets go, so a sync that listed the
// group before or during that act finds the record moved and plans again
// rather than register a destroyed member or take out a replacement.
func followersStale(doc, now *state.Document) bool {
	if now.Lineage != doc.Lineage || !sameStack(now.Stack, doc.Stack) ||
		!reflect.DeepEqual(now.Ingresses, doc.Ingresses) || !reflect.DeepEqual(now.Enrollments, doc.Enrollments) {
		return true
	}
	for name := range now.Groups {
		if _, ok := doc.Groups[name]; !ok && followed(doc, name) {
			return true
		}
	}
	for name, st := range doc.Groups {
		if followed(doc, name) && !sameRecord(st, now.Groups[name]) {
			return true
		}
	}
	return false
}

// sameRecord reports whether two records of a group hold the same members
// and flags (either may be nil: no record).
func sameRecord(a, b *state.GroupStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Freed == b.Freed && a.Destroying == b.Destroying && a.UpdateStopped == b.UpdateStopped &&
		slices.Equal(a.Instances, b.Instances)
}

// acquireSync joins the state lease for a sync that planned from doc:
// stale in scale-out mode when the stack, the lineage, or what the state
// records of ingresses and enrollments changed.
func (t *term) acquireSync(ctx context.Context, doc *state.Document) error {
	if !t.scaleOut() {
		return t.lease.acquire(ctx, doc.Lineage, doc.Serial)
	}
	return t.acquireVerified(ctx, func(now *state.Document) bool { return followersStale(doc, now) })
}

// acquireSize joins the state lease for an autoscale size change: in
// scale-out mode only another lineage is stale (setSize itself refuses a
// size someone changed).
func (t *term) acquireSize(ctx context.Context, spec groupSpec) error {
	if !t.scaleOut() {
		return t.lease.acquire(ctx, spec.lineage, spec.serial)
	}
	return t.acquireVerified(ctx, func(doc *state.Document) bool { return doc.Lineage != spec.lineage })
}

// acquireVerified joins the lease unless stale, then verifies the term's
// ownership with etcd (a process frozen since its last check must not
// act on an object that moved on).
func (t *term) acquireVerified(ctx context.Context, stale func(*state.Document) bool) error {
	if t.ctx.Err() != nil {
		return fmt.Errorf("not acting: %w", errNotOwner)
	}
	if err := t.lease.acquireFor(ctx, stale); err != nil {
		return err
	}
	vctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(t.ctx, cancel)
	err := t.gate.verify(vctx)
	stop()
	cancel()
	if err != nil {
		t.lease.release()
		return fmt.Errorf("not acting: %w", err)
	}
	return nil
}
