package plugin

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Conversions between the SPI types and the wire. Enumerations are closed on
// the wire: a value outside the SPI's constants is an error where it is
// sent, so a provider bug shows up at the boundary rather than as a state
// the core does not know. The empty value maps to UNSPECIFIED and back.

func specToProto(s instance.Spec) *pb.InstanceSpec {
	out := &pb.InstanceSpec{
		Properties: s.Properties,
		Tags:       s.Tags,
		Init:       s.Init,
		LogicalId:  (*string)(s.LogicalID),
	}
	for _, a := range s.Attachments {
		out.Attachments = append(out.Attachments, &pb.Attachment{Id: a.ID, Type: a.Type})
	}
	return out
}

func specFromProto(s *pb.InstanceSpec) instance.Spec {
	out := instance.Spec{
		Properties: rawJSON(s.GetProperties()),
		Tags:       s.GetTags(),
		Init:       s.GetInit(),
		LogicalID:  (*instance.LogicalID)(s.LogicalId),
	}
	for _, a := range s.GetAttachments() {
		out.Attachments = append(out.Attachments, instance.Attachment{ID: a.GetId(), Type: a.GetType()})
	}
	return out
}

func descriptionToProto(d instance.Description) (*pb.InstanceDescription, error) {
	st, err := stateToProto(d.State)
	if err != nil {
		return nil, fmt.Errorf("instance %q: %w", d.ID, err)
	}
	return &pb.InstanceDescription{
		Id:         string(d.ID),
		LogicalId:  (*string)(d.LogicalID),
		Tags:       d.Tags,
		Properties: d.Properties,
		Address:    d.Address,
		State:      st,
	}, nil
}

func descriptionFromProto(d *pb.InstanceDescription) (instance.Description, error) {
	st, err := stateFromProto(d.GetState())
	if err != nil {
		return instance.Description{}, fmt.Errorf("instance %q: %w", d.GetId(), err)
	}
	return instance.Description{
		ID:         instance.ID(d.GetId()),
		LogicalID:  (*instance.LogicalID)(d.LogicalId),
		Tags:       d.GetTags(),
		Properties: rawJSON(d.GetProperties()),
		Address:    d.GetAddress(),
		State:      st,
	}, nil
}

// Tags shared by every instance of a batch travel once (HealthyBatch's and
// DescribeInstances' common_tags): a group's members share nearly all their
// tags, and decoding a protobuf map costs a few allocations per entry.

// commonTags are the tags (key and value) that every one of insts carries;
// nil when there are none, or fewer than two instances to share them.
func commonTags(insts []instance.Description) map[string]string {
	if len(insts) < 2 || len(insts[0].Tags) == 0 {
		return nil
	}
	common := maps.Clone(insts[0].Tags)
	for _, d := range insts[1:] {
		for k, v := range common {
			if w, ok := d.Tags[k]; !ok || w != v {
				delete(common, k)
			}
		}
		if len(common) == 0 {
			return nil
		}
	}
	return common
}

// ownTags are tags less common (which tags holds, values included).
func ownTags(tags, common map[string]string) map[string]string {
	if len(common) == 0 {
		return tags
	}
	if len(tags) == len(common) {
		return nil
	}
	own := make(map[string]string, len(tags)-len(common))
	for k, v := range tags {
		if _, shared := common[k]; !shared {
			own[k] = v
		}
	}
	return own
}

// joinTags is common plus own (own wins). An instance with no tags of its
// own gets common itself: the descriptions of one answer then share one
// map (a listing of 10,000 cattle made 10,000 copies of the same tags,
// a sixth of an idle watch's CPU), so description tags are read-only.
func joinTags(common, own map[string]string) map[string]string {
	if len(common) == 0 {
		return own
	}
	if len(own) == 0 {
		return common
	}
	tags := make(map[string]string, len(common)+len(own))
	maps.Copy(tags, common)
	maps.Copy(tags, own)
	return tags
}

// rawJSON keeps "no properties" as nil rather than an empty, invalid JSON text.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// The enumerations convert with switches, not map lookups or scans: they
// run for every instance of every answer.

func stateToProto(s instance.State) (pb.InstanceState, error) {
	switch s {
	case "":
		return pb.InstanceState_INSTANCE_STATE_UNSPECIFIED, nil
	case instance.StatePending:
		return pb.InstanceState_INSTANCE_STATE_PENDING, nil
	case instance.StateRunning:
		return pb.InstanceState_INSTANCE_STATE_RUNNING, nil
	case instance.StateTerminating:
		return pb.InstanceState_INSTANCE_STATE_TERMINATING, nil
	}
	return 0, fmt.Errorf("unknown instance state %q (want pending, running or terminating)", s)
}

func stateFromProto(v pb.InstanceState) (instance.State, error) {
	switch v {
	case pb.InstanceState_INSTANCE_STATE_UNSPECIFIED:
		return "", nil
	case pb.InstanceState_INSTANCE_STATE_PENDING:
		return instance.StatePending, nil
	case pb.InstanceState_INSTANCE_STATE_RUNNING:
		return instance.StateRunning, nil
	case pb.InstanceState_INSTANCE_STATE_TERMINATING:
		return instance.StateTerminating, nil
	}
	return "", fmt.Errorf("unknown instance state %v", v)
}

func healthToProto(h flavor.Health) (pb.Health, error) {
	switch h {
	case "":
		return pb.Health_HEALTH_UNSPECIFIED, nil
	case flavor.HealthUnknown:
		return pb.Health_HEALTH_UNKNOWN, nil
	case flavor.HealthHealthy:
		return pb.Health_HEALTH_HEALTHY, nil
	case flavor.HealthUnhealthy:
		return pb.Health_HEALTH_UNHEALTHY, nil
	}
	return 0, fmt.Errorf("unknown health %q (want healthy, unhealthy or unknown)", h)
}

func healthFromProto(v pb.Health) (flavor.Health, error) {
	switch v {
	case pb.Health_HEALTH_UNSPECIFIED:
		return "", nil
	case pb.Health_HEALTH_UNKNOWN:
		return flavor.HealthUnknown, nil
	case pb.Health_HEALTH_HEALTHY:
		return flavor.HealthHealthy, nil
	case pb.Health_HEALTH_UNHEALTHY:
		return flavor.HealthUnhealthy, nil
	}
	return "", fmt.Errorf("unknown health %v", v)
}

var eventTypes = map[instance.EventType]pb.InstanceEvent_Type{
	"":                    pb.InstanceEvent_TYPE_UNSPECIFIED,
	instance.EventChanged: pb.InstanceEvent_TYPE_CHANGED,
	instance.EventGone:    pb.InstanceEvent_TYPE_GONE,
}

func eventToProto(e instance.Event) (*pb.InstanceEvent, error) {
	t, ok := eventTypes[e.Type]
	if !ok {
		return nil, fmt.Errorf("unknown instance event type %q", e.Type)
	}
	out := &pb.InstanceEvent{Type: t, Id: string(e.ID)}
	if e.Instance != nil {
		d, err := descriptionToProto(*e.Instance)
		if err != nil {
			return nil, err
		}
		out.Instance = d
	}
	return out, nil
}

func eventFromProto(e *pb.InstanceEvent) (instance.Event, error) {
	out := instance.Event{ID: instance.ID(e.GetId())}
	found := false
	for t, w := range eventTypes {
		if w == e.GetType() {
			out.Type, found = t, true
		}
	}
	if !found {
		return instance.Event{}, fmt.Errorf("unknown instance event type %v", e.GetType())
	}
	if e.Instance != nil {
		d, err := descriptionFromProto(e.Instance)
		if err != nil {
			return instance.Event{}, err
		}
		out.Instance = &d
	}
	return out, nil
}

var kinds = map[provider.Kind]pb.Kind{
	provider.KindInstance:     pb.Kind_KIND_INSTANCE,
	provider.KindFlavor:       pb.Kind_KIND_FLAVOR,
	provider.KindLoadBalancer: pb.Kind_KIND_LOADBALANCER,
	provider.KindAuthorizer:   pb.Kind_KIND_AUTHORIZER,
	provider.KindMetrics:      pb.Kind_KIND_METRICS,
}

func metadataToProto(m provider.Metadata) (*pb.ProviderMetadataResponse, error) {
	out := &pb.ProviderMetadataResponse{Name: m.Name, Version: m.Version}
	for _, o := range m.Objects {
		k, ok := kinds[o.Kind]
		if !ok {
			return nil, fmt.Errorf("metadata: object %q: unknown kind %q", o.Type, o.Kind)
		}
		s := &pb.Schema{Open: o.Schema.Open}
		if len(o.Schema.Attributes) > 0 {
			s.Attributes = make(map[string]*pb.Schema_Attribute, len(o.Schema.Attributes))
			for name, a := range o.Schema.Attributes {
				s.Attributes[name] = &pb.Schema_Attribute{Type: a.Type, Required: a.Required, Description: a.Description}
			}
		}
		out.Objects = append(out.Objects, &pb.Object{Kind: k, Type: o.Type, Schema: s, HealthFromState: o.HealthFromState,
			PrepareAhead: o.PrepareAhead})
	}
	return out, nil
}

func metadataFromProto(r *pb.ProviderMetadataResponse) (provider.Metadata, error) {
	out := provider.Metadata{Name: r.GetName(), Version: r.GetVersion()}
	for _, o := range r.GetObjects() {
		var kind provider.Kind
		for k, w := range kinds {
			if w == o.GetKind() {
				kind = k
			}
		}
		if kind == "" {
			return provider.Metadata{}, fmt.Errorf("object %q: unknown kind %v", o.GetType(), o.GetKind())
		}
		s := provider.Schema{Open: o.GetSchema().GetOpen()}
		if attrs := o.GetSchema().GetAttributes(); len(attrs) > 0 {
			s.Attributes = make(map[string]provider.Attribute, len(attrs))
			for name, a := range attrs {
				s.Attributes[name] = provider.Attribute{Type: a.GetType(), Required: a.GetRequired(), Description: a.GetDescription()}
			}
		}
		out.Objects = append(out.Objects, provider.Object{Kind: kind, Type: o.GetType(), Schema: s, HealthFromState: o.GetHealthFromState(),
			PrepareAhead: o.GetPrepareAhead()})
	}
	return out, nil
}
