package watch

import "runtime/debug"

// gcTuner lowers the process's GC percent while watch is idle (nothing in
// flight: no pass, sync or autoscale evaluation) and gives back the one it
// found while work runs. An idle watch holds its stack's members in memory
// and a Go heap grows to (100 + GOGC) % of what it holds between
// collections, so a low percent keeps an idle watch small; while a pass
// heals, the collections a low percent adds would be on the heal's path
// (issue 19: a heal of 3 of 10,000 took about a fifth longer at 50).
// Lowering the percent only moves the next collection earlier: an idle
// watch pays for one collection when it goes idle, no more than it would
// have at the low percent all along.
type gcTuner struct {
	// idle is the percent while idle; 0 leaves the GC alone.
	idle int
	// found is the percent the process had; started: idle was set once.
	found        int
	started, low bool
}

// set switches to the idle percent when busy is false, back to the found
// one when it is true.
func (g *gcTuner) set(busy bool) {
	switch {
	case g.idle <= 0:
	case !g.started:
		if busy {
			return // the first idle moment lowers it
		}
		g.found, g.started, g.low = debug.SetGCPercent(g.idle), true, true
	case busy && g.low:
		debug.SetGCPercent(g.found)
		g.low = false
	case !busy && !g.low:
		debug.SetGCPercent(g.idle)
		g.low = true
	}
}

// restore gives the process back the percent it had.
func (g *gcTuner) restore() {
	if g.started && g.low {
		debug.SetGCPercent(g.found)
		g.low = false
	}
}
