package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// probe passes every call to a real flavor (a go-plugin client) and records
// what the flavor was asked. short and decline alter its batch answers in
// the two ways a provider may and the simulator does not: one health too
// few, and declining the batch (errors.ErrUnsupported).
type probe struct {
	flavor.Plugin
	name    string
	journal *journal // shared by the probes of one group: the order of drains

	mu             sync.Mutex
	batches        [][]instance.ID // each HealthyAll's instances
	singles        []instance.ID   // each Healthy's instance
	inFlight, peak int             // Healthy calls in flight, and the most at once
	drained        []instance.Description
	short, decline bool
}

// journal is the order in which probes were asked to drain.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, s)
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.entries, ", ")
}

func newProbe(name string, p flavor.Plugin, j *journal) *probe {
	return &probe{Plugin: p, name: name, journal: j}
}

func (p *probe) HealthyAll(ctx context.Context, props json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	ids := make([]instance.ID, len(insts))
	for i, d := range insts {
		ids[i] = d.ID
	}
	p.mu.Lock()
	p.batches = append(p.batches, ids)
	short, decline := p.short, p.decline
	p.mu.Unlock()
	if decline {
		return nil, fmt.Errorf("not now: %w", errors.ErrUnsupported)
	}
	hs, err := p.Plugin.(flavor.BatchHealthChecker).HealthyAll(ctx, props, insts)
	if err == nil && short && len(hs) > 0 {
		hs = hs[1:]
	}
	return hs, err
}

func (p *probe) Healthy(ctx context.Context, props json.RawMessage, inst instance.Description) (flavor.Health, error) {
	p.mu.Lock()
	p.singles = append(p.singles, inst.ID)
	p.inFlight++
	p.peak = max(p.peak, p.inFlight)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}()
	return p.Plugin.Healthy(ctx, props, inst)
}

func (p *probe) Drain(ctx context.Context, props json.RawMessage, inst instance.Description) error {
	p.mu.Lock()
	p.drained = append(p.drained, inst)
	p.mu.Unlock()
	if p.journal != nil {
		p.journal.add(p.name + " " + string(inst.ID))
	}
	return p.Plugin.Drain(ctx, props, inst)
}

// reset forgets what was asked and clears the alterations.
func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batches, p.singles, p.drained, p.peak = nil, nil, nil, 0
	p.short, p.decline = false, false
}

func (p *probe) counts() (batches, singles int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.batches), len(p.singles)
}

// unbatched is a flavor.Plugin and nothing more: it hides HealthyAll, as
// a flavor served in process without batch support would.
type unbatched struct{ flavor.Plugin }
