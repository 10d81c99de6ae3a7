// Package vanilla implements the "vanilla" flavor: it adds init script
// lines, tags and attachments to an instance spec and judges every instance
// healthy. It is the flavor most groups start with, and the one that combines
// with others (several flavor blocks in a group apply in order).
//
// Properties (all optional):
//
//	init        = ["line", ...]                  appended to the spec's init script, one per line
//	tags        = { key = "value", ... }         merged into the spec's tags; vanilla's win
//	attachments = [{ id = "...", type = "..." }] appended to the spec's attachments
package vanilla

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Name is the provider's name; Type is the flavor type it serves.
const (
	Name = "vanilla"
	Type = "vanilla"
)

// Schema is the schema of the flavor's properties.
func Schema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"init": {
			Type:        "list(string)",
			Description: "Lines appended to the instance's init script, in order.",
		},
		"tags": {
			Type:        "map(string)",
			Description: "Tags merged into the instance's tags; these win over the group's.",
		},
		"attachments": {
			Type:        "list(object({id=string, type=string}))",
			Description: "Things to attach to the instance (volumes, addresses), appended in order.",
		},
	}}
}

// Metadata describes the vanilla provider.
func Metadata(version string) provider.Metadata {
	return provider.Metadata{
		Name:    Name,
		Version: version,
		Objects: []provider.Object{{Kind: provider.KindFlavor, Type: Type, Schema: Schema()}},
	}
}

// Properties is the decoded form of the flavor's properties.
type Properties struct {
	Init        []string
	Tags        map[string]string
	Attachments []instance.Attachment
}

// Flavor is the vanilla flavor. It holds no state.
type Flavor struct{}

var (
	_ flavor.Plugin             = Flavor{}
	_ flavor.BatchHealthChecker = Flavor{}
)

// Validate checks the properties, reporting every problem with its attribute path.
func (Flavor) Validate(ctx context.Context, properties json.RawMessage, _ flavor.Allocation) error {
	_, err := Parse(properties)
	return err
}

// Prepare applies the properties to spec (see Apply).
func (Flavor) Prepare(ctx context.Context, properties json.RawMessage, spec instance.Spec, _ flavor.Allocation, _ flavor.Index) (instance.Spec, error) {
	p, err := Parse(properties)
	if err != nil {
		return spec, err
	}
	return Apply(p, spec), nil
}

// Healthy is always healthy: vanilla knows nothing about what runs.
func (Flavor) Healthy(ctx context.Context, properties json.RawMessage, inst instance.Description) (flavor.Health, error) {
	return flavor.HealthHealthy, nil
}

// HealthyAll is Healthy for a whole group at once: every instance is
// healthy. It spares the provider one goroutine and call per instance.
func (Flavor) HealthyAll(ctx context.Context, properties json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	out := make([]flavor.Health, len(insts))
	for i := range out {
		out[i] = flavor.HealthHealthy
	}
	return out, nil
}

// Drain does nothing.
func (Flavor) Drain(ctx context.Context, properties json.RawMessage, inst instance.Description) error {
	return nil
}

// Apply returns spec with p applied, leaving the input's maps and slices
// untouched: init lines go after the existing script (newline-joined), tags
// merge with p's winning, attachments are appended.
func Apply(p Properties, spec instance.Spec) instance.Spec {
	if len(p.Init) > 0 {
		lines := strings.Join(p.Init, "\n")
		switch {
		case spec.Init == "":
			spec.Init = lines
		case strings.HasSuffix(spec.Init, "\n"):
			spec.Init += lines
		default:
			spec.Init += "\n" + lines
		}
	}
	if len(p.Tags) > 0 {
		tags := make(map[string]string, len(spec.Tags)+len(p.Tags))
		maps.Copy(tags, spec.Tags)
		maps.Copy(tags, p.Tags)
		spec.Tags = tags
	}
	if len(p.Attachments) > 0 {
		spec.Attachments = append(slices.Clip(spec.Attachments), p.Attachments...)
	}
	return spec
}

var (
	topKeys        = []string{"init", "tags", "attachments"}
	attachmentKeys = []string{"id", "type"}
)

// Parse decodes and checks properties. Absent properties (empty or null)
// are valid and change nothing. A non-nil error is provider.Diagnostics, one
// per problem, each with the path of the offending attribute (["init", "1"],
// ["tags", "tier"], ["attachments", "0", "id"]).
func Parse(raw json.RawMessage) (Properties, error) {
	var p Properties
	if isNull(raw) {
		return p, nil
	}
	var fields map[string]json.RawMessage
	if kind := jsonKind(raw); kind != "object" || json.Unmarshal(raw, &fields) != nil {
		if !json.Valid(raw) {
			kind = "invalid JSON"
		}
		return p, provider.Diagnostics{errorAt(nil, "Invalid properties", "The vanilla flavor's properties must be an object, got %s.", kind)}
	}
	var diags provider.Diagnostics
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		if !slices.Contains(topKeys, k) {
			diags = append(diags, unsupported([]string{k}, k, topKeys))
			continue
		}
		if isNull(v) {
			continue // an HCL null is the same as leaving it out
		}
		switch k {
		case "init":
			var ds provider.Diagnostics
			p.Init, ds = parseStringList(v, "init")
			diags = append(diags, ds...)
		case "tags":
			var ds provider.Diagnostics
			p.Tags, ds = parseStringMap(v, "tags")
			diags = append(diags, ds...)
		case "attachments":
			var ds provider.Diagnostics
			p.Attachments, ds = parseAttachments(v)
			diags = append(diags, ds...)
		}
	}
	if err := diags.Err(); err != nil {
		return Properties{}, err
	}
	return p, nil
}

func parseStringList(raw json.RawMessage, attr string) ([]string, provider.Diagnostics) {
	var elems []json.RawMessage
	if jsonKind(raw) != "list" || json.Unmarshal(raw, &elems) != nil {
		return nil, provider.Diagnostics{errorAt([]string{attr}, "Incorrect attribute value type",
			"%s must be a list of strings, got %s.", attr, jsonKind(raw))}
	}
	var diags provider.Diagnostics
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		var s string
		if jsonKind(e) != "string" || json.Unmarshal(e, &s) != nil {
			diags = append(diags, errorAt([]string{attr, strconv.Itoa(i)}, "Incorrect attribute value type",
				"%s[%d] must be a string, got %s.", attr, i, jsonKind(e)))
			continue
		}
		out = append(out, s)
	}
	return out, diags
}

func parseStringMap(raw json.RawMessage, attr string) (map[string]string, provider.Diagnostics) {
	var fields map[string]json.RawMessage
	if jsonKind(raw) != "object" || json.Unmarshal(raw, &fields) != nil {
		return nil, provider.Diagnostics{errorAt([]string{attr}, "Incorrect attribute value type",
			"%s must be a map of strings, got %s.", attr, jsonKind(raw))}
	}
	var diags provider.Diagnostics
	out := make(map[string]string, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		var s string
		if jsonKind(fields[k]) != "string" || json.Unmarshal(fields[k], &s) != nil {
			diags = append(diags, errorAt([]string{attr, k}, "Incorrect attribute value type",
				"%s[%q] must be a string, got %s.", attr, k, jsonKind(fields[k])))
			continue
		}
		out[k] = s
	}
	return out, diags
}

func parseAttachments(raw json.RawMessage) ([]instance.Attachment, provider.Diagnostics) {
	var elems []json.RawMessage
	if jsonKind(raw) != "list" || json.Unmarshal(raw, &elems) != nil {
		return nil, provider.Diagnostics{errorAt([]string{"attachments"}, "Incorrect attribute value type",
			"attachments must be a list of objects with id and type, got %s.", jsonKind(raw))}
	}
	var diags provider.Diagnostics
	out := make([]instance.Attachment, 0, len(elems))
	for i, e := range elems {
		path := []string{"attachments", strconv.Itoa(i)}
		var fields map[string]json.RawMessage
		if jsonKind(e) != "object" || json.Unmarshal(e, &fields) != nil {
			diags = append(diags, errorAt(path, "Incorrect attribute value type",
				"attachments[%d] must be an object with id and type, got %s.", i, jsonKind(e)))
			continue
		}
		var a instance.Attachment
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if !slices.Contains(attachmentKeys, k) {
				diags = append(diags, unsupported(append(slices.Clip(path), k), k, attachmentKeys))
			}
		}
		for _, k := range attachmentKeys {
			v, ok := fields[k]
			dst := &a.ID
			if k == "type" {
				dst = &a.Type
			}
			switch {
			case !ok || isNull(v):
				diags = append(diags, errorAt(append(slices.Clip(path), k), "Missing required argument",
					"attachments[%d] needs %q.", i, k))
			case jsonKind(v) != "string" || json.Unmarshal(v, dst) != nil:
				diags = append(diags, errorAt(append(slices.Clip(path), k), "Incorrect attribute value type",
					"attachments[%d].%s must be a string, got %s.", i, k, jsonKind(v)))
			}
		}
		out = append(out, a)
	}
	return out, diags
}

func errorAt(path []string, summary, detail string, args ...any) provider.Diagnostic {
	return provider.Diagnostic{Severity: provider.Error, Summary: summary, Detail: fmt.Sprintf(detail, args...), Path: path}
}

func unsupported(path []string, key string, allowed []string) provider.Diagnostic {
	return errorAt(path, "Unsupported argument",
		"An argument named %q is not expected here; the vanilla flavor accepts %s.", key, strings.Join(quoteAll(allowed), ", "))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func isNull(raw json.RawMessage) bool {
	k := jsonKind(raw)
	return k == "nothing" || k == "null"
}

// jsonKind names the kind of a JSON value in HCL's words, for error details.
func jsonKind(raw json.RawMessage) string {
	t := strings.TrimLeft(string(raw), " \t\r\n")
	if t == "" {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "list"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	default:
		return "number"
	}
}
