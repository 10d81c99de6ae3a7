package figures

import (
	"fmt"
	"math"
	"strings"
	"text/tabwriter"
)

// Regression is how much worse than its baseline a figure may be before
// the table flags it: 20 %.
const Regression = 0.20

// Line is one figure's row of the table, decided from its result and
// baseline; Table renders it.
type Line struct {
	Figure Figure
	Result Result
	// Measured is false when the run has no result for the figure, or the
	// scenario skipped it (Why says which).
	Measured bool
	Why      string
	Base     *BaseFigure
	// Verdict is PASS, MISS or "" (no target or not measured).
	Verdict string
	// Worse is true when the median is more than Regression worse than
	// the baseline's median.
	Worse bool
}

// Lines decides the table: one line per catalogued figure, in order.
func Lines(results map[string]Result, base Baseline) []Line {
	lines := make([]Line, 0, len(Catalogue))
	for _, f := range Catalogue {
		l := Line{Figure: f}
		r, ok := results[f.Key]
		switch {
		case !ok:
			l.Why = "skipped: not run (-run '" + f.Scenario + "')"
		case r.Skipped != "":
			l.Why = "skipped: " + r.Skipped
		default:
			l.Measured, l.Result = true, r
		}
		if b, ok := base.Figures[f.Key]; ok {
			l.Base = &b
		}
		if l.Measured && f.HasTarget() {
			l.Verdict = "MISS"
			if r.Median <= f.Target {
				l.Verdict = "PASS"
			}
		}
		if l.Measured && l.Base != nil {
			l.Worse = worse(r.Median, l.Base.Median)
		}
		lines = append(lines, l)
	}
	return lines
}

// worse reports whether v is more than Regression above base (for a base
// of zero, any value above it).
func worse(v, base float64) bool {
	return v-base > Regression*math.Abs(base)
}

// Table renders lines as the closing table of `make bench`, then the notes
// of the results that have one.
func Table(lines []Line) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmedian\tmax\truns\tload\ttarget\t\tbaseline\tchange\t")
	var notes []string
	missed, flagged := 0, 0
	for _, l := range lines {
		f := l.Figure
		target := "-"
		if f.HasTarget() {
			target = "≤ " + Format(f.Target, f.Unit)
		}
		base, change, flag := "-", "", ""
		if l.Base != nil {
			base = Format(l.Base.Median, f.Unit)
		}
		if !l.Measured {
			fmt.Fprintf(tw, "%s\t-\t\t\t\t%s\t\t%s\t\t%s\n", f.Label, target, base, l.Why)
			continue
		}
		r := l.Result
		if l.Base != nil && l.Base.Median != 0 {
			change = fmt.Sprintf("%+.0f %%", 100*(r.Median-l.Base.Median)/math.Abs(l.Base.Median))
		} else if l.Base != nil {
			change = fmt.Sprintf("%+g", r.Median-l.Base.Median)
		}
		if l.Worse {
			flag = "WORSE >20%"
			flagged++
		}
		if l.Verdict == "MISS" {
			missed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\n", f.Label, Format(r.Median, f.Unit), Format(r.Max, f.Unit),
			r.Runs, r.Load, target, l.Verdict, base, change, flag)
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("  %s: %s", f.Label, r.Note))
		}
	}
	tw.Flush()
	if len(notes) > 0 {
		b.WriteString("notes:\n" + strings.Join(notes, "\n") + "\n")
	}
	fmt.Fprintf(&b, "%d figures missed their target; %d are more than %.0f %% worse than bench/baseline.json (load: /proc/loadavg, 1 min, when measured)\n",
		missed, flagged, 100*Regression)
	return b.String()
}
