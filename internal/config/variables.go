package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// Block types of the stack language proper.
const (
	blockVariable = "variable"
	blockLocals   = "locals"
	blockOutput   = "output"
)

var (
	variableSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "type"}, {Name: "default"}, {Name: "description"}, {Name: "sensitive"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "validation"}},
	}
	validationSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "condition", Required: true}, {Name: "error_message", Required: true}},
	}
)

// Variable is a variable block with the value the stack was loaded with.
// The value is kept in the stack (and so in a saved plan and in state) so
// that what was planned with it is applied with it, and outputs evaluated
// after apply see it.
type Variable struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Sensitive   bool   `json:"sensitive,omitempty"`
	// Type is the type constraint as written ("list(string)"); "any" when none.
	Type string `json:"type"`
	// Value is the value after conversion to the type, with its type.
	Value ctyjson.SimpleJSONValue `json:"value"`

	DeclRange hcl.Range `json:"-"`
}

// varDecl is a variable block being decoded.
type varDecl struct {
	v        *Variable
	ty       cty.Type
	defaults *typeexpr.Defaults
	def      cty.Value // NilVal: required
	checks   []*hcl.Block
}

// decodeVariables declares the variable blocks and gives each its value
// from raws (lowest precedence first) or its default, then checks the
// validations. It returns the var object (sensitive values marked).
func (l *loader) decodeVariables(blocks []*hcl.Block, raws []rawValue) {
	decls := map[string]*varDecl{}
	for _, b := range l.declare(blocks, l.vars, &l.varNames, true) {
		d := l.decodeVariable(b)
		decls[d.v.Name] = d
		l.st.Variables = append(l.st.Variables, d.v)
	}
	given := map[string]rawValue{}
	for _, r := range raws {
		if _, ok := decls[r.name]; !ok {
			l.undeclaredValue(r)
			continue
		}
		given[r.name] = r
	}
	vals := map[string]cty.Value{}
	for _, v := range l.st.Variables {
		d := decls[v.Name]
		val, ok := l.variableValue(d, given)
		if !ok {
			val = cty.UnknownVal(d.ty)
		}
		v.Value = ctyjson.SimpleJSONValue{Value: val}
		if ok && !l.checkValidations(d, val, given) {
			val = cty.UnknownVal(d.ty)
		}
		if v.Sensitive {
			val = val.Mark(sensitiveMark)
		}
		vals[v.Name] = val
	}
	l.varVals = vals
}

// undeclaredValue reports a value given for no declared variable.
func (l *loader) undeclaredValue(r rawValue) {
	sev := r.undeclared
	if sev == 0 {
		return // the environment's: it may be another stack's
	}
	detail := fmt.Sprintf("A value for var.%s is given (%s), but the stack declares no variable %q; declare it with variable %q {}, or remove the value.",
		r.name, r.describe(), r.name, r.name)
	if s := suggest(r.name, l.varNames); s != "" {
		detail += fmt.Sprintf(" Did you mean %s?", s)
	}
	d := &hcl.Diagnostic{Severity: sev, Summary: "Value for undeclared variable", Detail: detail}
	if r.expr != nil {
		d.Subject = r.at.Ptr()
	}
	l.diags = append(l.diags, d)
}

func (l *loader) decodeVariable(b *hcl.Block) *varDecl {
	d := &varDecl{v: &Variable{Name: b.Labels[0], Type: "any", DeclRange: b.DefRange}, ty: cty.DynamicPseudoType}
	content, diags := b.Body.Content(variableSchema)
	l.diags = append(l.diags, diags...)
	if a := content.Attributes["type"]; a != nil {
		ty, defaults, td := typeexpr.TypeConstraintWithDefaults(a.Expr)
		l.diags = append(l.diags, td...)
		if !td.HasErrors() {
			d.ty, d.defaults = ty, defaults
			d.v.Type = typeexpr.TypeString(ty)
		}
	}
	if a := content.Attributes["description"]; a != nil {
		d.v.Description, _ = l.stringAttr(a, false)
	}
	if a := content.Attributes["sensitive"]; a != nil {
		d.v.Sensitive, _ = l.boolAttr(a)
	}
	if a := content.Attributes["default"]; a != nil {
		v, vd := a.Expr.Value(nil)
		l.diags = append(l.diags, vd...)
		if !vd.HasErrors() && !v.IsNull() {
			if cv, err := l.convertVar(d, v); err != nil {
				l.errorf(a.Expr.Range(), "Invalid default value for variable",
					"The default of var.%s does not fit its type %s: %s.", d.v.Name, d.v.Type, convertError(err))
			} else {
				d.def = cv
			}
		}
	}
	d.checks = content.Blocks.OfType("validation")
	return d
}

// convertVar applies the type's optional attribute defaults and converts.
func (l *loader) convertVar(d *varDecl, v cty.Value) (cty.Value, error) {
	if d.defaults != nil {
		v = d.defaults.Apply(v)
	}
	return convert.Convert(v, d.ty)
}

// variableValue is the given value converted to the type, or the default.
func (l *loader) variableValue(d *varDecl, given map[string]rawValue) (cty.Value, bool) {
	r, ok := given[d.v.Name]
	if !ok {
		if d.def == cty.NilVal {
			l.errorf(d.v.DeclRange, "No value for required variable",
				"var.%s has no default and no value was given: set it with -var %s=..., a variable file (%s, *%s, -var-file), or the environment variable %s%s.",
				d.v.Name, d.v.Name, VarFile, AutoVarFileSuffix, EnvVarPrefix, d.v.Name)
			return cty.NilVal, false
		}
		return d.def, true
	}
	v, diags := r.value(d.ty)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return cty.NilVal, false
	}
	cv, err := l.convertVar(d, v)
	if err == nil && cv.IsNull() {
		err = fmt.Errorf("the value must not be null")
	}
	if err != nil {
		diag := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value for variable",
			Detail: fmt.Sprintf("The value of var.%s given by %s does not fit its type %s: %s. The variable is declared at %s.",
				d.v.Name, r.describe(), d.v.Type, convertError(err), rangeString(d.v.DeclRange))}
		if r.expr != nil {
			diag.Subject = r.expr.Range().Ptr()
		} else {
			diag.Subject = d.v.DeclRange.Ptr()
		}
		l.diags = append(l.diags, diag)
		return cty.NilVal, false
	}
	return cv, true
}

// checkValidations evaluates the variable's validation blocks against its
// value: each condition sees var.<name> (and the functions).
func (l *loader) checkValidations(d *varDecl, val cty.Value, given map[string]rawValue) bool {
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{d.v.Name: val})},
		Functions: Functions(),
	}
	good := true
	for _, b := range d.checks {
		content, diags := b.Body.Content(validationSchema)
		l.diags = append(l.diags, diags...)
		ca, ma := content.Attributes["condition"], content.Attributes["error_message"]
		if ca == nil || ma == nil {
			good = false
			continue
		}
		msg, ok := l.stringAttr(ma, true)
		if !ok {
			good = false
			continue
		}
		cond, ok := l.value(ca, cty.Bool, ctx, true)
		if !ok {
			good = false
			continue
		}
		if !cond.IsKnown() || cond.True() {
			continue
		}
		from := "its default"
		if r, isGiven := given[d.v.Name]; isGiven {
			from = r.describe()
		}
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("%s\n\nThe value of var.%s comes from %s; this was checked by the validation rule at %s.", msg, d.v.Name, from, rangeString(ca.Range)),
			Subject:  ca.Expr.Range().Ptr(),
		})
		good = false
	}
	return good
}
