package legacy

import (
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Plugin names with a meaning of their own in old specifications.
const (
	comboPlugin   = "combo"
	vanillaPlugin = "vanilla"
)

// legacyGroup reads {"ID": "cattle", "Properties": {...}}.
func (r *reader) legacyGroup(n *node) {
	f, ok := r.fields(n, "A legacy group", &legacyGroupSpec)
	if !ok {
		return
	}
	id := f["ID"]
	if id == nil {
		r.errorf(n.startRange(), "Missing ID", `A legacy group needs "ID", its name: {"ID": "cattle", "Properties": {...}}.`)
		return
	}
	if id.value.kind != kindString {
		r.errorf(id.value.rng, "Invalid ID", "ID must be a string, the group's name; got %s.", id.value.kind)
		return
	}
	props := f["Properties"]
	if props == nil {
		r.errorf(id.value.rng, "Missing Properties", `Group %q has no "Properties" (its Allocation, Instance and Flavor).`, id.value.text)
		return
	}
	r.group(id.value, props.value, "Properties", nil, nil)
}

// group converts a group's properties (the same in both formats) into a
// group block named by name. tags are the new schema's metadata.tags and
// options its options; both may be nil.
func (r *reader) group(name *node, props *node, path string, tags, options *field) {
	f, ok := r.fields(props, path, &groupPropertiesSpec)
	if !ok {
		return
	}
	body := newBody(props.rng)

	if a := f["Allocation"]; a == nil {
		r.errorf(name.rng, "Missing Allocation",
			`Group %q has no %s.Allocation: {"Size": N} for cattle or {"LogicalIDs": [...]} for pets.`, name.text, path)
	} else if af, ok := r.fields(a.value, path+".Allocation", &allocationSpec); ok {
		size, ids := af["Size"], af["LogicalIDs"]
		if size == nil && ids == nil {
			r.errorf(a.nameRange, "Empty Allocation", `%s.Allocation needs "Size" (cattle) or "LogicalIDs" (pets).`, path)
		}
		if size != nil {
			setAttr(body, "size", size.nameRange, r.value(size.value))
		}
		if ids != nil {
			setAttr(body, "logical_ids", ids.nameRange, r.value(ids.value))
		}
	}
	if tags != nil {
		setAttr(body, "tags", tags.nameRange, r.value(tags.value))
	}

	if inst := f["Instance"]; inst == nil {
		r.errorf(name.rng, "Missing Instance", `Group %q has no %s.Instance: {"Plugin": "simulator/compute", "Properties": {...}}.`, name.text, path)
	} else if b := r.plugin("instance", inst, path+".Instance", true); b != nil {
		body.Blocks = append(body.Blocks, b)
	}
	if fl := f["Flavor"]; fl == nil {
		r.errorf(name.rng, "Missing Flavor", `Group %q has no %s.Flavor: {"Plugin": "vanilla", "Properties": {...}}.`, name.text, path)
	} else {
		body.Blocks = append(body.Blocks, r.flavors(fl, path+".Flavor", 0)...)
	}
	if u := f["Updating"]; u != nil {
		r.fields(u.value, path+".Updating", &updatingSpec) // every field warns
	}
	if options != nil {
		r.fields(options.value, "options", &groupOptionsSpec) // every field warns
	}
	r.body.Blocks = append(r.body.Blocks, newBlock("group", name.rng, body, name.text))
}

// pluginName is a parsed "name/type", "name.alias/type" or "name".
type pluginName struct {
	name, alias, typ string
}

// parsePlugin reads a Plugin field. In old infrakit "simulator/compute"
// named the plugin process simulator and the object compute it serves;
// here the process is a provider and the object its type. requireType
// says the type must be there (instances, load balancers, authorizers).
func (r *reader) parsePlugin(f *field, path string, requireType bool) (pluginName, bool) {
	v := f.value
	if v.kind != kindString {
		r.errorf(v.rng, "Invalid "+f.name, `%s must be a string like "simulator/compute"; got %s.`, path, v.kind)
		return pluginName{}, false
	}
	var p pluginName
	lookup, typ, hasType := strings.Cut(v.text, "/")
	p.typ = typ
	p.name, p.alias, _ = strings.Cut(lookup, ".")
	example := `"simulator/compute"`
	if strings.EqualFold(f.name, "L4Plugin") {
		example = `"simulator/lb1"`
	}
	switch {
	case !hclsyntax.ValidIdentifier(p.name):
		r.errorf(v.rng, "Invalid "+f.name,
			"%q does not start with a provider name: write NAME/TYPE, like %s; a name has letters, digits, underscores and dashes.", v.text, example)
		return pluginName{}, false
	case strings.Contains(lookup, ".") && !hclsyntax.ValidIdentifier(p.alias):
		r.errorf(v.rng, "Invalid "+f.name,
			"%q names provider %s with an invalid alias %q: an alias has letters, digits, underscores and dashes.", v.text, p.name, p.alias)
		return pluginName{}, false
	case hasType && typ == "", requireType && !hasType:
		r.errorf(v.rng, "Missing type in "+f.name,
			"%q names no type; write %s/TYPE, like %s.", v.text, lookup, example)
		return pluginName{}, false
	}
	r.implyProvider(p.name, p.alias, v.rng)
	return p, true
}

// providerExpr is the provider reference of a parsed plugin name.
func (p pluginName) providerExpr(rng hcl.Range) *hclsyntax.ScopeTraversalExpr {
	if p.alias != "" {
		return reference(rng, p.name, p.alias)
	}
	return reference(rng, p.name)
}

func (p pluginName) key() string {
	return Provider{Name: p.name, Alias: p.alias}.Key()
}

// plugin converts {"Plugin": ..., "Properties": ...} into an instance or
// flavor block.
func (r *reader) plugin(typ string, f *field, path string, requireType bool) *hclsyntax.Block {
	pf, ok := r.fields(f.value, path, &pluginSpec)
	if !ok {
		return nil
	}
	return r.pluginBlock(typ, f, pf, path, requireType)
}

func (r *reader) pluginBlock(typ string, f *field, pf map[string]*field, path string, requireType bool) *hclsyntax.Block {
	pl := pf["Plugin"]
	if pl == nil {
		r.errorf(f.nameRange, "Missing Plugin", `%s has no "Plugin", the provider and type that serve it, like "simulator/compute".`, path)
		return nil
	}
	name, ok := r.parsePlugin(pl, path+".Plugin", requireType)
	if !ok {
		return nil
	}
	body := newBody(f.value.rng)
	setAttr(body, "provider", pl.nameRange, name.providerExpr(pl.value.rng))
	if name.typ != "" {
		setAttr(body, "type", pl.nameRange, literal(cty.StringVal(name.typ), pl.value.rng))
	}
	if props := pf["Properties"]; props != nil {
		expr := r.value(props.value)
		if typ == "flavor" && name.name == vanillaPlugin && name.typ == "" {
			expr = r.vanilla(props, path+".Properties")
		}
		setAttr(body, "properties", props.nameRange, expr)
	}
	return newBlock(typ, f.nameRange, body)
}

// flavors converts a Flavor. A combo flavor ({"Plugin": "combo",
// "Properties": [{"Plugin": ..., "Properties": ...}, ...]}) combined the
// flavors it lists in order, which is what several flavor blocks do.
func (r *reader) flavors(f *field, path string, depth int) []*hclsyntax.Block {
	pf, ok := r.fields(f.value, path, &pluginSpec)
	if !ok {
		return nil
	}
	pl := pf["Plugin"]
	if pl == nil || pl.value.kind != kindString || pl.value.text != comboPlugin {
		if b := r.pluginBlock("flavor", f, pf, path, false); b != nil {
			return []*hclsyntax.Block{b}
		}
		return nil
	}
	props := pf["Properties"]
	switch {
	case props == nil || props.value.kind != kindArray || len(props.value.items) == 0:
		at := pl.value.rng
		if props != nil {
			at = props.value.rng
		}
		r.errorf(at, "Invalid combo flavor",
			`A combo flavor's Properties list the flavors it combines: [{"Plugin": "vanilla", "Properties": {...}}, ...].`)
		return nil
	case depth > maxDepth:
		r.errorf(pl.value.rng, "Invalid combo flavor", "Combo flavors are nested too deep.")
		return nil
	}
	var out []*hclsyntax.Block
	for i, item := range props.value.items {
		elem := &field{name: props.name, nameRange: props.nameRange, value: item}
		elemPath := path + ".Properties[" + strconv.Itoa(i) + "]"
		if item.kind == kindObject && item.field("Plugin") != nil && item.field("Plugin").value.text == comboPlugin {
			out = append(out, r.flavors(elem, elemPath, depth+1)...)
			continue
		}
		ef, ok := r.fields(item, elemPath, &comboElementSpec)
		if !ok {
			continue
		}
		// The element's own position is the most useful place for messages
		// about the flavor block it becomes.
		elem.nameRange = openRange(item.rng)
		if b := r.pluginBlock("flavor", elem, ef, elemPath, false); b != nil {
			out = append(out, b)
		}
	}
	return out
}

// vanilla converts the old vanilla flavor's properties, whose fields were
// Init, Tags and Attachments ([{"ID", "Type"}]), to the vanilla provider's
// init, tags and attachments ([{id, type}]).
func (r *reader) vanilla(props *field, path string) hclsyntax.Expression {
	if props.value.kind != kindObject {
		return r.value(props.value) // config says properties must be an object
	}
	vf, _ := r.fields(props.value, path, &vanillaSpec)
	obj := &hclsyntax.ObjectConsExpr{SrcRange: props.value.rng, OpenRange: openRange(props.value.rng)}
	add := func(key string, f *field, v hclsyntax.Expression) {
		obj.Items = append(obj.Items, hclsyntax.ObjectConsItem{
			KeyExpr:   &hclsyntax.ObjectConsKeyExpr{Wrapped: literal(cty.StringVal(key), f.nameRange)},
			ValueExpr: v,
		})
	}
	// In source order, so diagnostics come in the order of the file.
	for _, f := range props.value.fields {
		spec := vanillaSpec.lookup(f.name)
		if spec == nil || vf[spec.name] == nil || vf[spec.name].nameRange != f.nameRange {
			continue
		}
		switch spec.name {
		case "Init":
			add("init", vf["Init"], r.value(f.value))
		case "Tags":
			add("tags", vf["Tags"], r.value(f.value))
		case "Attachments":
			add("attachments", vf["Attachments"], r.attachments(f.value, path+".Attachments"))
		}
	}
	return obj
}

func (r *reader) attachments(n *node, path string) hclsyntax.Expression {
	if n.kind != kindArray {
		return r.value(n)
	}
	tuple := &hclsyntax.TupleConsExpr{SrcRange: n.rng, OpenRange: openRange(n.rng)}
	for i, item := range n.items {
		af, ok := r.fields(item, path+"["+strconv.Itoa(i)+"]", &attachmentSpec)
		if !ok {
			tuple.Exprs = append(tuple.Exprs, r.value(item))
			continue
		}
		obj := &hclsyntax.ObjectConsExpr{SrcRange: item.rng, OpenRange: openRange(item.rng)}
		for _, f := range item.fields {
			spec := attachmentSpec.lookup(f.name)
			if spec == nil || af[spec.name] == nil || af[spec.name].nameRange != f.nameRange {
				continue
			}
			obj.Items = append(obj.Items, hclsyntax.ObjectConsItem{
				KeyExpr:   &hclsyntax.ObjectConsKeyExpr{Wrapped: literal(cty.StringVal(strings.ToLower(spec.name)), f.nameRange)},
				ValueExpr: r.value(f.value),
			})
		}
		tuple.Exprs = append(tuple.Exprs, obj)
	}
	return tuple
}
