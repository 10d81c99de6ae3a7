package watch

import (
	"context"
	"errors"
	"time"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/ownership"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// Leadership. With the local backend one watch runs per state (the watch
// lock sees to that) and it leads for its whole life: one term that never
// ends. With the etcd backend several watch processes share the state;
// each campaigns (package election) and only the leader acts:
//
//   - The campaigner goroutine wins a Leadership and hands the loop a term.
//     The loop acts only while it holds a term: its passes act through the
//     term's lease, whose store is the backend fenced with the leader key
//     (stateetcd.Backend.Fenced), so a write made after the leadership
//     ended fails; before each pass acts the lease verifies the leadership
//     with etcd (election.Leadership.Verify), so a process that was frozen
//     does not act on the belief it still leads.
//   - Each provider call of a pass or a sync is gated (guard.go): refused
//     once the term ended or the lease is in doubt (its renewal overdue by
//     this process's clock), and cancelled in flight when the term ends.
//   - The term ends when the leadership is lost (its lease expired or was
//     revoked, its key deleted, or renewal overdue: Lost closes before the
//     lease can run out), or when a write or a verification finds it gone.
//     The loop then stops acting at once: the context of the passes in
//     flight is cancelled and no pass acts until the next term.
//   - A follower runs observe-only passes: its providers stay launched and
//     answering, and /v1/status shows the groups as they are, read-only.
//   - A new term starts every group's self-healing memory afresh (package
//     heal's Tracker), so for one health interval (its quiet period) the
//     new leader declares nothing unhealthy: a failover never causes a
//     mass replacement.
//   - On shutdown (SIGTERM) the leader lets the passes in flight finish,
//     then resigns: its lease is revoked in one round trip and a follower
//     leads at once.

// term is one leadership of this process, as the loop holds it.
type term struct {
	// lead is the won leadership; nil for the local backend's lifelong term.
	lead *election.Leadership
	// ctx is done when the term ends (the loop cancels it, or the
	// leadership is lost); the passes of the term run under it.
	ctx    context.Context
	cancel context.CancelFunc
	// ended is closed by the loop when it has stopped acting for the term;
	// the campaigner then resigns. nil for the lifelong term.
	ended chan struct{}
	lease *lease

	// In scale-out mode (scaleout.go) a term is the ownership of one
	// object (or, for a sync, of the followers it covers): obj is it and
	// fence its lease, which fences every state write made for it; gate
	// checks, before each provider call, that the session stands and the
	// object is still this process's. Zero in the other modes.
	obj   ownership.Object
	fence election.Fence
	gate  *stepGate
}

// scaleOut reports whether t is a scale-out term.
func (t *term) scaleOut() bool { return t.gate != nil }

// fences are the fences of t's state writes beyond the lease's store's
// own: the object's lease in scale-out mode, none otherwise.
func (t *term) fences() []election.Fence {
	if t.fence.IsZero() {
		return nil
	}
	return []election.Fence{t.fence}
}

// lifelongTerm is the local backend's term: the lone watch leads until it
// stops.
func lifelongTerm(l *lease) *term {
	return &term{ctx: context.Background(), cancel: func() {}, lease: l}
}

// ha is what a watch on the etcd backend adds to the service.
type ha struct {
	backend  *stateetcd.Backend
	election *election.Election
	identity string
	// won carries each term the campaigner wins to the loop.
	won chan *term
}

// campaignBackoff bounds the pause between failed campaigns.
const campaignBackoff = time.Second

// campaign campaigns for leadership until ctx ends, handing the loop a
// term each time it wins and waiting for that term to end before it
// campaigns again. It owns the Leadership it won: it resigns it when it is
// lost, or once the loop has stopped acting for it (a write found it gone,
// or watch is stopping). Runs in s.bg.
func (s *service) campaign(ctx context.Context) {
	log := s.log.Named("election")
	pause := 100 * time.Millisecond
	failing := false
	for ctx.Err() == nil {
		l, err := s.ha.election.Campaign(ctx, s.ha.identity)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				log.Warn("campaigning for leadership failed; trying again", "error", err)
			}
			failing = true
			sleep(ctx, pause)
			pause = min(2*pause, campaignBackoff)
			continue
		}
		failing, pause = false, 100*time.Millisecond
		// Modes never mix: scale-out members act on their own; a leader
		// beside them would act on the same groups.
		if err := checkNoOther(ctx, s.ha.backend.Client(), s.ha.backend.Prefix(), membersDir); err != nil {
			log.Error("won the leadership but not acting", "error", err)
			s.rec.Event(status.Event{Kind: status.EventError, Message: "not acting: " + err.Error()})
			s.resign(l)
			sleep(ctx, campaignBackoff)
			continue
		}
		tctx, cancel := context.WithCancel(l.Context())
		t := &term{lead: l, ctx: tctx, cancel: cancel, ended: make(chan struct{})}
		select {
		case s.ha.won <- t:
		case <-ctx.Done():
			cancel()
			s.resign(l)
			return
		}
		select {
		case <-l.Lost():
		case <-t.ended:
		}
		// Lost or not, Resign ends the renewals; once lost it only tidies
		// up (and revokes the lease if etcd still has it).
		s.resign(l)
		if err := l.Err(); err != nil && !errors.Is(err, election.ErrResigned) {
			log.Warn("leadership lost", "reason", err)
		}
	}
}

// resign resigns l, waiting for etcd at most one lease TTL (after which the
// lease has expired anyway).
func (s *service) resign(l *election.Leadership) {
	ctx, cancel := context.WithTimeout(context.Background(), l.TTL())
	defer cancel()
	if err := l.Resign(ctx); err != nil {
		s.log.Named("election").Warn("resigning", "error", err)
	}
}

// observeLeader keeps the status's leader_identity as the election says,
// until ctx ends. Runs in s.bg.
func (s *service) observeLeader(ctx context.Context) {
	for ctx.Err() == nil {
		for l := range s.ha.election.Observe(ctx) {
			s.rec.SetLeaderIdentity(l.Identity)
		}
		// The channel closes when etcd cannot be read: look again soon.
		sleep(ctx, time.Second)
	}
}

// lostC is closed when the current term's leadership is lost; nil (never
// ready) while there is no term or it is the local backend's.
func (s *service) lostC() <-chan struct{} {
	if s.term == nil || s.term.lead == nil {
		return nil
	}
	return s.term.lead.Lost()
}

// wonC delivers the terms the campaigner wins; nil with the local backend.
func (s *service) wonC() <-chan *term {
	if s.ha == nil {
		return nil
	}
	return s.ha.won
}

// lead makes t the current term: the loop acts from now on, every group
// starting with a fresh self-healing memory (see startPass), and the state
// is read again, as the previous leader may have written it.
func (s *service) lead(ctx, passCtx context.Context, t *term) {
	if s.term != nil {
		s.endTerm("a new leadership was won")
	}
	l := newLease(s.ha.backend.Fenced(t.lead.Fence()), s.serials, s.opts.LockTimeout)
	l.term, l.verify, l.writeTimeout = t.ctx, t.lead.Verify, t.lead.TTL()
	l.gate = &stepGate{standing: t.lead.Standing, verify: t.lead.Verify}
	t.lease = l
	s.term = t
	s.epoch++
	s.rec.SetLeaderCheck(t.lead.Standing)
	s.rec.SetLeader(true, "")
	s.log.Info("leading: this watch acts now; nothing is judged unhealthy for one interval",
		"identity", s.ha.identity, "fence", t.lead.Fence().String(), "interval", s.opts.Interval)
	if doc, err := readState(ctx, s.store); err != nil {
		s.log.Warn("reading the state on becoming the leader", "error", err)
	} else if s.doc == nil || doc.Lineage != s.doc.Lineage || doc.Serial != s.doc.Serial {
		s.setDoc(ctx, doc)
	}
	s.sweep(passCtx, s.names(), true)
	s.wantFollowers(nil)
}

// endTerm stops acting: the passes of the current term have their context
// cancelled (their provider calls in flight end, and their state writes
// fail on the fence), no pass acts until the next term, and the campaigner
// resigns the leadership and campaigns again.
func (s *service) endTerm(why string) {
	t := s.term
	if t == nil || t.lead == nil {
		return
	}
	s.term = nil
	s.epoch++
	t.cancel()
	close(t.ended)
	s.rec.SetLeader(false, "")
	s.rec.SetLeaderCheck(nil)
	s.log.Warn("no longer the leader: stopped acting", "reason", why)
}

// lostReason says why the current term's leadership was lost.
func (s *service) lostReason() string {
	if s.term == nil || s.term.lead == nil {
		return ""
	}
	if err := s.term.lead.Err(); err != nil {
		return err.Error()
	}
	return "leadership lost"
}

// errNotLeader: the term a lease acts for has ended.
var errNotLeader = errors.New("this watch no longer leads")

// deposed reports whether err says this process no longer leads: a write
// refused by its fence or by the loss of its state lock's lease, or a
// verification that found the leadership gone.
func deposed(err error) bool {
	return errors.Is(err, errNotLeader) || errors.Is(err, errNotOwner) || errors.Is(err, stateetcd.ErrFenced) || errors.Is(err, stateetcd.ErrLockLost) ||
		errors.Is(err, election.ErrDeposed) || errors.Is(err, election.ErrLeaseLost) ||
		errors.Is(err, election.ErrRenewalOverdue) || errors.Is(err, election.ErrResigned)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
