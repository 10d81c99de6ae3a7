package enrollment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// e2eEnrollment is the enrollment of DESIGN.md's e2e stack.
func e2eEnrollment() *config.Enrollment {
	return &config.Enrollment{
		Name:   "nfs",
		Source: "cattle",
		Target: config.EnrollmentTarget{
			Provider:   "simulator.nfs-auth",
			Type:       "disk",
			Properties: `{ host = member.id, iops = 10 }`,
		},
		SyncInterval: config.Duration(5 * time.Second),
	}
}

// call is one provider call seen by a recordingAuthorizer.
type call struct {
	op         string // "authorize" or "revoke"
	start, end time.Time
}

// recordingAuthorizer passes every call to a real authorizer and records
// when it started and ended, so tests can check the order of the phases.
type recordingAuthorizer struct {
	nfs.Authorizer
	mu    sync.Mutex
	calls []call
	// inFlight and maxInFlight measure the parallelism reached.
	inFlight, maxInFlight int
}

func (r *recordingAuthorizer) record(op string, do func()) {
	r.mu.Lock()
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	r.mu.Unlock()
	c := call{op: op, start: time.Now()}
	do()
	c.end = time.Now()
	r.mu.Lock()
	r.inFlight--
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recordingAuthorizer) Authorize(ctx context.Context, a nfs.Authorization) (id string, err error) {
	r.record("authorize", func() { id, err = r.Authorizer.Authorize(ctx, a) })
	return id, err
}

func (r *recordingAuthorizer) Revoke(ctx context.Context, id string) (err error) {
	r.record("revoke", func() { err = r.Authorizer.Revoke(ctx, id) })
	return err
}

// reset forgets the calls so far.
func (r *recordingAuthorizer) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.maxInFlight = nil, 0
}

// checkOrder fails unless every authorize ended before the first revoke
// started, and returns how many of each there were.
func (r *recordingAuthorizer) checkOrder(t *testing.T) (authorizes, revokes int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var lastAuthorize, firstRevoke time.Time
	for _, c := range r.calls {
		switch c.op {
		case "authorize":
			authorizes++
			if c.end.After(lastAuthorize) {
				lastAuthorize = c.end
			}
		case "revoke":
			revokes++
			if firstRevoke.IsZero() || c.start.Before(firstRevoke) {
				firstRevoke = c.start
			}
		}
	}
	if authorizes > 0 && revokes > 0 && !lastAuthorize.Before(firstRevoke) {
		t.Fatalf("a revoke started at %s, before the last authorize ended at %s", firstRevoke.Format(time.StampMicro), lastAuthorize.Format(time.StampMicro))
	}
	return authorizes, revokes
}

// authState is what the authorizer holds for the enrollment: by member, the
// host and iops of its authorizations.
func authState(t *testing.T, a nfs.Authorizer) map[instance.ID][]string {
	t.Helper()
	all, err := a.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[instance.ID][]string{}
	for _, x := range all {
		if !Ours("nfs", x) {
			continue
		}
		var p struct {
			Host string `json:"host"`
			IOPS int    `json:"iops"`
		}
		if err := json.Unmarshal(x.Properties, &p); err != nil {
			t.Fatal(err)
		}
		if x.Host != p.Host || x.SourceID != SourceOf(x) {
			t.Fatalf("authorization %+v: Host field and properties disagree", x)
		}
		out[SourceOf(x)] = append(out[SourceOf(x)], fmt.Sprintf("host=%s iops=%d", p.Host, p.IOPS))
	}
	return out
}

// settled is a source group that wants as many members as it lists live
// (pending or running): none is being replaced.
func settled(descs []instance.Description) Membership {
	n := 0
	for _, d := range descs {
		if d.State != instance.StateTerminating {
			n++
		}
	}
	return Membership{Instances: descs, Want: Want{Size: n}}
}

// checkFollows fails unless the enrollment holds exactly one authorization
// per source instance, with host = its ID and the given iops.
func checkFollows(t *testing.T, a nfs.Authorizer, source []instance.Description, iops int) {
	t.Helper()
	got := authState(t, a)
	want := map[instance.ID][]string{}
	for _, d := range source {
		want[d.ID] = []string{fmt.Sprintf("host=%s iops=%d", d.ID, iops)}
	}
	if len(got) != len(want) {
		t.Fatalf("%d members authorized, want %d: %v", len(got), len(want), got)
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Fatalf("member %s has %v, want %v", id, got[id], w)
		}
	}
}

// Authorizations follow membership, replacements are authorized before what
// they replace is revoked, and a change of the target properties
// re-authorizes every member the same way.
func TestSyncFollowsMembership(t *testing.T) {
	ctx := context.Background()
	sim, _ := startSimulator(t)
	rec := &recordingAuthorizer{Authorizer: sim.Authorizer("disk")}
	// Someone else's authorization, which must survive everything.
	if _, err := rec.Authorizer.Authorize(ctx, nfs.Authorization{SourceID: "elsewhere", Host: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	c, err := New(e2eEnrollment(), rec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cattle := provision(t, sim, "cattle", 10)
	done, err := c.Sync(ctx, settled(cattle), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Authorize) != 10 || done.Authorize[0].ID == "" {
		t.Fatalf("first sync did %+v", done)
	}
	checkFollows(t, rec, cattle, 10)
	if rec.maxInFlight < 2 || rec.maxInFlight > DefaultParallelism {
		t.Fatalf("authorized with %d calls in flight, want parallel and at most %d", rec.maxInFlight, DefaultParallelism)
	}

	// Converged: nothing to do.
	if done, err := c.Sync(ctx, settled(cattle), true); err != nil || !done.Empty() {
		t.Fatalf("second sync did %+v, %v", done, err)
	}

	// Three members are replaced (as a group heals them): the replacements
	// are authorized before the old ones are revoked.
	for _, d := range cattle[:3] {
		if err := sim.Instance("compute").Destroy(ctx, d.ID, instance.ReasonUnhealthy); err != nil {
			t.Fatal(err)
		}
	}
	provision(t, sim, "cattle", 3)
	cattle = describe(t, sim, "cattle")
	rec.reset()
	done, err = c.Sync(ctx, settled(cattle), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Authorize) != 3 || len(done.Revoke) != 3 {
		t.Fatalf("replacement sync did %+v", done)
	}
	if a, r := rec.checkOrder(t); a != 3 || r != 3 {
		t.Fatalf("%d authorizes, %d revokes", a, r)
	}
	checkFollows(t, rec, cattle, 10)

	// The target properties change: every member is re-authorized, new first.
	e := e2eEnrollment()
	e.Target.Properties = `{ host = member.id, iops = 20 }`
	c2, err := New(e, rec, Options{Source: func(context.Context) (Membership, error) { return settled(cattle), nil }})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := SpecOf(e)
	plan, err := c2.Plan(ctx, controller.Enforce, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Steps) != 20 || plan.Steps[0].Action != "replace" || plan.Steps[19].Action != "revoke" {
		t.Fatalf("plan %+v", plan.Steps)
	}
	checkFollows(t, rec, cattle, 10) // Plan changed nothing
	rec.reset()
	if _, err := c2.Commit(ctx, controller.Enforce, spec); err != nil {
		t.Fatal(err)
	}
	if a, r := rec.checkOrder(t); a != 10 || r != 10 {
		t.Fatalf("%d authorizes, %d revokes", a, r)
	}
	checkFollows(t, rec, cattle, 20)

	// Unknown membership changes nothing, even with no members passed.
	if done, err := c2.Sync(ctx, Membership{}, false); err != nil || !done.Held || !done.Empty() {
		t.Fatalf("sync with unknown membership did %+v, %v", done, err)
	}
	checkFollows(t, rec, cattle, 20)

	// Describe asks the provider and has the CLI's JSON shape.
	objs, err := c2.Describe(ctx, &controller.Metadata{Name: "nfs"})
	if err != nil {
		t.Fatal(err)
	}
	var view View
	if err := json.Unmarshal(objs[0].State, &view); err != nil {
		t.Fatal(err)
	}
	if view.Enrollment != "nfs" || len(view.Authorizations) != 10 || !strings.Contains(string(view.Authorizations[0].Properties), `"iops":20`) {
		t.Fatalf("describe state %s", objs[0].State)
	}
	var shape struct {
		Authorizations []map[string]json.RawMessage `json:"authorizations"`
	}
	_ = json.Unmarshal(objs[0].State, &shape)
	for _, k := range []string{"id", "source_id", "properties"} {
		if _, ok := shape.Authorizations[0][k]; !ok {
			t.Fatalf("describe state lacks %q: %s", k, objs[0].State)
		}
	}

	// Destroy revokes ours only.
	if _, err := c2.Destroy(ctx, nil); err != nil {
		t.Fatal(err)
	}
	all, _ := rec.Describe(ctx)
	if len(all) != 1 || all[0].SourceID != "elsewhere" {
		t.Fatalf("after destroy the authorizer holds %+v", all)
	}
}

// Members whose properties cannot be rendered are reported and keep what
// they have; the others are authorized.
func TestSyncRenderFailure(t *testing.T) {
	ctx := context.Background()
	sim, _ := startSimulator(t)
	cattle := provision(t, sim, "cattle", 2)
	e := e2eEnrollment()
	e.Target.Properties = `{ host = member.id, zone = member.properties.zone }`
	if !NeedsProperties(&e.Target) {
		t.Fatal("the target uses member.properties")
	}
	c, err := New(e, sim.Authorizer("disk"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cattle[1].Properties = json.RawMessage(`{"other":1}`)
	done, err := c.Sync(ctx, settled(cattle), true)
	if err == nil || !strings.Contains(err.Error(), string(cattle[1].ID)) {
		t.Fatalf("sync error %v, want one naming %s", err, cattle[1].ID)
	}
	if len(done.Authorize) != 1 || done.Authorize[0].SourceID != cattle[0].ID || len(done.Failed) != 1 {
		t.Fatalf("sync did %+v", done)
	}
	if !strings.Contains(string(done.Authorize[0].Properties), `"zone":"z1"`) {
		t.Fatalf("properties %s", done.Authorize[0].Properties)
	}
}

// Free touches nothing unless destroy_on_free; a freed enrollment does not
// sync; a commit resumes.
func TestFree(t *testing.T) {
	ctx := context.Background()
	sim, _ := startSimulator(t)
	auth := sim.Authorizer("disk")
	cattle := provision(t, sim, "cattle", 3)
	source := func(context.Context) (Membership, error) { return settled(cattle), nil }
	c, err := New(e2eEnrollment(), auth, Options{Source: source})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := SpecOf(e2eEnrollment())
	if _, err := c.Commit(ctx, controller.Enforce, spec); err != nil {
		t.Fatal(err)
	}
	checkFollows(t, auth, cattle, 10)

	if _, err := c.Free(ctx, nil); err != nil || !c.Freed() {
		t.Fatalf("free: %v", err)
	}
	checkFollows(t, auth, cattle, 10) // touched nothing
	if done, err := c.Sync(ctx, Membership{}, true); err != nil || !done.Empty() {
		t.Fatalf("a freed enrollment synced: %+v, %v", done, err)
	}
	checkFollows(t, auth, cattle, 10)

	// With destroy_on_free the authorizations go.
	e := e2eEnrollment()
	e.DestroyOnFree = true
	spec, _ = SpecOf(e)
	if _, err := c.Commit(ctx, controller.Enforce, spec); err != nil || c.Freed() {
		t.Fatalf("commit did not resume: %v", err)
	}
	objs, err := c.Free(ctx, &controller.Metadata{Name: "nfs"})
	if err != nil {
		t.Fatal(err)
	}
	if got := authState(t, auth); len(got) != 0 {
		t.Fatalf("destroy_on_free left %v", got)
	}
	var view View
	if err := json.Unmarshal(objs[0].State, &view); err != nil || len(view.Authorizations) != 0 {
		t.Fatalf("free returned %s, %v", objs[0].State, err)
	}
	if objs, _ := c.Free(ctx, &controller.Metadata{Name: "other"}); objs != nil {
		t.Fatalf("Free of another name selected %v", objs)
	}
}

// Scaling 10 → 1000 members: 990 authorizations at bounded parallelism
// within the 2 s budget; back to 10: 990 revokes.
func TestSyncScale(t *testing.T) {
	ctx := context.Background()
	sim, _ := startSimulator(t)
	rec := &recordingAuthorizer{Authorizer: sim.Authorizer("disk")}
	c, err := New(e2eEnrollment(), rec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cattle := func(n int) []instance.Description {
		out := make([]instance.Description, n)
		for i := range out {
			out[i] = instance.Description{ID: instance.ID(fmt.Sprintf("compute-%08x", i)), State: instance.StateRunning,
				Tags: tags.Member("test", "cattle", "h", "")}
		}
		return out
	}
	if _, err := c.Sync(ctx, settled(cattle(10)), true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	done, err := c.Sync(ctx, settled(cattle(1000)), true)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10 → 1000 authorizations in %s (%d calls in flight at most)", took, rec.maxInFlight)
	if len(done.Authorize) != 990 || rec.maxInFlight > DefaultParallelism {
		t.Fatalf("authorized %d with %d in flight", len(done.Authorize), rec.maxInFlight)
	}
	// The budget for the whole scale-up is 2 s; this pass is only part
	// of it, but a shared CI machine needs slack, so the guard is twice that.
	if took > 4*time.Second && !raceEnabled {
		t.Fatalf("10 → 1000 authorizations took %s", took)
	}
	done, err = c.Sync(ctx, settled(cattle(10)), true)
	if err != nil || len(done.Revoke) != 990 {
		t.Fatalf("1000 → 10 revoked %d: %v", len(done.Revoke), err)
	}
	if got := authState(t, rec); len(got) != 10 {
		t.Fatalf("%d left", len(got))
	}
}

// A dead provider fails the pass with an error naming the enrollment.
func TestSyncUnavailable(t *testing.T) {
	sim, _ := startSimulator(t)
	auth := sim.Authorizer("disk")
	sim.Kill()
	c, err := New(e2eEnrollment(), auth, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Sync(context.Background(), settled([]instance.Description{{ID: "c1", State: instance.StateRunning}}), true)
	if !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), `enrollment "nfs"`) {
		t.Fatalf("sync against a dead provider: %v", err)
	}
	if _, err := New(e2eEnrollment(), nil, Options{}); err == nil {
		t.Fatal("New accepted no authorizer")
	}
	if _, err := c.Plan(context.Background(), controller.Enforce, controller.Spec{Kind: controller.KindIngress}); err == nil {
		t.Fatal("Plan accepted an ingress spec")
	}
}

// An enrollment moved to another authorizer: the new target is synced and
// Release revokes, at the old one, what the new one does not list, leaving
// others' authorizations. Through one store (a second process on the same
// directory: two aliases of one provider) it revokes nothing.
func TestReleaseOldTarget(t *testing.T) {
	ctx := context.Background()
	oldSim, oldDir := startSimulator(t)
	newSim, _ := startSimulator(t)
	if _, err := oldSim.Authorizer("disk").Authorize(ctx, nfs.Authorization{SourceID: "elsewhere", Host: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	was, err := New(e2eEnrollment(), oldSim.Authorizer("disk"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cattle := provision(t, oldSim, "cattle", 4)
	if _, err := was.Sync(ctx, settled(cattle), true); err != nil {
		t.Fatal(err)
	}

	// The same store through another process: nothing to revoke.
	same, err := plugin.Start(ctx, plugin.ClientConfig{Name: "simulator", Path: simulatorBin, Env: []string{"INFRAKIT_SIMULATOR_DIR=" + oldDir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(same.Kill)
	moved := e2eEnrollment()
	moved.Target.Provider = "simulator"
	alias, err := New(moved, same.Authorizer("disk"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	has, err := alias.Authorizations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if done, err := was.Release(ctx, has); err != nil || !done.Empty() {
		t.Fatalf("release through one store did %+v, %v", done, err)
	}

	// Another store: the new target authorizes, the old one is emptied of ours.
	now, err := New(moved, newSim.Authorizer("disk"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := now.Sync(ctx, settled(cattle), true); err != nil || len(done.Authorize) != 4 {
		t.Fatalf("new target sync did %+v, %v", done, err)
	}
	if has, err = now.Authorizations(ctx); err != nil {
		t.Fatal(err)
	}
	done, err := was.Release(ctx, has)
	if err != nil || len(done.Revoke) != 4 || done.Revoke[0].Reason != ReasonRetarget {
		t.Fatalf("release did %+v, %v", done, err)
	}
	left, err := oldSim.Authorizer("disk").Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].SourceID != "elsewhere" {
		t.Fatalf("old target holds %+v, want only the foreign authorization", left)
	}
}
