package watch

import (
	"runtime/debug"
	"testing"
)

// The tuner lowers the GC percent at the first idle moment, gives the
// found one back while work runs, and restores it at the end; with no idle
// percent it never touches it.
func TestGCTuner(t *testing.T) {
	found := debug.SetGCPercent(137)
	t.Cleanup(func() { debug.SetGCPercent(found) })
	current := func() int {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p
	}
	g := &gcTuner{idle: 50}
	for i, c := range []struct {
		busy bool
		want int
	}{
		{true, 137}, // busy from the start: not lowered yet
		{false, 50},
		{false, 50},
		{true, 137},
		{true, 137},
		{false, 50},
	} {
		g.set(c.busy)
		if got := current(); got != c.want {
			t.Fatalf("step %d (busy %t): GC percent %d; want %d", i, c.busy, got, c.want)
		}
	}
	g.restore()
	if got := current(); got != 137 {
		t.Errorf("after restore: %d; want 137", got)
	}
	off := &gcTuner{}
	off.set(false)
	off.restore()
	if got := current(); got != 137 {
		t.Errorf("a tuner without an idle percent set it to %d", got)
	}
}
