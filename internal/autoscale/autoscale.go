// Package autoscale decides a group's size from its autoscale checks. The
// decision is a pure function of values (Decide): the checks' readings, the
// current size, the policy and the history of earlier recommendations go
// in; the desired size, the reason and the next history come out. Querying
// the metrics providers and setting the size are the caller's I/O (watch).
package autoscale

import (
	"time"
)

// Step bounds one direction of change (a scale_up or scale_down block).
type Step struct {
	// Stabilization: a scale-down goes no lower than the highest
	// recommendation made within this window before now; a scale-up no
	// higher than the lowest. 0 considers only the current recommendation.
	Stabilization time.Duration `json:"stabilization"`
	// MaxStep bounds the change of one evaluation; 0 is unbounded.
	MaxStep int `json:"max_step"`
}

// Policy is what a group's autoscale block says (PolicyFrom). Decide reads
// a negative Min, duration or max_step as 0 and a Max below Min as Min.
type Policy struct {
	Min int `json:"min"`
	Max int `json:"max"`
	// Cooldown: after a change of size, none is made until it has passed.
	Cooldown  time.Duration `json:"cooldown"`
	ScaleUp   Step          `json:"scale_up"`
	ScaleDown Step          `json:"scale_down"`
}

// Reading is one check's answer at this evaluation.
type Reading struct {
	Check string `json:"check"`
	// TargetPerInstance is the check's target (> 0).
	TargetPerInstance float64 `json:"target_per_instance"`
	Value             float64 `json:"value"`
	// Empty: the query matched no data. Error: the query failed. Either
	// way the reading carries no value, and a decision without a value
	// from every check keeps the current size. So does a Value that is
	// NaN, infinite or negative, or a TargetPerInstance that is not > 0.
	Empty bool   `json:"empty,omitempty"`
	Error string `json:"error,omitempty"`
}

// Recommendation is one evaluation's raw recommendation (before the
// stabilization, step, cooldown and bounds are applied): the stabilization
// windows compare raw recommendations, as HPA's do.
type Recommendation struct {
	At      time.Time `json:"at"`
	Desired int       `json:"desired"`
}

// History is what a decision remembers for the next one. It is a value:
// the caller keeps the one the last Decision returned and passes it in.
type History struct {
	// Recommendations within the longest stabilization window, oldest
	// first, with the current one last. Only the latest of equal
	// recommendations is kept (it stands for the earlier ones in every
	// window that holds them), and at most maxHistory: the history stays
	// small however often Decide runs.
	Recommendations []Recommendation `json:"recommendations,omitempty"`
	// LastChange is when the last decision that changed the size was made
	// (zero: never); the cooldown runs from it.
	LastChange time.Time `json:"last_change,omitzero"`
}

// Input is everything one decision depends on.
type Input struct {
	Policy   Policy
	Current  int
	Now      time.Time
	Readings []Reading
	History  History
}

// Limit names what held a decision back from the raw recommendation.
type Limit string

// The limits. Decide's doc gives the order it applies them in: min or max
// for a current size outside the bounds comes first, no_data next.
const (
	LimitNone          Limit = ""
	LimitNoData        Limit = "no_data"       // a check had no value: the size is kept
	LimitCooldown      Limit = "cooldown"      // within the cooldown: the size is kept
	LimitStabilization Limit = "stabilization" // the window's recommendations held it
	LimitMaxStep       Limit = "max_step"      // scale_up/scale_down max_step
	LimitMin           Limit = "min"
	LimitMax           Limit = "max"
)

// CheckResult is one check's part of a decision.
type CheckResult struct {
	Reading
	// Desired is ceil(Value / TargetPerInstance); absent without a value.
	Desired *int `json:"desired,omitempty"`
	// Problem says why the check has no value ("returned no data",
	// "query failed (...)"); empty when Desired is set.
	Problem string `json:"problem,omitempty"`
}

// Decision is Decide's result: printable, comparable, recorded by watch as
// an event.
type Decision struct {
	At      time.Time `json:"at"`
	Current int       `json:"current"`
	// Recommended is the largest of the checks' desired counts (Nomad's
	// rule), before any limit; equal to Current when a check had no value.
	Recommended int `json:"recommended"`
	// Desired is the size to set; Desired == Current means no change.
	Desired int `json:"desired"`
	// Limit is what held Desired back from Recommended, if anything: the
	// last limit applied that changed the size. Cooldown is named only
	// when it kept a size the other limits would have changed.
	Limit Limit `json:"limit,omitempty"`
	// Reason is one line for people: the checks' values and targets, the
	// raw recommendation, each limit that changed it, then the outcome
	// ("size kept at 5", "size 2 -> 6").
	Reason string        `json:"reason"`
	Checks []CheckResult `json:"checks"`
	// History is the history to pass to the next decision.
	History History `json:"-"`
}

// Changes reports whether the decision changes the size.
func (d Decision) Changes() bool { return d.Desired != d.Current }
