package autoscale

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/metrics"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// issuePolicy is the example of issue #17.
var issuePolicy = Policy{
	Min: 2, Max: 12, Cooldown: 30 * time.Second,
	ScaleDown: Step{Stabilization: 2 * time.Minute, MaxStep: 2},
	ScaleUp:   Step{MaxStep: 4},
}

func rps(v float64) Reading { return Reading{Check: "rps", TargetPerInstance: 50, Value: v} }

func ago(d time.Duration, desired int) Recommendation {
	return Recommendation{At: t0.Add(-d), Desired: desired}
}

type decideCase struct {
	name     string
	policy   Policy
	current  int
	readings []Reading
	history  History
	desired  int
	limit    Limit
	reason   string
}

var openPolicy = Policy{Min: 0, Max: 100}

// decideCases: each rule alone, then with the others; all at t0.
var decideCases = []decideCase{
	{"ceil of value over target", openPolicy, 2, []Reading{rps(130)}, History{}, 3, LimitNone,
		"rps = 130 (target 50 per instance) wants 3: size 2 -> 3"},
	{"an exact quotient is not rounded up", openPolicy, 3, []Reading{rps(100)}, History{}, 2, LimitNone,
		"rps = 100 (target 50 per instance) wants 2: size 3 -> 2"},
	{"float error is not rounded up", openPolicy, 1,
		[]Reading{{Check: "q", TargetPerInstance: 0.1, Value: 0.1 + 0.2}}, History{}, 3, LimitNone,
		"q = 0.3 (target 0.1 per instance) wants 3: size 1 -> 3"},
	{"no change", openPolicy, 3, []Reading{rps(101)}, History{}, 3, LimitNone,
		"rps = 101 (target 50 per instance) wants 3: size kept at 3"},
	{"the largest check wins", issuePolicy, 2,
		[]Reading{rps(130), {Check: "cpu", TargetPerInstance: 0.5, Value: 4.5}}, History{}, 6, LimitMaxStep,
		"rps = 130 (target 50 per instance) wants 3, cpu = 4.5 (target 0.5 per instance) wants 9; " +
			"scale_up.max_step 4 allows 6: size 2 -> 6"},
	{"scale_up.max_step", Policy{Min: 1, Max: 5, ScaleUp: Step{MaxStep: 1}}, 1, []Reading{rps(130)}, History{}, 2,
		LimitMaxStep, "rps = 130 (target 50 per instance) wants 3; scale_up.max_step 1 allows 2: size 1 -> 2"},
	{"scale_down.max_step", issuePolicy, 9, []Reading{rps(120)}, History{}, 7, LimitMaxStep,
		"rps = 120 (target 50 per instance) wants 3; scale_down.max_step 2 allows 7: size 9 -> 7"},
	{"zero load wants zero, min holds", issuePolicy, 3, []Reading{rps(0)}, History{}, 2, LimitMin,
		"rps = 0 (target 50 per instance) wants 0; scale_down.max_step 2 allows 1; bounded by min 2: size 3 -> 2"},
	{"max holds after the step", issuePolicy, 10, []Reading{rps(1000)}, History{}, 12, LimitMax,
		"rps = 1000 (target 50 per instance) wants 20; scale_up.max_step 4 allows 14; bounded by max 12: size 10 -> 12"},
	{"max already reached", issuePolicy, 12, []Reading{rps(1000)}, History{}, 12, LimitMax,
		"rps = 1000 (target 50 per instance) wants 20; scale_up.max_step 4 allows 16; bounded by max 12: size kept at 12"},

	{"empty keeps the size", issuePolicy, 4, []Reading{{Check: "rps", TargetPerInstance: 50, Empty: true}},
		History{}, 4, LimitNoData, `check "rps" returned no data: size kept at 4`},
	{"a failed query keeps the size", issuePolicy, 4,
		[]Reading{rps(500), {Check: "cpu", TargetPerInstance: 1, Error: "dial tcp 127.0.0.1:9090: connection refused"}},
		History{}, 4, LimitNoData,
		`check "cpu" query failed (dial tcp 127.0.0.1:9090: connection refused): size kept at 4`},
	{"NaN keeps the size", issuePolicy, 4, []Reading{rps(math.NaN())}, History{}, 4, LimitNoData,
		`check "rps" returned NaN: size kept at 4`},
	{"Inf keeps the size", issuePolicy, 4, []Reading{rps(math.Inf(1))}, History{}, 4, LimitNoData,
		`check "rps" returned +Inf: size kept at 4`},
	{"a negative value keeps the size", issuePolicy, 4, []Reading{rps(-3)}, History{}, 4, LimitNoData,
		`check "rps" returned a negative value (-3): size kept at 4`},
	{"a target of 0 keeps the size", issuePolicy, 4, []Reading{{Check: "rps", Value: 10}}, History{}, 4, LimitNoData,
		`check "rps" has no positive target_per_instance (0): size kept at 4`},
	{"no checks keep the size", issuePolicy, 4, nil, History{}, 4, LimitNoData,
		"no checks to evaluate: size kept at 4"},
	{"every missing check is named", issuePolicy, 4,
		[]Reading{{Check: "a", Empty: true}, rps(1), {Check: "b", Error: "timeout"}}, History{}, 4, LimitNoData,
		`check "a" returned no data; check "b" query failed (timeout): size kept at 4`},

	{"below min without data", issuePolicy, 1, []Reading{{Check: "rps", Empty: true}}, History{}, 2, LimitMin,
		`check "rps" returned no data; current 1 is below min 2: size 1 -> 2`},
	{"above max in cooldown", issuePolicy, 15, []Reading{rps(10)}, History{LastChange: t0.Add(-time.Second)}, 12,
		LimitMax, "rps = 10 (target 50 per instance) wants 1; current 15 is above max 12: size 15 -> 12"},
	{"below min by more than a step", issuePolicy, 0, []Reading{rps(1000)}, History{}, 2, LimitMin,
		"rps = 1000 (target 50 per instance) wants 20; current 0 is below min 2: size 0 -> 2"},

	{"cooldown keeps a change", issuePolicy, 5, []Reading{rps(350)}, History{LastChange: t0.Add(-18 * time.Second)},
		5, LimitCooldown, "rps = 350 (target 50 per instance) wants 7; in cooldown for another 12s: size kept at 5"},
	{"cooldown rounds the wait up", issuePolicy, 5, []Reading{rps(350)},
		History{LastChange: t0.Add(-18*time.Second - time.Millisecond)}, 5, LimitCooldown,
		"rps = 350 (target 50 per instance) wants 7; in cooldown for another 12s: size kept at 5"},
	{"cooldown is not named without a change", issuePolicy, 5, []Reading{rps(250)},
		History{LastChange: t0.Add(-time.Second)}, 5, LimitNone,
		"rps = 250 (target 50 per instance) wants 5: size kept at 5"},
	{"cooldown over", issuePolicy, 5, []Reading{rps(350)}, History{LastChange: t0.Add(-30 * time.Second)},
		7, LimitNone, "rps = 350 (target 50 per instance) wants 7: size 5 -> 7"},
	{"cooldown not over though max holds", issuePolicy, 12, []Reading{rps(1000)},
		History{LastChange: t0.Add(-time.Second)}, 12, LimitMax,
		"rps = 1000 (target 50 per instance) wants 20; scale_up.max_step 4 allows 16; bounded by max 12: size kept at 12"},

	{"scale-down held by the window", issuePolicy, 5, []Reading{rps(100)},
		History{Recommendations: []Recommendation{ago(time.Minute, 5)}}, 5, LimitStabilization,
		"rps = 100 (target 50 per instance) wants 2; scale-down held at 5 by the highest recommendation in the last 2m0s: size kept at 5"},
	{"scale-down to the window's highest", issuePolicy, 5, []Reading{rps(100)},
		History{Recommendations: []Recommendation{ago(150*time.Second, 5), ago(30*time.Second, 4)}}, 4,
		LimitStabilization,
		"rps = 100 (target 50 per instance) wants 2; scale-down held at 4 by the highest recommendation in the last 2m0s: size 5 -> 4"},
	{"a recommendation as old as the window is out", issuePolicy, 5, []Reading{rps(100)},
		History{Recommendations: []Recommendation{ago(2*time.Minute, 5)}}, 3, LimitMaxStep,
		"rps = 100 (target 50 per instance) wants 2; scale_down.max_step 2 allows 3: size 5 -> 3"},
	{"scale-up held by its window", Policy{Min: 1, Max: 10, ScaleUp: Step{Stabilization: time.Minute}}, 2,
		[]Reading{rps(300)}, History{Recommendations: []Recommendation{ago(30*time.Second, 3), ago(90*time.Second, 1)}},
		3, LimitStabilization,
		"rps = 300 (target 50 per instance) wants 6; scale-up held at 3 by the lowest recommendation in the last 1m0s: size 2 -> 3"},
	{"scale-up without a window ignores the history", issuePolicy, 2, []Reading{rps(300)},
		History{Recommendations: []Recommendation{ago(10*time.Second, 2)}}, 6, LimitNone,
		"rps = 300 (target 50 per instance) wants 6: size 2 -> 6"},
	{"stabilization then max_step", issuePolicy, 10, []Reading{rps(0)},
		History{Recommendations: []Recommendation{ago(time.Minute, 7)}}, 8, LimitMaxStep,
		"rps = 0 (target 50 per instance) wants 0; scale-down held at 7 by the highest recommendation in the last 2m0s; " +
			"scale_down.max_step 2 allows 8: size 10 -> 8"},

	{"a max below min is min", Policy{Min: 3, Max: 1}, 5, []Reading{rps(0)}, History{}, 3, LimitMax,
		"rps = 0 (target 50 per instance) wants 0; current 5 is above max 3: size 5 -> 3"},
	{"negative steps are unbounded", Policy{Min: 1, Max: 50, ScaleUp: Step{MaxStep: -1}}, 1,
		[]Reading{rps(1000)}, History{}, 20, LimitNone, "rps = 1000 (target 50 per instance) wants 20: size 1 -> 20"},
}

func TestDecide(t *testing.T) {
	for _, tc := range decideCases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{Policy: tc.policy, Current: tc.current, Now: t0, Readings: tc.readings, History: tc.history})
			if d.Desired != tc.desired || d.Limit != tc.limit || d.Reason != tc.reason {
				t.Fatalf("Decide = %d, %q, %q\nwant     %d, %q, %q", d.Desired, d.Limit, d.Reason,
					tc.desired, tc.limit, tc.reason)
			}
			if d.Current != tc.current || !d.At.Equal(t0) || len(d.Checks) != len(tc.readings) {
				t.Fatalf("decision echoes %d at %v with %d checks", d.Current, d.At, len(d.Checks))
			}
			wantLast := tc.history.LastChange
			if d.Changes() {
				wantLast = t0
			}
			if !d.History.LastChange.Equal(wantLast) {
				t.Fatalf("LastChange = %v, want %v", d.History.LastChange, wantLast)
			}
		})
	}
}

func TestDecideHistory(t *testing.T) {
	old := []Recommendation{ago(3*time.Minute, 9), ago(100*time.Second, 6), ago(80*time.Second, 4), ago(time.Minute, 6)}
	in := Input{Policy: issuePolicy, Current: 6, Now: t0, Readings: []Reading{rps(250)},
		History: History{Recommendations: old}}
	d := Decide(in)
	// 9 is older than the window; the 6 of 100s ago is stood for by the one of 60s ago.
	want := []Recommendation{ago(80*time.Second, 4), ago(time.Minute, 6), ago(0, 5)}
	if !reflect.DeepEqual(d.History.Recommendations, want) {
		t.Fatalf("history = %v, want %v", d.History.Recommendations, want)
	}

	in.Readings = []Reading{{Check: "rps", TargetPerInstance: 50, Empty: true}}
	d = Decide(in)
	if want := want[:2]; !reflect.DeepEqual(d.History.Recommendations, want) {
		t.Fatalf("no data: history = %v, want %v (nothing recorded)", d.History.Recommendations, want)
	}

	in.Readings = []Reading{rps(500)}
	in.History.LastChange = t0.Add(-10 * time.Second)
	d = Decide(in)
	if d.Limit != LimitCooldown || d.History.Recommendations[len(d.History.Recommendations)-1] != ago(0, 10) {
		t.Fatalf("cooldown: %q, history %v: want the recommendation recorded", d.Limit, d.History.Recommendations)
	}
}

func TestDecideHistoryBounded(t *testing.T) {
	var old []Recommendation
	for i := range 2 * maxHistory {
		old = append(old, Recommendation{At: t0.Add(-time.Minute + time.Duration(i)*time.Millisecond), Desired: 100 + i})
	}
	d := Decide(Input{Policy: issuePolicy, Current: 2, Now: t0, Readings: []Reading{rps(100)},
		History: History{Recommendations: old}})
	recs := d.History.Recommendations
	if len(recs) != maxHistory || recs[len(recs)-1] != ago(0, 2) || recs[0] != old[len(old)-maxHistory+1] {
		t.Fatalf("history of %d from %v to %v: want the %d latest", len(recs), recs[0], recs[len(recs)-1], maxHistory)
	}
}

func TestDecideCheckResults(t *testing.T) {
	d := Decide(Input{Policy: issuePolicy, Current: 2, Now: t0,
		Readings: []Reading{rps(130), {Check: "cpu", TargetPerInstance: 1, Empty: true}}})
	if len(d.Checks) != 2 || d.Checks[0].Desired == nil || *d.Checks[0].Desired != 3 || d.Checks[0].Problem != "" {
		t.Fatalf("rps check = %+v, want desired 3", d.Checks[0])
	}
	if d.Checks[1].Desired != nil || d.Checks[1].Problem != "returned no data" {
		t.Fatalf("cpu check = %+v, want no desired and its problem", d.Checks[1])
	}
	if d.Recommended != 2 {
		t.Fatalf("Recommended = %d, want the current size without data", d.Recommended)
	}
}

// TestIssueExample runs the issue's policy through a load that rises past
// max and stops: the group grows by max_step per cooldown, holds for the
// stabilization window after the last high recommendation, then shrinks
// by max_step per cooldown back to min.
func TestIssueExample(t *testing.T) {
	steps := []struct {
		at      int // seconds after t0, one evaluation every 10s
		rps     float64
		desired int
		limit   Limit
	}{
		{0, 600, 6, LimitMaxStep}, {10, 600, 6, LimitCooldown}, {20, 600, 6, LimitCooldown},
		{30, 600, 10, LimitMaxStep}, {40, 600, 10, LimitCooldown}, {50, 600, 10, LimitCooldown},
		{60, 600, 12, LimitNone}, {70, 0, 12, LimitStabilization}, {170, 0, 12, LimitStabilization},
		{180, 0, 10, LimitMaxStep}, {190, 0, 10, LimitCooldown}, {210, 0, 8, LimitMaxStep},
		{240, 0, 6, LimitMaxStep}, {270, 0, 4, LimitMaxStep}, {300, 0, 2, LimitMaxStep},
		{310, 0, 2, LimitMin}, {400, 0, 2, LimitMin},
	}
	current, h := 2, History{}
	for at := 0; at <= 400; at += 10 {
		now := t0.Add(time.Duration(at) * time.Second)
		load := 0.0
		if at <= 60 {
			load = 600
		}
		d := Decide(Input{Policy: issuePolicy, Current: current, Now: now, Readings: []Reading{rps(load)}, History: h})
		for _, s := range steps {
			if s.at == at && (d.Desired != s.desired || d.Limit != s.limit) {
				t.Fatalf("at %ds: %d (%q), want %d (%q): %s", at, d.Desired, d.Limit, s.desired, s.limit, d.Reason)
			}
		}
		current, h = d.Desired, d.History
	}
}

func TestPolicyFrom(t *testing.T) {
	a := config.DefaultAutoscale()
	a.Min, a.Max = 2, 12
	a.ScaleDown.Stabilization, a.ScaleDown.MaxStep = config.Duration(2*time.Minute), 2
	a.ScaleUp.MaxStep = 4
	if got := PolicyFrom(&a); got != issuePolicy {
		t.Fatalf("PolicyFrom = %+v, want %+v", got, issuePolicy)
	}
	if got := PolicyFrom(nil); got != (Policy{}) {
		t.Fatalf("PolicyFrom(nil) = %+v", got)
	}
}

func TestReadingFrom(t *testing.T) {
	c := config.Check{Name: "rps", TargetPerInstance: 50}
	for _, tc := range []struct {
		sample metrics.Sample
		err    error
		want   Reading
	}{
		{metrics.Sample{Value: 130}, nil, rps(130)},
		{metrics.Sample{Empty: true}, nil, Reading{Check: "rps", TargetPerInstance: 50, Empty: true}},
		{metrics.Sample{Value: 1}, errors.New("boom"), Reading{Check: "rps", TargetPerInstance: 50, Error: "boom"}},
	} {
		if got := ReadingFrom(c, tc.sample, tc.err); got != tc.want {
			t.Errorf("ReadingFrom(%+v, %v) = %+v, want %+v", tc.sample, tc.err, got, tc.want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 130: "130", 0.5: "0.5", 123.456789: "123.457", 52428800: "52428800",
		1234567.5: "1234568", 0.0123456789: "0.0123457", 1e-5: "1e-05", 1e20: "1e+20", -3: "-3",
	} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
