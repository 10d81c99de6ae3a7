package bench

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/bench/figures"
)

// resultsEnv names the file the scenarios append their figures to; `make
// bench` sets it and prints the table of it at the end (bench/benchtable).
// Unset, figures are only logged.
const resultsEnv = "INFRAKIT_BENCH_RESULTS"

// record stores the figure key measured as samples (in the figure's unit)
// with the load average now, and logs it.
func record(t *testing.T, key string, samples []float64, note string) {
	t.Helper()
	r := figures.Summarize(key, samples)
	r.Note = note
	store(t, r)
}

// recordSkip stores that the figure key was not measured, and why.
func recordSkip(t *testing.T, key, why string) {
	t.Helper()
	store(t, figures.Result{Key: key, Skipped: why})
}

func store(t *testing.T, r figures.Result) {
	t.Helper()
	f, ok := figures.Lookup(r.Key)
	if !ok {
		t.Fatalf("figure %q is not in bench/figures.Catalogue", r.Key)
	}
	r.Load, r.At = loadAverage(), time.Now().UTC()
	if r.Skipped != "" {
		t.Logf("figure %s: skipped: %s", r.Key, r.Skipped)
	} else {
		t.Logf("figure %s: median %s, max %s over %d runs, load %.2f", f.Label,
			figures.Format(r.Median, f.Unit), figures.Format(r.Max, f.Unit), r.Runs, r.Load)
	}
	path := os.Getenv(resultsEnv)
	if path == "" {
		return
	}
	if err := figures.Append(path, r); err != nil {
		t.Errorf("%s: %v", resultsEnv, err)
	}
}

// loadAverage is the 1-minute load average of /proc/loadavg (0 if
// unreadable).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[0], 64)
	return v
}

// secondsOf is the wall times of s in seconds.
func secondsOf(s series) []float64 {
	out := make([]float64, len(s))
	for i, m := range s {
		out[i] = m.wall.Seconds()
	}
	return out
}

func durationsSeconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// envDuration is the duration in the environment variable name, or def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 5m or 30s", name, v)
	}
	return d
}

// envInt is the whole number in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a whole number >= 1", name, v)
	}
	return n
}
