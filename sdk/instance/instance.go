// Package instance is the SPI of instance providers: things that create,
// label, list and destroy machines (or processes, or containers).
package instance

import (
	"context"
	"encoding/json"
)

// ID is a provider-assigned instance identifier.
type ID string

// LogicalID names a pet: a stable identity an instance is provisioned for.
type LogicalID string

// State of an instance as the provider sees it.
type State string

// Instance states. A pending instance counts toward a group's size, so a slow
// cloud never causes over-provisioning.
const (
	StatePending     State = "pending"
	StateRunning     State = "running"
	StateTerminating State = "terminating"
)

// Attachment is something to attach to an instance (a volume, an IP).
type Attachment struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Spec is what to provision.
type Spec struct {
	// Properties are provider-specific: a JSON object (an encoded cty value).
	Properties  json.RawMessage
	Tags        map[string]string
	Init        string
	LogicalID   *LogicalID
	Attachments []Attachment
}

// Description is an instance as the provider lists it.
type Description struct {
	ID        ID
	LogicalID *LogicalID
	// Tags are read-only: the descriptions of one listing may share a map,
	// and a provider may share it with its own records.
	Tags map[string]string
	// Properties is set only when asked for (withProperties); read-only,
	// like Tags.
	Properties json.RawMessage
	// Address is where the instance is reachable (host or host:port), may be empty.
	Address string
	State   State
}

// Plugin is the instance SPI for one instance type of a provider.
type Plugin interface {
	// Validate checks properties before anything is provisioned.
	Validate(ctx context.Context, properties json.RawMessage) error
	// Provision creates an instance and returns its ID at once; it may still be pending.
	Provision(ctx context.Context, spec Spec) (ID, error)
	// Label merges tags into an instance's tags.
	Label(ctx context.Context, id ID, tags map[string]string) error
	// Destroy removes an instance. Destroying one that is already gone is not an error.
	Destroy(ctx context.Context, id ID, reason DestroyReason) error
	// DescribeInstances lists instances carrying every given tag.
	DescribeInstances(ctx context.Context, tags map[string]string, withProperties bool) ([]Description, error)
}

// DescribingProvisioner is a Plugin that says, as it provisions, how the
// new instance stands: its Description as a listing right after would give
// it, properties included. A host takes an instance described running as
// ready at once, where it would otherwise list the group until it runs;
// one described otherwise (pending, or with no State) is listed for as
// before. Tags may be left nil when they are the spec's.
type DescribingProvisioner interface {
	ProvisionDescribed(ctx context.Context, spec Spec) (Description, error)
}

// ProvisionDescribed provisions spec through p, described when p is a
// DescribingProvisioner; otherwise only the new instance's ID is known
// (no State).
func ProvisionDescribed(ctx context.Context, p Plugin, spec Spec) (Description, error) {
	if dp, ok := p.(DescribingProvisioner); ok {
		return dp.ProvisionDescribed(ctx, spec)
	}
	id, err := p.Provision(ctx, spec)
	return Description{ID: id}, err
}

// DestroyReason says why an instance is destroyed, so providers can log it.
type DestroyReason string

// Destroy reasons.
const (
	ReasonTerminate     DestroyReason = "terminate"
	ReasonScaleDown     DestroyReason = "scale-down"
	ReasonRollingUpdate DestroyReason = "rolling-update"
	ReasonUnhealthy     DestroyReason = "unhealthy"
)

// EventType says what happened to an instance.
type EventType string

// Event types.
const (
	EventChanged EventType = "changed" // created, or its state/tags changed
	EventGone    EventType = "gone"    // it vanished or was destroyed
)

// Event is one change pushed by a Watcher.
type Event struct {
	Type     EventType
	ID       ID
	Instance *Description // nil for EventGone
}

// Watcher is implemented by providers that can push changes; the core then
// reacts at once instead of waiting for its next poll.
type Watcher interface {
	// Watch streams events about instances carrying every given tag until ctx ends.
	// The channel is closed when the stream ends.
	Watch(ctx context.Context, tags map[string]string) (<-chan Event, error)
}
