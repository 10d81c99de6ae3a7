package legacy

import (
	"fmt"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
)

// fieldSpec is one field an object of an old format may have.
type fieldSpec struct {
	// name is the field as the old format spelled it. Names match ignoring
	// case, as encoding/json matched them.
	name string
	// to says what the field becomes in a stack file; the migration page
	// lists it (TestMigrationPageListsEveryField keeps them in step).
	to string
	// ignored, when set, is why infrakit has no use for the field: reading
	// it gives a warning with this reason, never silence.
	ignored string
}

// objectSpec lists the fields of one kind of object.
type objectSpec struct {
	// name is how the migration page heads the object's fields.
	name   string
	fields []fieldSpec
}

func (o *objectSpec) lookup(name string) *fieldSpec {
	for i := range o.fields {
		if strings.EqualFold(o.fields[i].name, name) {
			return &o.fields[i]
		}
	}
	return nil
}

func (o *objectSpec) names() []string {
	out := make([]string, len(o.fields))
	for i, f := range o.fields {
		out[i] = f.name
	}
	return out
}

// Reasons shared by several ignored fields.
const (
	pluginOptions = "plugin options configured the old plugin process; infrakit starts providers itself, and a provider block's attributes are its settings"
	keySelector   = "infrakit matches members to what it made by the tags it puts on them (infrakit.enrollment.source_id), not by a template"
	parseErrOp    = "infrakit never enrolls or revokes an instance it cannot identify by its tags"
)

// The objects of both formats. Each reader checks an object against its
// spec before looking at the values (see reader.fields).
var (
	legacyGroupSpec = objectSpec{name: "Legacy group (JSON)", fields: []fieldSpec{
		{name: "ID", to: `the group block's label: group "cattle" {}`},
		{name: "Properties", to: "the group block's body (see group Properties)"},
	}}
	groupPropertiesSpec = objectSpec{name: "group Properties", fields: []fieldSpec{
		{name: "Allocation", to: "size or logical_ids"},
		{name: "Instance", to: "the instance block"},
		{name: "Flavor", to: "one flavor block; a combo flavor becomes one flavor block per element, in order"},
		{name: "Updating", to: "nothing (see Updating)"},
	}}
	allocationSpec = objectSpec{name: "Allocation", fields: []fieldSpec{
		{name: "Size", to: "size = N (cattle)"},
		{name: "LogicalIDs", to: `logical_ids = ["..."] (pets)`},
	}}
	pluginSpec = objectSpec{name: "Instance and Flavor", fields: []fieldSpec{
		{name: "Plugin", to: `provider = NAME and type = "TYPE" from "NAME/TYPE"; "NAME.ALIAS/TYPE" names an aliased provider`},
		{name: "Properties", to: "properties = { ... }, unchanged (vanilla's are renamed, see vanilla Properties)"},
		{name: "Options", ignored: pluginOptions},
	}}
	comboElementSpec = objectSpec{name: "combo Properties element", fields: []fieldSpec{
		{name: "Plugin", to: "the flavor block's provider and type"},
		{name: "Properties", to: "the flavor block's properties"},
		{name: "Options", ignored: pluginOptions},
	}}
	updatingSpec = objectSpec{name: "Updating", fields: []fieldSpec{
		{name: "Count", ignored: "infrakit replaces members one at a time by default (update { max_parallel = 1 }) and moves on once the replacement is healthy, bounded by update { health_timeout }; there is no count of healthy polls to wait for"},
		{name: "Duration", ignored: "infrakit moves on once a replacement is healthy, bounded by update { health_timeout }; there is no settle time to wait after that"},
		{name: "SkipBeforeInstanceDestroy", ignored: "infrakit drains each member through its flavors before destroying it; there is no step to skip"},
	}}
	vanillaSpec = objectSpec{name: "vanilla Properties", fields: []fieldSpec{
		{name: "Init", to: "init = [...]"},
		{name: "Tags", to: "tags = { ... }"},
		{name: "Attachments", to: `attachments = [{ id = "...", type = "..." }]`},
	}}
	attachmentSpec = objectSpec{name: "vanilla Attachments element", fields: []fieldSpec{
		{name: "ID", to: "id"},
		{name: "Type", to: "type"},
	}}

	specSpec = objectSpec{name: "New-schema specification (YAML, or the same shape in JSON)", fields: []fieldSpec{
		{name: "kind", to: "the block type: group, ingress or enrollment"},
		{name: "metadata", to: "see metadata"},
		{name: "properties", to: "the block's body (see the kind's properties)"},
		{name: "options", to: "see the kind's options"},
		{name: "version", ignored: "a stack file has no per-object version; the lock file pins the providers"},
		{name: "depends", ignored: "infrakit orders objects by their references (an ingress after the groups it names)"},
		{name: "template", ignored: "templates are not rendered; convert the rendered specification"},
		{name: "state", ignored: "what an old controller reported; infrakit keeps state in infrakit.state.json"},
	}}
	metadataSpec = objectSpec{name: "metadata", fields: []fieldSpec{
		{name: "name", to: `the block's label: group "cattle", ingress "test.com", enrollment "nfs"`},
		{name: "tags", to: "a group's tags = { ... }; an ingress or enrollment has none (a warning)"},
		{name: "id", ignored: "an object is identified by its kind and name"},
	}}
	groupOptionsSpec = objectSpec{name: "group options", fields: []fieldSpec{
		{name: "PollInterval", ignored: "apply converges once; infrakit watch -interval sets how often watch looks"},
		{name: "MaxParallelNum", ignored: "apply -parallelism (default 10) bounds provider calls in flight"},
		{name: "PollIntervalGroupSpec", ignored: "there is no metadata to poll; infrakit watch serves the status over HTTP"},
		{name: "PollIntervalGroupDetail", ignored: "there is no metadata to poll; infrakit watch serves the status over HTTP"},
		{name: "Self", ignored: "infrakit does not run inside the group it manages"},
		{name: "PolicyLeaderSelfUpdate", ignored: "infrakit does not run inside the group it manages"},
	}}
	ingressEntrySpec = objectSpec{name: "ingress properties element", fields: []fieldSpec{
		{name: "L4Plugin", to: `a rule's loadbalancer = loadbalancer.LB, and loadbalancer "LB" { provider = NAME } from "NAME/LB"`},
		{name: "Backends", to: "see Backends"},
		{name: "Routes", to: "one route block per element"},
		{name: "Vhost", ignored: "infrakit publishes the routes listed; there is no virtual-host matching of services"},
		{name: "RouteSources", ignored: "routes are the ones listed in Routes; routes discovered from Docker Swarm services are not supported"},
		{name: "HealthChecks", ignored: "every load balancer of an ingress gets infrakit's own health check, on the first route's backend port (see the language reference); a check of its own is not configurable"},
	}}
	backendsSpec = objectSpec{name: "Backends", fields: []fieldSpec{
		{name: "Groups", to: `groups = [group.NAME] from "STACK/NAME" (or "NAME")`},
		{name: "Instances", ignored: "backends are the members of the rule's groups; fixed instance IDs are not registered"},
	}}
	routeSpec = objectSpec{name: "Routes element", fields: []fieldSpec{
		{name: "LoadBalancerPort", to: "lb_port"},
		{name: "LoadBalancerProtocol", to: `lb_protocol, lower case ("HTTPS" becomes "https")`},
		{name: "Port", to: "port"},
		{name: "Protocol", to: "protocol, lower case"},
		{name: "Certificate", to: "certificate"},
	}}
	ingressOptionsSpec = objectSpec{name: "ingress options", fields: []fieldSpec{
		{name: "SyncInterval", to: "sync_interval"},
		{name: "HardSync", ignored: "infrakit always makes the routes and backends equal to the stack's"},
		{name: "MatchByLabels", ignored: "routes discovered from Docker Swarm services are not supported"},
		{name: "SourceKeySelector", ignored: keySelector},
	}}
	enrollmentPropertiesSpec = objectSpec{name: "enrollment properties", fields: []fieldSpec{
		{name: "List", to: `source = group.NAME from "STACK/NAME" (or "NAME")`},
		{name: "Instance", to: "the target block"},
	}}
	enrollmentInstanceSpec = objectSpec{name: "enrollment Instance", fields: []fieldSpec{
		{name: "Plugin", to: `the target's provider and type from "NAME/TYPE" or "NAME.ALIAS/TYPE"`},
		{name: "Properties", to: `the target's properties; {{.ID}} becomes member.id, {{.LogicalID}} member.logical_id, {{.Tags.NAME}} member.tags["NAME"]`},
		{name: "Labels", ignored: "infrakit tags what an enrollment makes itself (infrakit.enrollment.name, infrakit.enrollment.source_id)"},
	}}
	enrollmentOptionsSpec = objectSpec{name: "enrollment options", fields: []fieldSpec{
		{name: "SyncInterval", to: "sync_interval"},
		{name: "DestroyOnTerminate", ignored: "`infrakit enrollment destroy` always revokes the authorizations and `free` keeps them (destroy_on_free = true revokes on free too)"},
		{name: "SourceKeySelector", ignored: keySelector},
		{name: "EnrollmentKeySelector", ignored: keySelector},
		{name: "SourceParseErrPolicy", ignored: parseErrOp},
		{name: "SourceParseErrOp", ignored: parseErrOp},
		{name: "EnrollmentParseErrPolicy", ignored: parseErrOp},
		{name: "EnrollmentParseErrOp", ignored: parseErrOp},
	}}
)

// allSpecs is every object spec, for the migration page's test.
var allSpecs = []*objectSpec{
	&legacyGroupSpec, &groupPropertiesSpec, &allocationSpec, &pluginSpec, &comboElementSpec,
	&updatingSpec, &vanillaSpec, &attachmentSpec,
	&specSpec, &metadataSpec, &groupOptionsSpec,
	&ingressEntrySpec, &backendsSpec, &routeSpec, &ingressOptionsSpec,
	&enrollmentPropertiesSpec, &enrollmentInstanceSpec, &enrollmentOptionsSpec,
}

// fields checks an object against spec and returns its fields by their
// spec names. path names the object in messages ("Properties.Allocation").
// Unknown fields and fields given twice (in any case) are errors; a field
// the spec ignores gives a warning and is left out; null counts as absent.
// ok is false when n is not an object or has an unknown or repeated field:
// the caller then looks no further into it, so that one mistake is not
// reported again as a field missing.
func (r *reader) fields(n *node, path string, spec *objectSpec) (out map[string]*field, ok bool) {
	if n.kind != kindObject {
		r.errorf(n.rng, "Invalid "+lastPart(path), "%s must be an object; got %s.", path, n.kind)
		return nil, false
	}
	out, ok = map[string]*field{}, true
	seen := map[string]hcl.Range{}
	for i := range n.fields {
		f := &n.fields[i]
		fs := spec.lookup(f.name)
		if fs == nil {
			detail := fmt.Sprintf("%s has no field %q; its fields are %s.", path, f.name, strings.Join(spec.names(), ", "))
			if s := suggest(f.name, spec.names()); s != "" {
				detail += fmt.Sprintf(" Did you mean %q?", s)
			}
			r.errorf(f.nameRange, "Unknown field", "%s", detail)
			ok = false
			continue
		}
		if first, dup := seen[fs.name]; dup {
			r.errorf(f.nameRange, "Duplicate field", "%s.%s is already set at %s.", path, fs.name, rangeString(first))
			ok = false
			continue
		}
		seen[fs.name] = f.nameRange
		if f.value.kind == kindNull {
			continue
		}
		if fs.ignored != "" {
			r.warnf(f.nameRange, "Field not carried over", "%s.%s is ignored: %s.", path, fs.name, fs.ignored)
			continue
		}
		out[fs.name] = f
	}
	return out, ok
}

// suggest returns the name closest to given when it is close enough to be
// a typo, or "".
func suggest(given string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := levenshtein.Distance(strings.ToLower(given), strings.ToLower(n), nil); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

func lastPart(path string) string {
	if i := strings.LastIndexAny(path, ".]"); i >= 0 && i+1 < len(path) {
		return path[i+1:]
	}
	return path
}

// rangeString is "file:line:col" of where r starts.
func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}
