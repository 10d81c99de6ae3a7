package group

import (
	"context"
	"encoding/json"
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
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// testBin holds the provider binaries TestMain builds (the simulator, and
// vanilla when its package exists in the tree).
var testBin string

// TestMain builds the real providers the controller tests run against and
// checks that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "group-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBin = dir
	for _, name := range []string{"simulator", "vanilla"} {
		if name == "vanilla" && !packageExists("vanilla") {
			continue
		}
		out := filepath.Join(dir, "infrakit-provider-"+name)
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

// packageExists reports whether plugins/<name> has Go files (vanilla is
// written beside this package and may not exist yet).
func packageExists(name string) bool {
	matches, _ := filepath.Glob(filepath.Join("..", "..", "..", "plugins", name, "*.go"))
	return len(matches) > 0
}

// startProvider launches a built provider with a fresh simulator store and
// the given extra environment; it is killed when the test ends.
func startProvider(t *testing.T, name, simDir string, env ...string) *plugin.Client {
	t.Helper()
	path := filepath.Join(testBin, "infrakit-provider-"+name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("provider %s not built: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name: name,
		Path: path,
		Env:  append([]string{"INFRAKIT_SIMULATOR_DIR=" + simDir}, env...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// sim is one simulator process and its store.
type sim struct {
	client *plugin.Client
	dir    string
}

func newSim(t *testing.T, env ...string) *sim {
	dir := t.TempDir()
	return &sim{client: startProvider(t, "simulator", dir, env...), dir: dir}
}

// all lists every compute instance in the store, whatever its tags.
func (s *sim) all(t *testing.T) []instance.Description {
	t.Helper()
	descs, err := s.client.Instance("compute").DescribeInstances(context.Background(), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return descs
}

// setField edits an instance file the way a person injects a fault.
func (s *sim) setField(t *testing.T, id instance.ID, field, value string) {
	t.Helper()
	path := filepath.Join(s.dir, "instances", "compute", string(id)+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec[field] = value
	if b, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func cattleGroup(name string, size int, props string) *config.Group {
	return &config.Group{
		Name:     name,
		Size:     &size,
		Tags:     map[string]string{"project": "test", "tier": "user"},
		Instance: config.Plugin{Provider: "simulator", Type: "compute", Properties: json.RawMessage(props)},
		Flavors: []config.Plugin{{Provider: "simulator", Type: "simulator",
			Properties: json.RawMessage(`{"tags":{"tier":"flavor"}}`)}},
		Update: config.DefaultUpdatePolicy(),
		Health: config.DefaultHealthPolicy(),
	}
}

func petGroup(name string, props string, ids ...string) *config.Group {
	g := cattleGroup(name, 0, props)
	g.Size, g.LogicalIDs = nil, ids
	return g
}

// recorder collects what a controller reports.
type recorder struct {
	mu        sync.Mutex
	records   int
	created   []Member
	destroyed []instance.ID
	events    []Event
}

func (r *recorder) record(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records++
	r.created = append(r.created, rec.Created...)
	r.destroyed = append(r.destroyed, rec.Destroyed...)
}

func (r *recorder) progress(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func newController(t *testing.T, s *sim, g *config.Group, opts Options, r *recorder) *Controller {
	t.Helper()
	plugins := Plugins{Instance: s.client.Instance(g.Instance.Type)}
	for _, f := range g.Flavors {
		plugins.Flavors = append(plugins.Flavors, Flavor{Plugin: s.client.Flavor(f.Type), Properties: f.Properties})
	}
	opts.Stack = "teststack"
	if r != nil {
		opts.Record, opts.Progress = r.record, r.progress
	}
	opts.PollInterval = 20 * time.Millisecond
	c, err := New(g, plugins, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func liveIDs(t *testing.T, c *Controller) []instance.ID {
	t.Helper()
	members, err := c.Observe(ctxT(t), false)
	if err != nil {
		t.Fatal(err)
	}
	var ids []instance.ID
	for _, m := range Live(members) {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestControllerCreatesTaggedMembersAndShrinks(t *testing.T) {
	s := newSim(t)
	r := &recorder{}
	g := cattleGroup("miners", 5, `{"note":"custom"}`)
	c := newController(t, s, g, Options{}, r)
	ctx := ctxT(t)

	res, err := c.Converge(ctx)
	if err != nil || res.Created != 5 || res.Destroyed != 0 || len(res.Failed) != 0 {
		t.Fatalf("Converge = %+v, %v; want 5 created", res, err)
	}
	all := s.all(t)
	if len(all) != 5 {
		t.Fatalf("simulator holds %d instances, want 5", len(all))
	}
	hash := g.ConfigHash()
	for _, d := range all {
		want := map[string]string{
			"project": "test", "tier": "flavor", // the flavor's tag wins over the user's
			tags.Stack: "teststack", tags.Group: "miners", tags.ConfigHash: hash,
		}
		for k, v := range want {
			if d.Tags[k] != v {
				t.Errorf("%s: tag %s = %q, want %q (tags %v)", d.ID, k, d.Tags[k], v, d.Tags)
			}
		}
	}
	if len(r.created) != 5 || len(r.events) != 5 {
		t.Fatalf("recorded %d created, %d events; want 5 and 5", len(r.created), len(r.events))
	}
	for i, ev := range r.events {
		if ev.Action != ActionCreate || ev.Done != i+1 || ev.Total != 5 || ev.Group != "miners" || ev.ID == "" {
			t.Errorf("event %d = %+v", i, ev)
		}
	}

	// Converged: nothing more to do, and one member per recorded create.
	if res, err := c.Converge(ctx); err != nil || res.Created+res.Destroyed+res.Rolled != 0 {
		t.Fatalf("second Converge = %+v, %v; want nothing done", res, err)
	}

	// Shrink: the unhealthy member goes first.
	sick := all[3].ID
	s.setField(t, sick, "health", "unhealthy")
	if err := c.SetSize(2); err != nil {
		t.Fatal(err)
	}
	g2 := c.Group()
	g2.Health.ReplaceUnhealthy = false
	c2 := newController(t, s, g2, Options{}, r)
	res, err = c2.Converge(ctx)
	if err != nil || res.Destroyed != 3 || res.Created != 0 {
		t.Fatalf("shrinking Converge = %+v, %v; want 3 destroyed", res, err)
	}
	left := liveIDs(t, c2)
	if len(left) != 2 || slices.Contains(left, sick) {
		t.Fatalf("left %v; want 2 members without the unhealthy %s", left, sick)
	}
	if !slices.Contains(r.destroyed, sick) {
		t.Errorf("destroyed %v does not name the unhealthy %s", r.destroyed, sick)
	}
}

func TestControllerObserveHealth(t *testing.T) {
	s := newSim(t)
	c := newController(t, s, cattleGroup("web", 3, `{}`), Options{}, nil)
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	ids := liveIDs(t, c)
	s.setField(t, ids[0], "health", "unhealthy")
	s.setField(t, ids[1], "health", "unknown")

	members, err := c.Observe(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	got := map[instance.ID]flavor.Health{}
	for _, m := range members {
		got[m.ID] = m.Health
	}
	want := map[instance.ID]flavor.Health{ids[0]: flavor.HealthUnhealthy, ids[1]: flavor.HealthUnknown, ids[2]: flavor.HealthHealthy}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("health = %v, want %v", got, want)
	}
	members, err = c.Observe(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Health != flavor.HealthUnknown {
			t.Errorf("without health %s is %s, want unknown", m.ID, m.Health)
		}
	}

	// replace_unhealthy (the default) replaces the unhealthy member.
	res, err := c.Converge(ctx)
	if err != nil || res.Created != 1 || res.Destroyed != 1 {
		t.Fatalf("Converge = %+v, %v; want the unhealthy member replaced", res, err)
	}
	if left := liveIDs(t, c); len(left) != 3 || slices.Contains(left, ids[0]) {
		t.Fatalf("members %v: want 3 without %s", left, ids[0])
	}
}

func TestControllerPets(t *testing.T) {
	s := newSim(t)
	g := petGroup("db", `{"disk_gb":100}`, "10.0.0.1", "10.0.0.2", "10.0.0.3")
	c := newController(t, s, g, Options{}, nil)
	ctx := ctxT(t)
	res, err := c.Converge(ctx)
	if err != nil || res.Created != 3 {
		t.Fatalf("Converge = %+v, %v; want 3 pets", res, err)
	}
	byLID := map[string]instance.Description{}
	for _, d := range s.all(t) {
		if d.LogicalID == nil {
			t.Fatalf("%s has no logical ID", d.ID)
		}
		lid := string(*d.LogicalID)
		if d.Tags[tags.LogicalID] != lid || d.Address != lid {
			t.Errorf("%s: logical_id tag %q, address %q; want %q", d.ID, d.Tags[tags.LogicalID], d.Address, lid)
		}
		byLID[lid] = d
	}
	if len(byLID) != 3 {
		t.Fatalf("pets %v, want one per logical ID", byLID)
	}

	// Destroying a pet keeps its logical ID: the next pass rebuilds it.
	gone := byLID["10.0.0.2"].ID
	if res, err := c.DestroyInstances(ctx, []instance.ID{gone}); err != nil || res.Destroyed != 1 {
		t.Fatalf("DestroyInstances = %+v, %v", res, err)
	}
	if c.Size() != 3 {
		t.Errorf("pets size = %d after destroying one, want 3", c.Size())
	}
	if err := c.SetSize(5); err == nil || !strings.Contains(err.Error(), "logical_ids") {
		t.Errorf("SetSize on pets: %v, want a refusal naming logical_ids", err)
	}
	res, err = c.Converge(ctx)
	if err != nil || res.Created != 1 {
		t.Fatalf("Converge = %+v, %v; want the pet re-created", res, err)
	}
	found := false
	for _, d := range s.all(t) {
		if d.ID == gone {
			t.Errorf("destroyed pet %s still listed", gone)
		}
		if string(*d.LogicalID) == "10.0.0.2" {
			found = true
		}
	}
	if !found {
		t.Error("pet 10.0.0.2 was not re-created")
	}
}

func TestControllerDestroyInstances(t *testing.T) {
	s := newSim(t)
	c := newController(t, s, cattleGroup("web", 4, `{}`), Options{}, nil)
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	ids := liveIDs(t, c)

	_, err := c.DestroyInstances(ctx, []instance.ID{ids[0], "compute-nothere"})
	if err == nil || !strings.Contains(err.Error(), `"compute-nothere"`) {
		t.Fatalf("DestroyInstances with an unknown ID: %v, want an error naming it", err)
	}
	if n := len(liveIDs(t, c)); n != 4 || c.Size() != 4 {
		t.Fatalf("after a refused DestroyInstances: %d members, size %d; want 4 and 4", n, c.Size())
	}

	res, err := c.DestroyInstances(ctx, []instance.ID{ids[0], ids[2], ids[0]})
	if err != nil || res.Destroyed != 2 {
		t.Fatalf("DestroyInstances = %+v, %v; want 2 destroyed", res, err)
	}
	if c.Size() != 2 {
		t.Errorf("size = %d, want 2: destroyed cattle are not grown back", c.Size())
	}
	if res, err := c.Converge(ctx); err != nil || res.Created != 0 {
		t.Fatalf("Converge after DestroyInstances = %+v, %v; want nothing created", res, err)
	}
}

func TestControllerRollCattle(t *testing.T) {
	s := newSim(t)
	r := &recorder{}
	g := cattleGroup("web", 4, `{"version":1}`)
	g.Update.MaxParallel, g.Update.MaxUnavailable = 2, 2
	c := newController(t, s, g, Options{}, r)
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	old := liveIDs(t, c)

	g2 := copyGroup(g)
	g2.Instance.Properties = json.RawMessage(`{"version":2}`)
	spec, err := specOf(g2)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Plan(ctx, controller.Enforce, spec)
	if err != nil || len(ch.Steps) != 4 || ch.Steps[0].Action != "replace" {
		t.Fatalf("Plan = %+v, %v; want 4 replacements", ch, err)
	}
	obj, err := c.Commit(ctx, controller.Enforce, spec)
	if err != nil {
		t.Fatal(err)
	}
	var members []Member
	if err := json.Unmarshal(obj.State, &members); err != nil {
		t.Fatal(err)
	}
	if len(members) != 4 {
		t.Fatalf("after the roll %d members, want 4: %+v", len(members), members)
	}
	for _, m := range members {
		if m.ConfigHash != g2.ConfigHash() || slices.Contains(old, m.ID) {
			t.Errorf("member %+v not replaced", m)
		}
	}
	if len(s.all(t)) != 4 {
		t.Errorf("simulator holds %d instances, want 4", len(s.all(t)))
	}
}

func specOf(g *config.Group) (controller.Spec, error) {
	props, err := json.Marshal(g)
	return controller.Spec{Kind: controller.KindGroup, Metadata: controller.Metadata{Name: g.Name}, Properties: props}, err
}

func TestControllerRollPets(t *testing.T) {
	s := newSim(t)
	g := petGroup("db", `{"version":1}`, "10.0.0.1", "10.0.0.2")
	c := newController(t, s, g, Options{}, nil)
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	g2 := copyGroup(g)
	g2.Instance.Properties = json.RawMessage(`{"version":2}`)
	c2 := newController(t, s, g2, Options{}, nil)

	// Watch the store while rolling: never two live copies of a pet.
	stop := make(chan struct{})
	violation := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			descs, err := s.client.Instance("compute").DescribeInstances(context.Background(), nil, false)
			if err != nil {
				continue
			}
			seen := map[string]bool{}
			for _, d := range descs {
				if lid := string(*d.LogicalID); seen[lid] {
					select {
					case violation <- lid:
					default:
					}
				} else {
					seen[lid] = true
				}
			}
		}
	}()
	res, err := c2.Converge(ctx)
	close(stop)
	wg.Wait()
	if err != nil || res.Rolled != 2 || res.Created != 2 {
		t.Fatalf("rolling Converge = %+v, %v; want 2 pets rolled", res, err)
	}
	select {
	case lid := <-violation:
		t.Fatalf("pet %s had two live copies during the roll", lid)
	default:
	}
	members, err := c2.Observe(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.ConfigHash != g2.ConfigHash() {
			t.Errorf("pet %+v not rolled", m)
		}
	}
}

func TestControllerFailedProvisionsAreReportedPerInstance(t *testing.T) {
	s := newSim(t, "INFRAKIT_SIMULATOR_FAILURE_RATE=0.4")
	r := &recorder{}
	c := newController(t, s, cattleGroup("flaky", 0, `{}`), Options{Parallelism: 4}, r)
	ctx := ctxT(t)
	const n = 40
	res, err := c.Execute(ctx, Decision{Create: make([]Create, n)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Created+len(res.Failed) != n || len(res.Failed) == 0 || res.Created == 0 {
		t.Fatalf("result %d created, %d failed; want both, summing to %d", res.Created, len(res.Failed), n)
	}
	for _, f := range res.Failed {
		if f.Action != ActionCreate || !strings.Contains(f.Err.Error(), "simulated provision failure") ||
			!strings.Contains(f.Err.Error(), `group "flaky"`) {
			t.Errorf("failure %+v", f)
		}
	}
	errorsSeen := 0
	for _, ev := range r.events {
		if ev.Action == ActionError {
			errorsSeen++
		}
	}
	if errorsSeen != len(res.Failed) || len(r.events) != n {
		t.Errorf("%d error events of %d events; want %d of %d", errorsSeen, len(r.events), len(res.Failed), n)
	}
	if got := len(s.all(t)); got != res.Created || len(r.created) != res.Created {
		t.Errorf("simulator holds %d, recorded %d, created %d: want all equal", got, len(r.created), res.Created)
	}
}

func TestControllerRecordsInBoundedBatches(t *testing.T) {
	s := newSim(t)
	r := &recorder{}
	c := newController(t, s, cattleGroup("big", 0, `{}`), Options{RecordBatch: 100, RecordInterval: time.Hour}, r)
	ctx := ctxT(t)
	const n = 450
	res, err := c.Execute(ctx, Decision{Create: make([]Create, n)})
	if err != nil || res.Created != n {
		t.Fatalf("Execute = %+v, %v", res, err)
	}
	if r.records != 5 || len(r.created) != n {
		t.Fatalf("%d record calls holding %d members; want 5 (4 full batches and the rest) holding %d", r.records, len(r.created), n)
	}
	seen := map[instance.ID]bool{}
	for _, m := range r.created {
		if seen[m.ID] {
			t.Fatalf("%s recorded twice", m.ID)
		}
		seen[m.ID] = true
	}

	// The interval flushes too: a slow trickle is recorded as it goes.
	r2 := &recorder{}
	c2 := newController(t, s, cattleGroup("big", 0, `{}`), Options{RecordBatch: 1000, RecordInterval: time.Millisecond, Parallelism: 1}, r2)
	if _, err := c2.Execute(ctx, Decision{Create: make([]Create, 20)}); err != nil {
		t.Fatal(err)
	}
	if r2.records < 2 || len(r2.created) != 20 {
		t.Errorf("%d record calls for 20 slow creates; want the interval to flush more than once", r2.records)
	}

	// Destroy them all: batches again.
	r3 := &recorder{}
	c3 := newController(t, s, cattleGroup("big", 0, `{}`), Options{RecordBatch: 100, RecordInterval: time.Hour}, r3)
	res, err = c3.DestroyAll(ctx)
	if err != nil || res.Destroyed != n+20 {
		t.Fatalf("DestroyAll = %+v, %v", res, err)
	}
	if r3.records != 5 || len(r3.destroyed) != n+20 {
		t.Fatalf("%d record calls holding %d destroyed; want 5 holding %d", r3.records, len(r3.destroyed), n+20)
	}
}

func TestControllerInterruptedExecuteRecordsEverythingCreated(t *testing.T) {
	s := newSim(t)
	r := &recorder{}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	opts := Options{Parallelism: 4, RecordBatch: 1000, RecordInterval: time.Hour}
	c := newController(t, s, cattleGroup("web", 0, `{}`), opts, r)
	// Cancel from the progress callback once 7 are done: calls in flight
	// finish, nothing new starts.
	c.opts.Progress = func(ev Event) {
		if ev.Done == 7 {
			cancel()
		}
	}
	res, err := c.Execute(ctx, Decision{Create: make([]Create, 100)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute error = %v, want context.Canceled", err)
	}
	if res.Created < 7 || res.Created >= 100 {
		t.Fatalf("created %d; want the interrupt to stop the work early", res.Created)
	}
	if got := len(s.all(t)); got != res.Created || len(r.created) != got {
		t.Fatalf("simulator holds %d, recorded %d, result %d: every created instance must be recorded", got, len(r.created), res.Created)
	}
}

func TestControllerFlavorsCombineInOrder(t *testing.T) {
	s := newSim(t)
	g := cattleGroup("web", 1, `{}`)
	g.Flavors = []config.Plugin{
		{Provider: "simulator", Type: "simulator", Properties: json.RawMessage(`{"tags":{"tier":"first","a":"1"}}`)},
		{Provider: "simulator", Type: "simulator", Properties: json.RawMessage(`{"tags":{"tier":"second","infrakit.group":"hijack"}}`)},
	}
	c := newController(t, s, g, Options{}, nil)
	if _, err := c.Converge(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	all := s.all(t)
	if len(all) != 1 {
		t.Fatalf("%d instances, want 1", len(all))
	}
	got := all[0].Tags
	if got["tier"] != "second" || got["a"] != "1" || got["project"] != "test" || got[tags.Group] != "web" {
		t.Errorf("tags %v: want later flavors to win, earlier ones kept, infrakit's own last", got)
	}
}

func TestControllerVanillaInitConcatenates(t *testing.T) {
	simDir := t.TempDir()
	s := &sim{client: startProvider(t, "simulator", simDir), dir: simDir}
	vanilla := startProvider(t, "vanilla", simDir)
	g := cattleGroup("web", 1, `{}`)
	g.Flavors = []config.Plugin{
		{Provider: "vanilla", Type: "vanilla", Properties: json.RawMessage(`{"init":["echo one","echo two"]}`)},
		{Provider: "vanilla", Type: "vanilla", Properties: json.RawMessage(`{"init":["echo three"]}`)},
	}
	plugins := Plugins{Instance: s.client.Instance("compute")}
	for _, f := range g.Flavors {
		plugins.Flavors = append(plugins.Flavors, Flavor{Plugin: vanilla.Flavor(f.Type), Properties: f.Properties})
	}
	c, err := New(g, plugins, Options{Stack: "teststack"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Converge(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	all := s.all(t)
	if len(all) != 1 {
		t.Fatalf("%d instances, want 1", len(all))
	}
	b, err := os.ReadFile(filepath.Join(simDir, "instances", "compute", string(all[0].ID)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Init string }
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Init != "echo one\necho two\necho three" {
		t.Errorf("init = %q, want the flavors' lines in order", rec.Init)
	}
}

func TestControllerVerbs(t *testing.T) {
	s := newSim(t)
	g := cattleGroup("web", 2, `{}`)
	c := newController(t, s, g, Options{}, nil)
	ctx := ctxT(t)
	specs, err := c.Spec(ctx)
	if err != nil || len(specs) != 1 || specs[0].String() != "group.web" {
		t.Fatalf("Spec = %v, %v", specs, err)
	}
	ch, err := c.Plan(ctx, controller.Enforce, specs[0])
	if err != nil || len(ch.Steps) != 2 || ch.Steps[0].Action != "create" {
		t.Fatalf("Plan = %+v, %v; want 2 creates", ch, err)
	}
	if _, err := c.Commit(ctx, controller.Enforce, specs[0]); err != nil {
		t.Fatal(err)
	}
	objs, err := c.Describe(ctx, &controller.Metadata{Name: "other"})
	if err != nil || len(objs) != 0 {
		t.Fatalf("Describe of another group = %v, %v; want nothing", objs, err)
	}
	objs, err = c.Describe(ctx, nil)
	if err != nil || len(objs) != 1 {
		t.Fatalf("Describe = %v, %v", objs, err)
	}
	if _, err := c.Free(ctx, nil); err != nil || !c.Freed() {
		t.Fatalf("Free: %v, freed %v", err, c.Freed())
	}
	if len(s.all(t)) != 2 {
		t.Fatal("Free touched the instances")
	}
	other, _ := specOf(cattleGroup("other", 1, `{}`))
	if _, err := c.Commit(ctx, controller.Enforce, other); err == nil {
		t.Error("Commit of another group's spec succeeded")
	}
	ch, err = c.Plan(ctx, controller.Destroy, specs[0])
	if err != nil || len(ch.Steps) != 2 || ch.Steps[0].Action != "destroy" {
		t.Fatalf("Plan(Destroy) = %+v, %v", ch, err)
	}
	if _, err := c.Destroy(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(s.all(t)); n != 0 {
		t.Fatalf("%d instances after Destroy, want 0", n)
	}
}

func TestControllerRollWaitsForHealthyReplacements(t *testing.T) {
	s := newSim(t, "INFRAKIT_SIMULATOR_PROVISION_DELAY=300ms")
	g := cattleGroup("web", 2, `{"version":1}`)
	c := newController(t, s, g, Options{}, nil)
	ctx := ctxT(t)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond) // let the first members start

	g2 := copyGroup(g)
	g2.Instance.Properties = json.RawMessage(`{"version":2}`)
	c2 := newController(t, s, g2, Options{}, nil)
	start := time.Now()
	res, err := c2.Converge(ctx)
	if err != nil || res.Rolled != 2 {
		t.Fatalf("rolling Converge = %+v, %v; want 2 rolled", res, err)
	}
	// One at a time (max_parallel 1), each replacement pending 300ms
	// before its old member goes.
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Errorf("roll took %s: it did not wait for the replacements to run", took)
	}
	if n := len(s.all(t)); n != 2 {
		t.Errorf("%d instances after the roll, want 2", n)
	}
}

func TestControllerRollGivesUpAfterHealthTimeout(t *testing.T) {
	s := newSim(t, "INFRAKIT_SIMULATOR_PROVISION_DELAY=1h")
	g := cattleGroup("web", 1, `{"version":1}`)
	g.Update.HealthTimeout = config.Duration(200 * time.Millisecond)
	ctx := ctxT(t)
	c := newController(t, s, g, Options{}, nil)
	if _, err := c.Converge(ctx); err != nil {
		t.Fatal(err)
	}
	old := s.all(t)[0].ID
	s.setField(t, old, "state", "running") // the first member runs; replacements never will

	g2 := copyGroup(g)
	g2.Instance.Properties = json.RawMessage(`{"version":2}`)
	c2 := newController(t, s, g2, Options{}, nil)
	res, err := c2.Converge(ctx)
	if err == nil || !strings.Contains(err.Error(), "not healthy after 200ms") {
		t.Fatalf("Converge = %+v, %v; want the roll to give up after health_timeout", res, err)
	}
	ids := liveIDs(t, c2)
	if res.Rolled != 0 || len(ids) != 2 || !slices.Contains(ids, old) {
		t.Fatalf("after a stalled roll: rolled %d, members %v; want the old member kept beside its replacement", res.Rolled, ids)
	}
	// The next pass scales the pending replacement away first.
	c3 := newController(t, s, g, Options{}, nil)
	if res, err := c3.Converge(ctx); err != nil || res.Destroyed != 1 {
		t.Fatalf("next pass = %+v, %v", res, err)
	}
	if ids := liveIDs(t, c3); len(ids) != 1 || ids[0] != old {
		t.Fatalf("members %v, want only the running %s", ids, old)
	}
}
