package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Autoscale is a group's autoscale block: watch evaluates its checks every
// EvaluationInterval and sets the group's size within [Min, Max]. The
// group's size attribute is then only the start size (Min when the group
// leaves size out), and the loader and CheckStored hold it within the
// bounds. Only cattle groups (size, not logical_ids) may autoscale.
type Autoscale struct {
	Min int `json:"min"`
	Max int `json:"max"`
	// StartSize is the group's size attribute as the stack files give it
	// (min when they give none). The stored stack's Group.Size is the size
	// the autoscaler set since; apply keeps that one while StartSize, Min
	// and Max stay as they were applied.
	StartSize int `json:"start_size"`
	// EvaluationInterval is how often the checks are queried (at least 1s).
	EvaluationInterval Duration `json:"evaluation_interval"`
	// Cooldown is how long after a scaling action no other is taken.
	Cooldown Duration `json:"cooldown"`
	// Checks has at least one check, names unique; the largest desired
	// count wins.
	Checks    []Check     `json:"checks"`
	ScaleDown ScalePolicy `json:"scale_down"`
	ScaleUp   ScalePolicy `json:"scale_up"`

	DeclRange hcl.Range `json:"-"`
	MinRange  hcl.Range `json:"-"`
	MaxRange  hcl.Range `json:"-"`
}

// Check is an autoscale block's check block: a query to a metrics provider
// and the value each instance should carry.
type Check struct {
	Name string `json:"name"`
	// Source is the provider key of the metrics provider ("prometheus").
	// The stack names no metrics type: the provider answers the query in
	// its own language (ValidateWithProviders checks it serves metrics).
	Source string `json:"source"`
	// Query is passed to the source untouched (PromQL for prometheus).
	Query string `json:"query"`
	// TargetPerInstance is the metric value one instance should carry:
	// desired = ceil(value / target_per_instance). It is > 0 and finite.
	TargetPerInstance float64 `json:"target_per_instance"`

	DeclRange   hcl.Range `json:"-"`
	SourceRange hcl.Range `json:"-"`
	QueryRange  hcl.Range `json:"-"`
	TargetRange hcl.Range `json:"-"`
}

// ScalePolicy is a scale_up or scale_down block.
type ScalePolicy struct {
	// Stabilization is the window of past recommendations considered: a
	// scale-down goes no lower than the highest recommendation within it,
	// a scale-up no higher than the lowest (HPA's rule); 0 considers only
	// the current one.
	Stabilization Duration `json:"stabilization"`
	// MaxStep bounds the change of one evaluation (0: unbounded).
	MaxStep int `json:"max_step"`
}

// Defaults of an autoscale block's optional attributes.
const (
	DefaultEvaluationInterval = Duration(10 * time.Second)
	DefaultCooldown           = Duration(30 * time.Second)
	// DefaultScaleDownStabilization is HPA's default scale-down window.
	DefaultScaleDownStabilization = Duration(5 * time.Minute)
	// MinEvaluationInterval is the shortest evaluation_interval: a
	// metrics source is not a busy loop's.
	MinEvaluationInterval = time.Second
)

// DefaultAutoscale is an autoscale block's settings before its attributes
// are read (Min, Max and Checks have no defaults).
func DefaultAutoscale() Autoscale {
	return Autoscale{
		EvaluationInterval: DefaultEvaluationInterval,
		Cooldown:           DefaultCooldown,
		ScaleDown:          ScalePolicy{Stabilization: DefaultScaleDownStabilization},
	}
}

// Sources lists the provider keys the checks query, each once, in order.
func (a *Autoscale) Sources() []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, c := range a.Checks {
		if c.Source != "" && !slices.Contains(out, c.Source) {
			out = append(out, c.Source)
		}
	}
	return out
}

// Within reports whether n is in [Min, Max].
func (a *Autoscale) Within(n int) bool { return n >= a.Min && n <= a.Max }

// CheckAutoscaleSize is the rule for the size of an autoscaled group (the
// start size the stack says, and any size set later, by the autoscaler or
// `group scale`): within the autoscale bounds.
func CheckAutoscaleSize(a *Autoscale, group string, n int) error {
	if a == nil || a.Within(n) {
		return nil
	}
	return fmt.Errorf("group %q autoscales between min = %d and max = %d, so its size must be within them; got %d", group, a.Min, a.Max, n)
}

// checkAutoscaleBounds is the rule for min and max: 0 ≤ min ≤ max, max ≥ 1
// and within the stack's group size limit.
func checkAutoscaleBounds(st *Stack, group string, a *Autoscale) error {
	switch {
	case a.Min < 0:
		return fmt.Errorf("min must be at least 0; got %d", a.Min)
	case a.Max < 1:
		return fmt.Errorf("max must be at least 1; got %d", a.Max)
	case a.Min > a.Max:
		return fmt.Errorf("min (%d) is more than max (%d)", a.Min, a.Max)
	}
	return CheckGroupSize(st, group, a.Max)
}

// checkQuery is the rule for a check's query: not empty, and no longer
// than a property value may be.
func checkQuery(q string) error {
	switch {
	case q == "":
		return errors.New("the query must not be empty")
	case len(q) > MaxPropertyValueSize:
		return fmt.Errorf("the query is %d bytes; a query is at most %d bytes (%s)", len(q), MaxPropertyValueSize, byteSize(MaxPropertyValueSize))
	}
	return nil
}

// checkTarget is the rule for target_per_instance: a finite number above 0
// (desired = ceil(value / target) must be a number).
func checkTarget(f float64) error {
	if f > 0 && !math.IsInf(f, 0) {
		return nil
	}
	return fmt.Errorf("target_per_instance must be a finite number greater than 0; got %g", f)
}
