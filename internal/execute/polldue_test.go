package execute

import (
	"testing"
	"time"
)

// pollDue holds awaits no listing has seen until they are worth a listing (half
// the last one), the group's last is in, or PollMax has passed; awaits a
// listing left waiting follow the pause alone.
func TestPollDueBatchesFreshAwaitsAndListsAtOnceForTheLast(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const pollMax = time.Second
	pause := t0.Add(100 * time.Millisecond) // the pause after the listing at t0
	cases := []struct {
		name                   string
		now                    time.Time
		pending, fresh, listed int
		last                   bool
		polled, next           time.Time
		at                     time.Time
		wait                   bool
	}{
		{name: "nothing pending: wait for an await", now: t0, wait: true},
		{name: "first listing: at once", now: t0, pending: 1, fresh: 1, at: time.Time{}, wait: false},
		{name: "carried awaits: the pause", now: t0.Add(50 * time.Millisecond), pending: 3, fresh: 1, listed: 1000,
			polled: t0, next: pause, at: pause, wait: true},
		{name: "carried awaits after the pause: now", now: pause, pending: 3, fresh: 1, listed: 1000,
			polled: t0, next: pause, at: pause, wait: false},
		{name: "few fresh: held to PollMax", now: pause, pending: 10, fresh: 10, listed: 1000,
			polled: t0, next: pause, at: t0.Add(pollMax), wait: true},
		{name: "few fresh at PollMax: now", now: t0.Add(pollMax), pending: 10, fresh: 10, listed: 1000,
			polled: t0, next: pause, at: t0.Add(pollMax), wait: false},
		{name: "half the listing fresh: after the pause", now: pause, pending: 500, fresh: 500, listed: 1000,
			polled: t0, next: pause, at: pause, wait: false},
		{name: "half the listing fresh, in the pause: wait", now: t0, pending: 500, fresh: 500, listed: 1000,
			polled: t0, next: pause, at: pause, wait: true},
		{name: "the group's last await is in: at once", now: t0, pending: 10, fresh: 1, listed: 1000, last: true,
			polled: t0, next: pause, wait: false},
		{name: "last, nothing fresh: the pause", now: t0, pending: 10, fresh: 0, listed: 1000, last: true,
			polled: t0, next: pause, at: pause, wait: true},
	}
	for _, c := range cases {
		at, wait := pollDue(c.now, pollMax, c.pending, c.fresh, c.listed, c.last, c.polled, c.next)
		if wait != c.wait || (wait && !at.Equal(c.at)) {
			t.Errorf("%s: pollDue = %v, %v; want %v, %v", c.name, at, wait, c.at, c.wait)
		}
	}
}
