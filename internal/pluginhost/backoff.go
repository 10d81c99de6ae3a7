package pluginhost

import "time"

// Default relaunch backoff bounds.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// restarts decides when one provider key may be launched again. It is a pure
// state machine over the times it is told about, so tests drive it without
// processes.
//
// It limits launches rather than delaying every relaunch: after a launch, the
// next is allowed delay(failures) later, where failures counts launches in a
// row that failed or whose process died before it had run for max. A provider
// that crashes after running a while is relaunched at once; one that keeps
// crashing is relaunched at min, 2·min, 4·min ... up to max apart.
type restarts struct {
	min, max   time.Duration
	failures   int
	lastLaunch time.Time // start of the last launch attempt; zero before the first
}

// delay is the least time between the last launch and the next one.
func (r *restarts) delay() time.Duration {
	if r.failures <= 0 {
		return 0
	}
	d := r.min
	for i := 1; i < r.failures && d < r.max; i++ {
		d *= 2
	}
	return min(d, r.max)
}

// next is when a launch is next allowed.
func (r *restarts) next() time.Time { return r.lastLaunch.Add(r.delay()) }

// allowed reports whether a launch may start at now.
func (r *restarts) allowed(now time.Time) bool { return !now.Before(r.next()) }

// launching records a launch attempt starting at now.
func (r *restarts) launching(now time.Time) { r.lastLaunch = now }

// launchFailed records that the attempt started by launching failed.
func (r *restarts) launchFailed() { r.failures++ }

// exited records that the launched process was found dead at now. A process
// that had run for at least max was healthy: its death starts a new count.
func (r *restarts) exited(now time.Time) {
	if now.Sub(r.lastLaunch) >= r.max {
		r.failures = 0
	}
	r.failures++
}
