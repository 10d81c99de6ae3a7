package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// sensitiveMark marks the values of sensitive variables in the scope of
// outputs and the console, so that what derives from them is known to be
// sensitive too (cty carries marks through every operation and function).
const sensitiveMark = "sensitive"

// evalContext is the scope of the stack's values: var, local and the
// functions. Sizes, logical IDs, properties, intervals and routes are
// evaluated in it.
func (l *loader) evalContext() *hcl.EvalContext {
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": objectOf(l.varVals), "local": objectOf(l.localVals)},
		Functions: Functions(),
	}
}

// objectOf is the object with the given attributes (the empty object for none).
func objectOf(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// eval evaluates an expression in the stack's scope, reporting references
// to undeclared variables and locals the way Terraform does. The value is
// unmarked: what is sent to providers is plain JSON.
func (l *loader) eval(expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	v, d := l.evalMarked(expr)
	v, _ = v.UnmarkDeep()
	return v, d
}

// evalMarked is eval keeping the sensitive marks.
func (l *loader) evalMarked(expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	d := l.checkRefs(expr)
	for _, t := range expr.Variables() {
		if t.RootName() == "member" {
			d = append(d, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Variables not allowed",
				Detail:  "member may not be used here: it is one source instance, known only in an enrollment target's properties.",
				Subject: t.SourceRange().Ptr()})
		}
	}
	if d.HasErrors() {
		return cty.DynamicVal, d
	}
	return expr.Value(l.evalContext())
}

// checkRefs reports each var.x and local.x in expr that is not declared.
func (l *loader) checkRefs(expr hcl.Expression) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range expr.Variables() {
		if name, ok := refName(t, "var"); ok && l.vars[name] == (hcl.Range{}) {
			detail := fmt.Sprintf("No variable %q is declared; declare it with variable %q {}.", name, name)
			if s := suggest(name, l.varNames); s != "" {
				detail += fmt.Sprintf(" Did you mean var.%s?", s)
			}
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Reference to undeclared input variable",
				Detail: detail, Subject: t.SourceRange().Ptr()})
		}
		if name, ok := refName(t, "local"); ok && !l.localDeclared(name) {
			detail := fmt.Sprintf("No local value %q is defined in a locals block.", name)
			if s := suggest(name, l.localNames); s != "" {
				detail += fmt.Sprintf(" Did you mean local.%s?", s)
			}
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Reference to undeclared local value",
				Detail: detail, Subject: t.SourceRange().Ptr()})
		}
	}
	return diags
}

func (l *loader) localDeclared(name string) bool {
	for _, n := range l.localNames {
		if n == name {
			return true
		}
	}
	return false
}

// Observed is what outputs and the console see of the world: the members
// of each group as the state records them after an apply.
type Observed struct {
	// Members are by group name; a group missing has none.
	Members map[string][]ObservedMember
	// Unknown are the groups whose members are not known yet: those a
	// plan changes.
	Unknown map[string]bool
}

// ObservedMember is one member of a group: group.NAME.members[*].
type ObservedMember struct {
	ID        string
	LogicalID string
	Address   string
	State     string
}

// observedMemberType is the type of one element of group.NAME.members.
var observedMemberType = cty.Object(map[string]cty.Type{
	"id": cty.String, "logical_id": cty.String, "address": cty.String, "state": cty.String,
})

// EvalContext is the scope of outputs and of the console: var (sensitive
// values marked), local, the functions, and per group and load balancer
// an object: group.NAME is { name, size, members = [{ id, logical_id,
// address, state }, ...] } and loadbalancer.NAME is { name, provider,
// lb_ports }. With obs nil the members are unknown, as they are when a
// plan is made.
func (st *Stack) EvalContext(obs *Observed) *hcl.EvalContext {
	vars := map[string]cty.Value{}
	for _, v := range st.Variables {
		val := v.Value.Value
		if val == cty.NilVal {
			val = cty.DynamicVal
		}
		if v.Sensitive {
			val = val.Mark(sensitiveMark)
		}
		vars[v.Name] = val
	}
	locals := map[string]cty.Value{}
	for n, v := range st.Locals {
		locals[n] = v.Value
	}
	// A local that refers to a sensitive variable is sensitive too.
	for n := range st.SensitiveLocals {
		if v, ok := locals[n]; ok {
			locals[n] = v.Mark(sensitiveMark)
		}
	}
	groups := map[string]cty.Value{}
	for _, g := range st.Groups {
		groups[g.Name] = groupValue(g, obs)
	}
	lbs := map[string]cty.Value{}
	for _, lb := range st.LoadBalancers {
		lbs[lb.Name] = st.loadBalancerValue(lb)
	}
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"var": objectOf(vars), "local": objectOf(locals),
			blockGroup: objectOf(groups), blockLoadBalancer: objectOf(lbs),
		},
		Functions: Functions(),
	}
}

// groupValue is group.NAME.
func groupValue(g *Group, obs *Observed) cty.Value {
	size := cty.NumberIntVal(int64(len(g.LogicalIDs)))
	if g.Size != nil {
		size = cty.NumberIntVal(int64(*g.Size))
	}
	members := cty.UnknownVal(cty.List(observedMemberType))
	if obs != nil && !obs.Unknown[g.Name] {
		var elems []cty.Value
		for _, m := range obs.Members[g.Name] {
			lid := cty.NullVal(cty.String)
			if m.LogicalID != "" {
				lid = cty.StringVal(m.LogicalID)
			}
			elems = append(elems, cty.ObjectVal(map[string]cty.Value{
				"id": cty.StringVal(m.ID), "logical_id": lid, "address": cty.StringVal(m.Address), "state": cty.StringVal(m.State),
			}))
		}
		members = cty.ListValEmpty(observedMemberType)
		if len(elems) > 0 {
			members = cty.ListVal(elems)
		}
	}
	return cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(g.Name), "size": size, "members": members})
}

// loadBalancerValue is loadbalancer.NAME: its ports are those its rules publish.
func (st *Stack) loadBalancerValue(lb *LoadBalancer) cty.Value {
	var ports []cty.Value
	for _, in := range st.Ingresses {
		for _, r := range in.Rules {
			if r.LoadBalancer != lb.Name {
				continue
			}
			for _, rt := range r.Routes {
				ports = append(ports, cty.NumberIntVal(int64(rt.LBPort)))
			}
		}
	}
	portList := cty.ListValEmpty(cty.Number)
	if len(ports) > 0 {
		portList = cty.ListVal(ports)
	}
	return cty.ObjectVal(map[string]cty.Value{
		"name": cty.StringVal(lb.Name), "provider": cty.StringVal(lb.Provider), "lb_ports": portList,
	})
}

// scopeFor is the part of the stack's scope expr refers to (var.x and
// local.y it names), unmarked, for expressions evaluated later (enrollment
// target properties); nil when it refers to neither.
func (l *loader) scopeFor(expr hcl.Expression) map[string]ctyjson.SimpleJSONValue {
	pick := map[string]map[string]cty.Value{}
	for _, t := range expr.Variables() {
		for root, vals := range map[string]map[string]cty.Value{"var": l.varVals, "local": l.localVals} {
			if name, ok := refName(t, root); ok {
				if v, has := vals[name]; has {
					v, _ = v.UnmarkDeep()
					if pick[root] == nil {
						pick[root] = map[string]cty.Value{}
					}
					pick[root][name] = v
				}
			}
		}
	}
	if len(pick) == 0 {
		return nil
	}
	out := map[string]ctyjson.SimpleJSONValue{}
	for root, vals := range pick {
		out[root] = ctyjson.SimpleJSONValue{Value: cty.ObjectVal(vals)}
	}
	return out
}
