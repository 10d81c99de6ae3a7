package watch

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/testwait"
)

// The interval's tick passes every group but a covered one whose stream
// was open when it was last listed, which waits relistEvery since then.
func TestIntervalDue(t *testing.T) {
	const interval = 10 * time.Second
	now := time.Now()
	open := func(at time.Time) *subscription {
		s := &subscription{}
		s.live.opened(at)
		return s
	}
	managed := groupSpec{cfg: &config.Group{Name: "g"}}
	covered := func(members int, listed time.Time, sub *subscription) *groupSched {
		return &groupSched{spec: managed, covered: true, members: members, listedAt: listed, sub: sub}
	}
	for _, c := range []struct {
		name   string
		groups map[string]*groupSched
		due    []string
		ok     bool
	}{
		{"no groups: a pass of nothing", nil, nil, true},
		{"not covered", map[string]*groupSched{"a": {spec: managed, members: 10_000, listedAt: now, sub: open(now.Add(-time.Hour))}}, []string{"a"}, true},
		{"covered, small", map[string]*groupSched{"a": covered(1000, now.Add(-interval), open(now.Add(-time.Hour)))}, []string{"a"}, true},
		{"covered, big, listed lately", map[string]*groupSched{"a": covered(10_000, now.Add(-90*time.Second), open(now.Add(-time.Hour)))}, nil, false},
		{"covered, big, listed a relist ago", map[string]*groupSched{"a": covered(10_000, now.Add(-96*time.Second), open(now.Add(-time.Hour)))}, []string{"a"}, true},
		{"covered, stream closed", map[string]*groupSched{"a": covered(10_000, now, &subscription{})}, []string{"a"}, true},
		{"covered, no subscription", map[string]*groupSched{"a": covered(10_000, now, nil)}, []string{"a"}, true},
		{"covered, stream opened after the listing", map[string]*groupSched{"a": covered(10_000, now.Add(-time.Second), open(now))}, []string{"a"}, true},
		{"covered, never listed", map[string]*groupSched{"a": covered(10_000, time.Time{}, open(now.Add(-time.Hour)))}, []string{"a"}, true},
		{"one waits, one due", map[string]*groupSched{
			"a": covered(10_000, now, open(now.Add(-time.Hour))),
			"b": {spec: managed, sub: open(now.Add(-time.Hour))},
		}, []string{"b"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &service{groups: c.groups, opts: Options{Interval: interval}}
			due, ok := s.intervalDue(now)
			if !slices.Equal(due, c.due) || ok != c.ok {
				t.Errorf("intervalDue = %v, %t; want %v, %t", due, ok, c.due, c.ok)
			}
		})
	}
}

// A big group of vanilla cattle (health from state) over the simulator,
// which announces changes, is listed by the interval's ticks once every
// relistEvery: while a one-member group beside it passes on every tick, it
// passes on about every fourth. Both count the same ticks, so a slow
// machine only makes fewer passes of both.
func TestCoveredGroupListedLess(t *testing.T) {
	t.Parallel()
	const size = 3*relistUnit + 1 // relisted every 4 intervals
	small := `
group "small" {
  size = 1
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor {
    provider = vanilla
  }
}
`
	w := newWorkdir(t, stackOf(size, "big", "vanilla", "")+small)
	w.apply()
	opts := testOptions(w)
	opts.Interval = 200 * time.Millisecond
	r := start(t, opts)
	// Settled: both groups passed twice (the first pass may list before
	// the event stream opens).
	var from map[string]float64
	testwait.For(t, 30*time.Second, "two passes of each group", func() bool {
		from = groupPasses(t, r)
		return from["web"] >= 2 && from["small"] >= 2
	})
	const ticks = 16
	var now map[string]float64
	testwait.For(t, time.Minute, fmt.Sprintf("%d more passes of the small group", ticks), func() bool {
		now = groupPasses(t, r)
		return now["small"] >= from["small"]+ticks
	})
	if big := now["web"] - from["web"]; big > ticks/4+2 {
		t.Errorf("the big group passed %v times in %v ticks; want at most %d (every 4th, and the ticks at either end)", big, now["small"]-from["small"], ticks/4+2)
	}
}
