package status

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The Server starts goroutines (its serving loop, net/http's connection
// goroutines): none may outlive Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// clock is a fixed, advanceable clock for deterministic times.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
