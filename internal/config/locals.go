package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// localDecl is one attribute of a locals block.
type localDecl struct {
	attr *hcl.Attribute
	deps []string
}

// decodeLocals declares every attribute of the locals blocks (a stack may
// have several) and evaluates them in dependency order: a local may refer
// to variables, to other locals and call functions. A cycle is reported
// with where each local of it is. The values are kept in the stack so that
// outputs evaluated from a saved plan see them.
func (l *loader) decodeLocals(blocks []*hcl.Block) {
	decls := map[string]*localDecl{}
	var order []string
	for _, b := range blocks {
		attrs, d := b.Body.JustAttributes()
		l.diags = append(l.diags, d...)
		names := make([]string, 0, len(attrs))
		for n := range attrs {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int { return attrs[a].Range.Start.Byte - attrs[b].Range.Start.Byte })
		for _, n := range names {
			a := attrs[n]
			if first, dup := decls[n]; dup {
				l.errorf(a.NameRange, "Duplicate local value",
					"local.%s is already defined at %s; each local is defined once.", n, rangeString(first.attr.NameRange))
				continue
			}
			ld := &localDecl{attr: a}
			for _, t := range a.Expr.Variables() {
				if name, ok := refName(t, "local"); ok {
					ld.deps = append(ld.deps, name)
				}
			}
			decls[n] = ld
			order = append(order, n)
		}
	}
	l.localNames = order
	l.localVals = map[string]cty.Value{}
	state := map[string]int{} // 0 new, 1 evaluating, 2 done
	var stack []string
	var visit func(name string) bool
	visit = func(name string) bool {
		switch state[name] {
		case 2:
			return true
		case 1:
			l.localCycle(decls, append(stack, name))
			return false
		}
		state[name] = 1
		stack = append(stack, name)
		good := true
		for _, dep := range decls[name].deps {
			if _, declared := decls[dep]; declared && !visit(dep) {
				good = false
				break
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = 2
		v := cty.DynamicVal
		if good {
			v = l.evalLocal(decls[name].attr)
		}
		l.localVals[name] = v
		return good
	}
	for _, n := range order {
		if state[n] == 0 {
			visit(n)
		}
	}
	l.st.Locals = map[string]ctyjson.SimpleJSONValue{}
	for n, v := range l.localVals {
		if !v.IsWhollyKnown() {
			continue
		}
		if v.ContainsMarked() {
			if l.st.SensitiveLocals == nil {
				l.st.SensitiveLocals = map[string]bool{}
			}
			l.st.SensitiveLocals[n] = true
			v, _ = v.UnmarkDeep()
		}
		l.st.Locals[n] = ctyjson.SimpleJSONValue{Value: v}
	}
	if len(l.st.Locals) == 0 {
		l.st.Locals = nil
	}
}

// evalLocal evaluates one local in the scope built so far.
func (l *loader) evalLocal(a *hcl.Attribute) cty.Value {
	v, d := l.evalMarked(a.Expr)
	l.diags = append(l.diags, d...)
	if d.HasErrors() {
		return cty.DynamicVal
	}
	return v
}

// localCycle reports the locals of a cycle (path ends where it began).
func (l *loader) localCycle(decls map[string]*localDecl, path []string) {
	start := slices.Index(path, path[len(path)-1])
	cycle := path[start:]
	steps := make([]string, len(cycle))
	for i, n := range cycle {
		steps[i] = fmt.Sprintf("local.%s (%s)", n, rangeString(decls[n].attr.NameRange))
	}
	l.errorf(decls[cycle[0]].attr.NameRange, "Cycle in local values",
		"Local values refer to each other in a cycle, so none of them can be computed: %s.", strings.Join(steps, " refers to "))
}

// refName is the name in a traversal root.name (var.size, local.x).
func refName(t hcl.Traversal, root string) (string, bool) {
	if len(t) < 2 || t.RootName() != root {
		return "", false
	}
	switch s := t[1].(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() {
			return s.Key.AsString(), true
		}
	}
	return "", false
}
