package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Validator answers for the stack's providers, each named by its provider
// key ("simulator", "simulator.nfs-auth"). The plugin host implements it with
// the running provider processes.
type Validator interface {
	Metadata(ctx context.Context, providerKey string) (provider.Metadata, error)
	ValidateInstance(ctx context.Context, providerKey, typ string, props json.RawMessage) error
	ValidateFlavor(ctx context.Context, providerKey, typ string, props json.RawMessage, alloc flavor.Allocation) error
}

// ValidateWithProviders checks a loaded stack against what its providers
// serve: each instance type, flavor type, load balancer name and authorizer
// type must be listed in the provider's Metadata, and each autoscale
// check's source must serve metrics (of any type: a check names none, the
// provider reads the query in its own language); properties must fit the
// type's schema (no unknown attribute unless the schema is open, every
// required one present, values of the declared type); then the provider's
// own Validate runs. Problems are reported at the attribute they are about:
// provider diagnostics with a path point inside the properties object.
//
// A flavor block without a type gets its provider's only flavor type here
// (Type set, TypeImplied true), so call this before acting on a stack.
func ValidateWithProviders(ctx context.Context, st *Stack, v Validator) hcl.Diagnostics {
	pv := &providerValidation{ctx: ctx, st: st, v: v, meta: map[string]*metadataResult{}}
	for _, g := range st.Groups {
		pv.group(g)
	}
	for _, lb := range st.LoadBalancers {
		pv.loadBalancer(lb)
	}
	for _, e := range st.Enrollments {
		pv.enrollment(e)
	}
	return pv.diags
}

// providerValidation is one ValidateWithProviders run; it asks each provider
// for its metadata once.
type providerValidation struct {
	ctx   context.Context
	st    *Stack
	v     Validator
	meta  map[string]*metadataResult
	diags hcl.Diagnostics
}

type metadataResult struct {
	md provider.Metadata
	ok bool
}

// metadata returns a provider's metadata, reporting (once) a provider that
// cannot answer.
func (pv *providerValidation) metadata(key string) (provider.Metadata, bool) {
	if r, done := pv.meta[key]; done {
		return r.md, r.ok
	}
	md, err := pv.v.Metadata(pv.ctx, key)
	r := &metadataResult{md: md, ok: err == nil}
	pv.meta[key] = r
	if err != nil {
		var subject *hcl.Range
		if p := pv.st.Provider(key); p != nil {
			subject = subjectOf(p.DeclRange)
		}
		pv.diags = append(pv.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Provider unavailable",
			Detail:   fmt.Sprintf("Provider %q could not describe itself: %s", key, err),
			Subject:  subject,
		})
	}
	return r.md, r.ok
}

func (pv *providerValidation) group(g *Group) {
	in := &g.Instance
	if md, ok := pv.metadata(in.Provider); ok {
		if obj, ok := pv.find(md, in.Provider, provider.KindInstance, "instance type", in.Type, in.TypeRange, in.DeclRange); ok {
			what := fmt.Sprintf("provider %q (instance type %q)", in.Provider, in.Type)
			if pv.checkJSON(obj.Schema, in, what) {
				err := pv.v.ValidateInstance(pv.ctx, in.Provider, in.Type, in.Properties)
				pv.providerError(err, in.PropertiesExpr, in.fallback(), what)
			}
		}
	}
	pv.flavors(g)
	pv.autoscale(g)
}

func (pv *providerValidation) flavors(g *Group) {
	for i := range g.Flavors {
		f := &g.Flavors[i]
		md, ok := pv.metadata(f.Provider)
		if !ok || !pv.flavorType(md, f) {
			continue
		}
		obj, ok := pv.find(md, f.Provider, provider.KindFlavor, "flavor type", f.Type, f.TypeRange, f.DeclRange)
		if !ok {
			continue
		}
		what := fmt.Sprintf("provider %q (flavor type %q)", f.Provider, f.Type)
		if pv.checkJSON(obj.Schema, f, what) {
			err := pv.v.ValidateFlavor(pv.ctx, f.Provider, f.Type, f.Properties, g.Allocation())
			err = pv.allocationErrors(err, g, what)
			pv.providerError(err, f.PropertiesExpr, f.fallback(), what)
		}
	}
}

// allocationErrors reports the diagnostics of a flavor's Validate that are
// about the group's allocation (their path starts with
// flavor.AllocationPath) at the group's logical_ids, and returns the rest.
func (pv *providerValidation) allocationErrors(err error, g *Group, what string) error {
	var pd provider.Diagnostics
	if !errors.As(err, &pd) {
		return err
	}
	var rest provider.Diagnostics
	for _, d := range pd {
		if len(d.Path) < 2 || d.Path[0] != flavor.AllocationPath || d.Path[1] != "logical_ids" {
			rest = append(rest, d)
			continue
		}
		subject := g.DeclRange
		if g.LogicalIDsExpr != nil {
			subject, _, _ = exprAt(g.LogicalIDsExpr, d.Path[2:])
		}
		d.Path = nil
		pv.providerError(provider.Diagnostics{d}, nil, subject, what)
	}
	if len(rest) == 0 {
		return nil
	}
	return rest
}

// autoscale checks that the source of each autoscale check serves metrics.
func (pv *providerValidation) autoscale(g *Group) {
	if g.Autoscale == nil {
		return
	}
	for _, c := range g.Autoscale.Checks {
		md, ok := pv.metadata(c.Source)
		if !ok || len(md.Types(provider.KindMetrics)) > 0 {
			continue
		}
		subject := c.SourceRange
		if subject.Filename == "" {
			subject = c.DeclRange
		}
		pv.errorf(subject, "Not a metrics provider",
			"Provider %q serves no metrics, so check %q cannot query it; source must name a provider that serves metrics, like prometheus.", c.Source, c.Name)
	}
}

// flavorType fills in the type of a flavor block that names none, when its
// provider serves exactly one flavor type.
func (pv *providerValidation) flavorType(md provider.Metadata, f *Plugin) bool {
	if f.Type != "" {
		return true
	}
	types := md.Types(provider.KindFlavor)
	switch {
	case len(types) == 1 && types[0] != provider.AnyName:
		f.Type, f.TypeImplied = types[0], true
		return true
	case len(types) == 0:
		pv.errorf(f.ProviderRange, "Not a flavor provider", "Provider %q serves no flavors.", f.Provider)
	default:
		pv.errorf(f.DeclRange, "Missing flavor type",
			"Provider %q serves several flavor types (%s); name one with type = \"...\".", f.Provider, quoteList(types))
	}
	return false
}

func (pv *providerValidation) loadBalancer(lb *LoadBalancer) {
	md, ok := pv.metadata(lb.Provider)
	if !ok {
		return
	}
	pv.find(md, lb.Provider, provider.KindLoadBalancer, "load balancer", lb.Name, lb.DeclRange, lb.DeclRange)
}

// enrollment checks the target type and the shape of its properties. Their
// values depend on each member, so they are checked with an unknown member
// and the provider's own Validate runs per member when the enrollment syncs.
func (pv *providerValidation) enrollment(e *Enrollment) {
	t := &e.Target
	md, ok := pv.metadata(t.Provider)
	if !ok {
		return
	}
	obj, ok := pv.find(md, t.Provider, provider.KindAuthorizer, "authorizer type", t.Type, t.TypeRange, t.DeclRange)
	if !ok {
		return
	}
	expr, diags := t.PropertiesExpression()
	if diags.HasErrors() {
		pv.diags = append(pv.diags, diags...)
		return
	}
	val, diags := expr.Value(t.evalContext(cty.UnknownVal(MemberType())))
	if diags.HasErrors() {
		pv.diags = append(pv.diags, diags...)
		return
	}
	fallback := t.PropertiesRange
	if t.PropertiesExpr == nil {
		fallback = t.DeclRange
	}
	what := fmt.Sprintf("provider %q (authorizer type %q)", t.Provider, t.Type)
	pv.diags = append(pv.diags, checkSchema(obj.Schema, val, t.PropertiesExpr, fallback, what)...)
}

// find looks up an object the provider must serve, reporting it at subject
// (or fallback when subject is unset) with the names it does serve.
func (pv *providerValidation) find(md provider.Metadata, key string, kind provider.Kind, noun, name string, subject, fallback hcl.Range) (provider.Object, bool) {
	if obj, ok := md.Find(kind, name); ok {
		return obj, true
	}
	if subject.Filename == "" {
		subject = fallback
	}
	served := md.Types(kind)
	detail := fmt.Sprintf("Provider %q has no %s %q", key, noun, name)
	if len(served) == 0 {
		detail = fmt.Sprintf("Provider %q serves no %ss.", key, noun)
	} else {
		detail += fmt.Sprintf("; it serves %s.", quoteList(served))
		if s := suggest(name, served); s != "" {
			detail += fmt.Sprintf(" Did you mean %q?", s)
		}
	}
	pv.errorf(subject, "Unknown "+noun, "%s", detail)
	return provider.Object{}, false
}

// checkJSON checks a plugin's properties against a schema; it reports
// whether they passed (and the provider's Validate should run).
func (pv *providerValidation) checkJSON(schema provider.Schema, p *Plugin, what string) bool {
	val, err := jsonValue(p.Properties)
	if err != nil {
		pv.errorf(p.fallback(), "Invalid properties", "The properties are not a JSON object: %s.", err)
		return false
	}
	diags := checkSchema(schema, val, p.PropertiesExpr, p.fallback(), what)
	pv.diags = append(pv.diags, diags...)
	return !diags.HasErrors()
}

// providerError turns what a provider's Validate returned into diagnostics:
// provider.Diagnostics keep their severity and point at their path inside
// expr; any other error is reported at fallback.
func (pv *providerValidation) providerError(err error, expr hcl.Expression, fallback hcl.Range, what string) {
	if err == nil {
		return
	}
	var pd provider.Diagnostics
	if !errors.As(err, &pd) {
		pv.errorf(fallback, "Invalid properties", "Rejected by %s: %s", what, err)
		return
	}
	for _, d := range pd {
		sev := hcl.DiagError
		if d.Severity == provider.Warning {
			sev = hcl.DiagWarning
		}
		subject := fallback
		if expr != nil {
			subject, _, _ = exprAt(expr, d.Path)
		}
		detail := "Reported by " + what + "."
		if d.Detail != "" {
			detail = d.Detail + "\n\n" + detail
		}
		pv.diags = append(pv.diags, &hcl.Diagnostic{
			Severity: sev,
			Summary:  d.Summary,
			Detail:   detail,
			Subject:  subjectOf(subject),
		})
	}
}

func (pv *providerValidation) errorf(subject hcl.Range, summary, format string, args ...any) {
	pv.diags = append(pv.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subjectOf(subject),
	})
}

// fallback is where a problem with the properties as a whole is reported:
// the properties attribute, or the block when it has none.
func (p *Plugin) fallback() hcl.Range {
	if p.PropertiesExpr != nil {
		return p.PropertiesRange
	}
	return p.DeclRange
}

// checkSchema checks a properties value against a provider schema. Unknown
// values (an enrollment member's) pass the type check; a wholly unknown
// object cannot be checked at all.
func checkSchema(schema provider.Schema, val cty.Value, expr hcl.Expression, fallback hcl.Range, what string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	errorAt := func(r hcl.Range, summary, format string, args ...any) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   fmt.Sprintf(format, args...),
			Subject:  subjectOf(r),
		})
	}
	if !val.IsKnown() {
		return nil
	}
	present := map[string]cty.Value{}
	if !val.IsNull() {
		switch ty := val.Type(); {
		case ty.IsObjectType():
			for name := range ty.AttributeTypes() {
				present[name] = val.GetAttr(name)
			}
		case ty.IsMapType():
			for name, v := range val.AsValueMap() {
				present[name] = v
			}
		}
	}
	declared := make([]string, 0, len(schema.Attributes))
	for name := range schema.Attributes {
		declared = append(declared, name)
	}
	slices.Sort(declared)

	names := make([]string, 0, len(present))
	for name := range present {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v := present[name]
		valueRange, keyRange, found := exprAt(expr, []string{name})
		if expr == nil || !found {
			valueRange, keyRange = fallback, fallback
		}
		attr, ok := schema.Attributes[name]
		if !ok {
			if !schema.Open {
				detail := fmt.Sprintf("%s has no property %q", upperFirst(what), name)
				if s := suggest(name, declared); s != "" {
					detail += fmt.Sprintf("; did you mean %q?", s)
				} else if len(declared) > 0 {
					detail += fmt.Sprintf("; it takes %s.", quoteList(declared))
				} else {
					detail += "; it takes none."
				}
				errorAt(keyRange, "Unsupported property", "%s", detail)
			}
			continue
		}
		if v.IsNull() {
			continue
		}
		ty, err := attributeType(attr.Type)
		if err != nil {
			errorAt(fallback, "Invalid provider schema",
				"%s declares property %q with type %q: %s.", upperFirst(what), name, attr.Type, err)
			continue
		}
		if _, err := convert.Convert(v, ty); err != nil {
			errorAt(valueRange, "Incorrect property type",
				"Property %q of %s must be %s: %s.", name, what, attr.Type, convertError(err))
		}
	}
	for _, name := range declared {
		attr := schema.Attributes[name]
		if v, ok := present[name]; attr.Required && (!ok || v.IsNull()) {
			detail := fmt.Sprintf("%s requires the property %q", upperFirst(what), name)
			if attr.Description != "" {
				detail += ": " + attr.Description
			}
			errorAt(fallback, "Missing required property", "%s.", detail)
		}
	}
	return diags
}

// attributeType parses a schema attribute type ("list(string)"); empty is any.
func attributeType(s string) (cty.Type, error) {
	if strings.TrimSpace(s) == "" {
		return cty.DynamicPseudoType, nil
	}
	expr, diags := hclsyntax.ParseExpression([]byte(s), "<schema>", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilType, diags
	}
	ty, diags := typeexpr.TypeConstraint(expr)
	if diags.HasErrors() {
		return cty.NilType, diags
	}
	return ty, nil
}

// exprAt follows path (object keys, tuple indexes) into an object or tuple
// constructor expression. It returns the range of the deepest expression
// reached, the range of the key (or element) that led there, and whether
// the whole path was followed. A nil expr yields zero ranges.
func exprAt(expr hcl.Expression, path []string) (value, key hcl.Range, found bool) {
	if expr == nil {
		return hcl.Range{}, hcl.Range{}, false
	}
	cur := expr
	key = expr.Range()
	for _, step := range path {
		for {
			p, ok := cur.(*hclsyntax.ParenthesesExpr)
			if !ok {
				break
			}
			cur = p.Expression
		}
		var next hcl.Expression
		switch e := cur.(type) {
		case *hclsyntax.ObjectConsExpr:
			for _, item := range e.Items {
				k, d := item.KeyExpr.Value(nil)
				if !d.HasErrors() && k.IsKnown() && !k.IsNull() && k.Type() == cty.String && k.AsString() == step {
					next, key = item.ValueExpr, item.KeyExpr.Range()
				}
			}
		case *hclsyntax.TupleConsExpr:
			if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(e.Exprs) {
				next = e.Exprs[i]
				key = next.Range()
			}
		}
		if next == nil {
			return cur.Range(), key, false
		}
		cur = next
	}
	return cur.Range(), key, true
}

// subjectOf is r as a diagnostic subject; a zero range (a stack read from
// state has no source) is no subject.
func subjectOf(r hcl.Range) *hcl.Range {
	if r.Filename == "" {
		return nil
	}
	return r.Ptr()
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
