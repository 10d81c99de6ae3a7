package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state"
)

// serials remembers the state serials this process wrote, so that its own
// writes are never taken for someone else's (an apply, a group scale): only
// a foreign write means the desired stack may have changed.
type serials struct {
	mu      sync.Mutex
	lineage string
	mine    map[uint64]bool
	top     uint64
}

// keepSerials bounds the memory: a pass that read the state more than this
// many of our own writes ago re-reads it (foreign answers true), which is
// only wasteful.
const keepSerials = 4096

func newSerials() *serials { return &serials{mine: map[uint64]bool{}} }

// expect notes that this process is about to write serial n of lineage.
// It is noted before the write, so that a reader who sees the new file at
// once never mistakes it for a foreign one.
func (s *serials) expect(lineage string, n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lineage != lineage {
		s.lineage, s.mine, s.top = lineage, map[uint64]bool{}, 0
	}
	s.mine[n] = true
	s.top = max(s.top, n)
	if len(s.mine) > 2*keepSerials { // amortized: one sweep per keepSerials writes
		for k := range s.mine {
			if k+keepSerials < s.top {
				delete(s.mine, k)
			}
		}
	}
}

// forget undoes expect after a write that failed.
func (s *serials) forget(n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mine, n)
}

// foreign reports whether the state went from serial from to serial to
// through a write of another process. A lineage other than ours, or a
// serial that went back, is foreign.
func (s *serials) foreign(lineage string, from, to uint64) bool {
	if to == from {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if to < from || lineage != s.lineage {
		return true
	}
	for n := from + 1; n <= to; n++ {
		if !s.mine[n] {
			return true
		}
	}
	return false
}

// lease shares the state lock among the groups that act at one moment.
// Each group's pass observes without the lock, then joins the lease to act:
// the first to join takes the state lock and reads the state, the last to
// leave releases it, and writes in between go through the lease one at a
// time. So the CLI waits only while some group acts, and groups never wait
// for each other's lock the way separate lock holders would (a lock taken
// per group would make one slow provider hold up every other group).
//
// With the etcd backend a lease belongs to one leadership (a term, see
// leader.go): its store fences every write with the leader's key, its
// network waits end with the leadership (term), and verify confirms the
// leadership with etcd before every pass is let act.
type lease struct {
	store   state.Store
	serials *serials
	// timeout bounds the wait for the lock (-lock-timeout).
	timeout time.Duration
	// term, when set, is done once the leadership the lease acts for has
	// ended: reads and writes stop waiting for etcd then.
	term context.Context
	// verify, when set, confirms the leadership before a pass acts.
	verify func(context.Context) error
	// gate, when set, confirms the leadership before each provider call a
	// pass or a sync makes (guard.go).
	gate *stepGate
	// writeTimeout, when positive, bounds a state write. A write is not
	// bounded by term: made after the leadership ended it must still reach
	// etcd, to be refused there by the fence and say so.
	writeTimeout time.Duration
	// writeFenced, set in scale-out mode, writes the state fenced by the
	// lease of the object a write is for (the lease's store is then the
	// backend itself: each object has its own fence).
	writeFenced func(context.Context, *state.Document, election.Fence) error

	mu      sync.Mutex
	holders int
	unlock  func() error
	doc     *state.Document
	// kept is the document of the last holding, as stored when it ended,
	// and spoiled says this holding failed a write (its document may no
	// longer be what is stored): with a state.Revalidator the next holding
	// takes kept instead of reading and decoding the state again when the
	// store still holds it.
	kept    *state.Document
	spoiled bool
}

func newLease(store state.Store, sr *serials, timeout time.Duration) *lease {
	return &lease{store: store, serials: sr, timeout: timeout}
}

// bounded is ctx, also cancelled when the lease's term ends.
func (l *lease) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.term == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.term, cancel)
	return ctx, func() { stop(); cancel() }
}

// errStale says the state was written by another process since the pass
// read it: the pass must not act on what it decided.
var errStale = errors.New("the state changed since this pass read it")

// acquire joins the lease for a pass that read the state at lineage/serial.
// It returns errStale (and leaves the lease) when another process wrote the
// state since. Call release after a nil error.
func (l *lease) acquire(ctx context.Context, lineage string, serial uint64) error {
	return l.acquireFor(ctx, func(doc *state.Document) bool {
		return doc.Lineage != lineage || l.serials.foreign(lineage, serial, doc.Serial)
	})
}

// acquireFor joins the lease for a pass for which the stored state is
// stale when stale says so: errStale then (and it leaves the lease). In
// scale-out mode other watch processes write the state for their own
// objects all the time, so a pass asks only about what it depends on
// (scaleout.go); otherwise any foreign write since it read is stale.
func (l *lease) acquireFor(ctx context.Context, stale func(*state.Document) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term != nil && l.term.Err() != nil {
		return fmt.Errorf("not acting: %w", errNotLeader)
	}
	if l.holders == 0 {
		lctx, cancel := context.WithTimeout(ctx, max(l.timeout, 0))
		unlock, err := l.store.Lock(lctx, state.LockInfo{Operation: "watch"})
		cancel()
		if err != nil {
			return fmt.Errorf("waiting for the state lock: %w", err)
		}
		rctx, rcancel := l.bounded(context.WithoutCancel(ctx))
		doc, err := l.read(rctx)
		rcancel()
		if err != nil {
			unlock()
			return err
		}
		l.unlock, l.doc = unlock, doc
	}
	if stale(l.doc) {
		if l.holders == 0 {
			l.releaseLocked()
		}
		return errStale
	}
	if l.verify != nil {
		// Every pass that acts asks: the leadership may have ended while
		// this process was frozen, before its timers could say so.
		vctx, vcancel := l.bounded(ctx)
		err := l.verify(vctx)
		vcancel()
		if err != nil {
			if l.holders == 0 {
				l.releaseLocked()
			}
			return fmt.Errorf("not acting: %w", err)
		}
	}
	l.holders++
	return nil
}

// record stores a group's members in the state, and writes it, if they
// differ from what it holds. It returns the serial of the state afterwards.
// The write does not wait (the lock is held), so it goes through even when
// ctx is done: what a pass did is recorded, also during shutdown. With
// etcd it is fenced: once the leadership has ended it fails (ErrFenced);
// in scale-out mode by fence, the lease of the group (one, or none).
func (l *lease) record(name string, instances []state.Instance, fence ...election.Fence) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holders == 0 {
		return 0, errors.New("record state: the lease is not held")
	}
	// Looked up without adding the group: a holding that writes nothing
	// leaves the document as stored (it may be kept for the next one).
	var have []state.Instance
	if g := l.doc.Groups[name]; g != nil {
		have = g.Instances
	}
	if slices.Equal(have, instances) {
		return l.doc.Serial, nil
	}
	st := l.doc.Group(name)
	prev := st.Instances
	st.Instances = slices.Clone(instances) // the caller's slice stays the caller's
	next := l.doc.Serial + 1
	l.serials.expect(l.doc.Lineage, next)
	if err := l.write(fence); err != nil {
		l.spoiled = true
		l.serials.forget(next)
		st.Instances = prev
		return 0, fmt.Errorf("record state: %w", err)
	}
	return l.doc.Serial, nil
}

// write stores the lease's document: not bounded by the context of the
// pass (see record), fenced by fence when given. l.mu is held.
func (l *lease) write(fence []election.Fence) error {
	wctx, cancel := context.Background(), func() {}
	if l.writeTimeout > 0 {
		wctx, cancel = context.WithTimeout(wctx, l.writeTimeout)
	}
	defer cancel()
	if len(fence) > 0 {
		if l.writeFenced == nil || len(fence) > 1 {
			return errors.New("a fenced write needs scale-out mode and one fence")
		}
		return l.writeFenced(wctx, l.doc, fence[0])
	}
	return l.store.Write(wctx, l.doc)
}

// setSize stores size to for autoscaled group name in the state's stack,
// and writes it, when its stored size is still from (errStale otherwise:
// someone changed it since the decision). Fenced as record is.
func (l *lease) setSize(name string, from, to int, fence ...election.Fence) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holders == 0 {
		return errors.New("set size: the lease is not held")
	}
	st := l.doc.Stack
	g := st.Group(name)
	if g == nil || g.Autoscale == nil || g.Size == nil || *g.Size != from {
		return errStale
	}
	scaled := *g
	scaled.Size = &to
	next := *st
	next.Groups = slices.Clone(st.Groups)
	for i, x := range next.Groups {
		if x.Name == name {
			next.Groups[i] = &scaled
		}
	}
	l.doc.Stack = &next
	serial := l.doc.Serial + 1
	l.serials.expect(l.doc.Lineage, serial)
	if err := l.write(fence); err != nil {
		l.spoiled = true
		l.serials.forget(serial)
		l.doc.Stack = st
		return fmt.Errorf("set size: %w", err)
	}
	return nil
}

// release leaves the lease; the last holder out releases the lock.
func (l *lease) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holders--
	if l.holders == 0 {
		l.releaseLocked()
	}
}

func (l *lease) releaseLocked() {
	if l.unlock != nil {
		_ = l.unlock() // the flock goes with the descriptor in any case
	}
	l.kept = l.doc
	if l.spoiled {
		l.kept = nil
	}
	l.unlock, l.doc, l.spoiled = nil, nil, false
}

// read is the state for a new holding: the document kept from the last
// one when the store still holds it, else what the store reads.
func (l *lease) read(ctx context.Context) (*state.Document, error) {
	kept := l.kept
	l.kept = nil
	if rv, ok := l.store.(state.Revalidator); ok && kept != nil {
		h := state.Header{Exists: true, Lineage: kept.Lineage, Serial: kept.Serial}
		if same, err := rv.Unchanged(ctx, h); err == nil && same {
			return kept, nil
		}
	}
	return l.store.Read(ctx)
}

// sortedInstances sorts a group's recorded members by ID, as the state
// keeps them.
func sortedInstances(in []state.Instance) []state.Instance {
	slices.SortFunc(in, func(a, b state.Instance) int { return cmp.Compare(a.ID, b.ID) })
	return in
}
