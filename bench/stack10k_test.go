package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/infrakit/infrakit/bench/figures"
)

var cattleSize = regexp.MustCompile(`(group "cattle" \{\s*size\s*=\s*)10\b`)

// walkthroughWith is DESIGN.md's e2e stack (two groups, three load
// balancers, an ingress, an enrollment) with cattle of n.
func walkthroughWith(t *testing.T, n int) string {
	t.Helper()
	stack := walkthroughStack(t)
	if !cattleSize.MatchString(stack) {
		t.Fatal(`testdata/e2e/stack.hcl: no group "cattle" { size = 10 } to resize`)
	}
	return cattleSize.ReplaceAllString(stack, fmt.Sprintf("${1}%d", n))
}

// simPaths are where the walk-through's simulator keeps what a heal
// changes.
type simPaths struct {
	compute, auths, lbs, lb3 string
}

func simPathsOf(dir string) simPaths {
	sim := filepath.Join(dir, ".infrakit", "simulator")
	return simPaths{
		compute: filepath.Join(sim, "instances", "compute"),
		auths:   filepath.Join(sim, "authorizations", "disk"),
		lbs:     filepath.Join(sim, "loadbalancers"),
		lb3:     filepath.Join(sim, "loadbalancers", "lb3.json"),
	}
}

// TestBenchWatchStack10k runs `infrakit watch` with default settings over
// the walk-through stack with cattle = 10,000 and measures, once it has
// settled (INFRAKIT_BENCH_SETTLE, default 20s):
//   - idle: CPU (utime+stime of watch and its provider processes, percent
//     of one core) and their summed RSS over INFRAKIT_BENCH_RUNS windows
//     (default 3) of INFRAKIT_BENCH_IDLE_WINDOW (default 60s);
//   - heal: INFRAKIT_BENCH_HEALS times (default 20), 3 cattle instance files
//     removed from the simulator (the provider's event) until their
//     replacements' files exist, lb3 lists them and nfs has authorized
//     them, taken from inotify events; p50 and p99 (nearest rank).
//
// With INFRAKIT_BENCH_BASELINE the baseline revision is measured the same
// way afterwards and the figures compared.
func TestBenchWatchStack10k(t *testing.T) {
	enabled(t)
	const n = 10000
	type figs struct{ cpu, rss, p50, p99 float64 }
	var got []figs
	for i, b := range builds(t) {
		prefix := ""
		if i > 0 {
			prefix = "baseline-"
		}
		var f figs
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "stack.hcl"), []byte(walkthroughWith(t, n)), 0o644); err != nil {
			t.Fatal(err)
		}
		timeInfrakit(t, b.bin, dir, 0, "init", "-plugin-dir", b.bin)
		timeInfrakit(t, b.bin, dir, 0, "apply", "-auto-approve")
		w := startWatch(t, b.bin, dir)
		time.Sleep(envDuration(t, "INFRAKIT_BENCH_SETTLE", 20*time.Second)) // past start-up: launches, the first full syncs
		t.Run(prefix+"idle", func(t *testing.T) {
			u := idleStack(t, b.name, w, n, i == 0)
			f.cpu, f.rss = u.cpu(), float64(u.rss())/(1<<20)
		})
		t.Run(prefix+"heal", func(t *testing.T) {
			lat := healStack(t, b.name, w, dir, n, i == 0)
			f.p50, f.p99 = 1000*figures.Percentile(lat, 50), 1000*figures.Percentile(lat, 99)
		})
		w.stop()
		got = append(got, f)
	}
	if len(got) == 2 {
		out := compare("idle CPU", got[0].cpu, got[1].cpu, "%") +
			compare("watch RSS", got[0].rss, got[1].rss, "MiB") +
			compare("heal p50", got[0].p50, got[1].p50, "ms") +
			compare("heal p99", got[0].p99, got[1].p99, "ms")
		t.Log("\n" + out)
		fmt.Print(out)
	}
}

// idleStack measures the idle windows of w and reports them; record says
// whether they are this tree's figures.
func idleStack(t *testing.T, name string, w *benchWatch, n int, recordIt bool) usage {
	window := envDuration(t, "INFRAKIT_BENCH_IDLE_WINDOW", 60*time.Second)
	windows := runs(t)
	loadStart := loadAverage()
	all := make([]usage, windows)
	for i := range all {
		all[i] = idle(t, w.pid, window)
	}
	median := idleWindows(all)

	var b strings.Builder
	fmt.Fprintf(&b, "%s: watch idle, walk-through stack with cattle %d, default settings, %d windows of %s (load %.2f at the start, %.2f at the end)\n",
		name, n, windows, window, loadStart, loadAverage())
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "process\tCPU\tRSS")
	median.rows(tw, "median window")
	tw.Flush()
	fmt.Fprintf(&b, "idle CPU: %.2f%% (target <= 1%%), windows: %s; RSS %s (target <= 200 MiB)\n", median.cpu(), median.each(), mib(median.rss()))
	t.Log("\n" + b.String())
	fmt.Print(b.String())
	if recordIt {
		cpus, rsss := make([]float64, len(all)), make([]float64, len(all))
		for i, u := range all {
			cpus[i], rsss[i] = u.cpu(), float64(u.rss())/(1<<20)
		}
		record(t, "idle_cpu_10k", cpus, fmt.Sprintf("windows of %s; the median window by process: %s", window, median.byProcess()))
		record(t, "watch_rss_10k", rsss, "watch and its providers, summed, at the end of each window")
	}
	return median
}

// healStack times heals of 3 cattle instances under w and reports them;
// the latencies are returned in seconds.
func healStack(t *testing.T, name string, w *benchWatch, dir string, n int, recordIt bool) []float64 {
	heals := envInt(t, "INFRAKIT_BENCH_HEALS", 20)
	p := simPathsOf(dir)
	events := followDirs(t, p.compute, p.auths, p.lbs)
	var lat, created, onLB, authorized []float64
	for range heals {
		settled(t, w, p, n)
		h := healOnce(t, w, p, events)
		lat = append(lat, h.total.Seconds())
		created, onLB, authorized = append(created, h.created3.Seconds()), append(onLB, h.onLB.Seconds()), append(authorized, h.authorized3.Seconds())
	}
	p50, p99 := figures.Percentile(lat, 50), figures.Percentile(lat, 99)
	parts := fmt.Sprintf("p50 of the parts: replacements created %s, on lb3 %s, authorized %s",
		figures.Format(figures.Percentile(created, 50), figures.Seconds), figures.Format(figures.Percentile(onLB, 50), figures.Seconds),
		figures.Format(figures.Percentile(authorized, 50), figures.Seconds))
	out := fmt.Sprintf("%s: heal of 3 of %d cattle to running and registered (lb3, nfs), default settings, %d heals\n"+
		"p50 %s (target <= 50ms), p99 %s (target <= 200ms), all: %s\n%s\n",
		name, n, heals, figures.Format(p50, figures.Seconds), figures.Format(p99, figures.Seconds), joinSeconds(lat), parts)
	t.Log("\n" + out)
	fmt.Print(out)
	if recordIt {
		store(t, figures.Result{Key: "heal_p50_10k", Median: p50, Max: slices.Max(lat), Runs: len(lat), Note: parts})
		store(t, figures.Result{Key: "heal_p99_10k", Median: p99, Max: slices.Max(lat), Runs: len(lat),
			Note: "p99 is the nearest rank; with 20 heals, the slowest"})
	}
	return lat
}

// settled waits until lb3 lists n backends and nfs holds n authorizations
// (the previous heal's deregistrations and revocations are done), then a
// second more.
func settled(t *testing.T, w *benchWatch, p simPaths, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ids, err := lbBackends(p.lb3)
		auths, aerr := os.ReadDir(p.auths)
		if err == nil && aerr == nil && len(ids) == n && countJSON(auths) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lb3 has %d backends and nfs %d authorizations a minute after the last heal, want %d:\n%s",
				len(ids), countJSON(auths), n, tail(w.stderr.String(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
}

// healOnce removes 3 of lb3's backends' instance files and times until
// their replacements exist, are lb3 backends and are authorized by nfs.
func healOnce(t *testing.T, w *benchWatch, p simPaths, events *dirEvents) heal {
	t.Helper()
	entries, err := os.ReadDir(p.compute)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]bool{}
	for _, e := range entries {
		before[e.Name()] = true
	}
	cattle, err := lbBackends(p.lb3)
	if err != nil {
		t.Fatal(err)
	}
	for { // what the settling produced is not this heal's
		evs, err := events.next(0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
	}
	ids := make([]string, 0, len(cattle))
	for id := range cattle {
		ids = append(ids, id)
	}
	start := time.Now()
	for _, i := range rand.Perm(len(ids))[:3] {
		if err := os.Remove(filepath.Join(p.compute, ids[i]+".json")); err != nil {
			t.Fatal(err)
		}
	}
	hp := healProgress{paths: p, before: before, created: map[string]bool{}, authorized: map[string]bool{}, inLB: map[string]bool{}}
	for time.Since(start) < time.Minute {
		evs, err := events.next(100 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			hp.observe(e)
		}
		if len(evs) > 0 && hp.done(evs[len(evs)-1].at.Sub(start)) {
			return hp.heal
		}
	}
	t.Fatalf("3 instances removed a minute ago: %d replacements created, %d authorized, lb3 lists %d backends:\n%s",
		len(hp.created), len(hp.authorized), len(hp.inLB), tail(w.stderr.String(), 4000))
	return hp.heal
}

// healProgress is what the events since the removal showed of one heal.
type healProgress struct {
	paths  simPaths
	before map[string]bool // the instance files before the removal
	// created are the new instances; authorized the sources of new
	// authorizations; inLB lb3's backends as last read.
	created, authorized, inLB map[string]bool
	heal
}

// observe takes in one file event.
func (hp *healProgress) observe(e fileEvent) {
	switch e.dir {
	case hp.paths.compute:
		if strings.HasSuffix(e.name, ".json") && !hp.before[e.name] {
			hp.created[strings.TrimSuffix(e.name, ".json")] = true
		}
	case hp.paths.auths:
		if src := authSource(e.path()); src != "" {
			hp.authorized[src] = true
		}
	case hp.paths.lbs:
		if e.name == "lb3.json" {
			if backends, err := lbBackends(hp.paths.lb3); err == nil {
				hp.inLB = backends
			}
		}
	}
}

// done notes what is complete at (since the removal) and reports whether
// all of it is.
func (hp *healProgress) done(at time.Duration) bool {
	if len(hp.created) < 3 {
		return false
	}
	if hp.created3 == 0 {
		hp.created3 = at
	}
	if hp.onLB == 0 && all(hp.created, hp.inLB) {
		hp.onLB = at
	}
	if hp.authorized3 == 0 && all(hp.created, hp.authorized) {
		hp.authorized3 = at
	}
	if hp.onLB == 0 || hp.authorized3 == 0 {
		return false
	}
	hp.total = max(hp.onLB, hp.authorized3)
	return true
}

// heal is when, after the removal, the 3 replacements existed, were all
// lb3 backends and all authorized; total is the last of these.
type heal struct{ created3, onLB, authorized3, total time.Duration }

// all reports whether every key of ids is in set.
func all(ids, set map[string]bool) bool {
	for id := range ids {
		if !set[id] {
			return false
		}
	}
	return true
}

// lbBackends are the instance IDs of the backends of the simulator's load
// balancer file at path.
func lbBackends(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lb struct {
		Backends []struct {
			ID string `json:"id"`
		} `json:"backends"`
	}
	if err := json.Unmarshal(data, &lb); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(map[string]bool, len(lb.Backends))
	for _, b := range lb.Backends {
		out[b.ID] = true
	}
	return out, nil
}

// authSource is the source instance of the simulator's authorization file
// at path, or "" while it cannot be read whole.
func authSource(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var a struct {
		SourceID string `json:"source_id"`
	}
	if json.Unmarshal(data, &a) != nil {
		return ""
	}
	return a.SourceID
}

func joinSeconds(v []float64) string {
	parts := make([]string, len(v))
	for i, s := range v {
		parts[i] = figures.Format(s, figures.Seconds)
	}
	return strings.Join(parts, " ")
}
