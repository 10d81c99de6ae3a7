package watch

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
)

func TestGoneMembers(t *testing.T) {
	recorded := []state.Instance{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	listed := []group.Member{
		{ID: "a", State: instance.StateRunning},
		{ID: "c", State: instance.StateTerminating},
		{ID: "d", State: instance.StateRunning},
		{ID: "x", State: instance.StateTerminating}, // not recorded, listed terminating
	}
	// What the pass decides on: the listing, and a create it still
	// expects ("e", recorded by no one yet).
	adjusted := append(slices.Clone(listed), group.Member{ID: "e", State: instance.StatePending})
	// b is gone, c and x terminate: they left behind the pass's back. d
	// is taken away by the pass itself (its own steps deregister it); a and
	// e stay.
	got := goneMembers(recorded, listed, adjusted, map[instance.ID]bool{"d": true})
	if want := []instance.ID{"b", "c", "x"}; !slices.Equal(got, want) {
		t.Fatalf("goneMembers = %v, want %v", got, want)
	}
	// A member the pass decides on as terminating (the old member of a
	// replacement in flight) is gone to goneMembers; the pass leaves it out
	// itself (decide).
	marked := slices.Clone(adjusted)
	marked[0].State = instance.StateTerminating
	if got := goneMembers(recorded[:1], listed[:1], marked, nil); !slices.Equal(got, []instance.ID{"a"}) {
		t.Fatalf("a member marked terminating: %v, want a", got)
	}
	if got := goneMembers(recorded[:1], listed[:1], listed[:1], nil); len(got) != 0 {
		t.Fatalf("nothing leaves, got %v", got)
	}
	// A member the pass keeps (the brake, a create expected) is not taken
	// out even though the provider does not list it.
	if got := goneMembers([]state.Instance{{ID: "e"}}, nil, adjusted, nil); len(got) != 0 {
		t.Fatalf("an expected member is gone: %v", got)
	}
}

func TestJoinedMembers(t *testing.T) {
	first := []group.Member{{ID: "a", State: instance.StateRunning, Address: "10.0.0.1"}, {ID: "b", State: instance.StatePending}}
	joined, seen := joinedMembers(nil, first)
	if !joined || len(seen) != 2 {
		t.Fatalf("first listing: joined %v, seen %v", joined, seen)
	}
	if joined, _ := joinedMembers(seen, first); joined {
		t.Error("the same listing again joined")
	}
	// a leaves, b terminates: nothing joined.
	if joined, _ := joinedMembers(seen, []group.Member{{ID: "b", State: instance.StateTerminating}}); joined {
		t.Error("members leaving joined")
	}
	// b is running now, with an address.
	if joined, _ := joinedMembers(seen, []group.Member{first[0], {ID: "b", State: instance.StateRunning, Address: "10.0.0.2"}}); !joined {
		t.Error("a member now running did not join")
	}
	if joined, _ := joinedMembers(seen, append(slices.Clone(first), group.Member{ID: "c", State: instance.StatePending})); !joined {
		t.Error("a new member did not join")
	}
}

func TestFollowed(t *testing.T) {
	st := &config.Stack{
		LoadBalancers: []*config.LoadBalancer{{Name: "lb1", Provider: "haproxy"}, {Name: "lb2", Provider: "simulator"}},
		Ingresses: []*config.Ingress{
			{Name: "site", Rules: []config.Rule{{LoadBalancer: "lb1", Groups: []string{"web"}}, {LoadBalancer: "lb2", Groups: []string{"api"}}}},
			{Name: "freed", Rules: []config.Rule{{LoadBalancer: "lb1", Groups: []string{"admin"}}}},
		},
		Enrollments: []*config.Enrollment{{Name: "nfs", Source: "db"}, {Name: "gone", Source: "cache"}},
	}
	doc := &state.Document{Stack: st,
		Ingresses:   map[string]*state.ControllerStatus{"freed": {Freed: true}},
		Enrollments: map[string]*state.ControllerStatus{"gone": {Freed: true}}}
	for name, want := range map[string]bool{"web": true, "api": true, "db": true, "admin": false, "cache": false, "other": false} {
		if got := followed(doc, name); got != want {
			t.Errorf("followed(%q) = %v, want %v", name, got, want)
		}
	}
}

// slowSyncStack is followerStack with syncs an hour apart: only what a pass
// does, not the periodic sync, can move the backends and authorizations
// while a test runs.
var slowSyncStack = strings.ReplaceAll(followerStack, `sync_interval = "1s"`, `sync_interval = "1h"`)

// followersView reads, through the CLI's runner, the backends of lb1 and
// the members the enrollment nfs authorizes.
type followersView struct {
	t   *testing.T
	ctx context.Context
	cli *operation.Runner
}

func newFollowersView(t *testing.T, w *workdir) *followersView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cli, err := operation.New(ctx, operation.Options{WorkDir: w.dir, HostEnv: w.env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &followersView{t: t, ctx: ctx, cli: cli}
}

func (v *followersView) backends() []string {
	v.t.Helper()
	bs, err := v.cli.LoadBalancerBackends(v.ctx, "lb1")
	if err != nil {
		v.t.Fatal(err)
	}
	var out []string
	for _, b := range bs {
		out = append(out, string(b.ID))
	}
	slices.Sort(out)
	return out
}

func (v *followersView) authorized() []string {
	v.t.Helper()
	view, err := describeEnrollment(v.ctx, v.cli, "nfs")
	if err != nil {
		v.t.Fatal(err)
	}
	var out []string
	for _, a := range view.Authorizations {
		out = append(out, string(a.SourceID))
	}
	slices.Sort(out)
	return out
}

// startSettled starts watch once the last of ids has been taken out of lb1
// behind its back, and returns once watch's first pass is done and its
// first sync has put it back: from then on, with syncs an hour apart, only
// passes and the syncs they ask for change the load balancer and the
// enrollment.
func startSettled(t *testing.T, w *workdir, opts Options, ids []string) *running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := plugin.Start(ctx, plugin.ClientConfig{Name: "simulator", Path: filepath.Join(testBin, pluginhost.BinaryName("simulator")), Env: w.env})
	if err != nil {
		t.Fatal(err)
	}
	err = sim.LoadBalancer("lb1").DeregisterBackends(ctx, []instance.ID{instance.ID(ids[len(ids)-1])})
	sim.Kill()
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, opts)
	testwait.For(t, 10*time.Second, "the first pass and the first sync", func() bool {
		return r.status().Passes > 0 && countEvents(r.events(), EventSynced, "") > 0
	})
	return r
}

// startSettledWith applies stack and starts watch on it (startSettled),
// its providers run with simEnv ("INFRAKIT_SIMULATOR_PROVISION_DELAY=3s"):
// it returns the workdir, a view of its followers and the applied members.
func startSettledWith(t *testing.T, stack string, simEnv ...string) (*workdir, *followersView, []string, *running) {
	t.Helper()
	w := newWorkdir(t, stack)
	w.apply()
	v := newFollowersView(t, w)
	ids := instanceIDs(w.instances())
	opts := testOptions(w)
	opts.HostEnv = append(slices.Clone(w.env), simEnv...)
	return w, v, ids, startSettled(t, w, opts, ids)
}

// describeEnrollment asks, through the CLI's controller, the target of
// enrollment name for its authorizations.
func describeEnrollment(ctx context.Context, cli *operation.Runner, name string) (enrollment.View, error) {
	var view enrollment.View
	objs, err := cli.Enrollments().Describe(ctx, &controller.Metadata{Name: name})
	if err != nil {
		return view, err
	}
	err = json.Unmarshal(objs[0].State, &view)
	return view, err
}

func instanceIDs(rs []record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// A member that vanished leaves the load balancer at once, before (here:
// without) its replacement being created: every Provision of the watch's
// simulator fails, so the pass that sees the member gone creates nothing,
// and syncs are an hour apart, so only that pass can have deregistered it.
// The enrollment still authorizes the member: an authorization is revoked
// only by a sync, once the replacement is authorized.
func TestLeavingDeregisteredBeforeReplacement(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, slowSyncStack)
	w.apply()
	v := newFollowersView(t, w)
	ids := instanceIDs(w.instances())
	if got := v.backends(); !slices.Equal(got, ids) {
		t.Fatalf("after apply, backends %v, want the members %v", got, ids)
	}
	if got := v.authorized(); !slices.Equal(got, ids) {
		t.Fatalf("after apply, authorized %v, want the members %v", got, ids)
	}

	opts := testOptions(w)
	opts.HostEnv = append(slices.Clone(w.env), "INFRAKIT_SIMULATOR_FAILURE_RATE=1")
	r := startSettled(t, w, opts, ids)

	gone := ids[0]
	w.removeInstance(gone)
	testwait.For(t, 10*time.Second, "the vanished member's backend deregistered", func() bool {
		return slices.Equal(v.backends(), ids[1:])
	})
	if got := instanceIDs(w.instances()); !slices.Equal(got, ids[1:]) {
		t.Fatalf("instances %v: no replacement can have been created (every Provision fails)", got)
	}
	// Two more passes (each failing to create the replacement) change
	// neither the backends nor the authorizations.
	passes := r.status().Passes
	testwait.For(t, 10*time.Second, "two more passes", func() bool { return r.status().Passes >= passes+2 })
	if got := v.backends(); !slices.Equal(got, ids[1:]) {
		t.Errorf("backends %v, want %v", got, ids[1:])
	}
	if got := v.authorized(); !slices.Equal(got, ids) {
		t.Errorf("authorized %v, want still %v: the vanished member's authorization is revoked only once its replacement is authorized", got, ids)
	}
	// Recorded once the sync's steps are all done, which can be after
	// the providers show them.
	testwait.For(t, 10*time.Second, "a synced event for the deregistration", func() bool {
		return countEvents(r.events(), EventSynced, "") >= 2
	})
}

// A replacement that the provider starts slowly (pending for 2s) is
// registered by the sync after the pass that created it, and authorized by
// the sync a later pass asks for as soon as it lists the replacement
// running; syncs are an hour apart, so no periodic one can have done it.
func TestRunningReplacementSynced(t *testing.T) {
	t.Parallel()
	w, v, ids, _ := startSettledWith(t, slowSyncStack, "INFRAKIT_SIMULATOR_PROVISION_DELAY=2s")

	gone := ids[0]
	w.removeInstance(gone)
	var now []string
	testwait.For(t, 10*time.Second, "a replacement", func() bool {
		now = instanceIDs(w.instances())
		return len(now) == 3 && !slices.Contains(now, gone)
	})
	testwait.For(t, 10*time.Second, "the backends equal to the members", func() bool { return slices.Equal(v.backends(), now) })
	testwait.For(t, 20*time.Second, "the replacement authorized once running", func() bool { return slices.Equal(v.authorized(), now) })
}

// simulator starts a simulator client on w's store, killed when the test ends.
func simulator(t *testing.T, w *workdir) *plugin.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := plugin.Start(ctx, plugin.ClientConfig{Name: "simulator", Path: filepath.Join(testBin, pluginhost.BinaryName("simulator")), Env: w.env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Kill)
	return sim
}

// ingressSynced waits until a sync of the ingress has run since it was
// called: it registers a stranger on lb1 behind watch's back and waits
// until a sync takes it out again.
func ingressSynced(t *testing.T, sim *plugin.Client, v *followersView) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sim.LoadBalancer("lb1").RegisterBackends(ctx, []loadbalancer.Backend{{ID: "stranger"}}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "a sync of the ingress taking the stranger out of lb1", func() bool {
		return !slices.Contains(v.backends(), "stranger")
	})
}

// A member that vanishes keeps its authorization until its replacement is
// authorized, though syncs run every second and the replacement stays
// pending for 3s: sampled all along, the enrollment authorizes the member
// or its replacement, never neither.
func TestReplacementAuthorizedBeforeVictimRevoked(t *testing.T) {
	t.Parallel()
	w, v, ids, _ := startSettledWith(t, followerStack, "INFRAKIT_SIMULATOR_PROVISION_DELAY=3s")

	victim := ids[0]
	w.removeInstance(victim)
	heldWhilePending := false
	var replacement string
	testwait.For(t, 30*time.Second, "the replacement authorized", func() bool {
		auth := v.authorized()
		var fresh []string
		for _, id := range auth {
			if !slices.Contains(ids, id) {
				fresh = append(fresh, id)
			}
		}
		if !slices.Contains(auth, victim) && len(fresh) == 0 {
			t.Fatalf("neither the vanished member %s nor a replacement is authorized: %v", victim, auth)
		}
		if len(fresh) > 0 {
			replacement = fresh[0]
			return true
		}
		now := instanceIDs(w.instances())
		if len(now) == len(ids) && !slices.Contains(now, victim) {
			heldWhilePending = true // the replacement exists, pending, and the victim is still authorized
		}
		return false
	})
	if !heldWhilePending {
		t.Error("never saw the replacement pending while the vanished member was still authorized; the test did not test the rule")
	}
	testwait.For(t, 20*time.Second, "the vanished member's authorization revoked", func() bool {
		return !slices.Contains(v.authorized(), victim)
	})
	if got := v.authorized(); len(got) != len(ids) || !slices.Contains(got, replacement) {
		t.Fatalf("authorized %v, want the %d members with the replacement %s", got, len(ids), replacement)
	}
}

// With no replacement possible (every Provision fails) the periodic syncs,
// every second, keep the vanished member's authorization; scaling the group
// down to what runs revokes it.
func TestVanishedAuthorizationHeldBySyncs(t *testing.T) {
	t.Parallel()
	w, v, ids, _ := startSettledWith(t, followerStack, "INFRAKIT_SIMULATOR_FAILURE_RATE=1")
	sim := simulator(t, w)

	victim := ids[0]
	w.removeInstance(victim)
	testwait.For(t, 10*time.Second, "the vanished member's backend deregistered", func() bool {
		return slices.Equal(v.backends(), ids[1:])
	})
	ingressSynced(t, sim, v)
	ingressSynced(t, sim, v) // two periodic syncs since
	if got := v.authorized(); !slices.Equal(got, ids) {
		t.Fatalf("authorized %v, want still %v: no replacement is authorized", got, ids)
	}

	w.editState(func(doc *state.Document) {
		n := len(ids) - 1
		doc.Stack.Group("web").Size = &n
	})
	testwait.For(t, 20*time.Second, "the vanished member's authorization revoked once the group wants no replacement", func() bool {
		return slices.Equal(v.authorized(), ids[1:])
	})
}

// Each follower syncs on its own sync_interval: the ingress every second,
// the enrollment every hour, so a stray authorization of the enrollment
// outlives several syncs of the ingress.
func TestFollowersSyncOnTheirOwnInterval(t *testing.T) {
	t.Parallel()
	stack := strings.Replace(followerStack, "  }\n  sync_interval = \"1s\"\n}", "  }\n  sync_interval = \"1h\"\n}", 1)
	if stack == followerStack {
		t.Fatal("the enrollment's sync_interval was not found in followerStack")
	}
	w := newWorkdir(t, stack)
	w.apply()
	v := newFollowersView(t, w)
	ids := instanceIDs(w.instances())
	startSettled(t, w, testOptions(w), ids)
	sim := simulator(t, w)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stray := nfs.Authorization{SourceID: "stray", Host: "stray",
		Tags: map[string]string{tags.EnrollmentName: "nfs", tags.EnrollmentSourceID: "stray"}}
	if _, err := sim.Authorizer("disk").Authorize(ctx, stray); err != nil {
		t.Fatal(err)
	}
	ingressSynced(t, sim, v)
	ingressSynced(t, sim, v)
	if got := v.authorized(); !slices.Contains(got, "stray") {
		t.Fatalf("authorized %v: the enrollment was synced at the ingress's interval", got)
	}
}

// A sync covers every follower when full; otherwise those due and those
// that follow a group whose membership changed.
func TestFollowerSelection(t *testing.T) {
	now := time.Now()
	fs := []follower{
		{kind: "ingress", name: "site", groups: []string{"web"}, every: time.Second},
		{kind: "enrollment", name: "nfs", groups: []string{"db"}, every: time.Hour},
		{kind: "ingress", name: "admin", groups: []string{"db"}, every: time.Minute},
	}
	next := map[string]time.Time{"ingress/site": now, "enrollment/nfs": now.Add(time.Hour), "ingress/admin": now.Add(time.Minute)}
	sel, picked := selectFollowers(fs, next, nil, false, now)
	if !slices.Equal(sel.ingresses, []string{"site"}) || len(sel.enrollments) != 0 || sel.all || len(picked) != 1 {
		t.Errorf("due only: %+v", sel)
	}
	sel, picked = selectFollowers(fs, next, map[string]bool{"db": true}, false, now)
	if !slices.Equal(sel.ingresses, []string{"site", "admin"}) || !slices.Equal(sel.enrollments, []string{"nfs"}) || len(picked) != 3 {
		t.Errorf("due and following db: %+v", sel)
	}
	if sel, picked = selectFollowers(fs, next, nil, true, now); !sel.all || len(picked) != 3 {
		t.Errorf("full: %+v", sel)
	}
	if got := nextDue(fs, next); !got.Equal(now) {
		t.Errorf("nextDue = %v, want %v", got, now)
	}
	doc := &state.Document{Stack: &config.Stack{
		Ingresses:   []*config.Ingress{{Name: "site", Rules: []config.Rule{{Groups: []string{"web"}}}}},
		Enrollments: []*config.Enrollment{{Name: "nfs", Source: "db", SyncInterval: config.Duration(time.Minute)}, {Name: "freed", Source: "db"}},
	}, Enrollments: map[string]*state.ControllerStatus{"freed": {Freed: true}}}
	got := followersOf(doc)
	if len(got) != 2 || got[0].key() != "ingress/site" || got[0].every != time.Duration(config.DefaultSyncInterval) ||
		got[1].key() != "enrollment/nfs" || got[1].every != time.Minute {
		t.Errorf("followersOf = %+v", got)
	}
}
