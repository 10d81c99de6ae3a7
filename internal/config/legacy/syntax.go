package legacy

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// newBody is an empty body spanning rng.
func newBody(rng hcl.Range) *hclsyntax.Body {
	end := rng
	end.Start = rng.End
	return &hclsyntax.Body{Attributes: hclsyntax.Attributes{}, SrcRange: rng, EndRange: end}
}

// setAttr sets name = expr in body; nameRange is the old field's name.
func setAttr(body *hclsyntax.Body, name string, nameRange hcl.Range, expr hclsyntax.Expression) {
	body.Attributes[name] = &hclsyntax.Attribute{
		Name:        name,
		Expr:        expr,
		SrcRange:    hcl.RangeOver(nameRange, expr.Range()),
		NameRange:   nameRange,
		EqualsRange: nameRange,
	}
}

// newBlock is a block whose header (type and labels) is at at: the old
// field or name the block comes from, so config's messages about the
// block ("Duplicate group", "Missing flavor block") point there.
func newBlock(typ string, at hcl.Range, body *hclsyntax.Body, labels ...string) *hclsyntax.Block {
	ranges := make([]hcl.Range, len(labels))
	for i := range labels {
		ranges[i] = at
	}
	return &hclsyntax.Block{
		Type:            typ,
		Labels:          labels,
		Body:            body,
		TypeRange:       at,
		LabelRanges:     ranges,
		OpenBraceRange:  body.SrcRange,
		CloseBraceRange: body.EndRange,
	}
}

// reference is a traversal like simulator, simulator.nfs-auth or
// group.cattle, all at rng.
func reference(rng hcl.Range, root string, attrs ...string) *hclsyntax.ScopeTraversalExpr {
	t := hcl.Traversal{hcl.TraverseRoot{Name: root, SrcRange: rng}}
	for _, a := range attrs {
		t = append(t, hcl.TraverseAttr{Name: a, SrcRange: rng})
	}
	return &hclsyntax.ScopeTraversalExpr{Traversal: t, SrcRange: rng}
}

func literal(v cty.Value, rng hcl.Range) *hclsyntax.LiteralValueExpr {
	return &hclsyntax.LiteralValueExpr{Val: v, SrcRange: rng}
}

// openRange is the first character of rng.
func openRange(rng hcl.Range) hcl.Range {
	r := rng
	r.End = r.Start
	if r.End.Byte < rng.End.Byte {
		r.End.Byte++
		r.End.Column++
	}
	return r
}

// value converts a plain value: objects, lists and literals, as they are.
func (r *reader) value(n *node) hclsyntax.Expression {
	expr, _ := r.convert(n, nil)
	return expr
}

// convert turns a value into an expression and its HCL text. When str is
// set, it converts strings (to expressions that may refer to member, for
// enrollment properties); otherwise strings are literals.
func (r *reader) convert(n *node, str func(n *node) (hclsyntax.Expression, string)) (hclsyntax.Expression, string) {
	switch n.kind {
	case kindObject:
		obj := &hclsyntax.ObjectConsExpr{SrcRange: n.rng, OpenRange: openRange(n.rng)}
		texts := make([]string, 0, len(n.fields))
		for _, f := range n.fields {
			v, text := r.convert(f.value, str)
			obj.Items = append(obj.Items, hclsyntax.ObjectConsItem{
				KeyExpr:   &hclsyntax.ObjectConsKeyExpr{Wrapped: literal(cty.StringVal(f.name), f.nameRange)},
				ValueExpr: v,
			})
			texts = append(texts, keyText(f.name)+" = "+text)
		}
		if len(texts) == 0 {
			return obj, "{}"
		}
		return obj, "{ " + strings.Join(texts, ", ") + " }"
	case kindArray:
		tuple := &hclsyntax.TupleConsExpr{SrcRange: n.rng, OpenRange: openRange(n.rng)}
		texts := make([]string, 0, len(n.items))
		for _, item := range n.items {
			v, text := r.convert(item, str)
			tuple.Exprs = append(tuple.Exprs, v)
			texts = append(texts, text)
		}
		return tuple, "[" + strings.Join(texts, ", ") + "]"
	case kindString:
		if str != nil {
			return str(n)
		}
		v := cty.StringVal(n.text)
		return literal(v, n.rng), valueText(v)
	case kindNumber:
		v, err := cty.ParseNumberVal(n.text)
		if err != nil {
			r.errorf(n.rng, "Invalid number", "%s cannot be read as a number: %s.", n.text, err)
			v = cty.NullVal(cty.Number)
		}
		return literal(v, n.rng), valueText(v)
	case kindBool:
		v := cty.BoolVal(n.text == "true")
		return literal(v, n.rng), valueText(v)
	}
	return literal(cty.NullVal(cty.DynamicPseudoType), n.rng), "null"
}

// valueText is a literal as HCL source.
func valueText(v cty.Value) string {
	return string(hclwrite.TokensForValue(v).Bytes())
}

// hclKeywords cannot be written as bare object keys: HCL reads them as
// literals, or as the start of a for expression.
var hclKeywords = map[string]bool{"null": true, "true": true, "false": true, "for": true, "in": true, "if": true}

// keyText is an object key as HCL source: bare when it can be.
func keyText(k string) string {
	if hclsyntax.ValidIdentifier(k) && !hclKeywords[k] {
		return k
	}
	return valueText(cty.StringVal(k))
}

// memberString converts an enrollment property string: {{.ID}}-style
// actions become member references (a reference alone, or a template
// "${member.id}" among text); a string without actions stays literal.
func (r *reader) memberString(n *node) (hclsyntax.Expression, string) {
	parts, ok, err := memberTemplate(n.text)
	if err != nil {
		r.errorf(n.rng, "Unsupported template action", "%s.", upperFirst(err.Error()))
	}
	if !ok || err != nil {
		v := cty.StringVal(n.text)
		return literal(v, n.rng), valueText(v)
	}
	if len(parts) == 1 && parts[0].ref != nil {
		return memberReference(*parts[0].ref, n.rng)
	}
	tmpl := &hclsyntax.TemplateExpr{SrcRange: n.rng}
	var text strings.Builder
	text.WriteByte('"')
	for _, p := range parts {
		if p.ref == nil {
			tmpl.Parts = append(tmpl.Parts, literal(cty.StringVal(p.text), n.rng))
			quoted := valueText(cty.StringVal(p.text))
			text.WriteString(quoted[1 : len(quoted)-1])
			continue
		}
		expr, refText := memberReference(*p.ref, n.rng)
		tmpl.Parts = append(tmpl.Parts, expr)
		text.WriteString("${" + refText + "}")
	}
	text.WriteByte('"')
	return tmpl, text.String()
}

// memberReference is member.id, member.logical_id or member.tags["NAME"].
func memberReference(ref memberRef, rng hcl.Range) (hclsyntax.Expression, string) {
	t := hcl.Traversal{hcl.TraverseRoot{Name: "member", SrcRange: rng}, hcl.TraverseAttr{Name: ref.attr, SrcRange: rng}}
	text := "member." + ref.attr
	if ref.attr == "tags" {
		t = append(t, hcl.TraverseIndex{Key: cty.StringVal(ref.tag), SrcRange: rng})
		text += "[" + valueText(cty.StringVal(ref.tag)) + "]"
	}
	return &hclsyntax.ScopeTraversalExpr{Traversal: t, SrcRange: rng}, text
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
