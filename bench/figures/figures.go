// Package figures is the closing table of `make bench`: the catalogue of
// the figures the benchmarks report with their targets, the results file
// the INFRAKIT_BENCH=1 tests append their measurements to, the baseline
// (bench/baseline.json) a run is compared with, and the table that sets
// each figure beside its target and its baseline.
//
// Nothing here asserts a timing: the table flags a figure that misses its
// target or is worse than its baseline, and leaves the reading to people,
// because the machines it runs on are shared and noisy.
package figures

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Unit says how a figure's values are stored and printed.
type Unit string

const (
	Seconds Unit = "s"     // wall time, stored in seconds
	Percent Unit = "%"     // percent of one core, or of an even share
	MiB     Unit = "MiB"   // memory, stored in MiB
	Count   Unit = "count" // goroutines, file descriptors, threads
	Ratio   Unit = "ratio" // a dimensionless ratio
)

// Figure is one line of the table: a measurement and its target. Every
// figure is better lower, so its target is an upper bound.
type Figure struct {
	Key    string  // stable name in the results and baseline files
	Label  string  // what the table calls it
	Unit   Unit    // of Target and of the measured values
	Target float64 // upper bound; NaN when the figure has none
	// Scenario is the test that measures it, for `go test -run`.
	Scenario string
}

// HasTarget reports whether f has an upper bound to be judged against.
func (f Figure) HasTarget() bool { return !math.IsNaN(f.Target) }

var none = math.NaN()

// Catalogue is every figure of issues 19 and 20 in table order.
var Catalogue = []Figure{
	{"apply_1k_stack", "apply 1,000 (3 groups, ingress, enrollment)", Seconds, none, "TestBenchApply"},
	{"apply_10k_stack", "apply 10,000 (3 groups, ingress, enrollment)", Seconds, 1, "TestBenchApply"},
	{"plan_10k_stack", "no-op plan 10,000", Seconds, 0.2, "TestBenchApply"},
	{"ratio_10k_1k", "apply 10k/1k ratio", Ratio, 11, "TestBenchApply"},
	{"apply_100k", "apply 100,000 (10 groups)", Seconds, 15, "TestBenchScale100k"},
	{"plan_100k", "no-op plan 100,000", Seconds, 2, "TestBenchScale100k"},
	{"rss_100k_infrakit", "peak RSS of infrakit, apply 100,000", MiB, 400, "TestBenchScale100k"},
	{"rss_100k_providers", "peak RSS of a provider, apply 100,000", MiB, none, "TestBenchScale100k"},
	{"state_100k_load_save", "state file load + save, 100,000", Seconds, 0.5, "TestBenchScale100k/state"},
	{"soak_goroutines_growth", "idle watch 100k: goroutine growth over the soak", Count, 0, "TestBenchScale100k/soak"},
	{"soak_fds_growth", "idle watch 100k: open FD growth over the soak", Count, 0, "TestBenchScale100k/soak"},
	{"soak_rss_growth", "idle watch 100k: RSS growth, 2nd-half peak − 1st-half peak", MiB, none, "TestBenchScale100k/soak"},
	{"soak_rss_end", "idle watch 100k: RSS of watch + providers at the end", MiB, none, "TestBenchScale100k/soak"},
	{"idle_cpu_10k", "idle CPU, walk-through stack, cattle 10,000", Percent, 1, "TestBenchWatchStack10k/idle"},
	{"watch_rss_10k", "RSS of watch + providers, cattle 10,000", MiB, 200, "TestBenchWatchStack10k/idle"},
	{"heal_p50_10k", "heal 3 of 10,000 to registered, p50", Seconds, 0.050, "TestBenchWatchStack10k/heal"},
	{"heal_p99_10k", "heal 3 of 10,000 to registered, p99", Seconds, 0.200, "TestBenchWatchStack10k/heal"},
	{"scale_10_1000", "group scale 10 → 1,000 to LB and NFS at 1,000", Seconds, 1, "TestBenchWalkthroughFollow"},
	// Issue 20: three scale-out watch processes, 30 groups of 1,000.
	{"scaleout_pass_share", "scale-out, 3 watches × 30 groups: group passes per watch, worst off a third", Percent, 20, "TestBenchScaleOut"},
	{"scaleout_cpu_share", "scale-out, 3 watches × 30 groups: CPU per watch + providers, worst off a third", Percent, 20, "TestBenchScaleOut"},
	{"scaleout_kill_moved_extra", "scale-out: groups a SIGKILL of a watch moves beyond its share", Count, 1, "TestBenchScaleOut"},
	{"scaleout_kill_reown", "scale-out: SIGKILL of a watch until its groups have new owners (TTL 2 s)", Seconds, 3, "TestBenchScaleOut"},
}

// Lookup returns the catalogue's figure named key.
func Lookup(key string) (Figure, bool) {
	i := slices.IndexFunc(Catalogue, func(f Figure) bool { return f.Key == key })
	if i < 0 {
		return Figure{}, false
	}
	return Catalogue[i], true
}

// Result is one figure as a run measured it (or why it did not).
type Result struct {
	Key    string  `json:"key"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	Runs   int     `json:"runs"`
	// Load is /proc/loadavg's 1-minute average when it was measured.
	Load float64 `json:"load"`
	// Skipped says why the figure was not measured; the values are then
	// meaningless.
	Skipped string `json:"skipped,omitempty"`
	// Note is a short remark printed under the table.
	Note string    `json:"note,omitempty"`
	At   time.Time `json:"at"`
}

// Summarize is the result of samples of figure key: their median (the
// lower middle one of an even count) and maximum.
func Summarize(key string, samples []float64) Result {
	if len(samples) == 0 {
		return Result{Key: key, Skipped: "no samples"}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return Result{Key: key, Median: s[(len(s)-1)/2], Max: s[len(s)-1], Runs: len(s)}
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of samples.
func Percentile(samples []float64, p float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// Format prints v in unit u.
func Format(v float64, u Unit) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case u == Seconds && v < 1:
		return fmt.Sprintf("%.0f ms", v*1000)
	case u == Seconds:
		return fmt.Sprintf("%.2f s", v)
	case u == Percent:
		return fmt.Sprintf("%.2f %%", v)
	case u == MiB:
		return fmt.Sprintf("%.0f MiB", v)
	case u == Count:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}
