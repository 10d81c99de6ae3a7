package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/infrakit/infrakit/internal/tags"
)

// CheckStored checks a stack that was not loaded from files but read back
// (the desired stack in the state, a saved plan's) by the rules the loader
// applies to the files that guard against harm: names, the group size
// limit, logical IDs, tags, property limits, and no negative setting. A state edited by hand
// or damaged must be refused, never acted on: a size of -5 would destroy
// a group, one of 1e9 would exhaust memory.
//
// References between blocks are not checked: a stored stack may rightly
// name what it no longer holds (an ingress rule naming a group that `group
// destroy` removed; a pending teardown, state.ControllerStatus.Pending,
// holds only the blocks it tears down), and what acts on a reference
// resolves it and fails cleanly when it cannot.
func CheckStored(st *Stack) error {
	if st == nil {
		return nil
	}
	c := &storedCheck{st: st, providers: map[string]bool{}, groups: map[string]bool{}, lbs: map[string]bool{}}
	c.stack()
	for _, p := range st.Providers {
		c.provider(p)
	}
	for _, g := range st.Groups {
		c.group(g)
	}
	for _, lb := range st.LoadBalancers {
		c.loadBalancer(lb)
	}
	for _, in := range st.Ingresses {
		c.ingress(in)
	}
	for _, e := range st.Enrollments {
		c.enrollment(e)
	}
	return c.err()
}

// storedCheck is one CheckStored run, collecting every problem.
type storedCheck struct {
	st        *Stack
	problems  []string
	providers map[string]bool
	groups    map[string]bool
	lbs       map[string]bool
}

// maxProblems bounds the problems one error lists.
const maxProblems = 10

func (c *storedCheck) add(where string, err error) {
	switch {
	case err == nil:
	case where == "":
		c.problems = append(c.problems, err.Error())
	default:
		c.problems = append(c.problems, where+": "+err.Error())
	}
}

func (c *storedCheck) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	shown := c.problems
	more := ""
	if len(shown) > maxProblems {
		more = fmt.Sprintf("\n  (and %d more)", len(shown)-maxProblems)
		shown = shown[:maxProblems]
	}
	return fmt.Errorf("%w:\n  %s%s", ErrInvalidStored, strings.Join(shown, "\n  "), more)
}

// ErrInvalidStored is what CheckStored's errors match (errors.Is).
var ErrInvalidStored = errors.New("the stored stack breaks the rules of the stack language")

func (c *storedCheck) stack() {
	c.add("stack", CheckStackName(c.st.Name))
	if lim := c.st.Limits; lim != nil && lim.MaxGroupSize != 0 {
		c.add("stack limits", checkMaxGroupSize(lim.MaxGroupSize))
	}
}

func (c *storedCheck) provider(p *Provider) {
	where := fmt.Sprintf("provider %s", quoteName(p.Key()))
	c.add(where, checkReferenceableName(blockProvider, p.Name))
	if what, reserved := reservedRoots[p.Name]; reserved {
		c.add(where, fmt.Errorf("%q is reserved: references starting with it name %s", p.Name, what))
	}
	if p.Alias != "" && !validIdentifier(p.Alias) {
		c.add(where, fmt.Errorf("alias %s: %s", quoteName(p.Alias), nameRule))
	}
	if p.Parallelism < 0 {
		c.add(where, fmt.Errorf("parallelism must be at least 1; got %d", p.Parallelism))
	}
	if len(p.Config) > 0 {
		c.add(where+" config", CheckProperties(p.Config))
	}
	c.unique(where, c.providers, p.Key())
}

func (c *storedCheck) unique(where string, seen map[string]bool, key string) {
	if seen[key] {
		c.add(where, errors.New("declared twice"))
	}
	seen[key] = true
}

func (c *storedCheck) group(g *Group) {
	where := fmt.Sprintf("group %s", quoteName(g.Name))
	c.add(where, checkReferenceableName(blockGroup, g.Name))
	c.unique(where, c.groups, g.Name)
	switch {
	case g.Size != nil && g.LogicalIDs != nil:
		c.add(where, errors.New("has both size and logical_ids"))
	case g.Size != nil:
		c.add("", CheckGroupSize(c.st, g.Name, *g.Size))
	default:
		// Pets; none (which JSON cannot tell from "no logical_ids") is a
		// group of no instances, which harms nothing.
		c.add("", CheckGroupSize(c.st, g.Name, len(g.LogicalIDs)))
		c.add(where, checkLogicalIDs(g.LogicalIDs))
	}
	for k, v := range g.Tags {
		if tags.IsReserved(k) {
			c.add(where, fmt.Errorf("tag %s is infrakit's own (%s...) and cannot be set", quoteName(k), tags.Prefix))
		}
		c.add(where, CheckTag(k, v))
	}
	c.add(where+" instance properties", CheckProperties(g.Instance.Properties))
	for i, f := range g.Flavors {
		c.add(fmt.Sprintf("%s flavor %d properties", where, i+1), CheckProperties(f.Properties))
	}
	// Zero settings are left to the code that reads them (a stack built in
	// code may leave them out); a negative one no file can say.
	u := g.Update
	c.add(where+" update", atLeast("max_parallel", u.MaxParallel, 0))
	c.add(where+" update", atLeast("max_unavailable", u.MaxUnavailable, 0))
	c.add(where+" update", durationAtLeast("health_timeout", u.HealthTimeout, 0))
	h := g.Health
	c.add(where+" health", durationAtLeast("grace", h.Grace, 0))
	c.add(where+" health", atLeast("max_replacements_per_hour", h.MaxReplacementsPerHour, 0))
	c.add(where+" health", atLeast("brake_min", h.BrakeMin, 0))
	c.add(where, durationAtLeast("drain_delay", g.DrainDelay, 0))
	c.autoscale(where, g)
}

// autoscale checks a group's autoscale block: cattle only, bounds the
// loader would accept, the size within them, and checks that can be
// evaluated. Unlike other settings a zero evaluation_interval is refused:
// it would query the source in a busy loop.
func (c *storedCheck) autoscale(where string, g *Group) {
	a := g.Autoscale
	if a == nil {
		return
	}
	where += " autoscale"
	if g.Size == nil {
		c.add(where, errors.New("only cattle autoscale, and the group has no size"))
	}
	bounds := checkAutoscaleBounds(c.st, g.Name, a)
	c.add(where, bounds)
	if bounds == nil && g.Size != nil {
		c.add("", CheckAutoscaleSize(a, g.Name, *g.Size))
	}
	c.add(where, durationAtLeast("evaluation_interval", a.EvaluationInterval, MinEvaluationInterval))
	c.add(where, durationAtLeast("cooldown", a.Cooldown, 0))
	for _, p := range []struct {
		name string
		ScalePolicy
	}{{"scale_down", a.ScaleDown}, {"scale_up", a.ScaleUp}} {
		c.add(where+" "+p.name, durationAtLeast("stabilization", p.Stabilization, 0))
		c.add(where+" "+p.name, atLeast("max_step", p.MaxStep, 0))
	}
	if len(a.Checks) == 0 {
		c.add(where, errors.New("has no check"))
	}
	seen := map[string]bool{}
	for _, ch := range a.Checks {
		cw := fmt.Sprintf("%s check %s", where, quoteName(ch.Name))
		c.add(cw, checkReferenceableName("check", ch.Name))
		c.unique(cw, seen, ch.Name)
		if ch.Source == "" {
			c.add(cw, errors.New("names no source"))
		}
		c.add(cw, checkQuery(ch.Query))
		c.add(cw, checkTarget(ch.TargetPerInstance))
	}
}

// checkLogicalIDs is the rule for a group's logical IDs: none empty, none twice.
func checkLogicalIDs(ids []string) error {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		switch {
		case id == "":
			return errors.New("a logical ID must not be empty")
		case len(id) > MaxPropertyValueSize:
			return fmt.Errorf("logical ID %s is %d bytes long; it is at most %d", quoteName(id), len(id), MaxPropertyValueSize)
		case seen[id]:
			return fmt.Errorf("logical ID %s is listed twice", quoteName(id))
		}
		seen[id] = true
	}
	return nil
}

func (c *storedCheck) loadBalancer(lb *LoadBalancer) {
	where := fmt.Sprintf("loadbalancer %s", quoteName(lb.Name))
	c.add(where, checkReferenceableName(blockLoadBalancer, lb.Name))
	c.unique(where, c.lbs, lb.Name)
}

func (c *storedCheck) ingress(in *Ingress) {
	where := fmt.Sprintf("ingress %s", quoteName(in.Name))
	c.add(where, checkLabel(blockIngress, in.Name))
	c.add(where, durationAtLeast("sync_interval", in.SyncInterval, 0))
	for i, r := range in.Rules {
		rw := fmt.Sprintf("%s rule %d", where, i+1)
		for _, rt := range r.Routes {
			c.add(rw, portRule("lb_port", rt.LBPort))
			c.add(rw, portRule("port", rt.Port))
		}
	}
}

func (c *storedCheck) enrollment(e *Enrollment) {
	where := fmt.Sprintf("enrollment %s", quoteName(e.Name))
	c.add(where, checkLabel(blockEnrollment, e.Name))
	c.add(where, durationAtLeast("sync_interval", e.SyncInterval, 0))
	c.add(where+" target properties", checkTargetProperties(e.Target.Properties))
}

// checkTargetProperties is the rule for an enrollment target's properties
// as stored (HCL source text, parsed again to render each member's): the
// size and nesting limits of a stack file, then the properties' own.
func checkTargetProperties(src string) error {
	if src == "" {
		return nil
	}
	if len(src) > MaxPropertiesSize {
		return errors.New(strings.TrimSuffix(tooLargeProperties(len(src)), "."))
	}
	if diags := CheckSource("properties.hcl", []byte(src)); diags.HasErrors() {
		return errors.New(strings.TrimSuffix(diags[0].Detail, "."))
	}
	t := EnrollmentTarget{Properties: src}
	expr, diags := t.PropertiesExpression()
	if diags.HasErrors() {
		return fmt.Errorf("the properties do not parse: %s", diags[0].Summary)
	}
	v, diags := expr.Value(t.evalContext(cty.UnknownVal(MemberType())))
	if diags.HasErrors() {
		return fmt.Errorf("the properties do not evaluate: %s", diags[0].Summary)
	}
	if p, size, prefix, found := oversized(v); found {
		return errors.New(strings.TrimSuffix(tooLargeValue("The value at "+pathString(p), size, prefix), "."))
	}
	return nil
}

func atLeast(name string, n, lo int) error {
	if n < lo {
		return fmt.Errorf("%s must be at least %d; got %d", name, lo, n)
	}
	return nil
}

func durationAtLeast(name string, d Duration, lo time.Duration) error {
	if time.Duration(d) < lo {
		return fmt.Errorf("%s must be at least %s; got %s", name, lo, d)
	}
	return nil
}

func portRule(name string, p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("%s must be between 1 and 65535; got %d", name, p)
	}
	return nil
}
