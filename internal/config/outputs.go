package config

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "value", Required: true}, {Name: "description"}, {Name: "sensitive"}},
}

// Output is an output block. Its value may refer to what only exists once
// the stack is applied (group.web.members), so it is kept unevaluated, as
// source text that survives a saved plan and the state, and evaluated by
// EvalOutputs with what the state observed.
type Output struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Sensitive   bool   `json:"sensitive,omitempty"`
	// Value is the HCL source text of the value expression.
	Value string `json:"value"`

	DeclRange hcl.Range      `json:"-"`
	ValueExpr hcl.Expression `json:"-"`
}

// expression is the value expression: parsed from the file, or re-parsed
// from the source text a saved plan or the state kept.
func (o *Output) expression() (hcl.Expression, hcl.Diagnostics) {
	if o.ValueExpr != nil {
		return o.ValueExpr, nil
	}
	return hclsyntax.ParseExpression([]byte(o.Value), "<output "+o.Name+">", hcl.InitialPos)
}

// decodeOutput decodes an output block and checks its value in the scope
// it will have, with the members not yet known: references to what is not
// declared, and sensitive values in an output not marked sensitive.
func (l *loader) decodeOutput(b *hcl.Block) *Output {
	o := &Output{Name: b.Labels[0], DeclRange: b.DefRange}
	content, d := b.Body.Content(outputSchema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["description"]; a != nil {
		o.Description, _ = l.stringAttr(a, false)
	}
	if a := content.Attributes["sensitive"]; a != nil {
		o.Sensitive, _ = l.boolAttr(a)
	}
	a := content.Attributes["value"]
	if a == nil {
		return o
	}
	o.ValueExpr = a.Expr
	o.Value = l.sourceText(a.Expr)
	if d := l.checkRefs(a.Expr); d.HasErrors() {
		l.diags = append(l.diags, d...)
		return o
	}
	v, vd := a.Expr.Value(l.st.EvalContext(nil))
	l.diags = append(l.diags, vd...)
	if !vd.HasErrors() && v.ContainsMarked() && !o.Sensitive {
		l.errorf(a.Expr.Range(), "Output refers to sensitive values",
			"The value of output %q derives from a sensitive variable, so it would be shown in plain text. Add sensitive = true to the output block to show it as (sensitive value).", o.Name)
	}
	return o
}

// OutputValue is one output's value as evaluated after an apply, in the
// shape `terraform output -json` prints: sensitive, type and value.
type OutputValue struct {
	Sensitive bool
	Value     cty.Value
}

// MarshalJSON writes {"sensitive": bool, "type": <cty type>, "value": <json>}.
func (o OutputValue) MarshalJSON() ([]byte, error) {
	v, _ := o.Value.UnmarkDeep()
	ty, err := ctyjson.MarshalType(v.Type())
	if err != nil {
		return nil, err
	}
	val, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Sensitive bool            `json:"sensitive"`
		Type      json.RawMessage `json:"type"`
		Value     json.RawMessage `json:"value"`
	}{o.Sensitive, ty, val})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (o *OutputValue) UnmarshalJSON(b []byte) error {
	var raw struct {
		Sensitive bool            `json:"sensitive"`
		Type      json.RawMessage `json:"type"`
		Value     json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	ty, err := ctyjson.UnmarshalType(raw.Type)
	if err != nil {
		return fmt.Errorf("output type: %w", err)
	}
	v, err := ctyjson.Unmarshal(raw.Value, ty)
	if err != nil {
		return fmt.Errorf("output value: %w", err)
	}
	o.Sensitive, o.Value = raw.Sensitive, v
	return nil
}

// EvalOutputs evaluates the stack's outputs with what obs saw (nil: the
// members are not known, as in a plan; such values are unknown). A
// value is returned for every output that evaluates, unmarked, with
// Sensitive set from the block.
func (st *Stack) EvalOutputs(obs *Observed) (map[string]OutputValue, hcl.Diagnostics) {
	ctx := st.EvalContext(obs)
	out := map[string]OutputValue{}
	var diags hcl.Diagnostics
	for _, o := range st.Outputs {
		expr, d := o.expression()
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		v, d := expr.Value(ctx)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		v, _ = v.UnmarkDeep()
		out[o.Name] = OutputValue{Sensitive: o.Sensitive, Value: v}
	}
	return out, diags
}

// OutputNames are the stack's outputs in name order, as Terraform lists them.
func (st *Stack) OutputNames() []string {
	names := make([]string, 0, len(st.Outputs))
	for _, o := range st.Outputs {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}
