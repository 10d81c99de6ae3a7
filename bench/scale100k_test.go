package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/bench/figures"
	"github.com/infrakit/infrakit/internal/state"
)

// TestBenchScale100k measures issue 19's big run: 100,000 simulator
// instances in 10 groups (INFRAKIT_BENCH_LARGE_N changes the count, to try
// the scenario quickly). It times INFRAKIT_BENCH_RUNS applies (default 3;
// each in a fresh directory, the previous one removed to spare the disk)
// with the peak RSS of infrakit and of its providers, then as many no-op
// plans over the last; then, on that directory:
//   - state: the local state backend reading and writing its real state
//     file (load + save, as every command does);
//   - soak: `infrakit watch` idle for INFRAKIT_BENCH_SOAK (default 5m):
//     goroutines (its /metrics), open FDs, threads and RSS of watch and
//     its providers at the start and the end.
func TestBenchScale100k(t *testing.T) {
	enabled(t)
	n := envInt(t, "INFRAKIT_BENCH_LARGE_N", 100_000)
	reps := runs(t)
	bin := buildBinaries(t)

	var applies series
	var selfPeak, providerPeak []float64
	var dir string
	for range reps {
		if dir != "" {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}
		dir = t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(groupsStack(n, 10, false)), 0o644); err != nil {
			t.Fatal(err)
		}
		timeInfrakit(t, bin, dir, 0, "init", "-plugin-dir", bin)
		m, peaks := timeSampled(t, bin, dir, 0, "apply", "-auto-approve")
		if got := instanceCount(t, dir); got != n {
			t.Fatalf("after apply of %d the simulator holds %d instances", n, got)
		}
		applies = append(applies, m)
		selfPeak = append(selfPeak, float64(peaks.infrakit)/(1<<20))
		providerPeak = append(providerPeak, float64(peaks.provider)/(1<<20))
		t.Logf("apply %d: %s, CPU %s, peak RSS infrakit %s, largest provider %s, wait4 maxrss %s",
			n, seconds(m.wall), seconds(m.cpu), mib(peaks.infrakit), mib(peaks.provider), mib(m.maxRSS))
	}
	var plans series
	for range reps {
		plans = append(plans, timeInfrakit(t, bin, dir, 0, "plan", "-detailed-exitcode"))
	}
	t.Logf("no-op plans of %d: %s", n, joinSeconds(secondsOf(plans)))
	record(t, "apply_100k", secondsOf(applies), fmt.Sprintf("%d instances; CPU of infrakit + providers %s (median)", n, seconds(applies.cpu())))
	record(t, "plan_100k", secondsOf(plans), "")
	record(t, "rss_100k_infrakit", selfPeak, "wait4 maxrss when the providers stay below it, else VmHWM sampled every 50 ms")
	record(t, "rss_100k_providers", providerPeak, "the largest provider's VmHWM, sampled every 50 ms")

	t.Run("state", func(t *testing.T) { stateLoadSave(t, filepath.Join(dir, "infrakit.state.json"), reps) })
	t.Run("soak", func(t *testing.T) { soak(t, bin, dir, n) })
}

// stateLoadSave times the local backend reading the state file at path
// and writing it back (Read, then Write of what it read), reps times over
// a copy of it.
func stateLoadSave(t *testing.T, path string, reps int) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "infrakit.state.json")
	if err := os.WriteFile(copyPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var total, loads, saves []float64
	for range reps {
		l := state.NewLocal(copyPath)
		start := time.Now()
		doc, err := l.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		loaded := time.Now()
		if err := l.Write(ctx, doc); err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		total = append(total, end.Sub(start).Seconds())
		loads = append(loads, loaded.Sub(start).Seconds())
		saves = append(saves, end.Sub(loaded).Seconds())
	}
	slices.Sort(loads)
	slices.Sort(saves)
	record(t, "state_100k_load_save", total, fmt.Sprintf("state file %.1f MiB; load median %s, save median %s",
		float64(len(data))/(1<<20), figures.Format(loads[(len(loads)-1)/2], figures.Seconds), figures.Format(saves[(len(saves)-1)/2], figures.Seconds)))
}

// soakSample is what watch and its providers hold at one moment.
type soakSample struct {
	goroutines float64 // watch's go_goroutines, from /metrics
	fds        int     // open FDs of watch and its providers
	threads    int     // their threads
	rss        int64   // their RSS, summed
	cpuTicks   int64   // their utime+stime so far
	heap       float64 // watch's go_memstats_heap_inuse_bytes
	byProcess  string  // each one's RSS
}

// soak runs watch over dir for INFRAKIT_BENCH_SOAK and compares what it
// holds at the start and the end; RSS and watch's Go heap are also sampled
// ten times in between, so a GC cycle's sawtooth can be told from growth.
func soak(t *testing.T, bin, dir string, n int) {
	d := envDuration(t, "INFRAKIT_BENCH_SOAK", 5*time.Minute)
	w := startWatch(t, bin, dir)
	defer w.stop()
	time.Sleep(envDuration(t, "INFRAKIT_BENCH_SETTLE", 20*time.Second))
	startAt := time.Now()
	samples := []soakSample{sampleWatch(t, w)}
	for i := range 10 {
		time.Sleep(time.Until(startAt.Add(d * time.Duration(i+1) / 10)))
		samples = append(samples, sampleWatch(t, w))
	}
	start, end := samples[0], samples[len(samples)-1]
	elapsed := time.Since(startAt)
	cpu := 100 * float64(end.cpuTicks-start.cpuTicks) / userHZ / elapsed.Seconds()
	var rssSeries, heapSeries, goSeries []string
	for _, s := range samples {
		rssSeries = append(rssSeries, fmt.Sprintf("%.0f", float64(s.rss)/(1<<20)))
		heapSeries = append(heapSeries, fmt.Sprintf("%.0f", s.heap/(1<<20)))
		goSeries = append(goSeries, fmt.Sprintf("%.0f", s.goroutines))
	}
	series := fmt.Sprintf("RSS of watch + providers (MiB) every %s: %s; watch's Go heap in use (MiB): %s; goroutines: %s; at the end: %s",
		d/10, strings.Join(rssSeries, " "), strings.Join(heapSeries, " "), strings.Join(goSeries, " "), end.byProcess)
	out := fmt.Sprintf("watch idle over %d instances for %s (load %.2f): goroutines %.0f → %.0f, FDs %d → %d, threads %d → %d, RSS %s → %s, CPU %.2f%% of a core\n%s\n",
		n, d, loadAverage(), start.goroutines, end.goroutines, start.fds, end.fds, start.threads, end.threads, mib(start.rss), mib(end.rss), cpu, series)
	t.Log("\n" + out)
	fmt.Print(out)
	one := func(v float64) []float64 { return []float64{v} }
	// A sample can fall on a pass or sync in flight, whose goroutines are
	// not kept: a leak raises the fewest there are, so growth is the
	// fewest of the second half against the fewest of the first.
	half := len(samples) / 2
	record(t, "soak_goroutines_growth", one(fewestGoroutines(samples[half+1:])-fewestGoroutines(samples[:half+1])),
		fmt.Sprintf("%.0f → %.0f over %s; every %s: %s", start.goroutines, end.goroutines, d, d/10, strings.Join(goSeries, " ")))
	record(t, "soak_fds_growth", one(float64(end.fds-start.fds)), fmt.Sprintf("%d → %d (threads %d → %d)", start.fds, end.fds, start.threads, end.threads))
	// RSS moves with GC cycles by a fifth either way within a minute, so
	// growth is the peak of the second half against that of the first.
	growth := peakRSS(samples[half+1:]) - peakRSS(samples[:half+1])
	record(t, "soak_rss_growth", one(float64(growth)/(1<<20)), fmt.Sprintf("start %s, end %s; %s", mib(start.rss), mib(end.rss), series))
	record(t, "soak_rss_end", one(float64(end.rss)/(1<<20)), fmt.Sprintf("idle CPU over the soak %.2f%% of a core", cpu))
}

func peakRSS(samples []soakSample) int64 {
	var p int64
	for _, s := range samples {
		p = max(p, s.rss)
	}
	return p
}

func fewestGoroutines(samples []soakSample) float64 {
	fewest := samples[0].goroutines
	for _, s := range samples[1:] {
		fewest = min(fewest, s.goroutines)
	}
	return fewest
}

// sampleWatch reads what w and its providers hold now.
func sampleWatch(t *testing.T, w *benchWatch) soakSample {
	t.Helper()
	s := soakSample{goroutines: w.metric(t, "go_goroutines"), heap: w.metric(t, "go_memstats_heap_inuse_bytes")}
	var each []string
	for _, pid := range append([]int{w.pid}, children(t, w.pid)...) {
		each = append(each, fmt.Sprintf("%s %s", procName(pid), mib(rssOf(pid))))
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		ticks, _ := cpuTicks(pid)
		s.fds += len(fds)
		s.threads += len(tasks)
		s.rss += rssOf(pid)
		s.cpuTicks += ticks
	}
	s.byProcess = strings.Join(each, ", ")
	return s
}

// metric is the value of an unlabelled metric of watch's /metrics.
func (w *benchWatch) metric(t *testing.T, name string) float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+w.addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("watch /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("watch /metrics: %s\n%s", resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("watch /metrics: %s: %v", name, err)
			}
			return v
		}
	}
	t.Fatalf("watch /metrics has no %s", name)
	return 0
}
