// Package healthcheck implements the "healthcheck" flavor: Healthy probes
// an instance's Address, by opening a TCP connection or with an HTTP GET
// that must answer an expected status, and judges it over consecutive probes
// (see Counter): healthy after healthy_threshold successes in a row,
// unhealthy after unhealthy_threshold failures in a row, the previous
// verdict in between, unknown until the first threshold is reached.
// HealthyAll (flavor.BatchHealthChecker) probes a whole group at once,
// ProbeParallelism probes at a time, through the same per-instance
// counters: it is what `infrakit watch` calls on every pass.
//
// The counters live in the provider's memory, keyed by instance ID: a
// provider lives as long as the `infrakit watch` that probes through it, and
// a fresh one starts from unknown. Drain forgets an instance; counters of
// instances not probed for ten minutes are forgotten too.
//
// Prepare adds nothing to the spec: this flavor only judges. It combines
// with flavors that shape the instance (several flavor blocks in a group:
// healthy only when every flavor says so).
//
// Properties (all optional):
//
//	tcp                 = true                               TCP connect (the default without http)
//	http                = { path = "/health", expect_status = 200 }
//	port                = 8081                               probe this port instead of the address's
//	timeout             = "1s"                               bound on one probe
//	healthy_threshold   = 1
//	unhealthy_threshold = 2
package healthcheck

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Name is the provider's name; Type is the flavor type it serves.
const (
	Name = "healthcheck"
	Type = "healthcheck"
)

// forgetAfter is how long an instance's counters are kept without a probe;
// sweepEvery is how often Healthy looks for such counters.
const (
	forgetAfter = 10 * time.Minute
	sweepEvery  = time.Minute
)

// Metadata describes the healthcheck provider.
func Metadata(version string) provider.Metadata {
	return provider.Metadata{
		Name:    Name,
		Version: version,
		Objects: []provider.Object{{Kind: provider.KindFlavor, Type: Type, Schema: Schema(), PrepareAhead: true}},
	}
}

// Config is how a Flavor runs.
type Config struct {
	Logger hclog.Logger // nil discards
	// Now is the clock that ages counters; nil is time.Now.
	Now func() time.Time
}

// Flavor is the healthcheck flavor. It starts no goroutines; Close releases
// the probes' connections.
type Flavor struct {
	logger hclog.Logger
	now    func() time.Time
	prober *prober

	mu        sync.Mutex
	counters  map[instance.ID]*entry
	lastSweep time.Time
}

type entry struct {
	Counter
	seen time.Time
}

var (
	_ flavor.Plugin             = (*Flavor)(nil)
	_ flavor.BatchHealthChecker = (*Flavor)(nil)
)

// New returns a Flavor that remembers nothing yet.
func New(cfg Config) *Flavor {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Flavor{
		logger:   cfg.Logger,
		now:      cfg.Now,
		prober:   newProber(),
		counters: map[instance.ID]*entry{},
	}
}

// Close releases idle connections.
func (f *Flavor) Close() error {
	f.prober.close()
	return nil
}

// Validate checks the properties (see Parse).
func (f *Flavor) Validate(ctx context.Context, properties json.RawMessage, _ flavor.Allocation) error {
	_, err := Parse(properties)
	return err
}

// Prepare checks the properties and returns spec unchanged.
func (f *Flavor) Prepare(ctx context.Context, properties json.RawMessage, spec instance.Spec, _ flavor.Allocation, _ flavor.Index) (instance.Spec, error) {
	if _, err := Parse(properties); err != nil {
		return spec, err
	}
	return spec, nil
}

// Healthy probes the instance once and returns the verdict (see the package
// doc). An instance with no Address, one that is not running yet (or any
// more), or whose address has no port to probe is unknown, and its counters
// are left alone.
func (f *Flavor) Healthy(ctx context.Context, properties json.RawMessage, inst instance.Description) (flavor.Health, error) {
	p, err := Parse(properties)
	if err != nil {
		return flavor.HealthUnknown, err
	}
	return f.judge(ctx, p, inst)
}

// ProbeParallelism is how many probes HealthyAll runs at once. Probes
// mostly wait on the network (up to the timeout each), so many may run
// together; the bound keeps a large group from opening thousands of
// sockets at once.
const ProbeParallelism = 64

// HealthyAll probes every instance once, ProbeParallelism at a time, and
// returns their verdicts in order: Healthy for each, with the properties
// parsed once. Each instance keeps its own counters, so the thresholds
// work exactly as with one Healthy per instance. When ctx ends before every
// probe has run, the batch fails with ctx's error.
func (f *Flavor) HealthyAll(ctx context.Context, properties json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	p, err := Parse(properties)
	if err != nil {
		return nil, err
	}
	out := make([]flavor.Health, len(insts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(ProbeParallelism, len(insts)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(insts) {
					return
				}
				out[i], _ = f.judge(ctx, p, insts[i]) // its only error is ctx's
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// judge probes one instance with parsed properties (see Healthy).
func (f *Flavor) judge(ctx context.Context, p Properties, inst instance.Description) (flavor.Health, error) {
	if inst.Address == "" || (inst.State != "" && inst.State != instance.StateRunning) {
		return flavor.HealthUnknown, nil
	}
	addr, err := target(inst.Address, p.Port, p.HTTP != nil)
	if err != nil {
		f.logger.Warn("cannot probe instance", "id", inst.ID, "error", err)
		return flavor.HealthUnknown, nil
	}
	perr := f.prober.probe(ctx, p, addr)
	if perr != nil && ctx.Err() != nil {
		// The caller gave up, not the instance: no verdict from this probe.
		return f.health(inst.ID), ctx.Err()
	}
	c := f.observe(inst.ID, perr == nil, p.Thresholds)
	if perr != nil {
		f.logger.Debug("probe failed", "id", inst.ID, "address", addr, "failures", c.Failures, "verdict", c.Health(), "error", perr)
	}
	return c.Health(), nil
}

// Drain forgets the instance: it is about to be destroyed.
func (f *Flavor) Drain(ctx context.Context, properties json.RawMessage, inst instance.Description) error {
	f.mu.Lock()
	delete(f.counters, inst.ID)
	f.mu.Unlock()
	return nil
}

// observe records one probe result for id and returns its counter.
func (f *Flavor) observe(id instance.ID, ok bool, th Thresholds) Counter {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.lastSweep) >= sweepEvery {
		f.lastSweep = now
		for k, e := range f.counters {
			if now.Sub(e.seen) >= forgetAfter {
				delete(f.counters, k)
			}
		}
	}
	e := f.counters[id]
	if e == nil {
		e = &entry{}
		f.counters[id] = e
	}
	e.Counter, e.seen = e.Observe(ok, th), now
	return e.Counter
}

// health is id's verdict so far.
func (f *Flavor) health(id instance.ID) flavor.Health {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.counters[id]; e != nil {
		return e.Health()
	}
	return flavor.HealthUnknown
}
