package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Autoscale is a group's autoscale block: watch evaluates its checks every
// EvaluationInterval and sets the group's size within [Min, Max]. The
// group's size attribute is then only the start size. Only cattle groups
// (size, not logical_ids) may autoscale.
type Autoscale struct {
	Min int `json:"min"`
	Max int `json:"max"`
	// StartSize is the group's size attribute as the stack files give it
	// (min when they give none). The stored stack's Group.Size is the size
	// the autoscaler set since; apply keeps that one while StartSize, Min
	// and Max stay as they were applied.
	StartSize int `json:"start_size"`
	// EvaluationInterval is how often the checks are queried.
	EvaluationInterval Duration `json:"evaluation_interval"`
	// Cooldown is how long after a scaling action no other is taken.
	Cooldown Duration `json:"cooldown"`
	// Checks has at least one check; the largest desired count wins.
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
	Source string `json:"source"`
	Query  string `json:"query"`
	// TargetPerInstance is the metric value one instance should carry:
	// desired = ceil(value / target_per_instance). It is > 0.
	TargetPerInstance float64 `json:"target_per_instance"`

	DeclRange   hcl.Range `json:"-"`
	SourceRange hcl.Range `json:"-"`
	QueryRange  hcl.Range `json:"-"`
}

// ScalePolicy is a scale_up or scale_down block.
type ScalePolicy struct {
	// Stabilization is the window of past recommendations considered: a
	// scale-down goes no lower than the highest recommendation within it
	// (HPA's rule); 0 considers only the current one.
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
