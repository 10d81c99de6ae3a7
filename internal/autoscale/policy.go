package autoscale

import (
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/metrics"
)

// PolicyFrom is the policy of a group's autoscale block. A nil block is
// the zero Policy, which pins the size to 0: a caller decides only for
// groups that have the block.
func PolicyFrom(a *config.Autoscale) Policy {
	if a == nil {
		return Policy{}
	}
	return Policy{
		Min:       a.Min,
		Max:       a.Max,
		Cooldown:  time.Duration(a.Cooldown),
		ScaleUp:   stepFrom(a.ScaleUp),
		ScaleDown: stepFrom(a.ScaleDown),
	}
}

func stepFrom(s config.ScalePolicy) Step {
	return Step{Stabilization: time.Duration(s.Stabilization), MaxStep: s.MaxStep}
}

// ReadingFrom is check c's reading from its source's answer to the check's
// query: the sample, or the error the query failed with.
func ReadingFrom(c config.Check, s metrics.Sample, err error) Reading {
	r := Reading{Check: c.Name, TargetPerInstance: c.TargetPerInstance}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Value, r.Empty = s.Value, s.Empty
	return r
}
