package command

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
)

// Placeholders for values not shown, Terraform's words.
const (
	knownAfterApply = "(known after apply)"
	sensitiveValue  = "(sensitive value)"
)

// formatValue renders a value as HCL, as `terraform console` and `output`
// do: "text", 3, ["a", "b"], { a = 1 }; a value not wholly known is
// (known after apply). Sensitive values are the caller's to hide.
func formatValue(v cty.Value) string {
	v, _ = v.UnmarkDeep()
	if !v.IsWhollyKnown() {
		return knownAfterApply
	}
	if v.IsNull() {
		return "null"
	}
	return strings.TrimSpace(string(hclwrite.Format(hclwrite.TokensForValue(v).Bytes())))
}

// shownValue is formatValue, or (sensitive value).
func shownValue(o config.OutputValue) string {
	if o.Sensitive {
		return sensitiveValue
	}
	return formatValue(o.Value)
}

// writePlanOutputs adds Terraform's "Changes to Outputs:" to a rendered
// plan: each output whose value the plan changes, with what it will be
// ((known after apply) when it depends on members the plan changes).
func writePlanOutputs(w io.Writer, p *plan.Plan, doc *state.Document) error {
	var before map[string]config.OutputValue
	obs := &config.Observed{Unknown: map[string]bool{}}
	if doc != nil {
		before = doc.Outputs
		obs = doc.Observed()
		obs.Unknown = map[string]bool{}
	}
	for _, g := range p.Groups {
		if g.Action.IsChange() {
			obs.Unknown[g.Group] = true
		}
	}
	var after map[string]config.OutputValue
	if p.Desired != nil {
		after, _ = p.Desired.EvalOutputs(obs)
	}
	var lines []string
	names := map[string]bool{}
	for n := range before {
		names[n] = true
	}
	if p.Desired != nil {
		for _, n := range p.Desired.OutputNames() {
			names[n] = true
		}
	}
	for _, n := range sortedKeys(names) {
		b, had := before[n]
		a, has := after[n]
		switch {
		case had && !has:
			lines = append(lines, fmt.Sprintf("  - %s = %s", n, shownValue(b)))
		case !had && has:
			lines = append(lines, fmt.Sprintf("  + %s = %s", n, shownValue(a)))
		case had && has && (!a.Value.IsWhollyKnown() || !a.Value.RawEquals(b.Value) || a.Sensitive != b.Sensitive):
			lines = append(lines, fmt.Sprintf("  ~ %s = %s -> %s", n, shownValue(b), shownValue(a)))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\nChanges to Outputs:\n%s\n", strings.Join(lines, "\n"))
	return err
}

// writeOutputs prints the state's outputs after an apply, as Terraform
// does ("Outputs:" then name = value), and warns of the stack's outputs
// that did not evaluate.
func (m *Meta) writeOutputs(doc *state.Document, desired *config.Stack) {
	if desired != nil && len(desired.Outputs) > 0 {
		if _, diags := desired.EvalOutputs(doc.Observed()); diags.HasErrors() {
			for _, d := range diags {
				d.Severity = hcl.DiagWarning
			}
			m.ShowDiagnostics(desired.Files, diags)
		}
	}
	if len(doc.Outputs) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("\nOutputs:\n\n")
	for _, n := range sortedKeys(doc.Outputs) {
		fmt.Fprintf(&b, "%s = %s\n", n, shownValue(doc.Outputs[n]))
	}
	m.Ui.Output(strings.TrimRight(b.String(), "\n"))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
