// Package testwait is how tests wait for something that happens in another
// goroutine or process: they poll a condition until it holds, failing after
// a generous bound, rather than sleep for a while and hope (a test that
// sleeps is slow when the machine is idle and flaky when it is busy).
package testwait

import (
	"testing"
	"time"
)

// For polls cond until it holds and returns how long that took, or fails
// the test once within has passed ("not within 10s: what"). It polls every
// few milliseconds at first, then less often, so a long wait costs little.
func For(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 50*time.Millisecond) {
		if time.Since(start) > within {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(pause)
	}
	return time.Since(start)
}
