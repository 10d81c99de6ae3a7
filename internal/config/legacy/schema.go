package legacy

import (
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// The kinds of the new schema.
const (
	kindGroup      = "group"
	kindIngress    = "ingress"
	kindEnrollment = "enrollment"
)

// newSchema reads {kind, metadata: {name, tags}, properties, options}.
func (r *reader) newSchema(n *node) {
	f, ok := r.fields(n, "A specification", &specSpec)
	if !ok {
		return
	}
	k := f["kind"]
	if k == nil || k.value.kind != kindString {
		at := n.startRange()
		if k != nil {
			at = k.value.rng
		}
		r.errorf(at, "Invalid kind", "kind must be one of group, ingress, enrollment.")
		return
	}
	kind := strings.ToLower(k.value.text)
	switch kind {
	case kindGroup, kindIngress, kindEnrollment:
	default:
		detail := "kind must be one of group, ingress, enrollment; got " + strconv.Quote(k.value.text) + "."
		if s := suggest(kind, []string{kindGroup, kindIngress, kindEnrollment}); s != "" {
			detail += " Did you mean " + strconv.Quote(s) + "?"
		}
		r.errorf(k.value.rng, "Unknown kind", "%s", detail)
		return
	}

	md := f["metadata"]
	if md == nil {
		r.errorf(k.value.rng, "Missing metadata", "A %s needs metadata with its name: metadata: {name: NAME}.", kind)
		return
	}
	mf, ok := r.fields(md.value, "metadata", &metadataSpec)
	if !ok {
		return
	}
	name := mf["name"]
	if name == nil || name.value.kind != kindString {
		at := md.nameRange
		if name != nil {
			at = name.value.rng
		}
		r.errorf(at, "Missing metadata.name", "A %s needs a name: metadata: {name: NAME}.", kind)
		return
	}
	tags := mf["tags"]
	if tags != nil && kind != kindGroup {
		r.warnf(tags.nameRange, "Field not carried over", "metadata.tags is ignored: an %s has no tags; only a group's tags are carried over.", kind)
		tags = nil
	}
	props := f["properties"]
	if props == nil {
		r.errorf(name.value.rng, "Missing properties", "%s %q has no properties.", upperFirst(kind), name.value.text)
		return
	}
	options := f["options"]

	switch kind {
	case kindGroup:
		r.group(name.value, props.value, "properties", tags, options)
	case kindIngress:
		r.ingress(name.value, props.value, options)
	case kindEnrollment:
		r.enrollment(name.value, props.value, options)
	}
}

// syncInterval sets sync_interval from options.SyncInterval, checking the
// options against spec (the other fields warn).
func (r *reader) syncInterval(body *hclsyntax.Body, options *field, spec *objectSpec) {
	if options == nil {
		return
	}
	of, ok := r.fields(options.value, "options", spec)
	if !ok {
		return
	}
	if si := of["SyncInterval"]; si != nil {
		setAttr(body, "sync_interval", si.nameRange, r.value(si.value))
	}
}

// groupName reads a reference to a group: "mystack/cattle" (the old
// "plugin/group" form; the part before the slash named the group
// controller and is not needed) or "cattle".
func (r *reader) groupName(n *node, path string) (*hclsyntax.ScopeTraversalExpr, bool) {
	if n.kind != kindString {
		r.errorf(n.rng, "Invalid group reference", `%s must name a group, like "mystack/cattle"; got %s.`, path, n.kind)
		return nil, false
	}
	name := n.text
	if _, after, ok := strings.Cut(name, "/"); ok {
		name = after
	}
	if name == "" {
		r.errorf(n.rng, "Invalid group reference", `%q names no group; write STACK/GROUP, like "mystack/cattle".`, n.text)
		return nil, false
	}
	return reference(n.rng, kindGroup, name), true
}

// ingress converts an ingress's properties, a list of entries each naming
// a load balancer (L4Plugin), the groups behind it and its routes. Each
// entry becomes a rule.
func (r *reader) ingress(name, props *node, options *field) {
	body := newBody(props.rng)
	r.syncInterval(body, options, &ingressOptionsSpec)
	if props.kind != kindArray {
		r.errorf(props.rng, "Invalid properties",
			"An ingress's properties are a list of entries, each with L4Plugin, Backends and Routes; got %s.", props.kind)
		return
	}
	if len(props.items) == 0 {
		r.errorf(props.rng, "Empty properties", "Ingress %q lists no entries; each needs L4Plugin, Backends and Routes.", name.text)
		return
	}
	for i, entry := range props.items {
		if rule := r.rule(entry, "properties["+strconv.Itoa(i)+"]"); rule != nil {
			body.Blocks = append(body.Blocks, rule)
		}
	}
	r.body.Blocks = append(r.body.Blocks, newBlock("ingress", name.rng, body, name.text))
}

func (r *reader) rule(entry *node, path string) *hclsyntax.Block {
	ef, ok := r.fields(entry, path, &ingressEntrySpec)
	if !ok {
		return nil
	}
	body := newBody(entry.rng)
	at := openRange(entry.rng)

	l4 := ef["L4Plugin"]
	if l4 == nil {
		r.errorf(at, "Missing L4Plugin", `%s has no L4Plugin, the load balancer it configures, like "simulator/lb1".`, path)
		return nil
	}
	lb, ok := r.parsePlugin(l4, path+".L4Plugin", true)
	if !ok {
		return nil
	}
	if !hclsyntax.ValidIdentifier(lb.typ) {
		r.errorf(l4.value.rng, "Invalid L4Plugin",
			"%q names load balancer %q, which a stack cannot refer to: a name has letters, digits, underscores and dashes.", l4.value.text, lb.typ)
		return nil
	}
	if !r.implyLoadBalancer(lb.typ, lb.key(), l4.value.rng) {
		return nil
	}
	setAttr(body, "loadbalancer", l4.nameRange, reference(l4.value.rng, "loadbalancer", lb.typ))

	if b := ef["Backends"]; b == nil {
		r.errorf(at, "Missing Backends", `%s has no Backends: {Groups: ["mystack/cattle"]}.`, path)
	} else if bf, ok := r.fields(b.value, path+".Backends", &backendsSpec); ok {
		groups := bf["Groups"]
		switch {
		case groups == nil:
			r.errorf(b.nameRange, "Missing Backends.Groups", `%s.Backends has no Groups: the groups whose members become backends, like ["mystack/cattle"].`, path)
		case groups.value.kind != kindArray:
			r.errorf(groups.value.rng, "Invalid Backends.Groups", `Groups must be a list, like ["mystack/cattle"]; got %s.`, groups.value.kind)
		default:
			tuple := &hclsyntax.TupleConsExpr{SrcRange: groups.value.rng, OpenRange: openRange(groups.value.rng)}
			for i, g := range groups.value.items {
				if ref, ok := r.groupName(g, path+".Backends.Groups["+strconv.Itoa(i)+"]"); ok {
					tuple.Exprs = append(tuple.Exprs, ref)
				}
			}
			setAttr(body, "groups", groups.nameRange, tuple)
		}
	}

	routes := ef["Routes"]
	switch {
	case routes == nil:
		r.errorf(at, "Missing Routes", "%s has no Routes: infrakit publishes the routes listed, like [{LoadBalancerPort: 80, Port: 8080}].", path)
	case routes.value.kind != kindArray:
		r.errorf(routes.value.rng, "Invalid Routes", "Routes must be a list; got %s.", routes.value.kind)
	default:
		for i, rt := range routes.value.items {
			if b := r.route(rt, path+".Routes["+strconv.Itoa(i)+"]"); b != nil {
				body.Blocks = append(body.Blocks, b)
			}
		}
	}
	return newBlock("rule", l4.value.rng, body)
}

func (r *reader) route(n *node, path string) *hclsyntax.Block {
	rf, ok := r.fields(n, path, &routeSpec)
	if !ok {
		return nil
	}
	body := newBody(n.rng)
	for _, a := range []struct{ old, attr string }{
		{"LoadBalancerPort", "lb_port"}, {"LoadBalancerProtocol", "lb_protocol"},
		{"Port", "port"}, {"Protocol", "protocol"}, {"Certificate", "certificate"},
	} {
		f := rf[a.old]
		if f == nil {
			continue
		}
		expr := r.value(f.value)
		if strings.HasSuffix(a.old, "Protocol") && f.value.kind == kindString {
			// Old protocols were upper case (TCP, HTTPS) and read ignoring case.
			expr = literal(cty.StringVal(strings.ToLower(f.value.text)), f.value.rng)
		}
		setAttr(body, a.attr, f.nameRange, expr)
	}
	return newBlock("route", openRange(n.rng), body)
}

// enrollment converts {List: "mystack/cattle", Instance: {Plugin,
// Properties}}: every member of the List group gets an authorization from
// the Instance plugin, rendered from its properties.
func (r *reader) enrollment(name, props *node, options *field) {
	pf, ok := r.fields(props, "properties", &enrollmentPropertiesSpec)
	if !ok {
		return
	}
	body := newBody(props.rng)
	r.syncInterval(body, options, &enrollmentOptionsSpec)

	if list := pf["List"]; list == nil {
		r.errorf(name.rng, "Missing List", `Enrollment %q has no properties.List naming its source group, like "mystack/cattle".`, name.text)
	} else if list.value.kind == kindArray {
		r.errorf(list.value.rng, "Unsupported List",
			`A List of instance descriptions is not supported: an enrollment's source is a group; name it, like List: mystack/cattle.`)
	} else if ref, ok := r.groupName(list.value, "properties.List"); ok {
		setAttr(body, "source", list.nameRange, ref)
	}

	inst := pf["Instance"]
	if inst == nil {
		r.errorf(name.rng, "Missing Instance", `Enrollment %q has no properties.Instance, the plugin that authorizes each member: {Plugin: "simulator/disk", Properties: {...}}.`, name.text)
	} else if target := r.target(inst); target != nil {
		body.Blocks = append(body.Blocks, target)
	}
	r.body.Blocks = append(r.body.Blocks, newBlock("enrollment", name.rng, body, name.text))
}

func (r *reader) target(inst *field) *hclsyntax.Block {
	const path = "properties.Instance"
	tf, ok := r.fields(inst.value, path, &enrollmentInstanceSpec)
	if !ok {
		return nil
	}
	pl := tf["Plugin"]
	if pl == nil {
		r.errorf(inst.nameRange, "Missing Plugin", `%s has no Plugin, the provider and type that authorize each member, like "simulator/disk".`, path)
		return nil
	}
	p, ok := r.parsePlugin(pl, path+".Plugin", true)
	if !ok {
		return nil
	}
	body := newBody(inst.value.rng)
	setAttr(body, "provider", pl.nameRange, p.providerExpr(pl.value.rng))
	setAttr(body, "type", pl.nameRange, literal(cty.StringVal(p.typ), pl.value.rng))
	if props := tf["Properties"]; props != nil {
		expr, text := r.convert(props.value, r.memberString)
		setAttr(body, "properties", props.nameRange, &PropertiesExpr{Expression: expr, Source: text})
	}
	return newBlock("target", inst.nameRange, body)
}

var _ hcl.Expression = (*PropertiesExpr)(nil)
