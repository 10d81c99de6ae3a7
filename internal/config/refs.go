package config

import (
	"fmt"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// reservedRoots are the first words of references to things that are not
// providers; a provider may not be named after one, or `provider = group.x`
// would be ambiguous.
var reservedRoots = map[string]string{
	blockGroup:        "a group",
	blockLoadBalancer: "a load balancer",
	blockIngress:      "an ingress",
	blockEnrollment:   "an enrollment",
	blockStack:        "the stack",
	blockProvider:     "a provider block",
	"member":          "an enrollment member",
	// Keywords: a reference `null` would be read as the literal.
	"null":  "a literal value",
	"true":  "a literal value",
	"false": "a literal value",
}

// reference returns the static traversal an expression is (simulator,
// group.cattle). A quoted string is the commonest mistake, so it gets its own hint.
func (l *loader) reference(expr hcl.Expression, example string) (hcl.Traversal, bool) {
	t, d := hcl.AbsTraversalForExpr(expr)
	if !d.HasErrors() {
		return t, true
	}
	detail := fmt.Sprintf("Expected a reference like %s.", example)
	if v, vd := expr.Value(nil); !vd.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
		detail = fmt.Sprintf("Expected a reference like %s, not a string: write %s without quotes.", example, v.AsString())
	}
	l.errorf(expr.Range(), "Invalid reference", "%s", detail)
	return nil, false
}

// providerRef resolves `simulator` or `simulator.nfs-auth` to a declared provider key.
func (l *loader) providerRef(expr hcl.Expression) (string, bool) {
	const example = "simulator or simulator.nfs-auth"
	t, ok := l.reference(expr, example)
	if !ok {
		return "", false
	}
	root := t.RootName()
	if what, reserved := reservedRoots[root]; reserved {
		l.errorf(expr.Range(), "Invalid provider reference",
			"This refers to %s, not a provider; expected a provider like %s.", what, example)
		return "", false
	}
	key := root
	switch len(t) {
	case 1:
	case 2:
		attr, isAttr := t[1].(hcl.TraverseAttr)
		if !isAttr {
			l.errorf(expr.Range(), "Invalid provider reference", "Expected a provider like %s.", example)
			return "", false
		}
		key += "." + attr.Name
	default:
		l.errorf(expr.Range(), "Invalid provider reference", "Expected a provider like %s.", example)
		return "", false
	}
	if _, declared := l.providers[key]; declared {
		return key, true
	}
	detail := fmt.Sprintf("No provider %q is declared", key)
	if name, alias, hasAlias := strings.Cut(key, "."); hasAlias {
		detail += fmt.Sprintf("; declare it with provider %q { alias = %q }.", name, alias)
	} else {
		detail += fmt.Sprintf("; declare it with provider %q {}.", key)
	}
	if s := suggest(key, l.providerKeys); s != "" {
		detail += fmt.Sprintf(" Did you mean %s?", s)
	}
	l.errorf(expr.Range(), "Reference to undeclared provider", "%s", detail)
	return "", false
}

// objectRef resolves a reference like group.cattle to a name declared in
// declared. kind is the reference's first word and the block type.
func (l *loader) objectRef(expr hcl.Expression, kind string, declared map[string]hcl.Range, names []string) (string, bool) {
	example := kind + ".name"
	switch kind {
	case blockGroup:
		example = "group.cattle"
	case blockLoadBalancer:
		example = "loadbalancer.lb1"
	}
	t, ok := l.reference(expr, example)
	if !ok {
		return "", false
	}
	var name string
	if len(t) == 2 && t.RootName() == kind {
		if attr, isAttr := t[1].(hcl.TraverseAttr); isAttr {
			name = attr.Name
		}
	}
	if name == "" {
		what := reservedRoots[kind]
		l.errorf(expr.Range(), "Invalid reference", "Expected a reference to %s, like %s.", what, example)
		return "", false
	}
	if _, ok := declared[name]; !ok {
		detail := fmt.Sprintf("No %s named %q is declared.", kind, name)
		if s := suggest(name, names); s != "" {
			detail += fmt.Sprintf(" Did you mean %s.%s?", kind, s)
		}
		l.errorf(expr.Range(), "Reference to undeclared "+kind, "%s", detail)
		return "", false
	}
	return name, true
}

// objectRefs resolves a list of references, like groups = [group.a, group.b].
func (l *loader) objectRefs(a *hcl.Attribute, kind string, declared map[string]hcl.Range, names []string) []string {
	exprs, d := hcl.ExprList(a.Expr)
	if d.HasErrors() {
		l.errorf(a.Expr.Range(), "Invalid reference list", "Expected a list of references, like [%s.a, %s.b].", kind, kind)
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range exprs {
		name, ok := l.objectRef(e, kind, declared, names)
		if !ok {
			continue
		}
		if seen[name] {
			l.errorf(e.Range(), "Duplicate reference", "%s.%s is listed twice.", kind, name)
			continue
		}
		seen[name] = true
		out = append(out, name)
	}
	if len(exprs) == 0 {
		l.errorf(a.Expr.Range(), "Empty reference list", "The argument %q needs at least one %s.", a.Name, kind)
	}
	return out
}

// suggest returns the candidate closest to given when it is close enough to
// be a typo (the same threshold HCL uses), or "".
func suggest(given string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := levenshtein.Distance(given, c, nil); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}
