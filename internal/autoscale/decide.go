package autoscale

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// maxDesired caps a check's desired count so that steps and bounds cannot
// overflow an int; no group has two billion members.
const maxDesired = math.MaxInt32

// maxHistory bounds a History's recommendations. Equal recommendations
// are kept once (the latest), so only evaluations faster than a window
// can hold this many distinct ones and reach it; the oldest then go.
const maxHistory = 256

// integralSlack is how close to an integer a check's quotient counts as
// that integer: 100/50 is 2 and 0.3/0.1 is 3, not 4 (floating point).
const integralSlack = 1e-9

// Decide is the autoscale decision of one evaluation. The rules, in the
// order they apply:
//
//  1. A current size outside [Min, Max] goes to the nearest bound, whatever
//     the readings and the cooldown (Limit min or max).
//  2. A check without a value keeps the current size (Limit no_data): no
//     data is never read as no load. Such an evaluation records nothing
//     in the history.
//  3. Each check wants ceil(value / target_per_instance); the largest wins
//     (Nomad's target-value rule) and is recorded in the history.
//  4. Stabilization (HPA's): a scale-down goes no lower than the highest
//     recommendation within scale_down.stabilization, a scale-up no higher
//     than the lowest within scale_up.stabilization, the current one
//     included.
//  5. max_step bounds the change of one evaluation in each direction.
//  6. The result is clamped to [Min, Max].
//  7. Within the cooldown after the last change, a size that 4-6 would
//     change is kept instead (Limit cooldown). The recommendation is still
//     recorded, so a scale-down after the cooldown remembers the load seen
//     during it.
//
// Decide is pure: it reads no clock, does no I/O and leaves its input as
// it was (the returned history is a new slice).
func Decide(in Input) Decision {
	p := normalize(in.Policy)
	checks, rec, missing := evaluate(in.Readings)
	d := Decision{At: in.Now, Current: in.Current, Recommended: in.Current, Desired: in.Current, Checks: checks}
	recs := prune(in.History.Recommendations, in.Now, p.window())
	var r reason
	if len(missing) > 0 {
		r.add(missing...)
	} else {
		d.Recommended = rec
		recs = remember(recs, Recommendation{At: in.Now, Desired: rec})
		r.add(wantsPhrase(checks))
	}
	switch {
	case in.Current < p.Min:
		d.Desired, d.Limit = p.Min, LimitMin
		r.addf("current %d is below min %d", in.Current, p.Min)
	case in.Current > p.Max:
		d.Desired, d.Limit = p.Max, LimitMax
		r.addf("current %d is above max %d", in.Current, p.Max)
	case len(missing) > 0:
		d.Limit = LimitNoData
	default:
		var clauses []string
		d.Desired, d.Limit, clauses = limit(p, in.Current, rec, recs, in.Now)
		if left := cooldownLeft(p, in.History.LastChange, in.Now); left > 0 && d.Desired != in.Current {
			d.Desired, d.Limit = in.Current, LimitCooldown
			clauses = []string{"in cooldown for another " + roundUp(left).String()}
		}
		r.add(clauses...)
	}
	d.History = History{Recommendations: recs, LastChange: in.History.LastChange}
	if d.Changes() {
		d.History.LastChange = in.Now
	}
	d.Reason = r.outcome(d.Current, d.Desired)
	return d
}

// normalize reads the values a policy cannot mean sensibly (negative
// counts and durations, a max below min) as the nearest that it can.
func normalize(p Policy) Policy {
	p.Min = max(p.Min, 0)
	p.Max = max(p.Max, p.Min)
	p.Cooldown = max(p.Cooldown, 0)
	for _, s := range []*Step{&p.ScaleUp, &p.ScaleDown} {
		s.Stabilization = max(s.Stabilization, 0)
		s.MaxStep = max(s.MaxStep, 0)
	}
	return p
}

// window is how far back the history must reach: the longer of the two
// stabilization windows.
func (p Policy) window() time.Duration {
	return max(p.ScaleUp.Stabilization, p.ScaleDown.Stabilization)
}

// evaluate turns the readings into check results, the largest desired
// count and, when any check has no value, the phrases that say why.
func evaluate(rs []Reading) ([]CheckResult, int, []string) {
	if len(rs) == 0 {
		return nil, 0, []string{"no checks to evaluate"}
	}
	checks := make([]CheckResult, len(rs))
	rec := 0
	var missing []string
	for i, r := range rs {
		checks[i] = CheckResult{Reading: r}
		n, problem := desired(r)
		if problem != "" {
			checks[i].Problem = problem
			missing = append(missing, quoteCheck(r.Check)+" "+problem)
			continue
		}
		checks[i].Desired = &n
		rec = max(rec, n)
	}
	return checks, rec, missing
}

// desired is ceil(value / target) of a reading, or why it has none.
func desired(r Reading) (int, string) {
	switch {
	case r.Error != "":
		return 0, "query failed (" + r.Error + ")"
	case r.Empty:
		return 0, "returned no data"
	case math.IsNaN(r.Value) || math.IsInf(r.Value, 0):
		return 0, "returned " + formatValue(r.Value)
	case r.Value < 0:
		return 0, "returned a negative value (" + formatValue(r.Value) + ")"
	case !(r.TargetPerInstance > 0) || math.IsInf(r.TargetPerInstance, 0):
		return 0, "has no positive target_per_instance (" + formatValue(r.TargetPerInstance) + ")"
	}
	q := r.Value / r.TargetPerInstance
	if near := math.Round(q); math.Abs(q-near) <= integralSlack*max(1, near) {
		q = near
	}
	if q >= maxDesired {
		return maxDesired, ""
	}
	return int(math.Ceil(q)), ""
}

// limit applies stabilization, max_step and the bounds, in that order, to
// the recommendation rec for a current size within the bounds. It returns
// the size, the last limit that changed it and a clause per change.
func limit(p Policy, cur, rec int, recs []Recommendation, now time.Time) (int, Limit, []string) {
	want, lim := rec, LimitNone
	var clauses []string
	if s, clause := stabilize(p, cur, rec, recs, now); s != want {
		want, lim, clauses = s, LimitStabilization, append(clauses, clause)
	}
	if s, clause := step(p, cur, want); s != want {
		want, lim, clauses = s, LimitMaxStep, append(clauses, clause)
	}
	switch {
	case want < p.Min:
		want, lim, clauses = p.Min, LimitMin, append(clauses, fmt.Sprintf("bounded by min %d", p.Min))
	case want > p.Max:
		want, lim, clauses = p.Max, LimitMax, append(clauses, fmt.Sprintf("bounded by max %d", p.Max))
	}
	return want, lim, clauses
}

// stabilize holds a scale-down at the highest recommendation of the
// scale_down window and a scale-up at the lowest of the scale_up window
// (recs holds the current recommendation).
func stabilize(p Policy, cur, rec int, recs []Recommendation, now time.Time) (int, string) {
	switch {
	case rec < cur:
		w := p.ScaleDown.Stabilization
		highest := rec
		for _, r := range within(recs, now, w) {
			highest = max(highest, r.Desired)
		}
		got := min(cur, highest)
		return got, fmt.Sprintf("scale-down held at %d by the highest recommendation in the last %s", got, w)
	case rec > cur:
		w := p.ScaleUp.Stabilization
		lowest := rec
		for _, r := range within(recs, now, w) {
			lowest = min(lowest, r.Desired)
		}
		got := max(cur, lowest)
		return got, fmt.Sprintf("scale-up held at %d by the lowest recommendation in the last %s", got, w)
	}
	return rec, ""
}

// step bounds the change from cur to want by the direction's max_step.
func step(p Policy, cur, want int) (int, string) {
	if up := p.ScaleUp.MaxStep; up > 0 && want-cur > up {
		return cur + up, fmt.Sprintf("scale_up.max_step %d allows %d", up, cur+up)
	}
	if down := p.ScaleDown.MaxStep; down > 0 && cur-want > down {
		return cur - down, fmt.Sprintf("scale_down.max_step %d allows %d", down, cur-down)
	}
	return want, ""
}

// cooldownLeft is how much of the cooldown after the last change is left
// at now (0: none). A last change after now (the clock went back) counts
// as a change just now.
func cooldownLeft(p Policy, last, now time.Time) time.Duration {
	if last.IsZero() || p.Cooldown == 0 {
		return 0
	}
	return max(p.Cooldown-max(now.Sub(last), 0), 0)
}

// roundUp rounds a wait up to the second (to the millisecond below one),
// so that a reason says "12s", not "11.996824s", and never less than is
// left.
func roundUp(d time.Duration) time.Duration {
	unit := time.Second
	if d < time.Second {
		unit = time.Millisecond
	}
	return (d + unit - 1).Truncate(unit)
}

// within is the recommendations made in the window w before now: after
// now-w and not after now. A window of 0 holds none.
func within(recs []Recommendation, now time.Time, w time.Duration) []Recommendation {
	from := now.Add(-w)
	var in []Recommendation
	for _, r := range recs {
		if r.At.After(from) && !r.At.After(now) {
			in = append(in, r)
		}
	}
	return in
}

// prune is a new slice of the recommendations within the window w before
// now, oldest first, compacted.
func prune(recs []Recommendation, now time.Time, w time.Duration) []Recommendation {
	kept := within(recs, now, w)
	slices.SortStableFunc(kept, func(a, b Recommendation) int { return a.At.Compare(b.At) })
	return compact(kept)
}

// remember appends the current recommendation to a pruned history.
func remember(recs []Recommendation, r Recommendation) []Recommendation {
	return compact(append(recs, r))
}

// compact keeps the latest of equal recommendations (for any window that
// holds an earlier one holds the later one too, so the minimum and the
// maximum are unchanged) and at most the maxHistory latest.
func compact(recs []Recommendation) []Recommendation {
	seen := make(map[int]bool, len(recs))
	out := make([]Recommendation, 0, len(recs))
	for i := len(recs) - 1; i >= 0 && len(out) < maxHistory; i-- {
		if !seen[recs[i].Desired] {
			seen[recs[i].Desired] = true
			out = append(out, recs[i])
		}
	}
	slices.Reverse(out)
	return out
}
