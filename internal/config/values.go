package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/gocty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// emptyObject is the properties of a block that has none.
func emptyObject() json.RawMessage { return json.RawMessage(`{}`) }

// value evaluates an attribute and converts it to ty. A null value counts as
// not set (ok is false) unless required, where it is an error.
func (l *loader) value(a *hcl.Attribute, ty cty.Type, ctx *hcl.EvalContext, required bool) (cty.Value, bool) {
	var v cty.Value
	var d hcl.Diagnostics
	if ctx == nil {
		v, d = l.eval(a.Expr)
	} else {
		v, d = a.Expr.Value(ctx)
	}
	l.diags = append(l.diags, d...)
	if d.HasErrors() {
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		// Only a variable or local already reported as wrong is unknown here.
		return cty.NilVal, false
	}
	if v.IsNull() {
		if required {
			l.errorf(a.Expr.Range(), "Missing value", "The argument %q is required and must not be null.", a.Name)
		}
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity:    hcl.DiagError,
			Summary:     "Incorrect attribute value type",
			Detail:      fmt.Sprintf("Inappropriate value for attribute %q: %s.", a.Name, convertError(err)),
			Subject:     a.Expr.Range().Ptr(),
			Expression:  a.Expr,
			EvalContext: ctx,
		})
		return cty.NilVal, false
	}
	return cv, true
}

// stringAttr decodes a string attribute; a required one must not be empty.
func (l *loader) stringAttr(a *hcl.Attribute, required bool) (string, bool) {
	v, ok := l.value(a, cty.String, nil, required)
	if !ok {
		return "", false
	}
	s := v.AsString()
	if required && s == "" {
		l.errorf(a.Expr.Range(), "Invalid value", "The argument %q must not be empty.", a.Name)
		return "", false
	}
	return s, true
}

// intAttr decodes a whole number in [lo, hi].
func (l *loader) intAttr(a *hcl.Attribute, lo, hi int, required bool) (int, bool) {
	v, ok := l.value(a, cty.Number, nil, required)
	if !ok {
		return 0, false
	}
	var n int
	if err := gocty.FromCtyValue(v, &n); err != nil {
		l.errorf(a.Expr.Range(), "Invalid value", "The argument %q must be a whole number; got %s.",
			a.Name, v.AsBigFloat().Text('g', -1))
		return 0, false
	}
	if n < lo || n > hi {
		if hi == maxInt {
			l.errorf(a.Expr.Range(), "Invalid value", "The argument %q must be at least %d; got %d.", a.Name, lo, n)
		} else {
			l.errorf(a.Expr.Range(), "Invalid value", "The argument %q must be between %d and %d; got %d.", a.Name, lo, hi, n)
		}
		return 0, false
	}
	return n, true
}

const maxInt = int(^uint(0) >> 1)

// boolAttr decodes an optional bool.
func (l *loader) boolAttr(a *hcl.Attribute) (bool, bool) {
	v, ok := l.value(a, cty.Bool, nil, false)
	if !ok {
		return false, false
	}
	return v.True(), true
}

// durationAttr decodes a Go duration string ("30s", "5m") of at least lo.
func (l *loader) durationAttr(a *hcl.Attribute, lo time.Duration) (Duration, bool) {
	s, ok := l.stringAttr(a, false)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		l.errorf(a.Expr.Range(), "Invalid duration",
			"The argument %q must be a duration like \"30s\" or \"5m\"; %q is not one.", a.Name, s)
		return 0, false
	}
	if d < lo {
		l.errorf(a.Expr.Range(), "Invalid duration", "The argument %q must be at least %s; got %s.", a.Name, lo, d)
		return 0, false
	}
	return Duration(d), true
}

// stringMapAttr decodes a map(string) such as tags; an empty map is nil.
func (l *loader) stringMapAttr(a *hcl.Attribute) map[string]string {
	v, ok := l.value(a, cty.Map(cty.String), nil, false)
	if !ok || v.LengthInt() == 0 {
		return nil
	}
	out := map[string]string{}
	for k, e := range v.AsValueMap() {
		if e.IsNull() {
			l.errorf(a.Expr.Range(), "Invalid value", "The value of %s[%q] must not be null.", a.Name, k)
			continue
		}
		out[k] = e.AsString()
	}
	return out
}

// propertiesAttr evaluates a properties attribute to a JSON object. It must
// be an object (or map); null means empty.
func (l *loader) propertiesAttr(a *hcl.Attribute) json.RawMessage {
	v, d := l.eval(a.Expr)
	l.diags = append(l.diags, d...)
	if d.HasErrors() || (!v.IsWhollyKnown() && l.diags.HasErrors()) {
		return emptyObject()
	}
	if !isObjectLike(v) {
		l.errorf(a.Expr.Range(), "Invalid properties",
			"The properties must be an object, like { key = \"value\" }; got %s.", v.Type().FriendlyName())
		return emptyObject()
	}
	if v.IsNull() {
		return emptyObject()
	}
	b, err := valueJSON(v)
	if err != nil {
		l.errorf(a.Expr.Range(), "Invalid properties", "The properties cannot be encoded as JSON: %s.", err)
		return emptyObject()
	}
	if !l.checkPropertiesAt(a.Expr, v, b) {
		return emptyObject()
	}
	return b
}

// isObjectLike reports whether v can be a properties object. An unknown
// value of unknown type passes: its shape is only known per member.
func isObjectLike(v cty.Value) bool {
	ty := v.Type()
	return ty.IsObjectType() || ty.IsMapType() || ty == cty.DynamicPseudoType
}

// valueJSON encodes a wholly known value as plain JSON (no type information).
func valueJSON(v cty.Value) (json.RawMessage, error) {
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("the value is not known")
	}
	if fastJSON(v.Type()) && !v.ContainsMarked() {
		b, err := appendValueJSON(nil, v)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(b), nil
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

// jsonValue decodes plain JSON into a cty value of the JSON's implied type
// (objects become objects, arrays tuples).
func jsonValue(b json.RawMessage) (cty.Value, error) {
	if len(b) == 0 {
		return cty.EmptyObjectVal, nil
	}
	ty, err := ctyjson.ImpliedType(b)
	if err != nil {
		return cty.NilVal, err
	}
	return ctyjson.Unmarshal(b, ty)
}

// convertError renders a cty conversion error with the path it is about.
func convertError(err error) string {
	var pe cty.PathError
	if !errors.As(err, &pe) || len(pe.Path) == 0 {
		return err.Error()
	}
	return pathString(pe.Path) + ": " + pe.Error()
}

// pathString renders a cty path as `attribute "a", element 0`.
func pathString(p cty.Path) string {
	var parts []string
	for _, step := range p {
		switch s := step.(type) {
		case cty.GetAttrStep:
			parts = append(parts, fmt.Sprintf("attribute %q", s.Name))
		case cty.IndexStep:
			if s.Key.Type() == cty.String {
				parts = append(parts, fmt.Sprintf("element %q", s.Key.AsString()))
			} else if s.Key.Type() == cty.Number {
				parts = append(parts, "element "+s.Key.AsBigFloat().Text('f', -1))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// validIdentifier reports whether name can be written in a reference.
func validIdentifier(name string) bool { return hclsyntax.ValidIdentifier(name) }
