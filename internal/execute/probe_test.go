package execute

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// entry is one thing the probe saw, in the order it saw them: a call
// beginning or ending, a listing, a Progress event.
type entry struct {
	what     string // "begin", "end", "list", "event", "prepare"
	n        int    // a prepare's members
	op       string // the call ("provision", "register", ...) or the event's step kind
	provider string
	lb       string
	ids      []instance.ID
	err      error
	// states are a listing's, by ID.
	states map[instance.ID]instance.State
	// event's
	step        plan.StepID
	status      Status
	done, total int
	// registered are, for a drain or destroy, the load balancers that
	// still had the member as a backend when the call began; for a
	// deregistration, the backends the load balancer had.
	registered []string
}

// probe instruments the real clients: what each call was given, the calls
// in flight (by provider and in all), and hooks a test uses to act at a
// point of the run.
type probe struct {
	f *fixture

	mu       sync.Mutex
	journal  []entry
	inflight map[string]int
	peak     map[string]int
	total    int
	peakAll  int

	// Hooks, set before a run. onList sees each group listing an await
	// poller makes; onCall runs as a call begins (it may block), onDone
	// once it returned.
	onList func(descs []instance.Description)
	onCall func(provider, op string, ids []instance.ID)
	onDone func(provider, op string, err error)
	// lbs are the load balancers whose backends are read when a member is
	// drained or destroyed.
	lbs []string
	// noAhead makes the groups say their flavors do not prepare ahead.
	noAhead bool
}

func newProbe(f *fixture) *probe {
	return &probe{f: f, inflight: map[string]int{}, peak: map[string]int{}, lbs: []string{"lb1"}}
}

func (p *probe) add(e entry) {
	p.mu.Lock()
	p.journal = append(p.journal, e)
	p.mu.Unlock()
}

// event is the Progress callback.
func (p *probe) event(ev Event) {
	id := ev.Instance
	p.add(entry{what: "event", op: string(ev.Step.Kind), step: ev.Step.ID, status: ev.Status, ids: []instance.ID{id},
		lb: ev.Step.LoadBalancer, err: ev.Err, done: ev.Done, total: ev.Total})
}

// call counts a call to provider in flight around do, journaled.
func (p *probe) call(provider, op, lb string, ids []instance.ID, registered []string, do func() error) {
	p.mu.Lock()
	p.inflight[provider]++
	p.total++
	p.peak[provider] = max(p.peak[provider], p.inflight[provider])
	p.peakAll = max(p.peakAll, p.total)
	p.journal = append(p.journal, entry{what: "begin", op: op, provider: provider, lb: lb, ids: ids, registered: registered})
	hook, done := p.onCall, p.onDone
	p.mu.Unlock()
	if hook != nil {
		hook(provider, op, ids)
	}
	err := do()
	p.mu.Lock()
	p.inflight[provider]--
	p.total--
	p.journal = append(p.journal, entry{what: "end", op: op, provider: provider, lb: lb, ids: ids, err: err})
	p.mu.Unlock()
	if done != nil {
		done(provider, op, err)
	}
}

// reset forgets what the probe saw (a new run starts) and its hooks.
func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.journal, p.peak, p.peakAll = nil, map[string]int{}, 0
	p.onList, p.onCall, p.onDone = nil, nil, nil
}

// setHooks sets the hooks under the lock (a run may be going on).
func (p *probe) setHooks(set func(p *probe)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	set(p)
}

// entries is a copy of the journal.
func (p *probe) entries() []entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.journal)
}

// find is the index of the first entry matching, or -1.
func find(j []entry, match func(entry) bool) int {
	return slices.IndexFunc(j, match)
}

// eventOf matches the event of the step of kind acting on id.
func eventOf(kind plan.StepKind, id instance.ID) func(entry) bool {
	return func(e entry) bool {
		return e.what == "event" && e.op == string(kind) && slices.Contains(e.ids, id)
	}
}

// callOf matches the entry what ("begin", "end") of a call op given id.
func callOf(what, op string, id instance.ID) func(entry) bool {
	return func(e entry) bool { return e.what == what && e.op == op && slices.Contains(e.ids, id) }
}

// calls are the begin entries of op.
func calls(j []entry, op string) []entry {
	var out []entry
	for _, e := range j {
		if e.what == "begin" && e.op == op {
			out = append(out, e)
		}
	}
	return out
}

// registeredOn lists the probe's load balancers that have id as a backend.
func (p *probe) registeredOn(ctx context.Context, id instance.ID) []string {
	var out []string
	for _, name := range p.lbs {
		bs, err := p.f.clients["simulator"].LoadBalancer(name).Backends(ctx)
		if err != nil {
			out = append(out, name+": "+err.Error())
			continue
		}
		if slices.ContainsFunc(bs, func(b loadbalancer.Backend) bool { return b.ID == id }) {
			out = append(out, name)
		}
	}
	return out
}

// probedGroup is a group.Instances whose calls the probe sees.
type probedGroup struct {
	g        *group.Instances
	p        *probe
	provider string
}

func (g *probedGroup) PreparesAhead() bool {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return !g.p.noAhead && g.g.PreparesAhead()
}

// PrepareBatch is journaled, not a counted call: the provisions that
// follow are.
func (g *probedGroup) PrepareBatch(ctx context.Context, logicalIDs []string) []group.Prepared {
	out := g.g.PrepareBatch(ctx, logicalIDs)
	g.p.add(entry{what: "prepare", op: "prepare", n: len(logicalIDs)})
	return out
}

func (g *probedGroup) ProvisionPrepared(ctx context.Context, p group.Prepared) (m group.Member, d instance.Description, err error) {
	g.p.call(g.provider, "provision", "", nil, nil, func() error {
		m, d, err = g.g.ProvisionPrepared(ctx, p)
		return err
	})
	if err == nil {
		g.p.add(entry{what: "made", op: "provision", ids: []instance.ID{m.ID}})
	}
	return m, d, err
}

func (g *probedGroup) Drain(ctx context.Context, id instance.ID) (err error) {
	g.p.call(g.provider, "drain", "", []instance.ID{id}, g.p.registeredOn(ctx, id), func() error {
		err = g.g.Drain(ctx, id)
		return err
	})
	return err
}

func (g *probedGroup) Destroy(ctx context.Context, id instance.ID, reason instance.DestroyReason) (err error) {
	g.p.call(g.provider, "destroy", "", []instance.ID{id}, g.p.registeredOn(ctx, id), func() error {
		err = g.g.Destroy(ctx, id, reason)
		return err
	})
	return err
}

// Describe is an await poller's listing: not a counted call (awaits take
// no call slot), but journaled with the states it saw.
func (g *probedGroup) Describe(ctx context.Context, withProperties bool) ([]instance.Description, error) {
	descs, err := g.g.Describe(ctx, withProperties)
	if err == nil {
		states := map[instance.ID]instance.State{}
		for _, d := range descs {
			states[d.ID] = d.State
		}
		g.p.add(entry{what: "list", op: "describe", states: states})
		g.p.mu.Lock()
		hook := g.p.onList
		g.p.mu.Unlock()
		if hook != nil {
			hook(descs)
		}
	}
	return descs, err
}

func (g *probedGroup) Health(ctx context.Context, descs []instance.Description) map[instance.ID]flavor.Health {
	ids := make([]instance.ID, len(descs))
	for i, d := range descs {
		ids[i] = d.ID
	}
	g.p.add(entry{what: "health", op: "health", ids: ids})
	return g.g.Health(ctx, descs)
}

// probedLB is a load balancer client whose changes the probe sees.
type probedLB struct {
	l4             loadbalancer.L4
	p              *probe
	provider, name string
}

func (l *probedLB) Routes(ctx context.Context) ([]loadbalancer.Route, error) { return l.l4.Routes(ctx) }

func (l *probedLB) Backends(ctx context.Context) ([]loadbalancer.Backend, error) {
	return l.l4.Backends(ctx)
}

func (l *probedLB) Publish(ctx context.Context, r loadbalancer.Route) (err error) {
	l.p.call(l.provider, "publish", l.name, nil, nil, func() error { err = l.l4.Publish(ctx, r); return err })
	return err
}

func (l *probedLB) Unpublish(ctx context.Context, port int) (err error) {
	l.p.call(l.provider, "unpublish", l.name, nil, nil, func() error { err = l.l4.Unpublish(ctx, port); return err })
	return err
}

func (l *probedLB) ConfigureHealthCheck(ctx context.Context, hc loadbalancer.HealthCheck) (err error) {
	l.p.call(l.provider, "health-check", l.name, nil, nil, func() error { err = l.l4.ConfigureHealthCheck(ctx, hc); return err })
	return err
}

func (l *probedLB) RegisterBackends(ctx context.Context, bs []loadbalancer.Backend) (err error) {
	ids := make([]instance.ID, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	l.p.call(l.provider, "register", l.name, ids, nil, func() error { err = l.l4.RegisterBackends(ctx, bs); return err })
	return err
}

func (l *probedLB) DeregisterBackends(ctx context.Context, ids []instance.ID) (err error) {
	var had []string
	if bs, berr := l.l4.Backends(ctx); berr == nil {
		for _, b := range bs {
			had = append(had, string(b.ID))
		}
	}
	l.p.call(l.provider, "deregister", l.name, ids, had, func() error { err = l.l4.DeregisterBackends(ctx, ids); return err })
	return err
}

// probedAuthorizer is an authorizer client whose changes the probe sees.
type probedAuthorizer struct {
	a        nfs.Authorizer
	p        *probe
	provider string
}

func (a *probedAuthorizer) Validate(ctx context.Context, props json.RawMessage) error {
	return a.a.Validate(ctx, props)
}

func (a *probedAuthorizer) Describe(ctx context.Context) ([]nfs.Authorization, error) {
	return a.a.Describe(ctx)
}

func (a *probedAuthorizer) Authorize(ctx context.Context, auth nfs.Authorization) (id string, err error) {
	a.p.call(a.provider, "authorize", "", []instance.ID{auth.SourceID}, nil, func() error {
		id, err = a.a.Authorize(ctx, auth)
		return err
	})
	return id, err
}

func (a *probedAuthorizer) Revoke(ctx context.Context, id string) (err error) {
	a.p.call(a.provider, "revoke", "", nil, nil, func() error { err = a.a.Revoke(ctx, id); return err })
	return err
}

// setField edits the simulator's file of instance id as a person injecting
// a fault does, atomically (a dot file renamed into place), so a listing
// never reads half a file.
func (f *fixture) setField(key string, id instance.ID, field, value string) error {
	dir := filepath.Join(f.simDirs[key], "instances", "compute")
	path := filepath.Join(dir, string(id)+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		return err
	}
	rec[field] = value
	if b, err = json.Marshal(rec); err != nil {
		return err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".edit-%s-%d", id, time.Now().UnixNano()))
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// removeInstance deletes id's file: the instance vanished.
func (f *fixture) removeInstance(key string, id instance.ID) error {
	return os.Remove(filepath.Join(f.simDirs[key], "instances", "compute", string(id)+".json"))
}

// checkOrder fails t unless the entries matching each of matchers occur in
// that order in j (each found).
func checkOrder(t *testing.T, j []entry, what string, matchers ...func(entry) bool) {
	t.Helper()
	last := -1
	for i, m := range matchers {
		at := find(j, m)
		if at < 0 {
			t.Errorf("%s: entry %d not found", what, i+1)
			return
		}
		if at < last {
			t.Errorf("%s: entry %d (at %d) comes before entry %d (at %d)", what, i+1, at, i, last)
		}
		last = at
	}
}
