package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// Ingresses and enrollments follow group membership: the load balancers'
// backends and the NFS authorizations must equal the groups' members.
// watch syncs them (operation.Runner.SyncFollowers: one DescribeInstances
// per group they need, then the ingress and enrollment controllers' own
// observe → diff → act), each on its own sync_interval, and at once the
// ones that follow a group a pass just changed, or in which a pass saw a
// member join or change state or address (a replacement now running); all
// of them when the applied stack changes or a leadership begins. One sync
// runs at a time, under the state lease like a pass; syncs wanted while
// one runs are made by the next, together. Backends of members that leave
// are taken out earlier, by the pass (leaving.go); the authorizations of
// members that leave are held until their replacements are authorized
// (the enrollment package's rule), which the sync decides.

// EventSynced is the event of a sync that changed load balancers or
// authorizations (its message says what).
const EventSynced status.EventKind = "synced"

// followers is the loop's schedule of the sync.
type followers struct {
	running bool
	// pending asks for a sync: of the followers due (each sync_interval
	// after its last sync), of every follower (all, or when the stack or
	// the leadership changed since the last full sync: doc and term), and
	// of those that follow groups.
	pending bool
	all     bool
	groups  map[string]bool
	// every is the shortest sync_interval (0: the stack has no follower);
	// due is when the next follower is due (the loop's timer).
	every time.Duration
	due   time.Time
	// next is when each follower is due, by followerKey.
	next map[string]time.Time
	// doc and term are what the last full sync ran for.
	doc     *state.Document
	term    *term
	lastErr string
}

// follower is an ingress or enrollment of the stack that watch syncs.
type follower struct {
	kind, name string
	groups     []string
	every      time.Duration
}

func (f follower) key() string { return f.kind + "/" + f.name }

// followersOf are the ingresses and enrollments of doc's stack that doc
// does not mark freed, with their sync intervals.
func followersOf(doc *state.Document) []follower {
	if doc == nil || doc.Stack == nil {
		return nil
	}
	var out []follower
	for _, in := range doc.Stack.Ingresses {
		if st := doc.Ingresses[in.Name]; st != nil && st.Freed {
			continue
		}
		var groups []string
		for _, r := range in.Rules {
			groups = append(groups, r.Groups...)
		}
		out = append(out, follower{kind: "ingress", name: in.Name, groups: groups, every: interval(in.SyncInterval)})
	}
	for _, e := range doc.Stack.Enrollments {
		if st := doc.Enrollments[e.Name]; st != nil && st.Freed {
			continue
		}
		out = append(out, follower{kind: "enrollment", name: e.Name, groups: []string{e.Source}, every: interval(e.SyncInterval)})
	}
	return out
}

// interval is a sync_interval, the default for none.
func interval(d config.Duration) time.Duration {
	if d <= 0 {
		return time.Duration(config.DefaultSyncInterval)
	}
	return time.Duration(d)
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
		if v := interval(d); every == 0 || v < every {
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

// wantFollowers asks for a sync of the followers of groups, or (nil) of
// the followers that are due, and of all of them when the stack or the
// leadership changed since the last full sync.
func (s *service) wantFollowers(groups []string) {
	f := &s.fol
	if f.every == 0 {
		return
	}
	f.pending = true
	if groups == nil {
		return
	}
	if f.groups == nil {
		f.groups = map[string]bool{}
	}
	for _, g := range groups {
		f.groups[g] = true
	}
}

// selection is what a sync asked for at now covers: every follower when
// full, else those of fs that are due by next or follow one of groups.
func selection(fs []follower, next map[string]time.Time, groups map[string]bool, full bool, now time.Time) (operation.Selection, []follower) {
	if full {
		return operation.Selection{All: true}, fs
	}
	var sel operation.Selection
	var picked []follower
	for _, fl := range fs {
		due := !next[fl.key()].After(now)
		follows := slices.ContainsFunc(fl.groups, func(g string) bool { return groups[g] })
		if !due && !follows {
			continue
		}
		picked = append(picked, fl)
		if fl.kind == "ingress" {
			sel.Ingresses = append(sel.Ingresses, fl.name)
		} else {
			sel.Enrollments = append(sel.Enrollments, fl.name)
		}
	}
	return sel, picked
}

// nextDue is the earliest of next over fs (zero when fs is empty).
func nextDue(fs []follower, next map[string]time.Time) time.Time {
	var due time.Time
	for _, fl := range fs {
		if t := next[fl.key()]; due.IsZero() || t.Before(due) {
			due = t
		}
	}
	return due
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
	now := time.Now()
	fs := followersOf(s.doc)
	full := f.all || f.doc != s.doc || f.term != t
	sel, picked := selection(fs, f.next, f.groups, full, now)
	f.pending, f.all, f.groups = false, false, nil
	if full {
		f.doc, f.term = s.doc, t
		f.next = make(map[string]time.Time, len(fs))
	}
	for _, fl := range picked {
		f.next[fl.key()] = now.Add(fl.every)
	}
	if due := nextDue(fs, f.next); !due.IsZero() {
		f.due = due
	}
	if len(picked) == 0 {
		return // nothing due yet
	}
	f.running = true
	doc := s.doc
	go func() {
		ctx, cancel := termContext(passCtx, t)
		defer cancel()
		r := s.syncFollowers(ctx, t, doc, sel)
		r.term = t
		s.followed <- r // never blocks: one sync at a time, one slot
	}()
}

// syncFollowers runs one sync against the stack of doc, for the term t.
func (s *service) syncFollowers(ctx context.Context, t *term, doc *state.Document, sel operation.Selection) followResult {
	log := s.log.Named("followers")
	if err := t.lease.acquire(ctx, doc.Lineage, doc.Serial); err != nil {
		if errors.Is(err, errStale) {
			return followResult{stale: true}
		}
		return followResult{err: err, deposed: deposed(err)}
	}
	defer t.lease.release()
	res, err := s.runner.SyncFollowers(ctx, doc.Stack, doc, sel)
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
		s.fol.all = true
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
