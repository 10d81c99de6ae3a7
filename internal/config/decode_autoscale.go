package config

// The autoscale block of a group: its bounds, checks and scale policies.

import (
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// blockAutoscale is the autoscale block inside a group block.
const blockAutoscale = "autoscale"

var (
	autoscaleSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "min", Required: true}, {Name: "max", Required: true},
			{Name: "evaluation_interval"}, {Name: "cooldown"},
		},
		Blocks: []hcl.BlockHeaderSchema{
			{Type: "check", LabelNames: []string{"name"}},
			{Type: "scale_down"}, {Type: "scale_up"},
		},
	}
	autoscaleCheckSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "source", Required: true}, {Name: "query", Required: true}, {Name: "target_per_instance", Required: true},
		},
	}
	scalePolicySchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "stabilization"}, {Name: "max_step"}},
	}
)

// decodeAutoscale decodes a group's autoscale block; ok is false when any
// of it was wrong (and reported), so the group's size is not judged by
// bounds that are not known.
func (l *loader) decodeAutoscale(b *hcl.Block, group string) (*Autoscale, bool) {
	a := DefaultAutoscale()
	a.DeclRange = b.DefRange
	content, d := b.Body.Content(autoscaleSchema)
	l.diags = append(l.diags, d...)
	ok := !d.HasErrors()

	minAttr, maxAttr := content.Attributes["min"], content.Attributes["max"]
	if minAttr != nil {
		n, good := l.intAttr(minAttr, 0, maxInt, true)
		a.Min, a.MinRange, ok = n, minAttr.Expr.Range(), ok && good
	}
	if maxAttr != nil {
		n, good := l.intAttr(maxAttr, 1, maxInt, true)
		good = good && l.checkGroupSizeAt(maxAttr.Expr.Range(), group, n)
		a.Max, a.MaxRange, ok = n, maxAttr.Expr.Range(), ok && good
	}
	if ok && a.Min > a.Max {
		l.errorf(a.MinRange, "Invalid autoscale bounds",
			"The group autoscales between min and max, so min (%d) must be at most max (%d, set at %s).", a.Min, a.Max, rangeString(a.MaxRange))
		ok = false
	}
	duration := func(name string, lo time.Duration, dst *Duration) {
		if at := content.Attributes[name]; at != nil {
			v, good := l.durationAttr(at, lo)
			*dst, ok = v, ok && good
		}
	}
	duration("evaluation_interval", MinEvaluationInterval, &a.EvaluationInterval)
	duration("cooldown", 0, &a.Cooldown)

	checks := content.Blocks.OfType("check")
	if len(checks) == 0 && !d.HasErrors() {
		l.errorf(b.DefRange, "Missing check block",
			"An autoscale block needs at least one check block, naming the metrics provider to query, the query and the value one instance should carry (target_per_instance).")
		ok = false
	}
	first := map[string]hcl.Range{}
	for _, cb := range checks {
		c, good := l.decodeCheck(cb, first)
		if good {
			a.Checks = append(a.Checks, c)
		}
		ok = ok && good
	}
	if pb := l.single(b, "scale_down", content.Blocks.OfType("scale_down"), ""); pb != nil {
		ok = l.decodeScalePolicy(&a.ScaleDown, pb) && ok
	}
	if pb := l.single(b, "scale_up", content.Blocks.OfType("scale_up"), ""); pb != nil {
		ok = l.decodeScalePolicy(&a.ScaleUp, pb) && ok
	}
	return &a, ok
}

// decodeCheck decodes one check block; first holds the names of the checks
// before it, for duplicates.
func (l *loader) decodeCheck(b *hcl.Block, first map[string]hcl.Range) (Check, bool) {
	c := Check{Name: b.Labels[0], DeclRange: b.DefRange}
	if !l.checkName(b, true) {
		return c, false
	}
	if r, dup := first[c.Name]; dup {
		l.errorf(b.LabelRanges[0], "Duplicate check",
			"A check named %q is already declared at %s; the checks of an autoscale block have unique names.", c.Name, rangeString(r))
		return c, false
	}
	first[c.Name] = b.DefRange
	content, d := b.Body.Content(autoscaleCheckSchema)
	l.diags = append(l.diags, d...)
	ok := !d.HasErrors()
	if a := content.Attributes["source"]; a != nil {
		var good bool
		c.Source, good = l.providerRef(a.Expr)
		c.SourceRange, ok = a.Expr.Range(), ok && good
	}
	if a := content.Attributes["query"]; a != nil {
		q, good := l.stringAttr(a, true)
		if err := checkQuery(q); good && err != nil {
			l.errorf(a.Expr.Range(), "Invalid query", "%s.", upperFirst(err.Error()))
			good = false
		}
		c.Query, c.QueryRange, ok = q, a.Expr.Range(), ok && good
	}
	if a := content.Attributes["target_per_instance"]; a != nil {
		f, good := l.positiveAttr(a)
		c.TargetPerInstance, c.TargetRange, ok = f, a.Expr.Range(), ok && good
	}
	return c, ok
}

// positiveAttr decodes a required finite number greater than 0.
func (l *loader) positiveAttr(a *hcl.Attribute) (float64, bool) {
	v, ok := l.value(a, cty.Number, nil, true)
	if !ok {
		return 0, false
	}
	bf := v.AsBigFloat()
	f, _ := bf.Float64()
	if bf.Sign() <= 0 || f == 0 || math.IsInf(f, 0) {
		l.errorf(a.Expr.Range(), "Invalid value",
			"The argument %q must be a finite number greater than 0; got %s.", a.Name, bf.Text('g', 10))
		return 0, false
	}
	return f, true
}

func (l *loader) decodeScalePolicy(p *ScalePolicy, b *hcl.Block) bool {
	content, d := b.Body.Content(scalePolicySchema)
	l.diags = append(l.diags, d...)
	ok := !d.HasErrors()
	if a := content.Attributes["stabilization"]; a != nil {
		v, good := l.durationAttr(a, 0)
		p.Stabilization, ok = v, ok && good
	}
	if a := content.Attributes["max_step"]; a != nil {
		n, good := l.intAttr(a, 0, maxInt, false)
		p.MaxStep, ok = n, ok && good
	}
	return ok
}

// autoscaled applies a group's autoscale block to its allocation: only
// cattle autoscale; the size is the start size, within the bounds, and
// min when the group leaves size out.
func (l *loader) autoscaled(g *Group, content *hcl.BodyContent, a *Autoscale, ok bool) {
	sa, la := content.Attributes["size"], content.Attributes["logical_ids"]
	switch {
	case la != nil && sa != nil:
		return // reported as a conflicting allocation
	case la != nil:
		l.errorf(a.DeclRange, "Autoscale on pets",
			"Only cattle autoscale: a group of pets has one instance per logical ID (listed at %s). Write size = N instead of logical_ids, or remove the autoscale block.",
			rangeString(la.NameRange))
		return
	case !ok:
		return
	case sa == nil:
		n := a.Min
		g.Size = &n
	case g.Size == nil:
		return // a size already reported as wrong
	case !a.Within(*g.Size):
		l.errorf(sa.Expr.Range(), "Size outside autoscale bounds",
			"The group autoscales between min = %d and max = %d (set at %s), so its size, the start size, must be within them; got %d. Leave size out to start at min.",
			a.Min, a.Max, rangeString(a.MinRange), *g.Size)
		return
	}
	a.StartSize = *g.Size
	g.Autoscale = a
}
