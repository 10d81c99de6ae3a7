package store

import (
	"context"
	"time"
)

// The full listing RescanEvery asks for used to fall on the first listing
// after it was due: after two idle minutes, the caller that most wants an
// answer at once (a watch healing a vanished instance, listing 10,000
// authorizations) paid a stat of every file, 100 ms and more of a heal of
// 150. A keeper makes that listing when it falls due instead, while
// nobody waits for it; a listing asked for meanwhile waits for it as it
// would for any other.

// keeper is the goroutine that makes a following cache's full listings
// when they are due. A cache starts one whenever it starts following its
// collection; it ends once that cache stops following (stop), at the
// latest when its next listing would begin.
type keeper struct {
	stop  chan struct{}
	every time.Duration // rescanEvery when it started
}

// startKeeper starts the keeper of the following cache c, which lists
// collection of s. c.mu is held.
func (c *Cache[T]) startKeeper(s *Store, collection string) {
	if rescanEvery <= 0 {
		return // every listing is a full one
	}
	k := &keeper{stop: make(chan struct{}), every: rescanEvery}
	c.keeper = k
	c.keepers.Go(func() { c.keep(k, s, collection) })
}

// stopKeeper tells the keeper to end, without waiting for it (it may be
// waiting for c.mu, which the caller holds; Close waits). c.mu is held.
func (c *Cache[T]) stopKeeper() {
	if c.keeper != nil {
		close(c.keeper.stop)
		c.keeper = nil
	}
}

func (c *Cache[T]) keep(k *keeper, s *Store, collection string) {
	for {
		c.mu.Lock()
		current := c.keeper == k
		due := c.fullAt.Add(k.every)
		c.mu.Unlock()
		if !current {
			return
		}
		t := time.NewTimer(time.Until(due))
		select {
		case <-k.stop:
			t.Stop()
			return
		case <-t.C:
		}
		c.mu.Lock()
		if c.keeper == k && time.Since(c.fullAt) >= k.every {
			// A failure is the next listing's to report: it lists in full.
			// Its own refresh ends this keeper (and starts the next).
			_, _ = c.refresh(context.Background(), s, collection)
		}
		c.mu.Unlock()
	}
}
