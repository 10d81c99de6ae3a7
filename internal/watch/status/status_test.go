package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from the current output")

func member(id string, st instance.State, h flavor.Health) group.Member {
	return group.Member{ID: instance.ID(id), State: st, Health: h}
}

func size(n int) *int { return &n }

func TestCountMembers(t *testing.T) {
	running, pending, terminating := instance.StateRunning, instance.StatePending, instance.StateTerminating
	healthy, unhealthy, unknown := flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown
	tests := []struct {
		name    string
		members []group.Member
		live    int
		pending int
		term    int
		health  HealthCounts
		by      map[StateHealth]int
	}{
		{name: "none", by: map[StateHealth]int{}},
		{
			name: "mixed",
			members: []group.Member{
				member("a", running, healthy), member("b", running, unhealthy), member("c", pending, unknown),
				member("d", terminating, healthy), member("e", running, healthy),
			},
			live: 4, pending: 1, term: 1,
			health: HealthCounts{Healthy: 2, Unhealthy: 1, Unknown: 1},
			by: map[StateHealth]int{
				{running, healthy}: 2, {running, unhealthy}: 1, {pending, unknown}: 1, {terminating, healthy}: 1,
			},
		},
		{
			name:    "empty state is running, empty health unknown",
			members: []group.Member{member("a", "", "")},
			live:    1, health: HealthCounts{Unknown: 1},
			by: map[StateHealth]int{{running, unknown}: 1},
		},
		{
			name:    "an ID listed twice is one instance",
			members: []group.Member{member("a", running, healthy), member("a", terminating, unknown)},
			live:    1, health: HealthCounts{Healthy: 1},
			by: map[StateHealth]int{{running, healthy}: 1},
		},
		{
			name:    "an odd state is live and kept as reported",
			members: []group.Member{member("a", "stopped", healthy)},
			live:    1, health: HealthCounts{Healthy: 1},
			by: map[StateHealth]int{{"stopped", healthy}: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := CountMembers(tt.members)
			if c.Live != tt.live || c.Pending != tt.pending || c.Terminating != tt.term || c.Health != tt.health {
				t.Errorf("CountMembers = live %d pending %d terminating %d health %+v; want %d %d %d %+v",
					c.Live, c.Pending, c.Terminating, c.Health, tt.live, tt.pending, tt.term, tt.health)
			}
			if len(c.ByStateHealth) != len(tt.by) {
				t.Errorf("ByStateHealth = %v, want %v", c.ByStateHealth, tt.by)
			}
			for k, v := range tt.by {
				if c.ByStateHealth[k] != v {
					t.Errorf("ByStateHealth[%v] = %d, want %d", k, c.ByStateHealth[k], v)
				}
			}
		})
	}
}

// Whatever the members, the counts agree with each other: health adds up to
// the live members, and every distinct member is in exactly one series.
func TestCountMembersAddsUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		members := rapid.SliceOf(rapid.Custom(func(t *rapid.T) group.Member {
			return member(
				rapid.StringMatching(`[a-f]`).Draw(t, "id"),
				instance.State(rapid.SampledFrom([]string{"", "pending", "running", "terminating", "odd"}).Draw(t, "state")),
				flavor.Health(rapid.SampledFrom([]string{"", "healthy", "unhealthy", "unknown", "odd"}).Draw(t, "health")),
			)
		})).Draw(t, "members")
		c := CountMembers(members)
		distinct := map[instance.ID]bool{}
		for _, m := range members {
			distinct[m.ID] = true
		}
		if c.Live+c.Terminating != len(distinct) {
			t.Fatalf("live %d + terminating %d != %d distinct members", c.Live, c.Terminating, len(distinct))
		}
		if h := c.Health; h.Healthy+h.Unhealthy+h.Unknown != c.Live {
			t.Fatalf("health %+v does not add up to live %d", h, c.Live)
		}
		sum := 0
		for _, n := range c.ByStateHealth {
			sum += n
		}
		if sum != len(distinct) {
			t.Fatalf("series add up to %d, want %d", sum, len(distinct))
		}
		if c.Pending > c.Live {
			t.Fatalf("pending %d > live %d", c.Pending, c.Live)
		}
	})
}

func TestDesiredCount(t *testing.T) {
	tests := []struct {
		name string
		d    group.Desired
		want int
	}{
		{"cattle", group.Desired{Size: size(5)}, 5},
		{"cattle of zero", group.Desired{Size: size(0)}, 0},
		{"negative size is zero", group.Desired{Size: size(-2)}, 0},
		{"pets", group.Desired{LogicalIDs: []string{"10.0.0.1", "10.0.0.2"}}, 2},
		{"pets, duplicates and empties ignored", group.Desired{LogicalIDs: []string{"a", "", "a", "b"}}, 2},
	}
	for _, tt := range tests {
		if got := DesiredCount(tt.d); got != tt.want {
			t.Errorf("%s: DesiredCount = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// fixture is a Recorder with two groups, two providers, a few events and
// two passes, all at fixed times.
func fixture(t *testing.T) (*Recorder, *clock) {
	t.Helper()
	clk := newClock()
	r := NewRecorder(Options{Version: "0.1.0", Identity: "host-1/4242", Now: clk.Now})
	r.SetProvider("simulator", 1001)
	r.SetProvider("vanilla", 1002)
	clk.Advance(10 * time.Second)

	passStart := clk.Now()
	r.SetGroup(GroupReport{
		Name:    "miners",
		Desired: group.Desired{Size: size(5)},
		Members: []group.Member{
			member("i-1", instance.StateRunning, flavor.HealthHealthy),
			member("i-2", instance.StateRunning, flavor.HealthHealthy),
			member("i-3", instance.StateRunning, flavor.HealthUnhealthy),
			member("i-4", instance.StatePending, flavor.HealthUnknown),
			member("i-5", instance.StateTerminating, flavor.HealthUnhealthy),
		},
		Expected: 1,
		Rolling:  Rolling{Outdated: 2, InFlight: 1, Wait: ""},
		Start:    passStart,
		Duration: 120 * time.Millisecond,
	})
	r.SetGroup(GroupReport{
		Name:           "db",
		Desired:        group.Desired{LogicalIDs: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		Members:        []group.Member{member("p-1", instance.StateRunning, flavor.HealthUnhealthy)},
		Braked:         true,
		BrakeReason:    "2 of 3 instances look dead",
		BrakeReleaseAt: passStart.Add(30 * time.Second),
		Start:          passStart,
		Duration:       80 * time.Millisecond,
		Err:            errors.New(`group "db": provision: capacity exhausted`),
	})
	r.Replacement("miners", "i-0", group.ReasonUnhealthy, "unhealthy past the 30s grace")
	r.ProviderError("simulator", "Provision", errors.New(`provider "simulator": Provision: capacity exhausted`))
	clk.Advance(time.Second)
	r.ProviderRestart("vanilla", 1003, errors.New("process exited: signal: killed"))
	r.ObservePass(passStart, 250*time.Millisecond, errors.New(`group "db": provision: capacity exhausted`))
	clk.Advance(4 * time.Second)
	return r, clk
}

// The status document keeps its documented shape (testdata/status.json,
// which website/watch.md shows). Run with -update after a deliberate change.
func TestStatusGolden(t *testing.T) {
	r, _ := fixture(t)
	got, err := json.MarshalIndent(r.Status(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status.json", got)

	es, err := json.MarshalIndent(r.Events(EventQuery{}), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "events.json", es)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the current output:\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

// Before anything happened every field is still there, times are null and
// lists are empty arrays, never null.
func TestStatusEmptyShape(t *testing.T) {
	clk := newClock()
	r := NewRecorder(Options{Now: clk.Now})
	b, err := json.Marshal(r.Status())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "started", "uptime_seconds", "leader", "identity", "last_pass",
		"last_pass_duration_seconds", "last_error", "passes", "groups", "providers"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status lacks %q: %s", k, b)
		}
	}
	if m["last_pass"] != nil {
		t.Errorf("last_pass = %v before any pass, want null", m["last_pass"])
	}
	if g, ok := m["groups"].([]any); !ok || len(g) != 0 {
		t.Errorf("groups = %#v, want []", m["groups"])
	}
	if p, ok := m["providers"].([]any); !ok || len(p) != 0 {
		t.Errorf("providers = %#v, want []", m["providers"])
	}
	if m["leader"] != true {
		t.Errorf("a lone watch is its own leader; got leader = %v", m["leader"])
	}
	if id, _ := m["identity"].(string); id == "" {
		t.Errorf("default identity is empty")
	}
	if ev := r.Events(EventQuery{}); len(ev) != 0 {
		t.Errorf("events before anything happened: %v", ev)
	}
}

func TestBrakeTransitions(t *testing.T) {
	clk := newClock()
	r := NewRecorder(Options{Now: clk.Now})
	rep := GroupReport{Name: "g", Desired: group.Desired{Size: size(4)}}

	r.SetGroup(rep)
	engagedAt := clk.Now()
	rep.Braked, rep.BrakeReason = true, "3 of 4 look dead"
	r.SetGroup(rep)
	clk.Advance(time.Minute)
	rep.BrakeReason = "4 of 4 look dead"
	r.SetGroup(rep) // still engaged: no new event, Since kept, reason updated
	g, _ := r.Group("g")
	if !g.Brake.Engaged || g.Brake.Reason != "4 of 4 look dead" || g.Brake.Since == nil || !g.Brake.Since.Equal(engagedAt) {
		t.Errorf("brake = %+v, want engaged since %v with the latest reason", g.Brake, engagedAt)
	}
	release := clk.Now().Add(30 * time.Second)
	rep.BrakeReleaseAt = release
	r.SetGroup(rep)
	if g, _ := r.Group("g"); g.Brake.ReleaseAt == nil || !g.Brake.ReleaseAt.Equal(release) {
		t.Errorf("brake = %+v, want release_at %v", g.Brake, release)
	}
	rep.Braked, rep.BrakeReason, rep.BrakeReleaseAt, rep.BrakeRateLimit = false, "", time.Time{}, 2
	clk.Advance(time.Minute)
	r.SetGroup(rep)
	g, _ = r.Group("g")
	if g.Brake.Engaged || g.Brake.Since != nil || g.Brake.Reason != "" || g.Brake.ReleaseAt != nil || g.Brake.RateLimit != 2 {
		t.Errorf("released brake = %+v, want zero but its rate limit of 2", g.Brake)
	}
	if n := counterValue(t, r, MetricBrakeEngaged, "g"); n != 1 {
		t.Errorf("%s = %v, want 1 engagement", MetricBrakeEngaged, n)
	}
	var kinds []EventKind
	for _, e := range r.Events(EventQuery{}) {
		if e.Group != "g" {
			t.Errorf("brake event without its group: %+v", e)
		}
		kinds = append(kinds, e.Kind)
	}
	if evs := r.Events(EventQuery{}); len(evs) == 2 && !strings.Contains(evs[1].Message, "at most 2") {
		t.Errorf("release event %q does not give the rate limit", evs[1].Message)
	}
	if len(kinds) != 2 || kinds[0] != EventBrake || kinds[1] != EventBrakeReleased {
		t.Errorf("events = %v, want [brake brake-released]", kinds)
	}
}

func TestGroupLifecycle(t *testing.T) {
	clk := newClock()
	r := NewRecorder(Options{Now: clk.Now})
	if _, ok := r.Group("g"); ok {
		t.Fatal("a group no pass reported is known")
	}
	r.SetGroup(GroupReport{Name: "g", Desired: group.Desired{Size: size(1)}, Duration: 2 * time.Second,
		Err: errors.New("boom")})
	g, ok := r.Group("g")
	if !ok || g.LastError != "boom" || g.LastPass == nil || !g.LastPass.Equal(clk.Now().Add(-2*time.Second)) {
		t.Errorf("group = %+v; want last_error boom and last_pass now-2s", g)
	}
	// A later pass that succeeds clears the group's error.
	r.SetGroup(GroupReport{Name: "g", Desired: group.Desired{Size: size(1)}})
	if g, _ = r.Group("g"); g.LastError != "" {
		t.Errorf("last_error = %q after a good pass", g.LastError)
	}
	r.RemoveGroup("g")
	if _, ok := r.Group("g"); ok || len(r.Status().Groups) != 0 {
		t.Error("a removed group is still reported")
	}
}

func TestLeaderAndProviders(t *testing.T) {
	clk := newClock()
	r := NewRecorder(Options{Identity: "a/1", Now: clk.Now})
	r.SetLeader(true, "") // no change: no event
	r.SetLeader(false, "a/1")
	r.SetLeader(false, "a/1")
	s := r.Status()
	if s.Leader || s.Identity != "a/1" {
		t.Errorf("leader %v identity %q, want false a/1", s.Leader, s.Identity)
	}
	r.SetLeader(true, "")
	ev := r.Events(EventQuery{})
	if len(ev) != 2 || ev[0].Kind != EventLeader || ev[1].Kind != EventLeader {
		t.Errorf("leader events = %+v, want one per change", ev)
	}

	r.SetProvider("simulator", 10)
	r.ProviderRestart("simulator", 11, nil)
	r.ProviderRestart("simulator", 12, errors.New("hung"))
	r.ProviderError("simulator", "DescribeInstances", nil)
	p := r.Status().Providers[0]
	if p.PID != 12 || p.Restarts != 2 || p.LastError != "DescribeInstances failed" || p.LastErrorAt == nil {
		t.Errorf("provider = %+v", p)
	}
	r.RemoveProvider("simulator")
	if len(r.Status().Providers) != 0 {
		t.Error("a removed provider is still reported")
	}
}

// A Status snapshot is a copy: later updates do not show through it.
func TestStatusIsASnapshot(t *testing.T) {
	clk := newClock()
	r := NewRecorder(Options{Now: clk.Now})
	r.SetGroup(GroupReport{Name: "g", Desired: group.Desired{Size: size(1)}})
	r.SetProvider("p", 1)
	s := r.Status()
	r.SetGroup(GroupReport{Name: "g", Desired: group.Desired{Size: size(9)}})
	r.ProviderRestart("p", 2, nil)
	if s.Groups[0].Desired != 1 || s.Providers[0].PID != 1 {
		t.Errorf("snapshot changed after the fact: %+v %+v", s.Groups[0], s.Providers[0])
	}
	// Writing through a snapshot's times does not reach the Recorder.
	*r.Status().Groups[0].LastPass = time.Time{}
	if g, _ := r.Group("g"); g.LastPass.IsZero() {
		t.Error("a snapshot shares its times with the Recorder")
	}
}

// counterValue is the value of the named counter's series of group g.
func counterValue(t *testing.T, r *Recorder, name, g string) float64 {
	t.Helper()
	mfs, err := r.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" && l.GetValue() == g {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{group=%q}", name, g)
	return 0
}
