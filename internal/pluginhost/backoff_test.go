package pluginhost

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestRestartsDelays(t *testing.T) {
	r := restarts{min: 100 * time.Millisecond, max: 5 * time.Second}
	want := []time.Duration{0, 100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for failures, w := range want {
		r.failures = failures
		if got := r.delay(); got != w*time.Millisecond {
			t.Errorf("delay after %d failures = %s, want %s", failures, got, w*time.Millisecond)
		}
	}
}

func TestRestartsScenario(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := restarts{min: 100 * time.Millisecond, max: time.Second}

	if !r.allowed(t0) {
		t.Fatal("first launch must be allowed")
	}
	r.launching(at(0))
	// Ran 2s, then died: healthy run, relaunch at once.
	r.exited(at(2000))
	if !r.allowed(at(2000)) {
		t.Fatalf("relaunch after a long run should be immediate; next %s", r.next())
	}
	r.launching(at(2000))
	// Died after 50ms: wait until 100ms after that launch.
	r.exited(at(2050))
	if r.allowed(at(2050)) || !r.allowed(at(2200)) || r.next() != at(2200) {
		t.Fatalf("after a quick crash next = %s, want %s", r.next(), at(2200))
	}
	r.launching(at(2200))
	// The launch itself fails: twice the delay.
	r.launchFailed()
	if r.next() != at(2600) {
		t.Fatalf("after a failed launch next = %s, want %s", r.next(), at(2600))
	}
	r.launching(at(2600))
	r.exited(at(2610))
	if r.next() != at(3400) {
		t.Fatalf("after another crash next = %s, want %s", r.next(), at(3400))
	}
}

// Whatever happens, the delay stays within [min, max] once something went
// wrong, never shrinks while things keep going wrong, and a healthy run
// (longer than max) resets it to min.
func TestRestartsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		minD := time.Duration(rapid.IntRange(1, 1000).Draw(t, "min")) * time.Millisecond
		maxD := minD * time.Duration(rapid.IntRange(1, 100).Draw(t, "factor"))
		r := restarts{min: minD, max: maxD}
		now := time.Unix(1_700_000_000, 0)
		prevDelay := time.Duration(0)
		for range rapid.IntRange(1, 30).Draw(t, "events") {
			// Wait until a launch is allowed (callers get an error meanwhile).
			if !r.allowed(now) {
				now = r.next()
			}
			r.launching(now)
			if rapid.Bool().Draw(t, "launch fails") {
				r.launchFailed()
			} else {
				lived := time.Duration(rapid.IntRange(0, int(3*maxD/time.Millisecond)).Draw(t, "lived")) * time.Millisecond
				now = now.Add(lived)
				r.exited(now)
				if lived >= maxD && r.delay() != minD {
					t.Fatalf("after a healthy run of %s delay = %s, want min %s", lived, r.delay(), minD)
				}
				if lived >= maxD {
					prevDelay = 0
				}
			}
			d := r.delay()
			if d < minD || d > maxD {
				t.Fatalf("delay %s outside [%s, %s]", d, minD, maxD)
			}
			if d < prevDelay {
				t.Fatalf("delay shrank from %s to %s without a healthy run", prevDelay, d)
			}
			prevDelay = d
		}
	})
}
