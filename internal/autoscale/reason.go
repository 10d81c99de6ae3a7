package autoscale

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// reason collects a decision's clauses: what the checks said, then each
// limit that changed the size. Its outcome is the Decision's Reason:
//
//	rps = 130 (target 50 per instance) wants 3; scale_up.max_step 1 allows 2: size 1 -> 2
//	check "rps" returned no data: size kept at 2
type reason struct {
	clauses []string
}

func (r *reason) add(clauses ...string) {
	for _, c := range clauses {
		if c != "" {
			r.clauses = append(r.clauses, c)
		}
	}
}

func (r *reason) addf(format string, args ...any) { r.add(fmt.Sprintf(format, args...)) }

// outcome is the sentence: the clauses, then what happens to the size.
func (r *reason) outcome(current, desired int) string {
	what := fmt.Sprintf("size kept at %d", current)
	if desired != current {
		what = fmt.Sprintf("size %d -> %d", current, desired)
	}
	if len(r.clauses) == 0 {
		return what
	}
	return strings.Join(r.clauses, "; ") + ": " + what
}

// wantsPhrase says each check's value, target and desired count.
func wantsPhrase(checks []CheckResult) string {
	parts := make([]string, 0, len(checks))
	for _, c := range checks {
		if c.Desired == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s = %s (target %s per instance) wants %d",
			c.Check, formatValue(c.Value), formatValue(c.TargetPerInstance), *c.Desired))
	}
	return strings.Join(parts, ", ")
}

func quoteCheck(name string) string { return fmt.Sprintf("check %q", name) }

// formatValue prints a metric value for people: integers whole
// (52428800), others to six significant digits (123.457, 0.0123457),
// very large or small ones in exponent form.
func formatValue(v float64) string {
	a := math.Abs(v)
	if a >= 1 && a < 1e15 {
		digits := int(math.Floor(math.Log10(a))) + 1
		s := strconv.FormatFloat(v, 'f', max(0, 6-digits), 64)
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		return s
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
