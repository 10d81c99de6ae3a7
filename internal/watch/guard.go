package watch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A leader acts only while it leads, down to each provider call. The
// lease's acquire verifies the leadership when a pass starts to act; but a
// pass's plan may hold many steps, run over seconds, and the process may be
// frozen (SIGSTOP, a suspended VM) between two of them. So the executor
// asks the lease's gate right before every provider call, and every call
// carries the term's context, which is cancelled the moment the leadership
// is lost (the monitor's timers, a deleted key): a step queued before a
// freeze is refused after it, and a call in flight is cancelled.

// verifyEvery is how long a verification with etcd vouches for the steps
// that start after it. Within it the gate checks only this process's
// clock (Standing): a freeze longer than that makes the next step verify
// again, and one shorter cannot outlast the lease's margin.
const verifyEvery = 100 * time.Millisecond

// stepGate is the per-step check of a lease's term.
type stepGate struct {
	// standing is the leadership's own clock check (no round trip).
	standing func() bool
	verify   func(context.Context) error
	// gone is the error of a call refused once the term ended
	// (errNotLeader when nil).
	gone error

	mu       sync.Mutex
	verified time.Time
}

// guard sets the executor's gate and abort for the term: its own in
// scale-out mode (the object's), else its lease's.
func (t *term) guard(eo *execute.Options) {
	if t.gate != nil {
		eo.Before, eo.Abort = t.gate.check(t.ctx), t.ctx
		return
	}
	t.lease.guard(eo)
}

// guard sets the executor's gate and abort for the lease's term (nothing
// for the local backend's lifelong term, which never ends).
func (l *lease) guard(eo *execute.Options) {
	if l.term == nil || l.gate == nil {
		return
	}
	eo.Before, eo.Abort = l.gate.check(l.term), l.term
}

// check is the executor's Before: it refuses a call once the term ended,
// once the leadership's renewal is overdue by this process's clock (in
// doubt), or when etcd no longer holds the leader key with the fence's
// revision.
func (g *stepGate) check(term context.Context) func(context.Context, plan.Step) error {
	return func(ctx context.Context, s plan.Step) error {
		if term.Err() != nil {
			gone := g.gone
			if gone == nil {
				gone = errNotLeader
			}
			return fmt.Errorf("not acting (%s %s): %w", s.Kind, s.Subject(), gone)
		}
		if g.standing != nil && !g.standing() {
			return fmt.Errorf("not acting (%s %s): %w", s.Kind, s.Subject(), election.ErrRenewalOverdue)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.verify == nil || time.Since(g.verified) < verifyEvery {
			return nil
		}
		if err := g.verify(ctx); err != nil {
			return fmt.Errorf("not acting (%s %s): %w", s.Kind, s.Subject(), err)
		}
		g.verified = time.Now()
		return nil
	}
}

// sameMembership reports whether two listings of a group hold the same
// instances (their states may differ: a pending member that now runs
// changes no count).
func sameMembership(a, b []instance.Description) bool {
	if len(a) != len(b) {
		return false
	}
	ids := func(ds []instance.Description) []instance.ID {
		out := make([]instance.ID, len(ds))
		for i, d := range ds {
			out[i] = d.ID
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(ids(a), ids(b))
}
