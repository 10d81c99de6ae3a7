package group

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

func healthByID(members []Member) map[instance.ID]flavor.Health {
	out := map[instance.ID]flavor.Health{}
	for _, m := range members {
		out[m.ID] = m.Health
	}
	return out
}

// Observe with health asks the simulator's flavor, which reads the
// instance files; without health every member is unknown. A terminating
// member is not asked about.
func TestObserveHealth(t *testing.T) {
	s := newSim(t)
	p := newProbe("simulator", s.client.Flavor("simulator"), nil)
	c := newInstances(t, s, cattleGroup("web", 4, `{}`), Options{}, p)
	ctx := ctxT(t)
	ids := provision(t, c, 4)
	s.setField(t, ids[0], "health", "unhealthy")
	s.setField(t, ids[1], "health", "unknown")
	s.setField(t, ids[3], "state", "terminating")

	descs, members, err := c.ObserveDescriptions(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range members {
		if descs[i].ID != members[i].ID || descs[i].Tags[tags.Group] != "web" {
			t.Fatalf("descs[%d] = %+v does not describe members[%d] = %+v", i, descs[i], i, members[i])
		}
	}
	want := map[instance.ID]flavor.Health{ids[0]: flavor.HealthUnhealthy, ids[1]: flavor.HealthUnknown, ids[2]: flavor.HealthHealthy, ids[3]: flavor.HealthUnknown}
	if got := healthByID(members); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("health = %v, want %v", got, want)
	}
	if len(p.batches) != 1 || slices.Contains(p.batches[0], ids[3]) || len(p.batches[0]) != 3 {
		t.Fatalf("the flavor was asked %v, want one batch without the terminating %s", p.batches, ids[3])
	}
	p.reset()
	members, err = c.Observe(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Health != flavor.HealthUnknown {
			t.Errorf("without health %s is %s, want unknown", m.ID, m.Health)
		}
	}
	if b, n := p.counts(); b+n != 0 {
		t.Fatalf("Observe without health asked the flavor %d times", b+n)
	}
	// Health judges what the caller listed, the same way.
	if got := c.Health(ctx, descs); fmt.Sprint(got) != fmt.Sprint(map[instance.ID]flavor.Health{
		ids[0]: flavor.HealthUnhealthy, ids[1]: flavor.HealthUnknown, ids[2]: flavor.HealthHealthy}) {
		t.Fatalf("Health = %v", got)
	}
}

// ObserveFrom judges descriptions the caller listed for several groups at
// once (one DescribeInstances by stack), and remembers them for drains.
func TestObserveFrom(t *testing.T) {
	s := newSim(t)
	p := newProbe("simulator", s.client.Flavor("simulator"), nil)
	web := newInstances(t, s, cattleGroup("web", 2, `{}`), Options{}, p)
	db := newInstances(t, s, cattleGroup("db", 1, `{}`), Options{})
	ctx := ctxT(t)
	ids := provision(t, web, 2)
	provision(t, db, 1)
	s.setField(t, ids[1], "health", "unhealthy")
	all, err := s.client.Instance("compute").DescribeInstances(ctx, map[string]string{tags.Stack: "teststack"}, false)
	if err != nil || len(all) != 3 {
		t.Fatalf("listing by stack: %d, %v", len(all), err)
	}
	var mine []instance.Description
	for _, d := range all {
		if d.Tags[tags.Group] == "web" {
			mine = append(mine, d)
		}
	}
	got := healthByID(web.ObserveFrom(ctx, mine, true))
	if want := map[instance.ID]flavor.Health{ids[0]: flavor.HealthHealthy, ids[1]: flavor.HealthUnhealthy}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ObserveFrom health %v, want %v", got, want)
	}
	if err := web.Drain(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if d := p.drained; len(d) != 1 || d[0].Tags[tags.Group] != "web" || d[0].Address == "" {
		t.Fatalf("drained %+v, want the description ObserveFrom was given", d)
	}
}

// Health costs one batch per flavor per observation, and the flavors
// combine: unhealthy as soon as one says so (later flavors are not asked
// about that member), healthy only when all say so, unknown otherwise.
// Both flavors are simulator processes: the second, on a store of its
// own, judges by the files written there.
func TestHealthOneBatchPerFlavor(t *testing.T) {
	s := newSim(t)
	judge := newSim(t)
	first := newProbe("first", s.client.Flavor("simulator"), nil)
	second := newProbe("second", judge.client.Flavor("simulator"), nil)
	g := cattleGroup("web", 6, `{}`)
	g.Flavors = append(g.Flavors, config.Plugin{Provider: "judge", Type: "simulator"})
	c := newInstances(t, s, g, Options{}, first, second)
	ctx := ctxT(t)
	ids := provision(t, c, 6)
	slices.Sort(ids)
	s.setField(t, ids[0], "health", "unhealthy") // first: unhealthy (second is not asked)
	s.setField(t, ids[1], "health", "unknown")   // first: unknown, second: healthy
	s.setField(t, ids[2], "health", "unknown")   // first: unknown, second: unhealthy
	for i, h := range []string{"healthy", "healthy", "unhealthy", "unhealthy", "unknown", "healthy"} {
		judge.judge(t, ids[i], h)
	}

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
	for _, p := range []*probe{first, second} {
		if b, n := p.counts(); b != 1 || n != 0 {
			t.Fatalf("%s flavor asked %d batches and %d single calls, want one batch", p.name, b, n)
		}
	}
	if asked := slices.Sorted(slices.Values(first.batches[0])); !slices.Equal(asked, ids) {
		t.Fatalf("first flavor asked about %v, want every member", asked)
	}
	if asked := slices.Sorted(slices.Values(second.batches[0])); !slices.Equal(asked, ids[1:]) {
		t.Fatalf("second flavor asked about %v, want every member but %s (unhealthy already)", asked, ids[0])
	}
}

// A flavor without HealthyAll is asked one member at a time, with bounded
// parallelism; a call that fails makes that member unknown, and is logged.
func TestHealthFlavorWithoutBatch(t *testing.T) {
	s := newSim(t)
	judge := newSim(t)
	p := newProbe("judge", judge.client.Flavor("simulator"), nil)
	logs := &strings.Builder{}
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: lockedWriter{&mu, logs}})
	c := newInstances(t, s, cattleGroup("web", 5, `{}`), Options{Parallelism: 2, Logger: logger}, unbatched{p})
	ctx := ctxT(t)
	ids := provision(t, c, 5)
	for i, h := range []string{"healthy", "corrupt", "unhealthy", "healthy", "unknown"} {
		judge.judge(t, ids[i], h)
	}
	members, err := c.Observe(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[instance.ID]flavor.Health{
		ids[0]: flavor.HealthHealthy, ids[1]: flavor.HealthUnknown, ids[2]: flavor.HealthUnhealthy,
		ids[3]: flavor.HealthHealthy, ids[4]: flavor.HealthUnknown,
	}
	if got := healthByID(members); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("health %v, want %v", got, want)
	}
	if b, n := p.counts(); b != 0 || n != 5 {
		t.Fatalf("%d batches, %d Healthy calls; want 5 calls", b, n)
	}
	if p.peak > 2 {
		t.Fatalf("%d Healthy calls in flight, want at most Parallelism 2", p.peak)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "health check failed") || !strings.Contains(logs.String(), string(ids[1])) {
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

// A batch that fails (its provider died), or answers for the wrong number
// of members, makes every member it was about unknown and is not retried
// member by member; one that declines (ErrUnsupported) is asked member by
// member instead. Once the context is done nothing is asked.
func TestHealthBatchFailures(t *testing.T) {
	s := newSim(t)
	dead := newSim(t)
	dead.client.Kill()
	live := newProbe("live", s.client.Flavor("simulator"), nil)
	gone := newProbe("dead", dead.client.Flavor("simulator"), nil)
	c := newInstances(t, s, cattleGroup("web", 3, `{}`), Options{}, live)
	cDead := newInstances(t, s, cattleGroup("web", 3, `{}`), Options{}, gone)
	ctx := ctxT(t)
	ids := provision(t, c, 3)
	for _, tc := range []struct {
		name    string
		c       *Instances
		p       *probe
		set     func(*probe)
		want    flavor.Health
		singles int
	}{
		{"provider dead", cDead, gone, func(*probe) {}, flavor.HealthUnknown, 0},
		{"short", c, live, func(p *probe) { p.short = true }, flavor.HealthUnknown, 0},
		{"declines", c, live, func(p *probe) { p.decline = true }, flavor.HealthHealthy, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.reset()
			tc.set(tc.p)
			members, err := tc.c.Observe(ctx, true)
			if err != nil {
				t.Fatalf("Observe: %v; a health failure must not fail it", err)
			}
			for _, id := range ids {
				if h := healthByID(members)[id]; h != tc.want {
					t.Errorf("%s: %s, want %s", id, h, tc.want)
				}
			}
			if b, n := tc.p.counts(); b != 1 || n != tc.singles {
				t.Errorf("%d batches, %d single calls; want 1 and %d", b, n, tc.singles)
			}
		})
	}

	live.reset()
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
	if got := c.Health(done, descs); len(got) != 0 {
		t.Errorf("Health after the context ended = %v, want no member judged", got)
	}
	if b, n := live.counts(); b+n != 0 {
		t.Errorf("%d batches and %d calls asked after the context ended", b, n)
	}
}

// A flavor whose health is the instance's state alone is not asked: every
// member that is not terminating is healthy by it, whatever it would say.
func TestHealthFromStateNotAsked(t *testing.T) {
	s := newSim(t)
	p := newProbe("simulator", s.client.Flavor("simulator"), nil)
	g := cattleGroup("web", 3, `{}`)
	c, err := NewInstances(g, Plugins{Instance: s.client.Instance(g.Instance.Type),
		Flavors: []Flavor{{Plugin: p, Properties: g.Flavors[0].Properties, HealthFromState: true}}}, Options{Stack: "teststack"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	ids := provision(t, c, 3)
	s.setField(t, ids[0], "health", "unhealthy") // what the flavor would say, if asked
	s.setField(t, ids[2], "state", "terminating")
	_, members, err := c.ObserveDescriptions(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[instance.ID]flavor.Health{ids[0]: flavor.HealthHealthy, ids[1]: flavor.HealthHealthy, ids[2]: flavor.HealthUnknown}
	if got := healthByID(members); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("health = %v, want %v", got, want)
	}
	if b, n := p.counts(); b+n != 0 {
		t.Fatalf("the flavor was asked %d times", b+n)
	}
}
