// Package flavor is the SPI of flavor providers: they shape an instance spec
// (init lines, tags, attachments) and judge the health of what runs.
package flavor

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/infrakit/infrakit/sdk/instance"
)

// Allocation is how a group is sized: cattle by Size, pets by LogicalIDs.
type Allocation struct {
	Size       int
	LogicalIDs []instance.LogicalID
}

// AllocationPath starts the path of a Validate diagnostic about the
// allocation rather than the properties: the host reports one at
// LogicalIDPath(i) at the group's i-th logical ID. The angle brackets keep
// it apart from any property name.
const AllocationPath = "<allocation>"

// LogicalIDPath is the path of a diagnostic about the i-th logical ID of
// the allocation a flavor validates.
func LogicalIDPath(i int) []string {
	return []string{AllocationPath, "logical_ids", strconv.Itoa(i)}
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

// BatchHealthChecker is implemented by flavors that judge many instances in
// one call. It is optional: Plugin.Healthy stays the contract, and a flavor
// without it is asked one instance at a time (see HealthyEach).
//
// It exists because `infrakit watch` asks every member's health on every
// pass. Across a process boundary one Healthy per member is one round trip
// per member: for a group of 10,000 that is 10,000 gRPC calls every pass,
// which costs far more CPU than the judging does for most flavors. The host
// therefore asks a flavor once per pass with every member (the SDK splits
// that into calls of at most a few thousand), and a flavor that implements
// HealthyAll can answer from one read of a shared source, or run probes that
// do I/O in parallel on its own terms. The SDK's server answers the batch
// for flavors without it by calling Healthy for each instance, with bounded
// parallelism, inside the provider process.
type BatchHealthChecker interface {
	// HealthyAll returns the health of each of insts, in order: exactly
	// len(insts) entries, each what Healthy would answer for that instance
	// (one it cannot judge is HealthUnknown). An error fails the whole
	// batch, as invalid properties would; the caller then takes every
	// instance as unknown. An error wrapping errors.ErrUnsupported makes the
	// caller ask Healthy for each instance instead.
	//
	// insts is read-only, Tags maps included: the instances of a batch may
	// share one Tags map (the SDK's server does so for the tags they all
	// carry), so a flavor must not modify them.
	HealthyAll(ctx context.Context, properties json.RawMessage, insts []instance.Description) ([]Health, error)
}

// DefaultHealthParallelism is how many Healthy calls HealthyEach makes at
// once when asked for no particular number: health checks may do I/O (a
// probe, a cloud API call), so a batch is neither serial nor unbounded.
const DefaultHealthParallelism = 16

// HealthyEach judges insts with one p.Healthy call each, at most parallelism
// at once (DefaultHealthParallelism when parallelism ≤ 0): how a batch is
// answered for a flavor that does not implement BatchHealthChecker.
// healths[i] and errs[i] are the outcome for insts[i]; a call that failed
// leaves its health HealthUnknown, and errs is nil when none failed. Once
// ctx is done no further call starts: the instances not asked have the
// empty Health and ctx's error.
func HealthyEach(ctx context.Context, p Plugin, properties json.RawMessage, insts []instance.Description, parallelism int) (healths []Health, errs []error) {
	if parallelism <= 0 {
		parallelism = DefaultHealthParallelism
	}
	healths = make([]Health, len(insts))
	all := make([]error, len(insts))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(parallelism, len(insts)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(insts) {
					return
				}
				if err := ctx.Err(); err != nil {
					all[i] = err
					failed.Store(true)
					continue
				}
				h, err := p.Healthy(ctx, properties, insts[i])
				if err != nil {
					h = HealthUnknown
					all[i] = err
					failed.Store(true)
				}
				healths[i] = h
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		errs = all
	}
	return healths, errs
}
