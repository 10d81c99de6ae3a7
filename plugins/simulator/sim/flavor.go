package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/plugins/simulator/store"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

func flavorSchema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"tags": {Type: "map(string)", Description: "Tags added to each instance (they win over the group's)."},
	}}
}

// Flavor is the "simulator" flavor: health comes from the instance's file.
type Flavor struct{ sim *Simulator }

var (
	_ flavor.Plugin             = (*Flavor)(nil)
	_ flavor.BatchHealthChecker = (*Flavor)(nil)
)

type flavorProperties struct {
	Tags map[string]string `json:"tags"`
}

func parseFlavorProperties(raw json.RawMessage) (flavorProperties, error) {
	var fp flavorProperties
	if err := validateObject(raw); err != nil || properties.IsNull(raw) {
		return fp, err
	}
	var d properties.Decoder
	fields, ok := d.Object(raw, nil, []string{"tags"}, "the simulator flavor")
	if !ok {
		return fp, d.Err()
	}
	if v, ok := fields.Get("tags"); ok {
		fp.Tags = d.StringMap(v, []string{"tags"})
	}
	return fp, d.Err()
}

// Validate checks the optional tags property.
func (f *Flavor) Validate(ctx context.Context, properties json.RawMessage, _ flavor.Allocation) error {
	_, err := parseFlavorProperties(properties)
	return err
}

// Prepare adds the flavor's tags to the spec (they win).
func (f *Flavor) Prepare(ctx context.Context, properties json.RawMessage, spec instance.Spec, _ flavor.Allocation, _ flavor.Index) (instance.Spec, error) {
	fp, err := parseFlavorProperties(properties)
	if err != nil {
		return spec, err
	}
	if len(fp.Tags) > 0 {
		tags := maps.Clone(spec.Tags)
		if tags == nil {
			tags = map[string]string{}
		}
		maps.Copy(tags, fp.Tags)
		spec.Tags = tags
	}
	return spec, nil
}

// Healthy reads the "health" field of the instance's file, looked up by ID in
// every instance type: unhealthy and unknown are reported as written, anything
// else (usually absent) is healthy. An instance with no file is unknown: it is
// gone, and the group notices that from DescribeInstances. Files are read
// through the listing caches DescribeInstances keeps (see store.Cache).
func (f *Flavor) Healthy(ctx context.Context, properties json.RawMessage, inst instance.Description) (flavor.Health, error) {
	return newHealthReader(ctx, f.sim).health(inst.ID)
}

// HealthyAll is Healthy for each instance, in one call: what a group's
// health pass asks. The listing caches are brought up to date once, so a
// whole group costs about what one DescribeInstances does. An instance
// whose file cannot be read (corrupt) is unknown, with a warning in the
// log.
func (f *Flavor) HealthyAll(ctx context.Context, properties json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	r := newHealthReader(ctx, f.sim)
	out := make([]flavor.Health, len(insts))
	for i, inst := range insts {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		h, err := r.health(inst.ID)
		if err != nil {
			// One corrupt file must not blind the whole group: that
			// instance is unknown, as the group would take a failed
			// Healthy.
			f.sim.cfg.Logger.Warn("health check failed", "id", inst.ID, "error", err)
			h = flavor.HealthUnknown
		}
		out[i] = h
	}
	return out, nil
}

// healthReader reads instance files for health, one getter per instance
// type, made when first needed.
type healthReader struct {
	ctx     context.Context
	sim     *Simulator
	getters map[string]func(string) (instanceRecord, error)
}

func newHealthReader(ctx context.Context, sim *Simulator) *healthReader {
	return &healthReader{ctx: ctx, sim: sim, getters: map[string]func(string) (instanceRecord, error){}}
}

// health looks id up in the instance type its ID names first (IDs are
// "<type>-<hex>"), then in the others: a file copied by hand may have any
// name.
func (r *healthReader) health(id instance.ID) (flavor.Health, error) {
	if store.ValidName(string(id)) != nil {
		return flavor.HealthUnknown, nil
	}
	types := InstanceTypes()
	if prefix, _, ok := strings.Cut(string(id), "-"); ok {
		if i := slices.Index(types, prefix); i > 0 {
			types[0], types[i] = types[i], types[0]
		}
	}
	for _, t := range types {
		get, ok := r.getters[t]
		if !ok {
			c := instanceCollection(t)
			var err error
			if get, err = r.sim.cache(c).Getter(r.ctx, r.sim.store, c); err != nil {
				return flavor.HealthUnknown, fmt.Errorf("health of %q: %w", id, err)
			}
			r.getters[t] = get
		}
		rec, err := get(string(id))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return flavor.HealthUnknown, fmt.Errorf("health of %q: %w", id, err)
		}
		return healthOf(rec.Health), nil
	}
	return flavor.HealthUnknown, nil
}

func healthOf(field string) flavor.Health {
	switch flavor.Health(field) {
	case flavor.HealthUnhealthy:
		return flavor.HealthUnhealthy
	case flavor.HealthUnknown:
		return flavor.HealthUnknown
	default:
		return flavor.HealthHealthy
	}
}

// Drain does nothing: simulated instances hold no work.
func (f *Flavor) Drain(ctx context.Context, properties json.RawMessage, inst instance.Description) error {
	return nil
}
