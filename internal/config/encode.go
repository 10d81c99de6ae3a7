package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// MarshalHCL writes the stack as one formatted HCL file that Load reads back
// into an equal Stack (what `infrakit convert` prints). Settings equal to
// their defaults are left out; a flavor type filled in by
// ValidateWithProviders is left out too, as the user did.
func (s *Stack) MarshalHCL() ([]byte, error) {
	f := hclwrite.NewEmptyFile()
	root := f.Body()
	sb := root.AppendNewBlock(blockStack, []string{s.Name}).Body()
	if s.Limits != nil && s.Limits.MaxGroupSize != 0 {
		sb.AppendNewBlock(blockLimits, nil).Body().SetAttributeValue("max_group_size", cty.NumberIntVal(int64(s.Limits.MaxGroupSize)))
	}
	for _, p := range s.Providers {
		root.AppendNewline()
		b := root.AppendNewBlock(blockProvider, []string{p.Name}).Body()
		if p.Alias != "" {
			b.SetAttributeValue("alias", cty.StringVal(p.Alias))
		}
		if p.Parallelism > 0 {
			b.SetAttributeValue("parallelism", cty.NumberIntVal(int64(p.Parallelism)))
		}
		if err := setObjectAttributes(b, p.Config); err != nil {
			return nil, fmt.Errorf("provider %q: config: %w", p.Key(), err)
		}
	}
	for _, g := range s.Groups {
		root.AppendNewline()
		if err := encodeGroup(root.AppendNewBlock(blockGroup, []string{g.Name}).Body(), g); err != nil {
			return nil, fmt.Errorf("group %q: %w", g.Name, err)
		}
	}
	for _, lb := range s.LoadBalancers {
		root.AppendNewline()
		b := root.AppendNewBlock(blockLoadBalancer, []string{lb.Name}).Body()
		b.SetAttributeRaw("provider", providerTokens(lb.Provider))
	}
	for _, in := range s.Ingresses {
		root.AppendNewline()
		encodeIngress(root.AppendNewBlock(blockIngress, []string{in.Name}).Body(), in)
	}
	for _, e := range s.Enrollments {
		root.AppendNewline()
		if err := encodeEnrollment(root.AppendNewBlock(blockEnrollment, []string{e.Name}).Body(), e); err != nil {
			return nil, fmt.Errorf("enrollment %q: %w", e.Name, err)
		}
	}
	return joinEmptyBlocks(hclwrite.Format(f.Bytes())), nil
}

// joinEmptyBlocks writes an empty block as `stack "x" {}`, the way people
// do, instead of hclwrite's opening and closing brace on two lines.
func joinEmptyBlocks(src []byte) []byte {
	lines := strings.SplitAfter(string(src), "\n")
	var b strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasSuffix(line, "{\n") && i+1 < len(lines) {
			indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
			if lines[i+1] == indent+"}\n" {
				b.WriteString(strings.TrimSuffix(line, "\n") + "}\n")
				i++
				continue
			}
		}
		b.WriteString(line)
	}
	return []byte(b.String())
}

func encodeGroup(b *hclwrite.Body, g *Group) error {
	if g.Size != nil {
		b.SetAttributeValue("size", cty.NumberIntVal(int64(*g.Size)))
	} else {
		ids := make([]cty.Value, len(g.LogicalIDs))
		for i, id := range g.LogicalIDs {
			ids[i] = cty.StringVal(id)
		}
		b.SetAttributeValue("logical_ids", cty.TupleVal(ids))
	}
	if len(g.Tags) > 0 {
		tags := map[string]cty.Value{}
		for k, v := range g.Tags {
			tags[k] = cty.StringVal(v)
		}
		b.SetAttributeRaw("tags", valueTokens(cty.ObjectVal(tags)))
	}
	if err := encodePlugin(b.AppendNewBlock("instance", nil).Body(), g.Instance); err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	for i, f := range g.Flavors {
		if err := encodePlugin(b.AppendNewBlock("flavor", nil).Body(), f); err != nil {
			return fmt.Errorf("flavor %d: %w", i, err)
		}
	}
	if def := DefaultUpdatePolicy(); g.Update != def {
		u := b.AppendNewBlock("update", nil).Body()
		if g.Update.MaxParallel != def.MaxParallel {
			u.SetAttributeValue("max_parallel", cty.NumberIntVal(int64(g.Update.MaxParallel)))
		}
		if g.Update.MaxUnavailable != def.MaxUnavailable {
			u.SetAttributeValue("max_unavailable", cty.NumberIntVal(int64(g.Update.MaxUnavailable)))
		}
		if g.Update.HealthTimeout != def.HealthTimeout {
			u.SetAttributeValue("health_timeout", cty.StringVal(shortDuration(g.Update.HealthTimeout)))
		}
	}
	if g.DrainDelay != DefaultDrainDelay {
		b.SetAttributeValue("drain_delay", cty.StringVal(shortDuration(g.DrainDelay)))
	}
	if def := DefaultHealthPolicy(); g.Health != def {
		h := b.AppendNewBlock("health", nil).Body()
		if g.Health.Grace != def.Grace {
			h.SetAttributeValue("grace", cty.StringVal(shortDuration(g.Health.Grace)))
		}
		if g.Health.ReplaceUnhealthy != def.ReplaceUnhealthy {
			h.SetAttributeValue("replace_unhealthy", cty.BoolVal(g.Health.ReplaceUnhealthy))
		}
		if g.Health.MaxReplacementsPerHour != def.MaxReplacementsPerHour {
			h.SetAttributeValue("max_replacements_per_hour", cty.NumberIntVal(int64(g.Health.MaxReplacementsPerHour)))
		}
		if g.Health.BrakeMin != def.BrakeMin {
			h.SetAttributeValue("brake_min", cty.NumberIntVal(int64(g.Health.BrakeMin)))
		}
	}
	if g.Autoscale != nil {
		encodeAutoscale(b.AppendNewBlock(blockAutoscale, nil).Body(), g.Autoscale)
	}
	return nil
}

// encodeAutoscale writes an autoscale block; the group's size is written
// beside it, as the start size.
func encodeAutoscale(b *hclwrite.Body, a *Autoscale) {
	def := DefaultAutoscale()
	b.SetAttributeValue("min", cty.NumberIntVal(int64(a.Min)))
	b.SetAttributeValue("max", cty.NumberIntVal(int64(a.Max)))
	if a.EvaluationInterval != def.EvaluationInterval {
		b.SetAttributeValue("evaluation_interval", cty.StringVal(shortDuration(a.EvaluationInterval)))
	}
	if a.Cooldown != def.Cooldown {
		b.SetAttributeValue("cooldown", cty.StringVal(shortDuration(a.Cooldown)))
	}
	for _, c := range a.Checks {
		cb := b.AppendNewBlock("check", []string{c.Name}).Body()
		cb.SetAttributeRaw("source", providerTokens(c.Source))
		cb.SetAttributeValue("query", cty.StringVal(c.Query))
		cb.SetAttributeValue("target_per_instance", cty.NumberFloatVal(c.TargetPerInstance))
	}
	for _, p := range []struct {
		name      string
		got, want ScalePolicy
	}{{"scale_down", a.ScaleDown, def.ScaleDown}, {"scale_up", a.ScaleUp, def.ScaleUp}} {
		if p.got == p.want {
			continue
		}
		pb := b.AppendNewBlock(p.name, nil).Body()
		if p.got.Stabilization != p.want.Stabilization {
			pb.SetAttributeValue("stabilization", cty.StringVal(shortDuration(p.got.Stabilization)))
		}
		if p.got.MaxStep != p.want.MaxStep {
			pb.SetAttributeValue("max_step", cty.NumberIntVal(int64(p.got.MaxStep)))
		}
	}
}

func encodePlugin(b *hclwrite.Body, p Plugin) error {
	b.SetAttributeRaw("provider", providerTokens(p.Provider))
	if p.Type != "" && !p.TypeImplied {
		b.SetAttributeValue("type", cty.StringVal(p.Type))
	}
	v, err := jsonValue(p.Properties)
	if err != nil {
		return fmt.Errorf("properties: %w", err)
	}
	if v.IsNull() || v.LengthInt() > 0 {
		b.SetAttributeRaw("properties", valueTokens(v))
	}
	return nil
}

func encodeIngress(b *hclwrite.Body, in *Ingress) {
	if in.SyncInterval != DefaultSyncInterval {
		b.SetAttributeValue("sync_interval", cty.StringVal(shortDuration(in.SyncInterval)))
	}
	for _, r := range in.Rules {
		rb := b.AppendNewBlock("rule", nil).Body()
		rb.SetAttributeRaw("loadbalancer", refTokens(blockLoadBalancer, r.LoadBalancer))
		groups := make([]hclwrite.Tokens, len(r.Groups))
		for i, g := range r.Groups {
			groups[i] = refTokens(blockGroup, g)
		}
		rb.SetAttributeRaw("groups", hclwrite.TokensForTuple(groups))
		for _, rt := range r.Routes {
			b := rb.AppendNewBlock("route", nil).Body()
			b.SetAttributeValue("lb_port", cty.NumberIntVal(int64(rt.LBPort)))
			b.SetAttributeValue("lb_protocol", cty.StringVal(string(rt.LBProtocol)))
			b.SetAttributeValue("port", cty.NumberIntVal(int64(rt.Port)))
			b.SetAttributeValue("protocol", cty.StringVal(string(rt.Protocol)))
			if rt.Certificate != "" {
				b.SetAttributeValue("certificate", cty.StringVal(rt.Certificate))
			}
		}
	}
}

func encodeEnrollment(b *hclwrite.Body, e *Enrollment) error {
	b.SetAttributeRaw("source", refTokens(blockGroup, e.Source))
	t := b.AppendNewBlock("target", nil).Body()
	t.SetAttributeRaw("provider", providerTokens(e.Target.Provider))
	t.SetAttributeValue("type", cty.StringVal(e.Target.Type))
	if e.Target.Properties != "" {
		// The properties are kept as source text (they refer to member), so
		// they are copied as tokens rather than rebuilt from a value.
		src := "properties = " + e.Target.Properties + "\n"
		pf, diags := hclwrite.ParseConfig([]byte(src), "<target properties>", hcl.InitialPos)
		if diags.HasErrors() {
			return fmt.Errorf("target properties: %w", diags)
		}
		attr := pf.Body().GetAttribute("properties")
		if attr == nil {
			return fmt.Errorf("target properties: %q is not one expression", e.Target.Properties)
		}
		t.SetAttributeRaw("properties", attr.Expr().BuildTokens(nil))
	}
	if e.SyncInterval != DefaultSyncInterval {
		b.SetAttributeValue("sync_interval", cty.StringVal(shortDuration(e.SyncInterval)))
	}
	if e.DestroyOnFree {
		b.SetAttributeValue("destroy_on_free", cty.True)
	}
	return nil
}

// providerTokens writes a provider key as the reference `name` or `name.alias`.
func providerTokens(key string) hclwrite.Tokens {
	name, alias, ok := strings.Cut(key, ".")
	t := hcl.Traversal{hcl.TraverseRoot{Name: name}}
	if ok {
		t = append(t, hcl.TraverseAttr{Name: alias})
	}
	return hclwrite.TokensForTraversal(t)
}

// refTokens writes a reference like group.cattle.
func refTokens(kind, name string) hclwrite.Tokens {
	return hclwrite.TokensForTraversal(hcl.Traversal{hcl.TraverseRoot{Name: kind}, hcl.TraverseAttr{Name: name}})
}

// setObjectAttributes writes each attribute of a JSON object as an attribute of b.
func setObjectAttributes(b *hclwrite.Body, raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	v, err := jsonValue(raw)
	if err != nil {
		return err
	}
	if !v.Type().IsObjectType() {
		return fmt.Errorf("not a JSON object")
	}
	names := make([]string, 0, v.LengthInt())
	for name := range v.Type().AttributeTypes() {
		if !validIdentifier(name) {
			return fmt.Errorf("%q is not a valid attribute name", name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b.SetAttributeRaw(name, valueTokens(v.GetAttr(name)))
	}
	return nil
}

// valueTokens is hclwrite.TokensForValue with one fix: an object key
// spelled "for" right after the opening brace would read back as a for
// expression, so it is written quoted.
func valueTokens(v cty.Value) hclwrite.Tokens {
	toks := hclwrite.TokensForValue(v)
	out := make(hclwrite.Tokens, 0, len(toks))
	prev := hclsyntax.TokenNil
	for _, t := range toks {
		if t.Type == hclsyntax.TokenIdent && string(t.Bytes) == "for" && prev == hclsyntax.TokenOBrace {
			out = append(out,
				&hclwrite.Token{Type: hclsyntax.TokenOQuote, Bytes: []byte(`"`), SpacesBefore: t.SpacesBefore},
				&hclwrite.Token{Type: hclsyntax.TokenQuotedLit, Bytes: []byte("for")},
				&hclwrite.Token{Type: hclsyntax.TokenCQuote, Bytes: []byte(`"`)})
			prev = hclsyntax.TokenCQuote
			continue
		}
		out = append(out, t)
		if t.Type != hclsyntax.TokenNewline {
			prev = t.Type
		}
	}
	return out
}

// shortDuration writes a duration as a user would: "5m", not "5m0s".
func shortDuration(d Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
