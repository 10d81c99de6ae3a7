package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// Ingresses and enrollments follow group membership: the load balancers'
// backends and the NFS authorizations must equal the groups' members.
// watch syncs them (a plan of those followers, from one listing of each
// load balancer and authorizer and one DescribeInstances per group they
// need, run by the executor as apply runs its plans), each on its own
// sync_interval, and at once the
// ones that follow a group a pass just changed, or in which a pass saw a
// member join or change state or address (a replacement now running); all
// of them when the applied stack changes or a leadership begins. One sync
// runs at a time, under the state lease like a pass, and never while a
// pass of a group it covers acts (acting.go); syncs wanted while one runs
// are made by the next, together.
//
// A sync re-lists everything it covers, which costs in proportion to the
// members: a follower of up to relistUnit members is synced every
// sync_interval; a bigger one, whose groups no pass saw change, only
// every sync_interval × ⌈members / relistUnit⌉ (at most relistCap), so an
// idle watch of 10,000 members re-lists about as often per member as one
// of 1,000. That is the bound on repairing what changed behind infrakit's
// back at a provider (a backend deregistered by hand); a membership change
// a pass sees is synced at once, and a follower whose last sync failed is
// synced again on its sync_interval. Backends of members that leave
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
	// syncing are the followers the running sync covers (by key), so that
	// a failed one is retried on its sync_interval, not its relist time.
	syncing []follower
	// gen (the service's stackGen) and term are what the last full sync
	// ran for.
	gen     int
	term    *term
	lastErr string
	// configured are the load balancers (plan.LBKey) whose health check
	// this process configured: the SPI cannot read one back, so each is
	// configured on its first sync and then only when its routes change.
	configured map[string]bool
}

// selection is what one sync covers: every follower, or those named.
type selection struct {
	all                    bool
	ingresses, enrollments []string
}

// follower is an ingress or enrollment of the stack that watch syncs.
type follower struct {
	kind, name string
	groups     []string
	every      time.Duration
	// members is how many members its groups want.
	members int
}

func (f follower) key() string { return f.kind + "/" + f.name }

// relistEvery is how long after a sync an idle follower is synced again
// (relist.go).
func (f follower) relistEvery() time.Duration { return relistEvery(f.every, f.members) }

// wanted is how many members group name of st wants (its size, or its
// logical IDs).
func wanted(st *config.Stack, name string) int {
	g := st.Group(name)
	switch {
	case g == nil:
		return 0
	case g.Size != nil:
		return max(*g.Size, 0)
	default:
		return len(g.LogicalIDs)
	}
}

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
		members := 0
		for _, r := range in.Rules {
			for _, g := range r.Groups {
				if !slices.Contains(groups, g) {
					members += wanted(doc.Stack, g)
				}
				groups = append(groups, g)
			}
		}
		out = append(out, follower{kind: "ingress", name: in.Name, groups: groups, every: interval(in.SyncInterval), members: members})
	}
	for _, e := range doc.Stack.Enrollments {
		if st := doc.Enrollments[e.Name]; st != nil && st.Freed {
			continue
		}
		out = append(out, follower{kind: "enrollment", name: e.Name, groups: []string{e.Source}, every: interval(e.SyncInterval),
			members: wanted(doc.Stack, e.Source)})
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
func selectFollowers(fs []follower, next map[string]time.Time, groups map[string]bool, full bool, now time.Time) (selection, []follower) {
	if full {
		return selection{all: true}, fs
	}
	var sel selection
	var picked []follower
	for _, fl := range fs {
		due := !next[fl.key()].After(now)
		follows := slices.ContainsFunc(fl.groups, func(g string) bool { return groups[g] })
		if !due && !follows {
			continue
		}
		picked = append(picked, fl)
		if fl.kind == "ingress" {
			sel.ingresses = append(sel.ingresses, fl.name)
		} else {
			sel.enrollments = append(sel.enrollments, fl.name)
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
	if t == nil && s.so == nil {
		return // a follower syncs nothing; the sync waits for leadership
	}
	for _, g := range s.groups {
		if g.again {
			return // that pass registers what it made first (loop.go)
		}
	}
	now := time.Now()
	// In scale-out mode only the followers this process owns.
	fs := s.ownedFollowers(followersOf(s.doc))
	if len(fs) == 0 && s.so != nil {
		f.pending, f.all, f.groups = false, false, nil
		return
	}
	full := f.all || f.gen != s.stackGen || s.so == nil && f.term != t
	sel, picked := selectFollowers(fs, f.next, f.groups, full, now)
	f.pending, f.all, f.groups = false, false, nil
	if full {
		f.gen, f.term = s.stackGen, t
		f.next = make(map[string]time.Time, len(fs))
	}
	for _, fl := range picked {
		f.next[fl.key()] = now.Add(fl.relistEvery())
	}
	if due := nextDue(fs, f.next); !due.IsZero() {
		f.due = due
	}
	if len(picked) == 0 {
		return // nothing due yet
	}
	f.running, f.syncing = true, picked
	doc := s.doc
	if s.so != nil {
		// Named: "all" would be every follower of the stack.
		sel = selection{}
		for _, fl := range picked {
			if fl.kind == "ingress" {
				sel.ingresses = append(sel.ingresses, fl.name)
			} else {
				sel.enrollments = append(sel.enrollments, fl.name)
			}
		}
		t = s.syncTerm(picked)
	}
	fresh := s.freshListings()
	go func() {
		ctx, cancel := termContext(passCtx, t)
		defer cancel()
		r := s.syncFollowers(ctx, t, doc, sel, fresh)
		r.term = t
		if t.scaleOut() {
			t.cancel() // the sync's own term
		}
		s.followed <- r // never blocks: one sync at a time, one slot
	}()
}

// syncFollowers runs one sync against the stack of doc, for the term t:
// it plans the followers sel covers (their routes, backends and
// authorizations; teardowns are apply's) and executes the plan. The
// groups in fresh are planned with their passes' listings, if still
// current once held (listings.go), instead of being listed again.
func (s *service) syncFollowers(ctx context.Context, t *term, doc *state.Document, sel selection, fresh map[string]time.Time) followResult {
	log := s.log.Named("followers")
	if err := t.acquireSync(ctx, doc); err != nil {
		if errors.Is(err, errStale) {
			return followResult{stale: true}
		}
		return followResult{err: err, deposed: deposed(err)}
	}
	defer t.lease.release()
	scope := plan.Scope{Ingresses: []string{}, Enrollments: []string{}, Sync: true}
	for _, fl := range followersOf(doc) {
		if sel.all || fl.kind == "ingress" && slices.Contains(sel.ingresses, fl.name) ||
			fl.kind == "enrollment" && slices.Contains(sel.enrollments, fl.name) {
			if fl.kind == "ingress" {
				scope.Ingresses = append(scope.Ingresses, fl.name)
			} else {
				scope.Enrollments = append(scope.Enrollments, fl.name)
			}
		}
	}
	needs := plan.NeedsOf(doc.Stack, doc, scope)
	for _, lb := range needs.LoadBalancers {
		if k := plan.LBKey(lb.Provider, lb.Name); !s.fol.configured[k] {
			scope.Configure = append(scope.Configure, k)
		}
	}
	var groups []string
	for name := range needs.Groups {
		groups = append(groups, name)
	}
	release, err := s.acting.hold(ctx, groups)
	if err != nil {
		return followResult{} // shutting down, or the term ended
	}
	defer release()
	world := s.runner.ObserveKnown(ctx, needs, nil, s.listings.take(fresh))
	world.Rendered = &s.rendered
	s.acting.markDestroying(&world)
	for name, err := range world.Failed {
		log.Warn("group membership unknown; its backends and authorizations are left as they are", "group", name, "error", err)
	}
	p, err := plan.Compute(doc.Stack, doc, world, scope)
	if err != nil {
		return followResult{err: err}
	}
	r := s.runner.Execute(ctx, p, doc.Stack, discard{}, func(eo *execute.Options) {
		eo.Defer = true
		eo.Parallelism = s.opts.Parallelism
		eo.CallTimeout = s.opts.CallTimeout
		t.guard(eo)
	})
	s.noteConfigured(p, r)
	for _, line := range followerLines(p, r) {
		log.Info(line)
		s.rec.Event(status.Event{Kind: EventSynced, Message: line})
	}
	if ctx.Err() != nil {
		return followResult{} // shutting down
	}
	var errs []error
	for _, u := range p.Unknown() {
		errs = append(errs, errors.New(u))
	}
	err = errors.Join(append(errs, r.Errors())...)
	return followResult{err: err, deposed: deposed(r.Errors())}
}

// noteConfigured remembers the load balancers whose health check a sync
// configured.
func (s *service) noteConfigured(p *plan.Plan, r *execute.Result) {
	for _, st := range p.Steps {
		if st.Kind == plan.StepHealthCheck && r.Status[st.ID-1] == execute.StatusDone {
			if s.fol.configured == nil {
				s.fol.configured = map[string]bool{}
			}
			s.fol.configured[plan.LBKey(st.Provider, st.LoadBalancer)] = true
		}
	}
}

// retryFailed makes the followers of a failed sync due again on their
// sync_interval, sooner than a big follower's relist time.
func retryFailed(f *followers, synced []follower, now time.Time) {
	for _, fl := range synced {
		if at := now.Add(fl.every); f.next != nil && at.Before(f.next[fl.key()]) {
			f.next[fl.key()] = at
		}
	}
	if due := nextDue(synced, f.next); !due.IsZero() && due.Before(f.due) {
		f.due = due
	}
}

// followed takes a sync's result.
func (s *service) followedDone(ctx, passCtx context.Context, r followResult) {
	f := &s.fol
	f.running = false
	synced := f.syncing
	f.syncing = nil
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
		retryFailed(f, synced, time.Now())
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
