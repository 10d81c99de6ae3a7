package operation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

// testBin holds the real provider binaries TestMain builds.
var testBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "operation-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBin = dir
	for _, name := range []string{"simulator", "vanilla"} {
		out := filepath.Join(dir, pluginhost.BinaryName(name))
		cmd := exec.Command("go", "build", "-o", out, "github.com/infrakit/infrakit/plugins/"+name)
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", name, err, b)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code) // goleak reports leaks through the code
	}))
}

const stackTemplate = `
stack "test" {}

provider "simulator" {}
provider "vanilla" {}

group "miners" {
  size = %d
  tags = { project = "e2e" }
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = %q }
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo miner"], tags = { tier = "miners" } }
  }
}

group "db" {
  logical_ids = ["10.0.0.1", "10.0.0.2"]
  instance {
    provider   = simulator
    type       = "compute"
    properties = {}
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
}
`

// workdir is a stack directory with the providers installed by init.
type workdir struct {
	t   *testing.T
	dir string
}

func newWorkdir(t *testing.T, stack string) *workdir {
	t.Helper()
	w := &workdir{t: t, dir: t.TempDir()}
	w.writeStack(stack)
	_, err := pluginhost.Init(ctxT(t), w.dir, []string{"simulator", "vanilla"}, pluginhost.InitOptions{
		SearchDirs: pluginhost.SearchDirs([]string{testBin}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *workdir) writeStack(src string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, "main.hcl"), []byte(src), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// simulated lists the instance files the simulator holds.
func (w *workdir) simulated() []string {
	w.t.Helper()
	files, err := filepath.Glob(filepath.Join(w.dir, ".infrakit", "simulator", "instances", "compute", "*.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	var ids []string
	for _, f := range files {
		ids = append(ids, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	return ids
}

func (w *workdir) runner(opts Options) *Runner {
	w.t.Helper()
	opts.WorkDir = w.dir
	r, err := New(ctxT(w.t), opts)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { r.Close() })
	return r
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func load(t *testing.T, ctx context.Context, r *Runner) *config.Stack {
	t.Helper()
	st, _, diags := r.LoadStack(ctx)
	if diags.HasErrors() {
		t.Fatalf("LoadStack: %s", diags.Error())
	}
	return st
}

func planAndApply(t *testing.T, ctx context.Context, r *Runner, mode PlanMode) (*plan.Plan, *ApplyResult) {
	t.Helper()
	var st *config.Stack
	if !mode.Destroy {
		st = load(t, ctx, r)
	}
	p, err := r.Plan(ctx, st, mode)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, p)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return p, res
}

func groupRecord(t *testing.T, ctx context.Context, r *Runner, name string) *state.GroupStatus {
	t.Helper()
	doc, err := r.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return doc.Groups[name]
}

func recordedIDs(g *state.GroupStatus) []string {
	var ids []string
	if g != nil {
		for _, in := range g.Instances {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

func TestLifecycle(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 5, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)

	// apply 5 miners and 2 pets
	p, res := planAndApply(t, ctx, r, PlanMode{})
	if p.Summary.Add != 7 || res.Created != 7 || res.Destroyed != 0 || len(res.Failed) != 0 {
		t.Fatalf("first apply: plan %+v, result %+v; want 7 created", p.Summary, res)
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

	// A second plan is a no-op.
	st := load(t, ctx, r)
	p, err = r.Plan(ctx, st, PlanMode{})
	if err != nil || p.HasChanges() {
		t.Fatalf("plan after apply: %+v, %v; want no changes", p, err)
	}

	// group ls/describe
	views, err := r.Groups(ctx)
	if err != nil || len(views) != 2 || views[0].Name != "miners" || len(views[0].Instances) != 5 || *views[0].Size != 5 {
		t.Fatalf("Groups = %+v, %v", views, err)
	}
	for _, m := range views[0].Instances {
		if m.Health != "healthy" || views[0].Tags[m.ID][tags.Group] != "miners" || views[0].Tags[m.ID]["tier"] != "miners" {
			t.Errorf("member %+v tags %v", m, views[0].Tags[m.ID])
		}
	}
	db, err := r.Group(ctx, "db")
	if err != nil || db.Size != nil || len(db.Instances) != 2 {
		t.Fatalf("Group(db) = %+v, %v", db, err)
	}
	if _, err := r.Group(ctx, "nope"); !errors.Is(err, ErrNoGroup) {
		t.Errorf("Group(nope) = %v, want ErrNoGroup", err)
	}

	// scale 10: converged before returning
	res, err = r.Scale(ctx, "miners", 10)
	if err != nil || res.Created != 5 {
		t.Fatalf("Scale = %+v, %v; want 5 created", res, err)
	}
	if n := len(w.simulated()); n != 12 {
		t.Fatalf("simulator holds %d after scale, want 12", n)
	}
	doc, _ = r.State(ctx)
	if *doc.Stack.Group("miners").Size != 10 || len(doc.Groups["miners"].Instances) != 10 {
		t.Fatalf("state after scale: size %d, %d recorded", *doc.Stack.Group("miners").Size, len(doc.Groups["miners"].Instances))
	}
	if _, err := r.Scale(ctx, "db", 3); err == nil || !strings.Contains(err.Error(), "logical_ids") {
		t.Errorf("Scale of pets: %v, want a refusal", err)
	}

	// destroy-instances of 2 leaves 8; an unknown ID does nothing
	ids := recordedIDs(doc.Groups["miners"])
	if _, err := r.DestroyInstances(ctx, "miners", []instance.ID{instance.ID(ids[0]), "compute-00000000"}); err == nil ||
		!strings.Contains(err.Error(), "compute-00000000") {
		t.Fatalf("DestroyInstances with an unknown ID: %v, want an error naming it", err)
	}
	if n := len(w.simulated()); n != 12 {
		t.Fatalf("a refused destroy-instances destroyed something: %d left", n)
	}
	res, err = r.DestroyInstances(ctx, "miners", []instance.ID{instance.ID(ids[0]), instance.ID(ids[1])})
	if err != nil || res.Destroyed != 2 {
		t.Fatalf("DestroyInstances = %+v, %v", res, err)
	}
	doc, _ = r.State(ctx)
	if n := len(w.simulated()); n != 10 || *doc.Stack.Group("miners").Size != 8 || len(doc.Groups["miners"].Instances) != 8 {
		t.Fatalf("after destroy-instances: %d simulated, size %d, %d recorded; want 10, 8, 8",
			n, *doc.Stack.Group("miners").Size, len(doc.Groups["miners"].Instances))
	}
	if slices.Contains(recordedIDs(doc.Groups["miners"]), ids[0]) {
		t.Errorf("destroyed %s still recorded", ids[0])
	}

	// free: the provider is untouched, and plan shows a resume
	before := w.simulated()
	if err := r.FreeGroup(ctx, "miners"); err != nil {
		t.Fatal(err)
	}
	if after := w.simulated(); !slices.Equal(before, after) {
		t.Fatalf("free touched the provider: %v -> %v", before, after)
	}
	if err := r.FreeGroup(ctx, "nope"); !errors.Is(err, ErrNoGroup) {
		t.Errorf("FreeGroup(nope) = %v", err)
	}
	if _, err := r.Scale(ctx, "miners", 3); err == nil || !strings.Contains(err.Error(), "free") {
		t.Errorf("Scale of a freed group: %v, want a refusal", err)
	}
	st = load(t, ctx, r)
	p, err = r.Plan(ctx, st, PlanMode{})
	if err != nil || p.Groups[0].Action != plan.ActionResume || len(p.Groups[0].Destroy) != 3 {
		t.Fatalf("plan of a freed group: %+v, %v; want resume destroying 3 (8 -> 5)", p.Groups, err)
	}
	// apply resumes management (the stack says 5)
	if res, err = r.Apply(ctx, p); err != nil || res.Destroyed != 3 {
		t.Fatalf("resuming apply = %+v, %v", res, err)
	}
	if g := groupRecord(t, ctx, r, "miners"); g.Freed || len(g.Instances) != 5 {
		t.Fatalf("after resume: freed %v, %d recorded", g.Freed, len(g.Instances))
	}

	// destroy: nothing left in the provider or the state
	p, res = planAndApply(t, ctx, r, PlanMode{Destroy: true})
	if p.Summary.Destroy != 7 || res.Destroyed != 7 {
		t.Fatalf("destroy: plan %+v, result %+v", p.Summary, res)
	}
	if n := len(w.simulated()); n != 0 {
		t.Fatalf("%d instances left after destroy", n)
	}
	doc, _ = r.State(ctx)
	if len(doc.Groups) != 0 || len(doc.Stack.Groups) != 0 {
		t.Fatalf("state after destroy: groups %v, stack groups %v", doc.Groups, doc.Stack.Groups)
	}
	// and the stack can be applied again
	if _, res = planAndApply(t, ctx, r, PlanMode{}); res.Created != 7 {
		t.Fatalf("re-apply after destroy created %d, want 7", res.Created)
	}
}

func TestApplyRollsOutOfDateMembers(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 3, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	old := w.simulated()

	w.writeStack(fmt.Sprintf(stackTemplate, 3, "v2"))
	p, res := planAndApply(t, ctx, r, PlanMode{})
	if p.Summary.Roll != 3 || res.Rolled != 3 || res.Created != 0 || res.Destroyed != 0 {
		t.Fatalf("roll: plan %+v, result %+v; want 3 rolled", p.Summary, res)
	}
	now := w.simulated()
	if len(now) != 5 {
		t.Fatalf("%d instances after the roll, want 5", len(now))
	}
	replaced := 0
	for _, id := range now {
		if !slices.Contains(old, id) {
			replaced++
		}
	}
	if replaced != 3 {
		t.Errorf("%d instances replaced, want the 3 miners", replaced)
	}
	st := load(t, ctx, r)
	if p, err := r.Plan(ctx, st, PlanMode{}); err != nil || p.HasChanges() {
		t.Fatalf("plan after the roll: %+v, %v; want no changes", p.Summary, err)
	}
}

func TestInterruptedApplyRecordsEverythingCreated(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 60, "v1"))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var done atomic.Int32
	r := w.runner(Options{
		Parallelism: 4,
		// Slow provisions keep calls in flight when the interrupt comes.
		HostEnv: []string{"INFRAKIT_SIMULATOR_PROVISION_DELAY=1h"},
		Progress: func(p Progress) {
			if p.Action == "create" && done.Add(1) == 10 {
				cancel() // as Ctrl-C does
			}
		},
	})
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, p)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Apply: %v, want context.Canceled", err)
	}
	created := w.simulated()
	if res.Created < 10 || len(created) >= 62 {
		t.Fatalf("created %d (%d simulated): want the interrupt to stop the apply early", res.Created, len(created))
	}
	bg := ctxT(t)
	doc, err := r.State(bg)
	if err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, g := range doc.Groups {
		recorded = append(recorded, recordedIDs(g)...)
	}
	slices.Sort(recorded)
	if !slices.Equal(recorded, created) {
		t.Fatalf("state records %d instances, the simulator holds %d: every created instance must be recorded", len(recorded), len(created))
	}
	r.Close()

	// Re-applying converges without duplicates.
	r2 := w.runner(Options{})
	p, res = planAndApply(t, bg, r2, PlanMode{})
	if p.Summary.Add != 62-len(created) || res.Created != p.Summary.Add {
		t.Fatalf("re-apply: plan %+v, result %+v; want %d to add", p.Summary, res, 62-len(created))
	}
	if n := len(w.simulated()); n != 62 {
		t.Fatalf("%d instances after re-apply, want 62", n)
	}
	if g := groupRecord(t, bg, r2, "miners"); len(g.Instances) != 60 {
		t.Fatalf("%d miners recorded, want 60", len(g.Instances))
	}
}

func TestFailedProvisionsAreReportedAndRecorded(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 30, "v1"))
	r := w.runner(Options{HostEnv: []string{"INFRAKIT_SIMULATOR_FAILURE_RATE=0.3"}})
	ctx := ctxT(t)
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) == 0 || res.Created+len(res.Failed) != 32 {
		t.Fatalf("result %+v: want failures, and created + failed = 32", res)
	}
	for _, f := range res.Failed {
		if f.Group == "" || !strings.Contains(f.Err.Error(), "simulated provision failure") {
			t.Errorf("failure %+v", f)
		}
	}
	doc, _ := r.State(ctx)
	n := len(recordedIDs(doc.Groups["miners"])) + len(recordedIDs(doc.Groups["db"]))
	if n != res.Created || n != len(w.simulated()) {
		t.Fatalf("recorded %d, created %d, simulated %d: want equal", n, res.Created, len(w.simulated()))
	}
}

func TestStalePlanIsRefused(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 2, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	st := load(t, ctx, r)
	p1, err := r.Plan(ctx, st, PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	// Save and load it as `plan -out` and `apply FILE` do.
	var buf bytes.Buffer
	if err := p1.Save(&buf); err != nil {
		t.Fatal(err)
	}
	saved, err := plan.Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	planAndApply(t, ctx, r, PlanMode{})
	if _, err := r.Apply(ctx, saved); !errors.Is(err, plan.ErrStalePlan) {
		t.Fatalf("Apply of a stale plan: %v, want ErrStalePlan", err)
	}
	if n := len(w.simulated()); n != 4 {
		t.Fatalf("the stale plan acted: %d instances, want 4", n)
	}
}

func TestApplyWaitsForTheLockAndNamesTheHolder(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 1, "v1"))
	r := w.runner(Options{LockTimeout: 150 * time.Millisecond})
	ctx := ctxT(t)
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	other := state.NewLocal(filepath.Join(w.dir, StateFile))
	unlock, err := other.Lock(ctx, state.LockInfo{Operation: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Apply(ctx, p)
	unlock()
	var locked *state.LockedError
	if !errors.As(err, &locked) || !strings.Contains(err.Error(), `"watch"`) {
		t.Fatalf("Apply while locked: %v, want a LockedError naming the watch", err)
	}
	if n := len(w.simulated()); n != 0 {
		t.Fatalf("Apply acted without the lock: %d instances", n)
	}
}

func TestWithoutInitTheErrorSaysRunInit(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(fmt.Sprintf(stackTemplate, 1, "v1")), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := New(ctxT(t), Options{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, _, diags := r.LoadStack(ctxT(t))
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "infrakit init") {
		t.Fatalf("LoadStack without init: %v, want a diagnostic saying to run infrakit init", diags)
	}
}

func TestDestroyGroup(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 3, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	res, err := r.DestroyGroup(ctx, "miners")
	if err != nil || res.Destroyed != 3 {
		t.Fatalf("DestroyGroup = %+v, %v", res, err)
	}
	if n := len(w.simulated()); n != 2 {
		t.Fatalf("%d instances left, want the 2 pets", n)
	}
	doc, _ := r.State(ctx)
	if doc.Groups["miners"] != nil || doc.Stack.Group("miners") != nil {
		t.Fatal("the destroyed group is still in the state")
	}
	// The stack still declares it: the next plan creates it again.
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil || p.Groups[0].Action != plan.ActionCreate || p.Summary.Add != 3 {
		t.Fatalf("plan after group destroy: %+v, %v", p.Groups, err)
	}
}

func TestNoOpPlanObservesWithoutHealth(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 4, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	// An unhealthy member does not show in a no-op plan (watch replaces it)
	// but does with PlanMode.Health, since replace_unhealthy is the default.
	// The pets use the simulator flavor, which reads health from the file.
	id := recordedIDs(groupRecord(t, ctx, r, "db"))[0]
	path := filepath.Join(w.dir, ".infrakit", "simulator", "instances", "compute", id+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`{`), []byte(`{"health":"unhealthy",`), 1)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil || p.HasChanges() {
		t.Fatalf("plan: %+v, %v; want no changes", p.Summary, err)
	}
	p, err = r.Plan(ctx, st, PlanMode{Health: true})
	if err != nil || p.Summary.Add != 1 || p.Summary.Destroy != 1 {
		t.Fatalf("plan with health: %+v, %v; want the unhealthy member replaced", p.Summary, err)
	}
}
