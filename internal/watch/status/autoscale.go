package status

import (
	"slices"
	"strconv"
	"time"

	"github.com/infrakit/infrakit/internal/autoscale"
)

// EventAutoscale: the autoscaler of a group decided (Reason: scale-up,
// scale-down or hold; Message: why, with the metric values; Autoscale:
// the decision itself).
const EventAutoscale EventKind = "autoscale"

// KeepDecisions is how many of a group's latest autoscale decisions the
// status holds.
const KeepDecisions = 10

// Autoscale is an autoscaled group's part of its status: its bounds and
// its latest decisions, oldest first.
type Autoscale struct {
	Min                       int                  `json:"min"`
	Max                       int                  `json:"max"`
	EvaluationIntervalSeconds float64              `json:"evaluation_interval_seconds"`
	Decisions                 []autoscale.Decision `json:"decisions"`
}

// AutoscalePolicy is what Autoscaled shows of a group's autoscale block.
type AutoscalePolicy struct {
	Min, Max           int
	EvaluationInterval time.Duration
}

// Autoscale decision actions (the event's Reason and the metric's label).
const (
	ActionScaleUp   = "scale-up"
	ActionScaleDown = "scale-down"
	ActionHold      = "hold"
)

// DecisionAction is what a decision does to the size.
func DecisionAction(d autoscale.Decision) string {
	switch {
	case d.Desired > d.Current:
		return ActionScaleUp
	case d.Desired < d.Current:
		return ActionScaleDown
	default:
		return ActionHold
	}
}

// Autoscaled records a decision of group's autoscaler: in the group's
// status (the latest KeepDecisions), in the metrics, and as an event when
// it changes the size or differs from the one before (a decision that
// repeats the last one is not repeated in the event ring, which it would
// otherwise fill every evaluation interval). It reports whether it
// recorded an event.
func (r *Recorder) Autoscaled(group string, p AutoscalePolicy, d autoscale.Decision) bool {
	action := DecisionAction(d)
	r.mu.Lock()
	e, ok := r.groups[group]
	if !ok {
		e = &groupEntry{view: Group{Name: group, Kind: KindCattle}}
		r.groups[group] = e
	}
	a := e.view.Autoscale
	if a == nil {
		a = &Autoscale{}
	}
	var last *autoscale.Decision
	if n := len(a.Decisions); n > 0 {
		last = &a.Decisions[n-1]
	}
	repeated := last != nil && action == ActionHold && sameDecision(*last, d)
	decisions := append(slices.Clone(a.Decisions), d)
	if len(decisions) > KeepDecisions {
		decisions = decisions[len(decisions)-KeepDecisions:]
	}
	e.view.Autoscale = &Autoscale{Min: p.Min, Max: p.Max,
		EvaluationIntervalSeconds: p.EvaluationInterval.Seconds(), Decisions: decisions}
	r.metrics.setAutoscale(group, action, d)
	r.mu.Unlock()

	if repeated {
		return false
	}
	dc := d
	r.events.add(Event{Time: d.At.UTC(), Kind: EventAutoscale, Group: group, Reason: action,
		Message: autoscaleMessage(d), Autoscale: &dc})
	return true
}

// sameDecision reports whether two decisions say the same thing (their
// times and values aside).
func sameDecision(a, b autoscale.Decision) bool {
	return a.Current == b.Current && a.Desired == b.Desired && a.Recommended == b.Recommended &&
		a.Limit == b.Limit && a.Reason == b.Reason
}

func autoscaleMessage(d autoscale.Decision) string {
	switch {
	case d.Desired != d.Current:
		return "size " + itoa(d.Current) + " -> " + itoa(d.Desired) + ": " + d.Reason
	default:
		return "size kept at " + itoa(d.Current) + ": " + d.Reason
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// setAutoscale sets a group's autoscale series from a decision.
func (m *metrics) setAutoscale(group, action string, d autoscale.Decision) {
	m.autoscaleEvaluations.WithLabelValues(group, action).Inc()
	m.autoscaleDesired.WithLabelValues(group).Set(float64(d.Desired))
	m.autoscaleRecommended.WithLabelValues(group).Set(float64(d.Recommended))
	for _, c := range d.Checks {
		if c.Empty || c.Error != "" {
			m.autoscaleNoData.WithLabelValues(group, c.Check).Inc()
			continue
		}
		m.autoscaleValue.WithLabelValues(group, c.Check).Set(c.Value)
	}
}
