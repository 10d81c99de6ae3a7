package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/haproxy/haproxytest"
	"github.com/infrakit/infrakit/plugins/prometheus/promtest"
)

// asStack is testdata/autoscale in a workdir with a real Prometheus of its
// own: the realStack helpers (records, live members, HAProxy, cleanup)
// over the autoscale stack, whose enrollment keeps prometheus/web.json,
// the file the Prometheus scrapes every second.
type asStack struct {
	*realStack
	prom *promtest.Server
}

// newAutoscaleStack starts Prometheus (the stack's validate and apply
// check the query with it), then copies testdata/autoscale into a new
// workdir with HAProxy on a free loopback port and the Prometheus address
// in infrakit.ivars, as a user sets a variable.
func newAutoscaleStack(t *testing.T) *asStack {
	t.Helper()
	realNeedHAProxy(t)
	promtest.Require(t)
	w := newWorkdir(t)
	w.copyStack("testdata/autoscale")
	s := &realStack{workdir: w, lbPort: haproxytest.FreePort(t)}
	b, err := os.ReadFile(filepath.Join(w.dir, "stack.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !realLBPort.Match(b) {
		t.Fatal("testdata/autoscale/stack.hcl: no lb_port = 18090 to replace")
	}
	w.writeFile("stack.hcl", realLBPort.ReplaceAllString(string(b), fmt.Sprintf("lb_port$1= %d", s.lbPort)))
	// Unix socket paths are at most 107 bytes: t.TempDir() may be too deep.
	if s.haproxyDir, err = os.MkdirTemp("", "ik-"); err != nil {
		t.Fatal(err)
	}
	for i, kv := range w.env {
		if strings.HasPrefix(kv, "PATH=") {
			w.env[i] = "PATH=" + binDir + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		}
	}
	w.env = append(w.env, "INFRAKIT_HAPROXY_DIR="+s.haproxyDir)
	t.Cleanup(s.cleanup)
	// Started after the cleanup above is registered, so stopped before it
	// runs: nothing scrapes the web servers while they are killed.
	prom := promtest.Start(t, promtest.Config{Files: []string{filepath.Join(w.dir, "prometheus", "web.json")}})
	w.writeFile("infrakit.ivars", fmt.Sprintf("prometheus_address = %q\n", prom.URL))
	return &asStack{realStack: s, prom: prom}
}

// scraped reports whether the Prometheus scrapes exactly members (by the
// infrakit_instance label the file_sd target carries), each at the port
// the process provider gave it, and found each up at its last scrape.
func (s *asStack) scraped(members []string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	targets, err := s.prom.Targets(ctx)
	if err != nil {
		return false, err.Error()
	}
	recs := s.records()
	var got []string
	for _, tg := range targets {
		id := string(tg.Labels["infrakit_instance"])
		got = append(got, id)
		if r, ok := recs[id]; !ok || string(tg.Labels["instance"]) != "127.0.0.1:"+fmt.Sprint(r.Port) {
			return false, fmt.Sprintf("target %s at %s is no live member's address", id, tg.Labels["instance"])
		}
		if tg.Health != "up" || tg.Labels["infrakit_group"] != "web" || tg.Labels["infrakit_stack"] != "shop" {
			return false, fmt.Sprintf("target %s: health %q, labels %v", id, tg.Health, tg.Labels)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, members) {
		return false, fmt.Sprintf("Prometheus scrapes %v, the members are %v", got, members)
	}
	return true, ""
}

// asDecision is one autoscale decision as GET /v1/status and the events
// show it, declared as a user's script would read it.
type asDecision struct {
	At          time.Time `json:"at"`
	Current     int       `json:"current"`
	Recommended int       `json:"recommended"`
	Desired     int       `json:"desired"`
	Limit       string    `json:"limit"`
	Reason      string    `json:"reason"`
	Checks      []struct {
		Check             string  `json:"check"`
		TargetPerInstance float64 `json:"target_per_instance"`
		Value             float64 `json:"value"`
		Empty             bool    `json:"empty"`
		Error             string  `json:"error"`
		Desired           *int    `json:"desired"`
		Problem           string  `json:"problem"`
	} `json:"checks"`
}

func (d asDecision) String() string {
	return fmt.Sprintf("%s %d -> %d (recommended %d, limit %q): %s", d.At.Format("15:04:05.000"), d.Current, d.Desired, d.Recommended, d.Limit, d.Reason)
}

// asStatus is the autoscale part of GET /v1/status.
type asStatus struct {
	Groups []struct {
		Name      string `json:"name"`
		Desired   int    `json:"desired"`
		Autoscale *struct {
			Min                       int          `json:"min"`
			Max                       int          `json:"max"`
			EvaluationIntervalSeconds float64      `json:"evaluation_interval_seconds"`
			Decisions                 []asDecision `json:"decisions"`
		} `json:"autoscale"`
	} `json:"groups"`
}

// asDecisions gathers every decision the watch's status shows while the
// test polls it (the status keeps the latest 10, one a second: polling
// more often than every 10 s misses none), by time.
type asDecisions struct {
	p  *watchProc
	by map[time.Time]asDecision
}

// poll reads the status and adds the decisions not seen yet.
func (a *asDecisions) poll() {
	a.p.t.Helper()
	var st asStatus
	a.p.get("/v1/status", &st)
	for _, g := range st.Groups {
		if g.Name != "web" || g.Autoscale == nil {
			continue
		}
		if g.Autoscale.Min != 2 || g.Autoscale.Max != 4 || g.Autoscale.EvaluationIntervalSeconds != 1 {
			a.p.t.Fatalf("/v1/status: autoscale min %d, max %d, interval %gs; the stack says 2, 4, 1s",
				g.Autoscale.Min, g.Autoscale.Max, g.Autoscale.EvaluationIntervalSeconds)
		}
		for _, d := range g.Autoscale.Decisions {
			a.by[d.At] = d
		}
	}
}

// all returns the decisions seen, oldest first.
func (a *asDecisions) all() []asDecision {
	out := make([]asDecision, 0, len(a.by))
	for _, d := range a.by {
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y asDecision) int { return x.At.Compare(y.At) })
	return out
}

// asLoad sends GET / through HAProxy at a steady rate from a few workers,
// each request on a new connection, and keeps every answer. It is bounded
// in count and in time: it stops after maxRequests requests or after d, whichever
// comes first, or when stopped.
type asLoad struct {
	stop chan struct{}
	halt sync.Once
	done sync.WaitGroup
	sent atomic.Int64
	mu   sync.Mutex
	all  []realAnswer
}

// asLoadWorkers send the requests: a slow answer on a loaded machine holds
// up one worker's share of the rate, not all of it.
const asLoadWorkers = 4

func (s *asStack) startLoad(perSecond, maxRequests int, d time.Duration) *asLoad {
	l := &asLoad{stop: make(chan struct{})}
	deadline := time.After(d)
	stopped := make(chan struct{})
	go func() { // the time bound
		select {
		case <-deadline:
			l.end()
		case <-stopped:
		}
	}()
	every := time.Duration(asLoadWorkers) * time.Second / time.Duration(perSecond)
	for range asLoadWorkers {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			tick := time.NewTicker(every) // pacing only: the rate of the load
			defer tick.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				if l.sent.Add(1) > int64(maxRequests) {
					return
				}
				a := s.get()
				l.mu.Lock()
				l.all = append(l.all, a)
				l.mu.Unlock()
			}
		}()
	}
	s.t.Cleanup(func() {
		l.end()
		close(stopped)
	})
	return l
}

// end stops the workers and returns every answer.
func (l *asLoad) end() []realAnswer {
	l.halt.Do(func() { close(l.stop) })
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// answered is how many requests have been answered or have failed.
func (l *asLoad) answered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}
