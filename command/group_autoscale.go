package command

import (
	"fmt"
	"strings"
	"time"

	"github.com/infrakit/infrakit/internal/watch"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// describedDecisions is how many of the latest autoscale decisions group
// describe prints (the watch keeps status.KeepDecisions).
const describedDecisions = 5

// autoscaleLines says what the local watch reports of a group's
// autoscaler: its bounds and its latest decisions, newest last. Empty when
// the group is not autoscaled or the watch has not evaluated it yet.
func autoscaleLines(a *status.Autoscale, from watch.Holder) string {
	if a == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Autoscale: min %d, max %d, evaluated every %s (watch pid %d at %s)",
		a.Min, a.Max, time.Duration(a.EvaluationIntervalSeconds*float64(time.Second)), from.PID, from.Listen)
	ds := a.Decisions
	if len(ds) > describedDecisions {
		ds = ds[len(ds)-describedDecisions:]
	}
	for _, d := range ds {
		fmt.Fprintf(&b, "\n  %s  %-10s %d -> %d  %s", d.At.UTC().Format(time.RFC3339), status.DecisionAction(d), d.Current, d.Desired, d.Reason)
	}
	return b.String()
}
