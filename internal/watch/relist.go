package watch

import (
	"sync/atomic"
	"time"
)

// Listing a big group or follower in full costs in proportion to its
// members, so what only guards against changes nothing announced is
// spread out: every interval up to relistUnit members, then that much
// longer per relistUnit, at most relistCap. An idle watch of 10,000
// members then lists about as often per member as one of 1,000.
//
// A sync re-lists a follower on that schedule (followers.go). A group is
// listed on it by the interval's passes only while its provider's event
// stream is open and its health needs no asking (the flavors judge the
// instance's state, or the group does not replace unhealthy members):
// then every change a pass would find is announced by an event, which
// passes the group at once, and the listing is only the guard against a
// lost event. A group whose stream is down, or whose flavors are asked
// for health (a probe that fails announces nothing), is listed every
// interval whatever its size.
const (
	relistUnit = 1000
	relistCap  = 5 * time.Minute
)

// relistEvery is every up to relistUnit members, then that much longer per
// relistUnit, at most relistCap (or every, if longer).
func relistEvery(every time.Duration, members int) time.Duration {
	n := (members + relistUnit - 1) / relistUnit
	if n <= 1 {
		return every
	}
	d := every * time.Duration(n)
	if d > relistCap || d/time.Duration(n) != every { // capped, or overflowed
		d = max(relistCap, every)
	}
	return d
}

// streaming is when a subscription's event stream opened (unix
// nanoseconds; 0 while it is not open). A listing begun before it may
// have missed a change no event announces.
type streaming struct{ since atomic.Int64 }

func (l *streaming) opened(at time.Time) { l.since.Store(at.UnixNano()) }
func (l *streaming) closed()             { l.since.Store(0) }

// before reports whether the stream was open at t and has been since.
func (l *streaming) before(t time.Time) bool {
	since := l.since.Load()
	return since != 0 && since <= t.UnixNano()
}

// intervalDue are the groups the interval's tick passes at now: every
// group, but one whose changes its events announce (covered by its last
// full pass, its stream open) only once relistEvery has gone by since that
// pass. Half an interval of slack keeps a group from waiting one tick more
// because its last pass ended a little after a tick. ok is false when the
// tick passes nothing (every group waits), so that it counts as no pass.
func (s *service) intervalDue(now time.Time) (due []string, ok bool) {
	names := s.names()
	waits := false
	for _, name := range names {
		g := s.groups[name]
		if g.spec.managed() && s.passes(name) && g.covered && !g.listedAt.IsZero() &&
			g.sub != nil && g.sub.live.before(g.listedAt) &&
			now.Add(s.opts.Interval/2).Sub(g.listedAt) < relistEvery(s.opts.Interval, g.members) {
			waits = true
			continue
		}
		due = append(due, name)
	}
	return due, len(due) > 0 || !waits
}
