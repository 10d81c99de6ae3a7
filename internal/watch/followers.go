package watch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// Ingresses and enrollments follow group membership: the load balancers'
// backends and the NFS authorizations must equal the groups' members.
// watch syncs them (operation.Runner.SyncFollowers: one DescribeInstances
// per group they need, then the ingress and enrollment controllers' own
// observe → diff → act) on the shortest sync_interval among them, and at
// once for the ones that follow a group a pass just changed, or in which a
// pass saw a member join or change state or address (a replacement now
// running). One sync runs at a time, under the state lease like a pass;
// wanting another while one runs makes one more follow. Backends of
// members that leave are taken out earlier, by the pass (leaving.go).

// EventSynced is the event of a sync that changed load balancers or
// authorizations (its message says what).
const EventSynced status.EventKind = "synced"

// followers is the loop's schedule of the sync.
type followers struct {
	running bool
	// pending asks for a sync: of every follower (all), or of those that
	// follow groups.
	pending bool
	all     bool
	groups  map[string]bool
	// every is the shortest sync_interval (0: the stack has no follower);
	// due is when the next periodic sync is.
	every   time.Duration
	due     time.Time
	lastErr string
}

// followResult is what a sync tells the loop.
type followResult struct {
	err   error
	stale bool
	// term is the leadership the sync ran for; deposed says it found
	// that leadership gone.
	term    *term
	deposed bool
}

// syncEvery is the shortest sync_interval of st's ingresses and
// enrollments, or 0 when it has none.
func syncEvery(st *config.Stack) time.Duration {
	if st == nil {
		return 0
	}
	var every time.Duration
	take := func(d config.Duration) {
		v := time.Duration(d)
		if v <= 0 {
			v = time.Duration(config.DefaultSyncInterval)
		}
		if every == 0 || v < every {
			every = v
		}
	}
	for _, in := range st.Ingresses {
		take(in.SyncInterval)
	}
	for _, e := range st.Enrollments {
		take(e.SyncInterval)
	}
	return every
}

// wantFollowers asks for a sync of the followers of groups (nil: all).
func (s *service) wantFollowers(groups []string) {
	f := &s.fol
	if f.every == 0 {
		return
	}
	f.pending = true
	if groups == nil {
		f.all = true
		return
	}
	if f.groups == nil {
		f.groups = map[string]bool{}
	}
	for _, g := range groups {
		f.groups[g] = true
	}
}

// startFollowers starts the sync asked for, unless one runs.
func (s *service) startFollowers(passCtx context.Context) {
	f := &s.fol
	if f.running || !f.pending || f.every == 0 || s.resetHost || passCtx.Err() != nil || s.doc == nil || s.doc.Stack == nil {
		return
	}
	t := s.term
	if t == nil {
		return // a follower syncs nothing; the sync waits for leadership
	}
	var groups []string
	if !f.all {
		groups = slices.Sorted(maps.Keys(f.groups))
	}
	f.running, f.pending, f.all, f.groups = true, false, false, nil
	if groups == nil {
		f.due = time.Now().Add(f.every)
	}
	doc := s.doc
	go func() {
		ctx, cancel := termContext(passCtx, t)
		defer cancel()
		r := s.syncFollowers(ctx, t, doc, groups)
		r.term = t
		s.followed <- r // never blocks: one sync at a time, one slot
	}()
}

// syncFollowers runs one sync against the stack of doc, for the term t.
func (s *service) syncFollowers(ctx context.Context, t *term, doc *state.Document, groups []string) followResult {
	log := s.log.Named("followers")
	if err := t.lease.acquire(ctx, doc.Lineage, doc.Serial); err != nil {
		if errors.Is(err, errStale) {
			return followResult{stale: true}
		}
		return followResult{err: err, deposed: deposed(err)}
	}
	defer t.lease.release()
	res, err := s.runner.SyncFollowers(ctx, doc.Stack, doc, groups)
	for _, line := range res.Lines {
		log.Info(line)
		s.rec.Event(status.Event{Kind: EventSynced, Message: line})
	}
	if ctx.Err() != nil {
		return followResult{} // shutting down
	}
	return followResult{err: err}
}

// followed takes a sync's result.
func (s *service) followedDone(ctx, passCtx context.Context, r followResult) {
	f := &s.fol
	f.running = false
	if r.deposed && r.term != nil && r.term == s.term {
		s.endTerm(fmt.Sprintf("sync of ingresses and enrollments: %v", r.err))
	}
	switch {
	case r.stale:
		if doc, err := readState(ctx, s.store); err == nil {
			s.setDoc(ctx, doc)
		}
		s.wantFollowers(nil)
	case r.err != nil:
		if msg := r.err.Error(); msg != f.lastErr {
			f.lastErr = msg
			s.log.Named("followers").Error("syncing load balancers and authorizations", "error", r.err)
			s.rec.Event(status.Event{Kind: status.EventError, Message: "sync of ingresses and enrollments: " + msg})
		}
	default:
		f.lastErr = ""
	}
	s.startFollowers(passCtx)
}
