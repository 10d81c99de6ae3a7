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
	"github.com/infrakit/infrakit/sdk/properties"
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
		// Healthy says healthy for every instance: the host need not ask.
		Objects: []provider.Object{{Kind: provider.KindFlavor, Type: Type, Schema: Schema(), HealthFromState: true, PrepareAhead: true}},
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
	if properties.IsNull(raw) {
		return p, nil
	}
	var d properties.Decoder
	fields, ok := d.Object(raw, nil, topKeys, "the vanilla flavor's properties")
	if !ok {
		return Properties{}, d.Err()
	}
	if v, ok := fields.Get("init"); ok {
		p.Init = d.StringList(v, []string{"init"})
	}
	if v, ok := fields.Get("tags"); ok {
		p.Tags = d.StringMap(v, []string{"tags"})
	}
	if v, ok := fields.Get("attachments"); ok {
		p.Attachments = decodeAttachments(&d, v)
	}
	if err := d.Err(); err != nil {
		return Properties{}, err
	}
	return p, nil
}

// decodeAttachments decodes attachments = [{id, type}, ...]; both are
// required strings.
func decodeAttachments(d *properties.Decoder, raw json.RawMessage) []instance.Attachment {
	path := []string{"attachments"}
	var elems []json.RawMessage
	if properties.Kind(raw) != "list" || json.Unmarshal(raw, &elems) != nil {
		d.Errorf(path, "Incorrect attribute value type",
			"attachments must be a list of objects with id and type, got %s.", properties.Kind(raw))
		return nil
	}
	out := make([]instance.Attachment, 0, len(elems))
	for i, e := range elems {
		at := properties.Append(path, strconv.Itoa(i))
		if properties.Kind(e) != "object" {
			d.Errorf(at, "Incorrect attribute value type",
				"attachments[%d] must be an object with id and type, got %s.", i, properties.Kind(e))
			continue
		}
		fields, ok := d.Object(e, at, attachmentKeys, fmt.Sprintf("attachments[%d]", i))
		if !ok {
			continue
		}
		var a instance.Attachment
		for _, k := range attachmentKeys {
			dst := &a.ID
			if k == "type" {
				dst = &a.Type
			}
			v, ok := fields.Get(k)
			if !ok {
				d.Errorf(properties.Append(at, k), "Missing required argument", "attachments[%d] needs %q.", i, k)
				continue
			}
			*dst, _ = d.String(v, properties.Append(at, k))
		}
		out = append(out, a)
	}
	return out
}
