package autoscale

import (
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func drawPolicy(t *rapid.T) Policy {
	lo := rapid.IntRange(0, 5).Draw(t, "min")
	seconds := func(label string, most int) time.Duration {
		return time.Duration(rapid.IntRange(0, most).Draw(t, label)) * time.Second
	}
	return Policy{
		Min:       lo,
		Max:       lo + rapid.IntRange(0, 20).Draw(t, "span"),
		Cooldown:  seconds("cooldown", 60),
		ScaleUp:   Step{Stabilization: seconds("up.stabilization", 120), MaxStep: rapid.IntRange(0, 5).Draw(t, "up.max_step")},
		ScaleDown: Step{Stabilization: seconds("down.stabilization", 180), MaxStep: rapid.IntRange(0, 5).Draw(t, "down.max_step")},
	}
}

// drawReadings draws one to three checks, now and then without a value.
func drawReadings(t *rapid.T) []Reading {
	n := rapid.IntRange(1, 3).Draw(t, "checks")
	rs := make([]Reading, n)
	for i := range rs {
		r := Reading{Check: string(rune('a' + i)), TargetPerInstance: rapid.SampledFrom([]float64{0.5, 1, 10, 50}).Draw(t, "target")}
		switch rapid.IntRange(0, 29).Draw(t, "kind") {
		case 0:
			r.Empty = true
		case 1:
			r.Error = "connection refused"
		case 2:
			r.Value = rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1)}).Draw(t, "nonfinite")
		case 3:
			r.Value = -rapid.Float64Range(0.001, 100).Draw(t, "negative")
		default:
			r.Value = rapid.Float64Range(0, 20*r.TargetPerInstance).Draw(t, "value")
		}
		rs[i] = r
	}
	return rs
}

func hasValues(rs []Reading) bool {
	for _, r := range rs {
		if _, problem := desired(r); problem != "" {
			return false
		}
	}
	return len(rs) > 0
}

// TestDecideSequenceProperties runs evaluations with an advancing clock,
// feeding each decision's size and history to the next, and checks every
// decision against the rules, judged from a full log of recommendations
// the test keeps itself (so pruning and compaction lose nothing).
func TestDecideSequenceProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		current := rapid.IntRange(p.Min, p.Max).Draw(t, "current")
		now := t0
		var h History
		var log []Recommendation
		var lastChange time.Time
		for i, n := 0, rapid.IntRange(1, 40).Draw(t, "evaluations"); i < n; i++ {
			now = now.Add(time.Duration(rapid.IntRange(0, 30).Draw(t, "advance")) * time.Second)
			rs := drawReadings(t)
			d := Decide(Input{Policy: p, Current: current, Now: now, Readings: rs, History: h})
			if hasValues(rs) {
				log = append(log, Recommendation{At: now, Desired: d.Recommended})
			}
			checkStep(t, p, d, rs, log, lastChange)
			checkHistory(t, p, d, now)
			if d.Changes() {
				lastChange = now
			}
			if !d.History.LastChange.Equal(lastChange) {
				t.Fatalf("LastChange %v, want %v (changed: %v)", d.History.LastChange, lastChange, d.Changes())
			}
			current, h = d.Desired, d.History
		}
	})
}

// checkStep checks one decision of a size within the bounds.
func checkStep(t *rapid.T, p Policy, d Decision, rs []Reading, log []Recommendation, lastChange time.Time) {
	if d.Desired < p.Min || d.Desired > p.Max {
		t.Fatalf("desired %d outside [%d, %d]: %s", d.Desired, p.Min, p.Max, d.Reason)
	}
	if up := p.ScaleUp.MaxStep; up > 0 && d.Desired-d.Current > up {
		t.Fatalf("%d -> %d is more than scale_up.max_step %d", d.Current, d.Desired, up)
	}
	if down := p.ScaleDown.MaxStep; down > 0 && d.Current-d.Desired > down {
		t.Fatalf("%d -> %d is more than scale_down.max_step %d", d.Current, d.Desired, down)
	}
	if !hasValues(rs) && (d.Changes() || d.Limit != LimitNoData) {
		t.Fatalf("without data: %d -> %d (%q): %s", d.Current, d.Desired, d.Limit, d.Reason)
	}
	if !lastChange.IsZero() && d.At.Sub(lastChange) < p.Cooldown && d.Changes() {
		t.Fatalf("changed %d -> %d %s after the last change, within cooldown %s", d.Current, d.Desired,
			d.At.Sub(lastChange), p.Cooldown)
	}
	for _, r := range log {
		if d.Desired < d.Current && r.Desired > d.Desired && r.At.After(d.At.Add(-p.ScaleDown.Stabilization)) {
			t.Fatalf("scaled down %d -> %d though %d was recommended at %s, within %s", d.Current, d.Desired,
				r.Desired, r.At.Sub(d.At), p.ScaleDown.Stabilization)
		}
		if d.Desired > d.Current && r.Desired < d.Desired && r.At.After(d.At.Add(-p.ScaleUp.Stabilization)) {
			t.Fatalf("scaled up %d -> %d though %d was recommended at %s, within %s", d.Current, d.Desired,
				r.Desired, r.At.Sub(d.At), p.ScaleUp.Stabilization)
		}
	}
}

// checkHistory: the history holds only the window and the current
// recommendation, oldest first, each value once, at most maxHistory.
func checkHistory(t *rapid.T, p Policy, d Decision, now time.Time) {
	recs := d.History.Recommendations
	if len(recs) > maxHistory {
		t.Fatalf("history of %d", len(recs))
	}
	seen := map[int]bool{}
	for i, r := range recs {
		if r.At.After(now) || !(r.At.After(now.Add(-p.window())) || r.At.Equal(now)) {
			t.Fatalf("history holds %v, outside the window %s before %v", r, p.window(), now)
		}
		if i > 0 && r.At.Before(recs[i-1].At) {
			t.Fatalf("history out of order: %v", recs)
		}
		if seen[r.Desired] {
			t.Fatalf("history holds %d twice: %v", r.Desired, recs)
		}
		seen[r.Desired] = true
	}
}

func drawInput(t *rapid.T) Input {
	p := drawPolicy(t)
	in := Input{
		Policy:   p,
		Current:  rapid.IntRange(0, p.Max+5).Draw(t, "current"),
		Now:      t0,
		Readings: drawReadings(t),
	}
	for i, n := 0, rapid.IntRange(0, 6).Draw(t, "history"); i < n; i++ {
		at := t0.Add(-time.Duration(rapid.IntRange(0, 300).Draw(t, "age")) * time.Second)
		in.History.Recommendations = append(in.History.Recommendations,
			Recommendation{At: at, Desired: rapid.IntRange(0, 30).Draw(t, "recommended")})
	}
	if rapid.Bool().Draw(t, "changed") {
		in.History.LastChange = t0.Add(-time.Duration(rapid.IntRange(0, 90).Draw(t, "since")) * time.Second)
	}
	return in
}

// nanFree replaces NaN values, which are unequal to themselves, so that
// reflect.DeepEqual compares what Decide did, not NaN's arithmetic.
func nanFree(rs []Reading) []Reading {
	rs = slices.Clone(rs)
	for i := range rs {
		if math.IsNaN(rs[i].Value) {
			rs[i].Value = -math.MaxFloat64
		}
	}
	return rs
}

func sameInput(a, b Input) bool {
	a.Readings, b.Readings = nanFree(a.Readings), nanFree(b.Readings)
	return reflect.DeepEqual(a, b)
}

func sameDecision(a, b Decision) bool {
	for _, d := range []*Decision{&a, &b} {
		d.Checks = slices.Clone(d.Checks)
		for i := range d.Checks {
			if math.IsNaN(d.Checks[i].Value) {
				d.Checks[i].Value = -math.MaxFloat64
			}
		}
	}
	return reflect.DeepEqual(a, b)
}

func copyInput(in Input) Input {
	in.Readings = slices.Clone(in.Readings)
	in.History.Recommendations = slices.Clone(in.History.Recommendations)
	return in
}

// TestDecidePure: the same input gives the same decision, the input is
// left as it was, and the decision shares no memory with it.
func TestDecidePure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := drawInput(t)
		before := copyInput(in)
		d1, d2 := Decide(in), Decide(in)
		if !sameDecision(d1, d2) {
			t.Fatalf("two decisions of one input:\n%+v\n%+v", d1, d2)
		}
		if !sameInput(in, before) {
			t.Fatalf("Decide changed its input:\n%+v\nwas\n%+v", in, before)
		}
		for i := range d1.History.Recommendations {
			d1.History.Recommendations[i].Desired = -1
		}
		for i := range d1.Checks {
			d1.Checks[i].Check = "changed"
		}
		if !sameInput(in, before) {
			t.Fatalf("the decision shares memory with its input")
		}
	})
}

// TestDecideBoundsProperties: a size outside the bounds goes to the
// nearest bound whatever the readings and cooldown; within them, missing
// data keeps it.
func TestDecideBoundsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := drawInput(t)
		d := Decide(in)
		p := in.Policy
		switch {
		case in.Current < p.Min:
			if d.Desired != p.Min || d.Limit != LimitMin {
				t.Fatalf("current %d below min %d: %d (%q)", in.Current, p.Min, d.Desired, d.Limit)
			}
		case in.Current > p.Max:
			if d.Desired != p.Max || d.Limit != LimitMax {
				t.Fatalf("current %d above max %d: %d (%q)", in.Current, p.Max, d.Desired, d.Limit)
			}
		case !hasValues(in.Readings):
			if d.Changes() || d.Limit != LimitNoData {
				t.Fatalf("without data: %d -> %d (%q)", d.Current, d.Desired, d.Limit)
			}
		default:
			if d.Desired < p.Min || d.Desired > p.Max {
				t.Fatalf("desired %d outside [%d, %d]", d.Desired, p.Min, p.Max)
			}
		}
	})
}

// TestDesiredExact: k instances' worth of load wants exactly k.
func TestDesiredExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(0, 100000).Draw(t, "k")
		target := rapid.SampledFrom([]float64{0.1, 0.3, 0.7, 1, 3, 7.5, 50, 1e6}).Draw(t, "target")
		if got, problem := desired(Reading{TargetPerInstance: target, Value: float64(k) * target}); got != k || problem != "" {
			t.Fatalf("desired(%d * %v) = %d %q", k, target, got, problem)
		}
	})
}
