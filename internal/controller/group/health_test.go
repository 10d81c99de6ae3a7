package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// scripted is an in-process flavor whose answers a test sets per member. It
// records what it is asked. Without batch it does not implement
// flavor.BatchHealthChecker (see plainScripted).
type scripted struct {
	mu       sync.Mutex
	health   map[instance.ID]flavor.Health // missing: healthy
	fail     map[instance.ID]bool          // Healthy / Drain fail for these
	batchErr error                         // HealthyAll fails with it
	short    bool                          // HealthyAll returns one health too few
	batches  [][]instance.ID               // each HealthyAll's instances
	singles  []instance.ID                 // each Healthy's instance
	drained  []instance.ID
}

func (f *scripted) Validate(context.Context, json.RawMessage, flavor.Allocation) error { return nil }

func (f *scripted) Prepare(_ context.Context, _ json.RawMessage, spec instance.Spec, _ flavor.Allocation, _ flavor.Index) (instance.Spec, error) {
	return spec, nil
}

func (f *scripted) judge(id instance.ID) flavor.Health {
	if h, ok := f.health[id]; ok {
		return h
	}
	return flavor.HealthHealthy
}

func (f *scripted) Healthy(_ context.Context, _ json.RawMessage, inst instance.Description) (flavor.Health, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.singles = append(f.singles, inst.ID)
	if f.fail[inst.ID] {
		return flavor.HealthHealthy, fmt.Errorf("probe of %s failed", inst.ID)
	}
	return f.judge(inst.ID), nil
}

func (f *scripted) HealthyAll(_ context.Context, _ json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]instance.ID, len(insts))
	out := make([]flavor.Health, len(insts))
	for i, d := range insts {
		ids[i], out[i] = d.ID, f.judge(d.ID)
	}
	f.batches = append(f.batches, ids)
	if f.batchErr != nil {
		return nil, f.batchErr
	}
	if f.short && len(out) > 0 {
		out = out[1:]
	}
	return out, nil
}

func (f *scripted) Drain(_ context.Context, _ json.RawMessage, inst instance.Description) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[inst.ID] {
		return fmt.Errorf("drain of %s failed", inst.ID)
	}
	f.drained = append(f.drained, inst.ID)
	return nil
}

// plainScripted hides HealthyAll: a flavor.Plugin and nothing more.
type plainScripted struct{ f *scripted }

func (p plainScripted) Validate(ctx context.Context, props json.RawMessage, a flavor.Allocation) error {
	return p.f.Validate(ctx, props, a)
}

func (p plainScripted) Prepare(ctx context.Context, props json.RawMessage, spec instance.Spec, a flavor.Allocation, i flavor.Index) (instance.Spec, error) {
	return p.f.Prepare(ctx, props, spec, a, i)
}

func (p plainScripted) Healthy(ctx context.Context, props json.RawMessage, inst instance.Description) (flavor.Health, error) {
	return p.f.Healthy(ctx, props, inst)
}

func (p plainScripted) Drain(ctx context.Context, props json.RawMessage, inst instance.Description) error {
	return p.f.Drain(ctx, props, inst)
}

// withFlavors is a controller of g on the simulator s whose flavors are
// the simulator's own flavor (health from the instance files, asked in
// batches over gRPC) followed by extra.
func withFlavors(t *testing.T, s *sim, g *config.Group, opts Options, r *recorder, extra ...flavor.Plugin) *Controller {
	t.Helper()
	g.Flavors = g.Flavors[:1]
	plugins := Plugins{Instance: s.client.Instance(g.Instance.Type), Flavors: []Flavor{{Plugin: s.client.Flavor("simulator"), Properties: g.Flavors[0].Properties}}}
	for range extra {
		g.Flavors = append(g.Flavors, config.Plugin{Provider: "test", Type: "scripted"})
	}
	for _, f := range extra {
		plugins.Flavors = append(plugins.Flavors, Flavor{Plugin: f, Properties: json.RawMessage(`{}`)})
	}
	opts.Stack = "teststack"
	if r != nil {
		opts.Record, opts.Progress = r.record, r.progress
	}
	c, err := New(g, plugins, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func healthByID(members []Member) map[instance.ID]flavor.Health {
	out := map[instance.ID]flavor.Health{}
	for _, m := range members {
		out[m.ID] = m.Health
	}
	return out
}

// Health costs one batch per flavor per observation, and the flavors
// combine as they always did: unhealthy as soon as one says so (later
// flavors are not asked about that member), healthy only when all say so,
// unknown otherwise.
func TestHealthOneBatchPerFlavor(t *testing.T) {
	s := newSim(t)
	second := &scripted{}
	g := cattleGroup("web", 6, `{}`)
	c := withFlavors(t, s, g, Options{}, nil, second)
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	ids := liveIDs(t, c)
	slices.Sort(ids)
	s.setField(t, ids[0], "health", "unhealthy") // first flavor: unhealthy
	s.setField(t, ids[1], "health", "unknown")   // first: unknown, second: healthy
	s.setField(t, ids[2], "health", "unknown")   // first: unknown, second: unhealthy
	second.health = map[instance.ID]flavor.Health{
		ids[0]: flavor.HealthHealthy, ids[2]: flavor.HealthUnhealthy,
		ids[3]: flavor.HealthUnhealthy, ids[4]: flavor.HealthUnknown,
	}
	second.batches = nil

	members, err := c.Observe(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[instance.ID]flavor.Health{
		ids[0]: flavor.HealthUnhealthy, ids[1]: flavor.HealthUnknown, ids[2]: flavor.HealthUnhealthy,
		ids[3]: flavor.HealthUnhealthy, ids[4]: flavor.HealthUnknown, ids[5]: flavor.HealthHealthy,
	}
	if got := healthByID(members); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("health %v, want %v", got, want)
	}
	if len(second.batches) != 1 || len(second.singles) != 0 {
		t.Fatalf("second flavor asked %d batches and %d single calls, want one batch", len(second.batches), len(second.singles))
	}
	asked := slices.Clone(second.batches[0])
	slices.Sort(asked)
	if !slices.Equal(asked, ids[1:]) {
		t.Fatalf("second flavor asked about %v, want every member but %s (unhealthy already)", asked, ids[0])
	}
}

// A flavor without HealthyAll (in process) is asked one member at a time,
// with bounded parallelism; a call that fails makes that member unknown.
func TestHealthFlavorWithoutBatch(t *testing.T) {
	s := newSim(t)
	f := &scripted{}
	g := cattleGroup("web", 5, `{}`)
	logs := &strings.Builder{}
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: lockedWriter{&mu, logs}})
	c := withFlavors(t, s, g, Options{Parallelism: 2, Logger: logger}, nil, plainScripted{f})
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	ids := liveIDs(t, c)
	f.mu.Lock()
	f.singles = nil
	f.fail = map[instance.ID]bool{ids[1]: true}
	f.health = map[instance.ID]flavor.Health{ids[2]: flavor.HealthUnhealthy}
	f.mu.Unlock()
	members, err := c.Observe(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	got := healthByID(members)
	if got[ids[1]] != flavor.HealthUnknown || got[ids[2]] != flavor.HealthUnhealthy || got[ids[0]] != flavor.HealthHealthy {
		t.Fatalf("health %v", got)
	}
	if len(f.singles) != 5 || len(f.batches) != 0 {
		t.Fatalf("%d Healthy calls, %d batches; want 5 calls", len(f.singles), len(f.batches))
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "probe of "+string(ids[1])+" failed") {
		t.Fatalf("the failed check is not logged:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A batch that fails, or answers for the wrong number of members, makes
// every member it was about unknown; one that declines (ErrUnsupported)
// is asked member by member instead.
func TestHealthBatchFailures(t *testing.T) {
	s := newSim(t)
	f := &scripted{}
	g := cattleGroup("web", 3, `{}`)
	c := withFlavors(t, s, g, Options{}, nil, f)
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	ids := liveIDs(t, c)
	for _, tc := range []struct {
		name    string
		set     func()
		want    flavor.Health
		singles int
	}{
		{"fails", func() { f.batchErr = errors.New("provider unavailable") }, flavor.HealthUnknown, 0},
		{"short", func() { f.short = true }, flavor.HealthUnknown, 0},
		{"declines", func() { f.batchErr = fmt.Errorf("not now: %w", errors.ErrUnsupported) }, flavor.HealthHealthy, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mu.Lock()
			f.batchErr, f.short, f.singles, f.batches = nil, false, nil, nil
			tc.set()
			f.mu.Unlock()
			members, err := c.Observe(ctx, true)
			if err != nil {
				t.Fatalf("Observe: %v; a health failure must not fail it", err)
			}
			for _, id := range ids {
				if h := healthByID(members)[id]; h != tc.want {
					t.Errorf("%s: %s, want %s", id, h, tc.want)
				}
			}
			if len(f.batches) != 1 || len(f.singles) != tc.singles {
				t.Errorf("%d batches, %d single calls; want 1 and %d", len(f.batches), len(f.singles), tc.singles)
			}
		})
	}
	// Once the context is done nothing is asked and no member is judged.
	f.mu.Lock()
	f.batchErr, f.short, f.batches = nil, false, nil
	f.mu.Unlock()
	descs, _, err := c.ObserveDescriptions(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, m := range c.ObserveFrom(done, descs, true) {
		if m.Health != flavor.HealthUnknown {
			t.Errorf("%s judged %s after the context ended", m.ID, m.Health)
		}
	}
	if len(f.batches) != 0 {
		t.Errorf("%d batches asked after the context ended", len(f.batches))
	}
}

// failingDestroy fails Destroy for one instance.
type failingDestroy struct {
	instance.Plugin
	id instance.ID
}

func (p failingDestroy) Destroy(ctx context.Context, id instance.ID, reason instance.DestroyReason) error {
	if id == p.id {
		return errors.New("cloud says no")
	}
	return p.Plugin.Destroy(ctx, id, reason)
}

// A destroy's event says whether the member was drained: a failed drain
// leaves it alone (no destroy, not drained); a destroy that fails after the
// drain still reports the drain.
func TestDestroyEventsSayDrained(t *testing.T) {
	s := newSim(t)
	f := &scripted{}
	r := &recorder{}
	g := cattleGroup("web", 4, `{}`)
	c := withFlavors(t, s, g, Options{}, r, f)
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	ids := liveIDs(t, c)
	slices.Sort(ids)
	f.fail = map[instance.ID]bool{ids[1]: true}
	c.plugins.Instance = failingDestroy{Plugin: c.plugins.Instance, id: ids[2]}
	if _, err := c.Observe(ctx, false); err != nil { // the descriptions destroys drain with
		t.Fatal(err)
	}
	r.events = nil
	dec := Decision{Destroy: []Destroy{
		{ID: ids[0], Reason: ReasonUnhealthy}, {ID: ids[1], Reason: ReasonUnhealthy}, {ID: ids[2], Reason: ReasonScaleDown},
	}}
	res, err := c.Execute(ctx, dec)
	if err != nil || res.Destroyed != 1 || len(res.Failed) != 2 {
		t.Fatalf("Execute = %+v, %v; want 1 destroyed, 2 failed", res, err)
	}
	got := map[instance.ID]string{}
	for _, ev := range r.events {
		got[ev.ID] = fmt.Sprintf("%s drained=%v", ev.Action, ev.Drained)
	}
	want := map[instance.ID]string{
		ids[0]: "destroy drained=true",
		ids[1]: "error drained=false",
		ids[2]: "error drained=true",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if slices.Contains(f.drained, ids[1]) || !slices.Contains(f.drained, ids[0]) || !slices.Contains(f.drained, ids[2]) {
		t.Fatalf("drained %v", f.drained)
	}
}
