package operation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

// describeGroups is Groups().Describe decoded into views (those it
// returns with an error too).
func describeGroups(t *testing.T, ctx context.Context, r *Runner, meta *controller.Metadata) ([]GroupView, error) {
	t.Helper()
	objs, err := r.Groups().Describe(ctx, meta)
	views := make([]GroupView, len(objs))
	for i, o := range objs {
		var derr error
		if views[i], derr = GroupViewOf(o); derr != nil {
			t.Fatal(derr)
		}
		if o.Spec.Kind != controller.KindGroup || o.Spec.Metadata.Name != views[i].Name || o.Freed != views[i].Freed {
			t.Errorf("object %+v does not agree with its view %+v", o.Spec, views[i])
		}
	}
	return views, err
}

func TestLifecycle(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 5, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	groups := r.Groups()

	// apply 5 miners and 2 pets
	p, res := planAndApply(t, ctx, r, PlanMode{})
	if p.Summary != (plan.Counts{Add: 7}) || res.Done != p.Summary {
		t.Fatalf("first apply: plan %+v, done %+v; want 7 added", p.Summary, res.Done)
	}
	if n := len(w.simulated()); n != 7 {
		t.Fatalf("simulator holds %d instances, want 7", n)
	}
	doc, err := r.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Stack == nil || doc.Stack.Name != "test" || len(doc.Groups["miners"].Instances) != 5 || len(doc.Groups["db"].Instances) != 2 {
		t.Fatalf("state after apply: stack %v, groups %v", doc.Stack, doc.Groups)
	}
	checkNoChanges(t, r)

	// group ls/describe
	views, err := describeGroups(t, ctx, r, nil)
	if err != nil || len(views) != 2 || views[0].Name != "miners" || len(views[0].Instances) != 5 || *views[0].Size != 5 {
		t.Fatalf("Describe = %+v, %v", views, err)
	}
	for _, m := range views[0].Instances {
		if m.Health != "healthy" || views[0].Tags[m.ID][tags.Group] != "miners" || views[0].Tags[m.ID]["tier"] != "miners" {
			t.Errorf("member %+v tags %v", m, views[0].Tags[m.ID])
		}
	}
	db, err := describeGroups(t, ctx, r, &controller.Metadata{Name: "db"})
	if err != nil || len(db) != 1 || db[0].Size != nil || len(db[0].Instances) != 2 {
		t.Fatalf("Describe(db) = %+v, %v", db, err)
	}
	if _, err := groups.Describe(ctx, &controller.Metadata{Name: "nope"}); !errors.Is(err, ErrNoGroup) {
		t.Errorf("Describe(nope) = %v, want ErrNoGroup", err)
	}
	if n, err := groups.Size(ctx, "db"); err != nil || n != 2 {
		t.Errorf("Size(db) = %d, %v; want the 2 logical IDs", n, err)
	}

	// scale 10: converged before returning
	res = must(t, "SetSize 10")(groups.SetSize(ctx, "miners", 10, controller.ScaleOptions{}))
	if res.Done != (plan.Counts{Add: 5}) || res.Plan.Summary != res.Done {
		t.Fatalf("SetSize = %+v; want 5 added", res.Done)
	}
	if n := len(w.simulated()); n != 12 {
		t.Fatalf("simulator holds %d after scale, want 12", n)
	}
	doc, _ = r.State(ctx)
	if *doc.Stack.Group("miners").Size != 10 || len(doc.Groups["miners"].Instances) != 10 {
		t.Fatalf("state after scale: size %d, %d recorded", *doc.Stack.Group("miners").Size, len(doc.Groups["miners"].Instances))
	}
	if n, err := groups.Size(ctx, "miners"); err != nil || n != 10 {
		t.Errorf("Size(miners) = %d, %v", n, err)
	}
	if _, err := groups.SetSize(ctx, "db", 3, controller.ScaleOptions{}); err == nil || !strings.Contains(err.Error(), "logical_ids") {
		t.Errorf("SetSize of pets: %v, want a refusal", err)
	}

	// destroy-instances of 2 leaves 8; an unknown ID does nothing
	ids := recordedIDs(doc.Groups["miners"])
	serial := doc.Serial
	if res, err := groups.DestroyInstances(ctx, "miners", []instance.ID{instance.ID(ids[0]), "compute-00000000"}); err == nil ||
		!strings.Contains(err.Error(), "compute-00000000") || res != nil {
		t.Fatalf("DestroyInstances with an unknown ID: %+v, %v; want an error naming it and no result", res, err)
	}
	if n := len(w.simulated()); n != 12 {
		t.Fatalf("a refused destroy-instances destroyed something: %d left", n)
	}
	if doc, _ = r.State(ctx); doc.Serial != serial {
		t.Fatalf("a refused destroy-instances wrote the state (serial %d -> %d)", serial, doc.Serial)
	}
	res = must(t, "DestroyInstances")(groups.DestroyInstances(ctx, "miners", []instance.ID{instance.ID(ids[0]), instance.ID(ids[1]), instance.ID(ids[0])}))
	if res.Done != (plan.Counts{Destroy: 2}) {
		t.Fatalf("DestroyInstances = %+v", res.Done)
	}
	doc, _ = r.State(ctx)
	if n := len(w.simulated()); n != 10 || *doc.Stack.Group("miners").Size != 8 || len(doc.Groups["miners"].Instances) != 8 {
		t.Fatalf("after destroy-instances: %d simulated, size %d, %d recorded; want 10, 8, 8",
			n, *doc.Stack.Group("miners").Size, len(doc.Groups["miners"].Instances))
	}
	if slices.Contains(recordedIDs(doc.Groups["miners"]), ids[0]) || slices.Contains(w.simulated(), ids[0]) {
		t.Errorf("destroyed %s still recorded or simulated", ids[0])
	}

	// free: the provider is untouched, and plan shows a resume
	before := w.simulated()
	objs, _, err := groups.Free(ctx, &controller.Metadata{Name: "miners"})
	if err != nil || len(objs) != 1 || !objs[0].Freed {
		t.Fatalf("Free = %+v, %v", objs, err)
	}
	if after := w.simulated(); !slices.Equal(before, after) {
		t.Fatalf("free touched the provider: %v -> %v", before, after)
	}
	if _, _, err := groups.Free(ctx, &controller.Metadata{Name: "nope"}); !errors.Is(err, ErrNoGroup) {
		t.Errorf("Free(nope) = %v", err)
	}
	if _, err := groups.SetSize(ctx, "miners", 3, controller.ScaleOptions{}); !errors.Is(err, controller.ErrFreed) {
		t.Errorf("SetSize of a freed group: %v, want ErrFreed", err)
	}
	p, err = r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil || p.Groups[0].Action != plan.ActionResume || len(p.Groups[0].Destroy) != 3 {
		t.Fatalf("plan of a freed group: %+v, %v; want resume destroying 3 (8 -> 5)", p.Groups, err)
	}
	// apply resumes management (the stack says 5)
	if res, err = r.Apply(ctx, p); err != nil || res.Done != (plan.Counts{Destroy: 3}) {
		t.Fatalf("resuming apply = %+v, %v", res, err)
	}
	if g := groupRecord(t, ctx, r, "miners"); g.Freed || len(g.Instances) != 5 {
		t.Fatalf("after resume: freed %v, %d recorded", g.Freed, len(g.Instances))
	}

	// destroy: nothing left in the provider or the state
	p, res = planAndApply(t, ctx, r, PlanMode{Destroy: true})
	if p.Summary != (plan.Counts{Destroy: 7}) || res.Done != p.Summary {
		t.Fatalf("destroy: plan %+v, done %+v", p.Summary, res.Done)
	}
	if n := len(w.simulated()); n != 0 {
		t.Fatalf("%d instances left after destroy", n)
	}
	doc, _ = r.State(ctx)
	if len(doc.Groups) != 0 || len(doc.Stack.Groups) != 0 {
		t.Fatalf("state after destroy: groups %v, stack groups %v", doc.Groups, doc.Stack.Groups)
	}
	// and the stack can be applied again
	if _, res = planAndApply(t, ctx, r, PlanMode{}); res.Done.Add != 7 {
		t.Fatalf("re-apply after destroy added %d, want 7", res.Done.Add)
	}
}

func TestDestroyGroup(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 3, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	if _, err := r.Groups().Destroy(ctx, &controller.Metadata{Name: "nope"}); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Destroy(nope) = %v, want ErrNoGroup", err)
	}
	res := must(t, "Destroy")(r.Groups().Destroy(ctx, &controller.Metadata{Name: "miners"}))
	if res.Done != (plan.Counts{Destroy: 3}) || res.Plan.Summary != res.Done {
		t.Fatalf("Destroy = %+v", res.Done)
	}
	if n := len(w.simulated()); n != 2 {
		t.Fatalf("%d instances left, want the 2 pets", n)
	}
	doc, _ := r.State(ctx)
	if doc.Groups["miners"] != nil || doc.Stack.Group("miners") != nil {
		t.Fatal("the destroyed group is still in the state")
	}
	// The stack still declares it: the next plan creates it again.
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil || p.Groups[0].Action != plan.ActionCreate || p.Summary != (plan.Counts{Add: 3}) {
		t.Fatalf("plan after group destroy: %+v, %v", p.Groups, err)
	}
}

// destroy-instances takes the members off the load balancer and revokes
// them before destroying them; the counts are the plan's.
func TestDestroyInstancesDeregistersAndRevokesFirst(t *testing.T) {
	w := newWorkdir(t, followed{size: 4, apiLB: "lb2"}.hcl())
	var progress events
	r := w.runner(Options{Progress: progress.add})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	members := w.simulated()
	before := w.followerSnapshot()
	if _, err := r.Groups().DestroyInstances(ctx, "cattle", []instance.ID{instance.ID(members[0]), "compute-00000000"}); err == nil ||
		!strings.Contains(err.Error(), "compute-00000000") {
		t.Fatalf("DestroyInstances with an unknown ID: %v, want an error naming it", err)
	}
	if after := w.followerSnapshot(); !slices.Equal(w.simulated(), members) || !slices.Equal(after.authorized, before.authorized) ||
		!slices.Equal(after.backends["lb1"], before.backends["lb1"]) || !slices.Equal(after.backends["lb2"], before.backends["lb2"]) {
		t.Fatalf("a refused destroy-instances changed something: %+v -> %+v", before, after)
	}

	progress.reset()
	res := must(t, "DestroyInstances")(r.Groups().DestroyInstances(ctx, "cattle", []instance.ID{instance.ID(members[0]), instance.ID(members[1])}))
	if want := (plan.Counts{Destroy: 2, Deregister: 4, Revoke: 2}); res.Done != want || res.Plan.Summary != want {
		t.Fatalf("DestroyInstances did %+v of %+v, want %+v", res.Done, res.Plan.Summary, want)
	}
	w.checkFollowers("after destroy-instances", members[2:])
	if _, backends := w.lbFile("lb2"); !slices.Equal(backends, members[2:]) {
		t.Fatalf("lb2's backends %v, want %v", backends, members[2:])
	}
	checkBreakAfterLeaving(t, progress.snapshot(), before, members[:2])
	if n, _ := r.Groups().Size(ctx, "cattle"); n != 2 {
		t.Fatalf("stored size %d, want 2", n)
	}
}

// One rule for a freed group: every verb that would act on it refuses it
// with controller.Freed's message, touching nothing (its members, their
// backends and authorizations); apply resumes it, and destroy destroys it.
// A freed ingress or enrollment is left alone by the verbs of the group
// they follow, and destroyed when asked.
func TestFreedObjectsAreRefusedExceptByApplyAndDestroy(t *testing.T) {
	w := newWorkdir(t, followerStack(3, "c1", false))
	r := w.runner(Options{})
	ctx := ctxT(t)
	groups := r.Groups()
	planAndApply(t, ctx, r, PlanMode{})
	members := w.simulated()
	if _, _, err := groups.Free(ctx, &controller.Metadata{Name: "cattle"}); err != nil {
		t.Fatal(err)
	}
	doc, _ := r.State(ctx)
	serial := doc.Serial
	want := controller.Freed(controller.KindGroup, "cattle").Error()
	for verb, err := range map[string]error{
		"SetSize":          second(groups.SetSize(ctx, "cattle", 5, controller.ScaleOptions{})),
		"DestroyInstances": second(groups.DestroyInstances(ctx, "cattle", []instance.ID{instance.ID(members[0])})),
		"StopUpdate":       groups.StopUpdate(ctx, "cattle"),
	} {
		if !errors.Is(err, controller.ErrFreed) || err.Error() != want {
			t.Errorf("%s of a freed group: %v, want %q", verb, err, want)
		}
	}
	if doc, _ := r.State(ctx); doc.Serial != serial || !slices.Equal(w.simulated(), members) {
		t.Fatalf("the refusals changed something: serial %d -> %d, members %v -> %v", serial, doc.Serial, members, w.simulated())
	}
	w.checkFollowers("after the refusals", members)

	// apply resumes it
	p, _ := planAndApply(t, ctx, r, PlanMode{})
	if p.Groups[0].Action != plan.ActionResume || groupRecord(t, ctx, r, "cattle").Freed || p.Summary != (plan.Counts{}) {
		t.Fatalf("apply of the freed group: %+v, summary %+v", p.Groups[0], p.Summary)
	}

	// A freed ingress and enrollment: scaling the group touches neither.
	for kind, c := range map[string]controller.Controller{"ingress": r.Ingresses(), "enrollment": r.Enrollments()} {
		if objs, _, err := c.Free(ctx, &controller.Metadata{Name: "nope"}); err == nil || objs != nil {
			t.Errorf("%s Free(nope) = %+v, %v; want an error and no object", kind, objs, err)
		}
	}
	if _, _, err := r.Ingresses().Free(ctx, &controller.Metadata{Name: "site"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Enrollments().Free(ctx, &controller.Metadata{Name: "nfs"}); err != nil {
		t.Fatal(err)
	}
	res := must(t, "SetSize 4")(groups.SetSize(ctx, "cattle", 4, controller.ScaleOptions{}))
	if res.Done != (plan.Counts{Add: 1}) {
		t.Fatalf("SetSize with freed followers did %+v, want 1 added only", res.Done)
	}
	w.checkFollowers("after a scale with freed followers", members)
	// destroy acts on them
	if res := must(t, "ingress Destroy")(r.Ingresses().Destroy(ctx, &controller.Metadata{Name: "site"})); res.Done != (plan.Counts{Unpublish: 1, Deregister: 3}) {
		t.Fatalf("destroy of the freed ingress did %+v", res.Done)
	}
	if res := must(t, "enrollment Destroy")(r.Enrollments().Destroy(ctx, &controller.Metadata{Name: "nfs"})); res.Done != (plan.Counts{Revoke: 3}) {
		t.Fatalf("destroy of the freed enrollment did %+v", res.Done)
	}
	if ports, _ := w.lbFile("lb1"); len(ports) != 0 {
		t.Fatalf("lb1 routes %v after the ingress's destroy", ports)
	}
	w.checkFollowers("after the followers' destroy", nil)
	// apply brings both back, and the stack's size
	if _, res := planAndApply(t, ctx, r, PlanMode{}); res.Done != (plan.Counts{Destroy: 1, Publish: 1, Register: 3, Authorize: 3}) {
		t.Fatalf("apply after the followers' destroy did %+v", res.Done)
	}
	w.checkFollowers("after apply", w.simulated())

	// a freed group is destroyed when asked
	if _, _, err := groups.Free(ctx, &controller.Metadata{Name: "cattle"}); err != nil {
		t.Fatal(err)
	}
	res = must(t, "Destroy")(groups.Destroy(ctx, &controller.Metadata{Name: "cattle"}))
	if res.Done != (plan.Counts{Destroy: 3, Deregister: 3, Revoke: 3}) || len(w.simulated()) != 0 {
		t.Fatalf("destroy of the freed group did %+v, %d left", res.Done, len(w.simulated()))
	}
	w.checkFollowers("after the group's destroy", nil)
}

func second[T any](_ T, err error) error { return err }

// A group the state records without its configuration (no stack stored:
// a state written by hand, or by an old infrakit) cannot be acted on, since
// its provider is unknown: every verb says so, none panics, and describe
// shows the recorded members.
func TestGroupWithoutConfigurationIsRefused(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 1, "v1"))
	ctx := ctxT(t)
	doc := state.NewDocument()
	doc.Group("old").Instances = []state.Instance{{ID: "compute-0000abcd", State: string(instance.StateRunning)}}
	if err := state.NewLocal(filepath.Join(w.dir, StateFile)).Write(ctx, doc); err != nil {
		t.Fatal(err)
	}
	r := w.runner(Options{})
	groups := r.Groups()
	for verb, err := range map[string]error{
		"SetSize":          second(groups.SetSize(ctx, "old", 2, controller.ScaleOptions{})),
		"DestroyInstances": second(groups.DestroyInstances(ctx, "old", []instance.ID{"compute-0000abcd"})),
		"Destroy":          second(groups.Destroy(ctx, &controller.Metadata{Name: "old"})),
		"StopUpdate":       groups.StopUpdate(ctx, "old"),
	} {
		if err == nil || !strings.Contains(err.Error(), "configuration is not in the state") {
			t.Errorf("%s: %v, want a refusal saying the configuration is not in the state", verb, err)
		}
	}
	if _, _, err := groups.Free(ctx, &controller.Metadata{Name: "old"}); err == nil || !strings.Contains(err.Error(), "no stack is stored") {
		t.Errorf("Free: %v, want a refusal saying no stack is stored", err)
	}
	views, err := describeGroups(t, ctx, r, &controller.Metadata{Name: "old"})
	if err == nil || len(views) != 1 || len(views[0].Instances) != 1 || views[0].Instances[0].ID != "compute-0000abcd" {
		t.Errorf("Describe: %+v, %v; want the recorded member and an error", views, err)
	}
}

// The controller surface of groups: Spec lists what is stored, Plan says
// what Commit would do and changes nothing, Commit enforces a spec (with
// its followers), and Commit of Destroy destroys the group.
func TestGroupCommitEnforcesASpec(t *testing.T) {
	w := newWorkdir(t, followerStack(2, "c1", false))
	r := w.runner(Options{})
	ctx := ctxT(t)
	groups := r.Groups()
	planAndApply(t, ctx, r, PlanMode{})
	specs, err := groups.Spec(ctx)
	if err != nil || len(specs) != 1 || specs[0].String() != "group.cattle" {
		t.Fatalf("Spec = %+v, %v", specs, err)
	}
	var cfg config.Group
	if err := json.Unmarshal(specs[0].Properties, &cfg); err != nil {
		t.Fatal(err)
	}
	size := 3
	cfg.Size = &size
	spec := specs[0]
	if spec.Properties, err = json.Marshal(&cfg); err != nil {
		t.Fatal(err)
	}
	doc, _ := r.State(ctx)
	p, err := groups.Plan(ctx, controller.Enforce, spec)
	if want := (plan.Counts{Add: 1, Register: 1, Authorize: 1}); err != nil || p.Summary != want {
		t.Fatalf("Plan = %+v, %v; want %+v", p.Summary, err, want)
	}
	if after, _ := r.State(ctx); after.Serial != doc.Serial || len(w.simulated()) != 2 {
		t.Fatal("Plan changed something")
	}
	res := must(t, "Commit")(groups.Commit(ctx, controller.Enforce, spec))
	if res.Done != p.Summary {
		t.Fatalf("Commit did %+v, planned %+v", res.Done, p.Summary)
	}
	w.checkFollowers("after Commit", w.simulated())
	if n, _ := groups.Size(ctx, "cattle"); n != 3 || len(w.simulated()) != 3 {
		t.Fatalf("stored size %d, %d members; want 3", n, len(w.simulated()))
	}
	res = must(t, "Commit Destroy")(groups.Commit(ctx, controller.Destroy, spec))
	if res.Done != (plan.Counts{Destroy: 3, Deregister: 3, Revoke: 3}) || len(w.simulated()) != 0 {
		t.Fatalf("Commit of Destroy did %+v, %d left", res.Done, len(w.simulated()))
	}
	w.checkFollowers("after Commit of Destroy", nil)
}
