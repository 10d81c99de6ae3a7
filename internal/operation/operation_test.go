package operation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
)

// testBin holds the real provider binaries TestMain builds, and the
// configured test provider of pluginhost (which answers what its provider
// block configured as metrics queries).
var testBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "operation-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBin = dir
	for name, pkg := range map[string]string{
		"simulator":  "github.com/infrakit/infrakit/plugins/simulator",
		"vanilla":    "github.com/infrakit/infrakit/plugins/vanilla",
		"configured": "github.com/infrakit/infrakit/internal/pluginhost/testdata/configured",
	} {
		out := filepath.Join(dir, pluginhost.BinaryName(name))
		cmd := exec.Command("go", "build", "-o", out, pkg)
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

// planAndApply plans the stack files (or the destroy) and applies the plan;
// any failed step fails the test.
func planAndApply(t *testing.T, ctx context.Context, r *Runner, mode PlanMode) (*plan.Plan, *controller.Result) {
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
	if err := res.Err(); err != nil {
		t.Fatalf("Apply: steps failed: %v", err)
	}
	return p, res
}

// must returns what checks a verb's outcome: the test fails unless the
// verb succeeded with every step done. (A closure, so that the verb's two
// results can be passed as they are.)
func must(t *testing.T, what string) func(*controller.Result, error) *controller.Result {
	return func(res *controller.Result, err error) *controller.Result {
		t.Helper()
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}
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

// events collects the executor's progress events.
type events struct {
	mu  sync.Mutex
	all []execute.Event
}

func (e *events) add(ev execute.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

// of are the events of steps of kind on object.
func (e *events) of(object string, kind plan.StepKind) []execute.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []execute.Event
	for _, ev := range e.all {
		if ev.Step.Object == object && ev.Step.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func (e *events) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = nil
}

func (e *events) snapshot() []execute.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}

func TestApplyRollsOutOfDateMembers(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 3, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	old := w.simulated()

	w.writeStack(fmt.Sprintf(stackTemplate, 3, "v2"))
	p, res := planAndApply(t, ctx, r, PlanMode{})
	if p.Summary.Roll != 3 || res.Done != p.Summary || res.Done.Add != 0 || res.Done.Destroy != 0 {
		t.Fatalf("roll: plan %+v, done %+v; want 3 rolled and nothing else", p.Summary, res.Done)
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
	checkNoChanges(t, r)
}

// An interrupt (Ctrl-C) while provisions are in flight loses nothing: the
// calls in flight finish, the state records every instance the simulator
// holds, and a second apply converges without duplicates.
//
// Provisions of a group go to the provider in jobs of at most 50 members
// made one after another, and their events come when a job ends: with 400
// miners and 2 call slots, the interrupt (at the 10th event) comes when a
// job of 50 has ended and at least 300 provisions are not begun, however
// fast the simulator makes them.
func TestInterruptedApplyRecordsEverythingCreated(t *testing.T) {
	const miners = 400
	const total = miners + 2 // and the two db pets
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, miners, "v1"))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	provisioned := 0
	r := w.runner(Options{
		Parallelism: 2,
		Progress: func(ev execute.Event) {
			if ev.Step.Kind == plan.StepProvision && ev.Status == execute.StatusDone {
				if provisioned++; provisioned == 10 {
					cancel() // as Ctrl-C does
				}
			}
		},
	})
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, p)
	if !errors.Is(err, context.Canceled) || res == nil {
		t.Fatalf("interrupted Apply: %+v, %v; want a result and context.Canceled", res, err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "interrupted: ") || strings.Contains(msg, "context canceled") {
		t.Errorf("interrupted Apply says %q; want the user's words, not Go's", msg)
	}
	created := w.simulated()
	if res.Done.Add < 10 || res.Done.Add != len(created) || len(created) >= total || res.NotRun == 0 {
		t.Fatalf("done %d (%d simulated, %d not run): want the interrupt to stop the apply early, and every instance made counted",
			res.Done.Add, len(created), res.NotRun)
	}
	t.Logf("interrupted after %d of %d provisions (%d steps not run)", len(created), total, res.NotRun)
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
	if p.Summary.Add != total-len(created) || res.Done != p.Summary {
		t.Fatalf("re-apply: plan %+v, done %+v; want %d to add", p.Summary, res.Done, total-len(created))
	}
	if n := len(w.simulated()); n != total {
		t.Fatalf("%d instances after re-apply, want %d", n, total)
	}
	if g := groupRecord(t, bg, r2, "miners"); len(g.Instances) != miners {
		t.Fatalf("%d miners recorded, want %d", len(g.Instances), miners)
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
	if len(res.Failed) == 0 || res.Done.Add+len(res.Failed) != 32 {
		t.Fatalf("done %+v, %d failed: want failures, and added + failed = 32", res.Done, len(res.Failed))
	}
	for _, f := range res.Failed {
		if f.Step.Kind != plan.StepProvision || f.Step.Group == "" || !strings.Contains(f.Err.Error(), "simulated provision failure") {
			t.Errorf("failure %+v", f)
		}
	}
	doc, _ := r.State(ctx)
	n := len(recordedIDs(doc.Groups["miners"])) + len(recordedIDs(doc.Groups["db"]))
	if n != res.Done.Add || n != len(w.simulated()) {
		t.Fatalf("recorded %d, added %d, simulated %d: want equal", n, res.Done.Add, len(w.simulated()))
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

func TestNoOpPlanObservesWithoutHealth(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 4, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	// An unhealthy member does not show in a no-op plan (watch replaces it)
	// but does with PlanMode.Health, since replace_unhealthy is the default.
	// The pets use the simulator flavor, which reads health from the file.
	id := recordedIDs(groupRecord(t, ctx, r, "db"))[0]
	w.setHealth(id, "unhealthy")
	st := load(t, ctx, r)
	p, err := r.Plan(ctx, st, PlanMode{})
	if err != nil || p.HasChanges() {
		t.Fatalf("plan: %+v, %v; want no changes", p.Summary, err)
	}
	p, err = r.Plan(ctx, st, PlanMode{Health: true})
	if err != nil || p.Summary != (plan.Counts{Replace: 1}) {
		t.Fatalf("plan with health: %+v, %v; want the unhealthy member replaced", p.Summary, err)
	}
	for _, gc := range p.Groups {
		if gc.Group == "db" && (len(gc.Replace) != 1 || string(gc.Replace[0].Old) != id) {
			t.Fatalf("db's plan %+v, want %s replaced", gc, id)
		}
	}
}
