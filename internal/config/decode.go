package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/infrakit/infrakit/internal/tags"
)

// Body schemas, read-only.
var (
	groupSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "size"}, {Name: "logical_ids"}, {Name: "tags"}, {Name: "drain_delay"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "instance"}, {Type: "flavor"}, {Type: "update"}, {Type: "health"}, {Type: blockAutoscale}},
	}
	instanceSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "provider", Required: true}, {Name: "type", Required: true}, {Name: "properties"}},
	}
	// A flavor block may leave out its type when its provider serves one flavor.
	flavorSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "provider", Required: true}, {Name: "type"}, {Name: "properties"}},
	}
	updateSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "max_parallel"}, {Name: "max_unavailable"}, {Name: "health_timeout"}},
	}
	healthSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "grace"}, {Name: "replace_unhealthy"}, {Name: "max_replacements_per_hour"}, {Name: "brake_min"}},
	}
	loadBalancerSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "provider", Required: true}},
	}
	ingressSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "sync_interval"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "rule"}},
	}
	ruleSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "loadbalancer", Required: true}, {Name: "groups", Required: true}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "route"}},
	}
	routeSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "lb_port", Required: true}, {Name: "lb_protocol"},
			{Name: "port", Required: true}, {Name: "protocol"},
			{Name: "certificate"},
		},
	}
	enrollmentSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "source", Required: true}, {Name: "sync_interval"}, {Name: "destroy_on_free"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "target"}},
	}
	targetSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "provider", Required: true}, {Name: "type", Required: true}, {Name: "properties"}},
	}
)

// decodeProvider decodes and declares a provider block. Its attributes other
// than alias and parallelism are the provider's configuration.
func (l *loader) decodeProvider(b *hcl.Block) {
	p := &Provider{Name: b.Labels[0], DeclRange: b.DefRange}
	if !l.checkName(b, true) {
		return
	}
	if what, reserved := reservedRoots[p.Name]; reserved {
		l.errorf(b.LabelRanges[0], "Invalid provider name",
			"%q is reserved: references starting with it name %s.", p.Name, what)
		return
	}
	attrs, d := b.Body.JustAttributes()
	l.diags = append(l.diags, d...)
	config := map[string]cty.Value{}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	slices.Sort(names) // diagnostics in a stable order
	for _, name := range names {
		a := attrs[name]
		if name == "alias" {
			alias, ok := l.stringAttr(a, true)
			if ok && !validIdentifier(alias) {
				l.errorf(a.Expr.Range(), "Invalid provider alias",
					"%q cannot be written in a reference like %s.alias: an alias must start with a letter or underscore and contain only letters, digits, underscores and dashes.", alias, p.Name)
				ok = false
			}
			if !ok {
				return
			}
			p.Alias = alias
			continue
		}
		if name == "parallelism" {
			if n, ok := l.intAttr(a, 1, maxInt, true); ok {
				p.Parallelism = n
			}
			continue
		}
		if !utf8.ValidString(name) || !validIdentifier(name) {
			// The parser takes bytes that are not UTF-8 for letters; JSON
			// would store them as U+FFFD, another name.
			l.errorf(a.NameRange, "Invalid attribute name",
				"%q is not a name: a provider's configuration attribute must start with a letter or underscore and contain only letters, digits, underscores and dashes.", name)
			continue
		}
		v, vd := l.eval(a.Expr)
		l.diags = append(l.diags, vd...)
		if !vd.HasErrors() {
			config[name] = v
		}
	}
	if len(config) > 0 {
		v := cty.ObjectVal(config)
		b, err := valueJSON(v)
		if err != nil {
			l.errorf(p.DeclRange, "Invalid provider configuration", "The configuration cannot be encoded as JSON: %s.", err)
		}
		if err == nil && !l.checkPropertiesAt(hcl.StaticExpr(v, p.DeclRange), v, b) {
			return
		}
		p.Config = b
	}
	key := p.Key()
	if first, dup := l.providers[key]; dup {
		detail := fmt.Sprintf("Provider %q is already declared at %s.", key, rangeString(first.DeclRange))
		if p.Alias == "" {
			detail += fmt.Sprintf(" To run a second %s process, give this block an alias: alias = \"name\".", p.Name)
		}
		l.errorf(b.DefRange, "Duplicate provider", "%s", detail)
		return
	}
	l.providers[key] = p
	l.providerKeys = append(l.providerKeys, key)
	l.st.Providers = append(l.st.Providers, p)
}

func (l *loader) decodeGroup(b *hcl.Block) *Group {
	g := &Group{
		Name:       b.Labels[0],
		Update:     DefaultUpdatePolicy(),
		Health:     DefaultHealthPolicy(),
		DrainDelay: DefaultDrainDelay,
		DeclRange:  b.DefRange,
	}
	content, d := b.Body.Content(groupSchema)
	l.diags = append(l.diags, d...)

	// A misspelled size is already reported as an unsupported argument;
	// saying the group has no size as well would only repeat it. An
	// autoscaled group may leave size out: it starts at min.
	autoscale := content.Blocks.OfType(blockAutoscale)
	l.decodeAllocation(g, b, content, !d.HasErrors() && len(autoscale) == 0)
	if a := content.Attributes["tags"]; a != nil {
		g.Tags = l.userTags(a)
	}
	if a := content.Attributes["drain_delay"]; a != nil {
		if v, ok := l.durationAttr(a, 0); ok {
			g.DrainDelay = v
		}
	}

	blocks := content.Blocks.ByType()
	if ib := l.single(b, "instance", blocks["instance"],
		"A group needs an instance block naming the provider and type that provision its members."); ib != nil {
		g.Instance = l.decodePlugin(ib, instanceSchema)
	}
	if len(blocks["flavor"]) == 0 {
		l.errorf(b.DefRange, "Missing flavor block",
			"A group needs at least one flavor block, naming the provider that prepares and health-checks its members.")
	}
	for _, fb := range blocks["flavor"] {
		g.Flavors = append(g.Flavors, l.decodePlugin(fb, flavorSchema))
	}
	if ub := l.single(b, "update", blocks["update"], ""); ub != nil {
		l.decodeUpdate(&g.Update, ub)
	}
	if hb := l.single(b, "health", blocks["health"], ""); hb != nil {
		l.decodeHealth(&g.Health, hb)
	}
	if ab := l.single(b, blockAutoscale, autoscale, ""); ab != nil {
		a, ok := l.decodeAutoscale(ab, g.Name)
		l.autoscaled(g, content, a, ok)
	}
	return g
}

// decodeAllocation decodes exactly one of size (cattle) and logical_ids (pets).
func (l *loader) decodeAllocation(g *Group, b *hcl.Block, content *hcl.BodyContent, reportMissing bool) {
	sa, la := content.Attributes["size"], content.Attributes["logical_ids"]
	switch {
	case sa != nil && la != nil:
		l.errorf(la.NameRange, "Conflicting allocation",
			"A group has either size (cattle) or logical_ids (pets), not both; size is set at %s.", rangeString(sa.NameRange))
	case sa == nil && la == nil:
		if !reportMissing {
			return
		}
		l.errorf(b.DefRange, "Missing allocation",
			"A group needs size = N (cattle) or logical_ids = [...] (pets).")
	case sa != nil:
		if n, ok := l.intAttr(sa, 0, maxInt, true); ok && l.checkGroupSizeAt(sa.Expr.Range(), g.Name, n) {
			g.Size = &n
		}
	default:
		g.LogicalIDs = l.logicalIDs(la, g.Name)
		g.LogicalIDsExpr = la.Expr
	}
}

// userTags decodes a group's tags, refusing infrakit's own (tags.IsReserved):
// providers are the source of truth for membership through those, so a user
// tag must not override one.
func (l *loader) userTags(a *hcl.Attribute) map[string]string {
	user := l.stringMapAttr(a)
	keys := make([]string, 0, len(user))
	for k := range user {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := CheckTag(k, user[k]); err != nil && !tags.IsReserved(k) {
			l.errorf(a.Expr.Range(), "Invalid tag", "%s.", upperFirst(err.Error()))
			delete(user, k)
			continue
		}
		if tags.IsReserved(k) {
			_, keyRange, found := exprAt(a.Expr, []string{k})
			if !found {
				keyRange = a.Expr.Range()
			}
			l.errorf(keyRange, "Reserved tag",
				"Tags starting with %q are set by infrakit to track instances (%s, %s, ...); %q cannot be set here.", tags.Prefix, tags.Group, tags.ConfigHash, k)
			delete(user, k)
		}
	}
	if len(user) == 0 {
		return nil
	}
	return user
}

// logicalIDs decodes a non-empty list of unique, non-empty logical IDs,
// pointing at the offending element when one is wrong.
func (l *loader) logicalIDs(a *hcl.Attribute, group string) []string {
	exprs, d := hcl.ExprList(a.Expr)
	if d.HasErrors() {
		// Not written out (var.ids, split(",", local.s)): one list value,
		// whose elements all point at the attribute.
		v, ok := l.value(a, cty.List(cty.String), nil, true)
		if !ok {
			return nil
		}
		for _, e := range v.AsValueSlice() {
			exprs = append(exprs, hcl.StaticExpr(e, a.Expr.Range()))
		}
	}
	if !l.checkGroupSizeAt(a.Expr.Range(), group, len(exprs)) {
		return nil
	}
	if len(exprs) == 0 {
		l.errorf(a.Expr.Range(), "Empty logical_ids",
			"A group of pets needs at least one logical ID; for an empty group write size = 0.")
		return nil
	}
	first := map[string]hcl.Range{}
	var ids []string
	for _, e := range exprs {
		id, ok := l.value(&hcl.Attribute{Name: "logical_ids", Expr: e}, cty.String, nil, true)
		if !ok {
			continue
		}
		s := id.AsString()
		if err := checkLogicalIDs([]string{s}); err != nil {
			l.errorf(e.Range(), "Invalid logical ID", "%s.", upperFirst(err.Error()))
			continue
		}
		if r, dup := first[s]; dup {
			l.errorf(e.Range(), "Duplicate logical ID", "Logical ID %q is already listed at %s.", s, rangeString(r))
			continue
		}
		first[s] = e.Range()
		ids = append(ids, s)
	}
	return ids
}

// single returns the only block of type typ inside parent, reporting extra
// ones. When missing is not empty a block is required and missing says why.
func (l *loader) single(parent *hcl.Block, typ string, blocks []*hcl.Block, missing string) *hcl.Block {
	if len(blocks) == 0 {
		if missing != "" {
			l.errorf(parent.DefRange, "Missing "+typ+" block", "%s", missing)
		}
		return nil
	}
	article := "A"
	if strings.ContainsRune("aeiou", rune(parent.Type[0])) {
		article = "An" // an autoscale block
	}
	for _, extra := range blocks[1:] {
		l.errorf(extra.DefRange, "Duplicate "+typ+" block",
			"%s %s has at most one %s block; the first is at %s.", article, parent.Type, typ, rangeString(blocks[0].DefRange))
	}
	return blocks[0]
}

// decodePlugin decodes an instance or flavor block.
func (l *loader) decodePlugin(b *hcl.Block, schema *hcl.BodySchema) Plugin {
	p := Plugin{Properties: emptyObject(), DeclRange: b.DefRange}
	content, d := b.Body.Content(schema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["provider"]; a != nil {
		p.Provider, _ = l.providerRef(a.Expr)
		p.ProviderRange = a.Expr.Range()
	}
	if a := content.Attributes["type"]; a != nil {
		p.Type, _ = l.stringAttr(a, true)
		p.TypeRange = a.Expr.Range()
	}
	if a := content.Attributes["properties"]; a != nil {
		p.Properties = l.propertiesAttr(a)
		p.PropertiesRange = a.Expr.Range()
		p.PropertiesExpr = a.Expr
	}
	return p
}

func (l *loader) decodeUpdate(u *UpdatePolicy, b *hcl.Block) {
	content, d := b.Body.Content(updateSchema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["max_parallel"]; a != nil {
		if n, ok := l.intAttr(a, 1, maxInt, false); ok {
			u.MaxParallel = n
		}
	}
	if a := content.Attributes["max_unavailable"]; a != nil {
		if n, ok := l.intAttr(a, 0, maxInt, false); ok {
			u.MaxUnavailable = n
		}
	}
	if a := content.Attributes["health_timeout"]; a != nil {
		if v, ok := l.durationAttr(a, time.Second); ok {
			u.HealthTimeout = v
		}
	}
}

func (l *loader) decodeHealth(h *HealthPolicy, b *hcl.Block) {
	content, d := b.Body.Content(healthSchema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["grace"]; a != nil {
		if v, ok := l.durationAttr(a, 0); ok {
			h.Grace = v
		}
	}
	if a := content.Attributes["replace_unhealthy"]; a != nil {
		if v, ok := l.boolAttr(a); ok {
			h.ReplaceUnhealthy = v
		}
	}
	if a := content.Attributes["max_replacements_per_hour"]; a != nil {
		if n, ok := l.intAttr(a, 0, maxInt, false); ok {
			h.MaxReplacementsPerHour = n
		}
	}
	if a := content.Attributes["brake_min"]; a != nil {
		if n, ok := l.intAttr(a, 1, maxInt, false); ok {
			h.BrakeMin = n
		}
	}
}

func (l *loader) decodeEnrollment(b *hcl.Block) *Enrollment {
	e := &Enrollment{Name: b.Labels[0], SyncInterval: DefaultSyncInterval, DeclRange: b.DefRange}
	content, d := b.Body.Content(enrollmentSchema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["source"]; a != nil {
		e.Source, _ = l.objectRef(a.Expr, blockGroup, l.groups, l.groupNames)
		e.SourceRange = a.Expr.Range()
	}
	if a := content.Attributes["sync_interval"]; a != nil {
		if v, ok := l.durationAttr(a, time.Second); ok {
			e.SyncInterval = v
		}
	}
	if a := content.Attributes["destroy_on_free"]; a != nil {
		e.DestroyOnFree, _ = l.boolAttr(a)
	}
	if tb := l.single(b, "target", content.Blocks.OfType("target"),
		"An enrollment needs a target block naming the provider and type that authorize each member."); tb != nil {
		e.Target = l.decodeTarget(tb)
	}
	return e
}

// decodeTarget decodes an enrollment target. Its properties are evaluated
// once with an unknown member, which catches references to anything but
// member and to attributes a member does not have, and are then kept as
// source text, formatted, to be rendered per member.
func (l *loader) decodeTarget(b *hcl.Block) EnrollmentTarget {
	t := EnrollmentTarget{DeclRange: b.DefRange}
	content, d := b.Body.Content(targetSchema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["provider"]; a != nil {
		t.Provider, _ = l.providerRef(a.Expr)
		t.ProviderRange = a.Expr.Range()
	}
	if a := content.Attributes["type"]; a != nil {
		t.Type, _ = l.stringAttr(a, true)
		t.TypeRange = a.Expr.Range()
	}
	if a := content.Attributes["properties"]; a != nil {
		t.PropertiesRange = a.Expr.Range()
		t.PropertiesExpr = a.Expr
		t.Properties = formatExpression(l.sourceText(a.Expr))
		if rd := l.checkRefs(a.Expr); rd.HasErrors() {
			l.diags = append(l.diags, rd...)
			return t
		}
		t.Scope = l.scopeFor(a.Expr)
		v, vd := a.Expr.Value(t.evalContext(cty.UnknownVal(MemberType())))
		v, _ = v.UnmarkDeep()
		l.diags = append(l.diags, vd...)
		switch {
		case vd.HasErrors():
		case !isObjectLike(v):
			l.errorf(a.Expr.Range(), "Invalid properties",
				"The properties must be an object, like { host = member.address }; got %s.", v.Type().FriendlyName())
		default:
			// The source text is what state keeps and what is rendered per member.
			l.checkPropertiesAt(a.Expr, v, []byte(t.Properties))
		}
	}
	return t
}
