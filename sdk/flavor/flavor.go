// Package flavor is the SPI of flavor providers: they shape an instance spec
// (init lines, tags, attachments) and judge the health of what runs.
package flavor

import (
	"context"
	"encoding/json"

	"github.com/infrakit/infrakit/sdk/instance"
)

// Allocation is how a group is sized: cattle by Size, pets by LogicalIDs.
type Allocation struct {
	Size       int
	LogicalIDs []instance.LogicalID
}

// Index places one instance being prepared within its group.
type Index struct {
	Group    string
	Sequence uint64
}

// Health of an instance as a flavor judges it.
type Health string

// Health values.
const (
	HealthUnknown   Health = "unknown"
	HealthHealthy   Health = "healthy"
	HealthUnhealthy Health = "unhealthy"
)

// Plugin is the flavor SPI.
type Plugin interface {
	Validate(ctx context.Context, properties json.RawMessage, allocation Allocation) error
	// Prepare returns spec with this flavor's init lines, tags and attachments applied.
	Prepare(ctx context.Context, properties json.RawMessage, spec instance.Spec, allocation Allocation, index Index) (instance.Spec, error)
	Healthy(ctx context.Context, properties json.RawMessage, inst instance.Description) (Health, error)
	// Drain is called before an instance is destroyed.
	Drain(ctx context.Context, properties json.RawMessage, inst instance.Description) error
}
