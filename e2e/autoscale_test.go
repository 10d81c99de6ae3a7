package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asBound bounds every wait of the autoscale test: generous, for a
// machine busy with other tests (each step takes a few seconds idle).
const asBound = 90 * time.Second

// TestAutoscalePrometheus runs testdata/autoscale with real processes: web
// servers behind a real HAProxy, a real Prometheus scraping them every
// second through the file_sd file the stack's enrollment keeps, and
// `infrakit watch` evaluating the rps check every second. It shows what
// issue 17 asks: load above target grows the group to its max of 4 and
// Prometheus scrapes the new members; a query that fails (Prometheus
// stopped with SIGSTOP, so it times out) keeps the size and says so; once
// the load drops to a trickle the group shrinks back to its min of 2 after
// the stabilization window, one member per decision; HAProxy answers
// every request throughout, the scale-down included; the decisions, with
// the metric value and the desired count, are in /v1/status, in the
// events and in `group describe`; plan says the autoscaler owns the size
// and group scale is refused without -override.
func TestAutoscalePrometheus(t *testing.T) {
	t.Parallel()
	s := newAutoscaleStack(t)
	s.init()
	s.ok("validate")
	s.ok("apply", "-auto-approve")
	peak := 0
	members := s.asConverged(2, nil, &peak, "after apply")

	p := s.startWatch(nil, "-interval", "2s")
	ds := &asDecisions{p: p, by: map[time.Time]asDecision{}}
	within(t, asBound, "a first autoscale decision in /v1/status", func() bool {
		ds.poll()
		return len(ds.by) > 0
	})

	// 60 requests a second is 12 instances' worth at 5 per instance: the
	// group grows to its max of 4, by at most 2 a decision.
	heavy := s.startLoad(60, 60*120, 120*time.Second)
	grown := s.asConverged(4, ds, &peak, "under load")
	newcomers := realNewcomers(members, grown)
	if len(newcomers) != 2 || !slices.Equal(realWithout(grown, newcomers...), members) {
		t.Fatalf("under load the members went from %v to %v; want the 2 kept and 2 new", members, grown)
	}
	within(t, asBound, "a decision at 4 held by max", func() bool {
		ds.poll()
		return slices.ContainsFunc(ds.all(), func(d asDecision) bool { return d.Current == 4 && d.Limit == "max" })
	})
	t.Logf("under load: %d requests answered so far; Prometheus scrapes the new members %v", heavy.answered(), newcomers)

	// The load stops, and at once the query fails: Prometheus stopped
	// (SIGSTOP: it accepts connections and never answers, so the
	// provider's 5 s timeout ends each query). The size stays at 4.
	answers := heavy.end()
	prom := s.promPID()
	if err := syscall.Kill(prom, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(prom, syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	stoppedAt := time.Now()
	var failed asDecision
	within(t, asBound, "a decision on a failed query", func() bool {
		ds.poll()
		for _, d := range ds.all() {
			if d.At.After(stoppedAt) && d.Limit == "no_data" && len(d.Checks) == 1 && d.Checks[0].Error != "" {
				failed = d
				return true
			}
		}
		return false
	})
	if failed.Current != 4 || failed.Desired != 4 || !strings.Contains(failed.Reason, `check "rps" query failed (`) || !strings.HasSuffix(failed.Reason, "size kept at 4") {
		t.Errorf("the decision on a failed query: %v; want 4 kept, saying the query failed", failed)
	}
	if n := len(s.alive()); n != 4 {
		t.Errorf("%d members while the query fails; want 4 kept", n)
	}
	t.Logf("Prometheus stopped: %v", failed)
	resume()

	// While the autoscaler owns the size, plan says so and group scale
	// needs -override.
	if res := s.ok("plan"); !asOwned.MatchString(res.stdout) {
		t.Errorf("plan does not say the autoscaler owns the size:\n%s", res)
	}
	if res := s.run("group", "scale", "web", "3"); res.code == 0 || !strings.Contains(res.stderr, `group "web" is autoscaled (min 2, max 4)`) || !strings.Contains(res.stderr, "-override") {
		t.Errorf("group scale without -override: want a refusal naming -override\n%s", res)
	}

	// A trickle of 2 requests a second (wants 1): the group shrinks to its
	// min of 2 once the stabilization window has passed the load, while
	// HAProxy answers every request.
	trickle := s.startLoad(2, 2*180, 180*time.Second)
	shrunk := s.asConverged(2, ds, &peak, "after the load")
	if len(realNewcomers(grown, shrunk)) != 0 {
		t.Errorf("the group went from %v to %v: a scale-down creates nobody", grown, shrunk)
	}
	at := time.Now()
	within(t, asBound, "a decision keeping 2, with requests still flowing", func() bool {
		ds.poll()
		last := ds.all()[len(ds.by)-1]
		return last.At.After(at) && last.Current == 2 && last.Desired == 2
	})
	answers = append(answers, trickle.end()...)
	by, failures := realTally(answers)
	t.Logf("%d requests through HAProxy, %d failed, answered by %v", len(answers), len(failures), by)
	for _, f := range failures {
		t.Errorf("request at %s failed: %v", f.at.Format("15:04:05.000"), f.err)
	}
	if peak > 4 {
		t.Errorf("%d members ran at once; max is 4", peak)
	}
	for _, id := range grown {
		if by[id] == 0 {
			t.Errorf("member %s answered no request: %v", id, by)
		}
	}

	s.asCheckDecisions(ds.all())
	s.asCheckEvents(p)
	s.asCheckMetrics(p)
	s.asCheckDescribe(ds)
}

// asOwned is plan's note on the autoscaled group, at whatever size the
// scale-down has reached.
var asOwned = regexp.MustCompile(`Note: the autoscaler owns the size of group "web": [234] \(min 2, max 4\); apply keeps it\.`)

// asConverged waits until the group has n live members that are exactly
// what Prometheus scrapes (and finds up) and HAProxy's backends, and
// returns them. Each poll also gathers the decisions in ds (when set) and
// keeps the most members seen at once in peak.
func (s *asStack) asConverged(n int, ds *asDecisions, peak *int, what string) []string {
	s.t.Helper()
	var members []string
	why := "no poll yet"
	took := within(s.t, asBound, fmt.Sprintf("%s: %d members, scraped and as backends", what, n), func() bool {
		if ds != nil {
			ds.poll()
		}
		members = s.alive()
		*peak = max(*peak, len(members))
		if len(members) != n {
			why = fmt.Sprintf("%d members", len(members))
			return false
		}
		var ok bool
		if ok, why = s.scraped(members); !ok {
			return false
		}
		b := s.backends("web")
		why = fmt.Sprintf("backends %v, members %v", b, members)
		return slices.Equal(b, members)
	})
	s.t.Logf("%s: %d members %v, scraped by Prometheus and HAProxy's backends after %s", what, n, members, took.Round(time.Millisecond))
	if n != len(members) {
		s.t.Fatal(why)
	}
	return members
}

// asCheckDecisions checks the decisions /v1/status showed: within the
// bounds and max_step, with the check's value and desired count; a
// scale-up above target and held by max; the first scale-down after the
// load not below any recommendation of the 5 s before it.
func (s *asStack) asCheckDecisions(all []asDecision) {
	t := s.t
	t.Helper()
	var ups, downs int
	sawMax := false
	for i, d := range all {
		if d.Desired < 2 || d.Desired > 4 || d.Desired-d.Current > 2 || d.Current-d.Desired > 1 {
			t.Errorf("decision %v: outside [2, 4] or past max_step (up 2, down 1)", d)
		}
		if len(d.Checks) != 1 || d.Checks[0].Check != "rps" || d.Checks[0].TargetPerInstance != 5 {
			t.Errorf("decision %v: checks %+v; want the rps check, target 5", d, d.Checks)
			continue
		}
		c := d.Checks[0]
		if d.Limit != "no_data" && (c.Desired == nil || *c.Desired != d.Recommended || !strings.Contains(d.Reason, "rps = ")) {
			t.Errorf("decision %v: check %+v; want its value and desired count", d, c)
		}
		switch {
		case d.Desired > d.Current:
			ups++
			if c.Value <= 5*float64(d.Current) {
				t.Errorf("scale-up %v at %g requests/s: not above the target of %d instances", d, c.Value, d.Current)
			}
		case d.Desired < d.Current:
			downs++
			// HPA's rule: no lower than the recommendations of the window.
			for _, e := range all[:i] {
				if e.Limit != "no_data" && e.At.After(d.At.Add(-5*time.Second+10*time.Millisecond)) && e.Recommended > d.Desired {
					t.Errorf("scale-down %v within 5s of the recommendation %v", d, e)
				}
			}
		}
		if d.Recommended > 4 && d.Desired == 4 && d.Limit == "max" {
			sawMax = true
		}
	}
	t.Logf("%d decisions seen, %d scale-ups, %d scale-downs", len(all), ups, downs)
	if ups < 1 || downs != 2 || !sawMax {
		t.Errorf("scale-ups %d, scale-downs %d (want 2: one member at a time), held by max %v; decisions:\n%s", ups, downs, sawMax, asLines(all))
	}
}

// asCheckEvents checks that the events carry the scale-up and scale-down
// decisions, with their values.
func (s *asStack) asCheckEvents(p *watchProc) {
	s.t.Helper()
	var evs []struct {
		Kind, Group, Reason, Message string
		Autoscale                    *asDecision `json:"autoscale"`
	}
	p.get("/v1/events", &evs)
	seen := map[string]int{}
	for _, e := range evs {
		if e.Kind != "autoscale" {
			continue
		}
		if e.Group != "web" || e.Autoscale == nil || len(e.Autoscale.Checks) != 1 || !strings.Contains(e.Message, e.Autoscale.Reason) {
			s.t.Errorf("autoscale event %+v: want group web, its decision and its reason", e)
			continue
		}
		if e.Reason != "hold" && !strings.HasPrefix(e.Message, fmt.Sprintf("size %d -> %d: ", e.Autoscale.Current, e.Autoscale.Desired)) {
			s.t.Errorf("autoscale event %s: message %q", e.Reason, e.Message)
		}
		seen[e.Reason]++
	}
	if seen["scale-up"] < 1 || seen["scale-down"] != 2 || seen["hold"] < 1 {
		s.t.Errorf("autoscale events by reason: %v; want scale-ups, 2 scale-downs and holds", seen)
	}
}

// asCheckMetrics checks watch's /metrics: the size the last decision kept,
// the two scale-downs, the failed queries.
func (s *asStack) asCheckMetrics(p *watchProc) {
	s.t.Helper()
	resp, err := p.request(http.DefaultClient, "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^infrakit_autoscale_desired_size\{group="web"\} 2$`),
		regexp.MustCompile(`(?m)^infrakit_autoscale_evaluations_total\{action="scale-down",group="web"\} 2$`),
		regexp.MustCompile(`(?m)^infrakit_autoscale_evaluations_total\{action="scale-up",group="web"\} [1-9]`),
		regexp.MustCompile(`(?m)^infrakit_autoscale_no_data_total\{check="rps",group="web"\} [1-9]`),
		regexp.MustCompile(`(?m)^infrakit_autoscale_metric_value\{check="rps",group="web"\} [0-9]`),
	} {
		if !want.Match(b) {
			s.t.Errorf("watch's /metrics has no line matching %s", want)
		}
	}
}

var asDescribeLine = regexp.MustCompile(`^  (\S+)  (hold|scale-up|scale-down) +(\d+) -> (\d+)  (rps = .*)$`)

// asCheckDescribe checks that group describe shows the bounds and the
// latest decisions the watch reports.
func (s *asStack) asCheckDescribe(ds *asDecisions) {
	s.t.Helper()
	res := s.ok("group", "describe", "web")
	ds.poll()
	lines := strings.Split(res.stdout, "\n")
	i := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "Autoscale: min 2, max 4, evaluated every 1s (watch pid ")
	})
	if i < 0 {
		s.t.Fatalf("group describe web shows no autoscale line:\n%s", res)
	}
	shown := 0
	for _, l := range lines[i+1:] {
		m := asDescribeLine.FindStringSubmatch(l)
		if m == nil {
			break
		}
		shown++
		if !slices.ContainsFunc(ds.all(), func(d asDecision) bool {
			return d.At.UTC().Format(time.RFC3339) == m[1] && fmt.Sprint(d.Current) == m[3] && fmt.Sprint(d.Desired) == m[4] && d.Reason == m[5]
		}) {
			s.t.Errorf("group describe shows %q, a decision /v1/status never showed", l)
		}
	}
	if shown != 5 {
		s.t.Errorf("group describe shows %d decisions, want the latest 5:\n%s", shown, res.stdout)
	}
}

// promPID is the PID of the test's Prometheus, found by the configuration
// file in its command line (promtest runs one per test, in a directory of
// its own).
func (s *asStack) promPID() int {
	s.t.Helper()
	want := "--config.file=" + filepath.Join(s.prom.Dir, "prometheus.yml")
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), want) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(f, "/proc/%d/cmdline", &pid); err == nil {
			return pid
		}
	}
	s.t.Fatalf("no process runs prometheus %s", want)
	return 0
}

func asLines(ds []asDecision) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  %v\n", d)
	}
	return b.String()
}
