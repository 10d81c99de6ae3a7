package status

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infrakit/infrakit/internal/autoscale"
)

// Every decision reaches the status (the latest KeepDecisions) and the
// metrics; the event ring gets those that change something, not a hold
// that repeats the one before.
func TestAutoscaled(t *testing.T) {
	r := NewRecorder(Options{Version: "test"})
	p := AutoscalePolicy{Min: 2, Max: 12, EvaluationInterval: 10 * time.Second}
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	want := 3
	up := autoscale.Decision{At: at, Current: 2, Recommended: 3, Desired: 3, Reason: "rps = 130 (target 50 per instance) wants 3: size 2 -> 3",
		Checks: []autoscale.CheckResult{{Reading: autoscale.Reading{Check: "rps", TargetPerInstance: 50, Value: 130}, Desired: &want}}}
	hold := autoscale.Decision{At: at.Add(10 * time.Second), Current: 3, Recommended: 3, Desired: 3, Reason: "rps = 140 wants 3: size kept at 3",
		Checks: []autoscale.CheckResult{{Reading: autoscale.Reading{Check: "rps", TargetPerInstance: 50, Value: 140}, Desired: &want}}}
	if !r.Autoscaled("web", p, up) || !r.Autoscaled("web", p, hold) {
		t.Fatal("a scale-up and a first hold must be events")
	}
	for i := range 12 {
		h := hold
		h.At = hold.At.Add(time.Duration(i+1) * 10 * time.Second)
		if r.Autoscaled("web", p, h) {
			t.Fatalf("hold %d repeats the one before, yet was an event", i)
		}
	}
	evs := r.Events(EventQuery{})
	if len(evs) != 2 || evs[0].Kind != EventAutoscale || evs[0].Reason != ActionScaleUp || evs[0].Autoscale == nil ||
		evs[0].Message != "size 2 -> 3: "+up.Reason || evs[1].Reason != ActionHold || !strings.HasPrefix(evs[1].Message, "size kept at 3: ") {
		t.Fatalf("events: %+v", evs)
	}
	g, ok := r.Group("web")
	if !ok || g.Autoscale == nil || len(g.Autoscale.Decisions) != KeepDecisions || g.Autoscale.Min != 2 || g.Autoscale.EvaluationIntervalSeconds != 10 {
		t.Fatalf("status: %+v", g.Autoscale)
	}
	// A pass's report keeps the autoscaler's part.
	r.SetGroup(GroupReport{Name: "web"})
	if g, _ := r.Group("web"); g.Autoscale == nil {
		t.Fatal("a pass's report dropped the autoscale status")
	}
	if v := testutil.ToFloat64(r.metrics.autoscaleEvaluations.WithLabelValues("web", ActionHold)); v != 13 {
		t.Errorf("hold evaluations = %v, want 13", v)
	}
	if v := testutil.ToFloat64(r.metrics.autoscaleValue.WithLabelValues("web", "rps")); v != 140 {
		t.Errorf("metric value = %v, want 140", v)
	}
	r.RemoveGroup("web")
	if n := testutil.CollectAndCount(r.metrics.autoscaleDesired); n != 0 {
		t.Errorf("%d desired-size series left after the group went", n)
	}
}
