package execute

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// The executor is tested against the real providers, launched as go-plugin
// subprocesses as the CLI launches them: the simulator (instances, load
// balancers, NFS authorizations) and vanilla (an always healthy flavor).
// What a test observes of a run comes from three places: the Progress
// events, a probe wrapped around the real clients (calls in flight, what
// each call was given, what the load balancers held when a member was
// drained or destroyed), and the providers' own state read back after.

// testBin holds the provider binaries TestMain builds.
var testBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "execute-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBin = dir
	for _, name := range []string{"simulator", "vanilla"} {
		out := filepath.Join(dir, providertest.BinaryPrefix+name)
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

// startProvider launches the binary of provider key ("simulator",
// "simulator.broken": the part before the dot) with env; it is killed when
// the test ends.
func startProvider(t *testing.T, key string, env ...string) *plugin.Client {
	t.Helper()
	name, _, _ := strings.Cut(key, ".")
	logs := providertest.LogWriter(t) // registered first, so it runs after Kill
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name: key, Path: filepath.Join(testBin, providertest.BinaryPrefix+name), Env: env,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// fixture is one test's world: a stack, its providers, a state file.
type fixture struct {
	t       *testing.T
	stack   *config.Stack
	clients map[string]*plugin.Client // by provider key
	simDirs map[string]string         // each simulator's store, by provider key
	store   *state.Local
	doc     *state.Document
	probe   *probe

	mu     sync.Mutex
	groups map[string]*group.Instances
}

// newFixture loads the stack src and launches every provider it declares;
// env adds knobs to the provider of a key.
func newFixture(t *testing.T, src string, env map[string][]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	st, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("load stack: %s", diags.Error())
	}
	f := &fixture{t: t, stack: st, clients: map[string]*plugin.Client{}, simDirs: map[string]string{},
		store: state.NewLocal(filepath.Join(dir, "infrakit.state.json")), doc: state.NewDocument(),
		groups: map[string]*group.Instances{}}
	f.probe = newProbe(f)
	for _, p := range st.Providers {
		key := p.Key()
		var e []string
		if p.Name == "simulator" {
			f.simDirs[key] = filepath.Join(dir, "sim-"+key)
			e = append(e, "INFRAKIT_SIMULATOR_DIR="+f.simDirs[key])
		}
		f.clients[key] = startProvider(t, key, append(e, env[key]...)...)
	}
	return f
}

// setStack loads src as the stack the next plans converge to; the
// providers stay as launched.
func (f *fixture) setStack(src string) {
	f.t.Helper()
	dir := f.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		f.t.Fatal(err)
	}
	st, diags := config.Load(dir)
	if diags.HasErrors() {
		f.t.Fatalf("load stack: %s", diags.Error())
	}
	f.mu.Lock()
	f.stack, f.groups = st, map[string]*group.Instances{}
	f.mu.Unlock()
}

// stackOf is a stack "test" with group "web" of size cattle over the
// simulator (vanilla flavor), groupExtra in the group block and extra
// blocks after it. The drain delay is zero unless groupExtra sets one.
func stackOf(size int, note, groupExtra, extra string) string {
	if !strings.Contains(groupExtra, "drain_delay") {
		groupExtra += "\n  drain_delay = \"0s\""
	}
	return fmt.Sprintf(`
stack "test" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  size = %d
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = %q }
  }
  flavor {
    provider   = vanilla
    type       = "vanilla"
    properties = { init = ["echo web"] }
  }
  %s
}
%s
`, size, note, groupExtra, extra)
}

// stackWith is a stack "test" with providers and blocks.
func stackWith(providers, blocks string) string {
	return "stack \"test\" {}\n" + providers + blocks
}

// groupBlock is a cattle group over the instance provider key (vanilla
// flavor), without a drain delay.
func groupBlock(name, provider string, size int) string {
	return fmt.Sprintf(`
group %q {
  size = %d
  drain_delay = "0s"
  instance {
    provider = %s
    type     = "compute"
  }
  flavor {
    provider = vanilla
    type     = "vanilla"
  }
}
`, name, size, provider)
}

// lbIngress is a load balancer lb1 at the simulator routing to group web.
const lbIngress = `
loadbalancer "lb1" { provider = simulator }

ingress "web" {
  rule {
    loadbalancer = loadbalancer.lb1
    groups       = [group.web]
    route {
      lb_port     = 80
      lb_protocol = "http"
      port        = 8080
      protocol    = "http"
    }
  }
}
`

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// instances is the group.Instances of group name, made once per fixture
// (so its drains use the descriptions its listings remembered).
func (f *fixture) instances(name string) (*group.Instances, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g := f.groups[name]; g != nil {
		return g, nil
	}
	g := f.stack.Group(name)
	if g == nil && f.doc.Stack != nil {
		g = f.doc.Stack.Group(name)
	}
	if g == nil {
		return nil, fmt.Errorf("group %q: not in the stack", name)
	}
	plugins := group.Plugins{Instance: f.clients[g.Instance.Provider].Instance(g.Instance.Type)}
	for _, fl := range g.Flavors {
		c := f.clients[fl.Provider]
		md, err := c.Metadata(context.Background())
		if err != nil {
			return nil, err
		}
		o, _ := md.Find(provider.KindFlavor, fl.Type)
		plugins.Flavors = append(plugins.Flavors, group.Flavor{Plugin: c.Flavor(fl.Type), Properties: fl.Properties,
			HealthFromState: o.HealthFromState, PrepareAhead: o.PrepareAhead})
	}
	inst, err := group.NewInstances(g, plugins, group.Options{Stack: f.stack.Name, CallTimeout: time.Minute})
	if err != nil {
		return nil, err
	}
	f.groups[name] = inst
	return inst, nil
}

// observe lists what a plan of scope reads (plan.NeedsOf), health included.
func (f *fixture) observe(scope plan.Scope) plan.World {
	f.t.Helper()
	ctx := ctxT(f.t)
	needs := plan.NeedsOf(f.stack, f.doc, scope)
	w := plan.World{Members: map[string][]group.Member{}, Instances: map[string][]instance.Description{},
		Failed: map[string]error{}, LoadBalancers: map[string]plan.LoadBalancerView{}, Authorizers: map[string]plan.AuthorizerView{}}
	for _, lb := range needs.LoadBalancers {
		l4 := f.clients[lb.Provider].LoadBalancer(lb.Name)
		routes, err := l4.Routes(ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		backends, err := l4.Backends(ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		w.LoadBalancers[plan.LBKey(lb.Provider, lb.Name)] = plan.LoadBalancerView{Routes: routes, Backends: backends}
	}
	for _, tg := range needs.Targets {
		as, err := f.clients[tg.Provider].Authorizer(tg.Type).Describe(ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		w.Authorizers[plan.TargetKey(tg.Provider, tg.Type)] = plan.AuthorizerView{Authorizations: as}
	}
	for name := range needs.Groups {
		g, err := f.instances(name)
		if err != nil {
			f.t.Fatal(err)
		}
		descs, members, err := g.ObserveDescriptions(ctx, true)
		if err != nil {
			f.t.Fatal(err)
		}
		w.Members[name], w.Instances[name] = members, descs
	}
	return w
}

// plan observes and computes the plan of scope, checked.
func (f *fixture) plan(scope plan.Scope) *plan.Plan {
	f.t.Helper()
	p, err := plan.Compute(f.stack, f.doc, f.observe(scope), scope)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := plan.Check(p.Steps); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// run executes p under the state lock, recording into the state file, and
// reads the state back. Progress events go to the probe's journal.
func (f *fixture) run(ctx context.Context, p *plan.Plan, o Options) *Result {
	f.t.Helper()
	return f.runRecorded(ctx, p, o, nil)
}

// runRecorded is run that hands the recorder (its member writes an hour
// apart, so only Flush writes them) to made before the run starts.
func (f *fixture) runRecorded(ctx context.Context, p *plan.Plan, o Options, made func(*StateRecorder)) *Result {
	f.t.Helper()
	unlock, err := f.store.Lock(ctxT(f.t), state.LockInfo{Operation: "test"})
	if err != nil {
		f.t.Fatal(err)
	}
	defer unlock()
	rec := NewStateRecorder(f.store, f.doc, p.Desired, time.Hour, nil)
	if made != nil {
		made(rec)
	}
	if o.Progress == nil {
		o.Progress = f.probe.event
	}
	if o.PollMax == 0 {
		o.PollMin, o.PollMax = 10*time.Millisecond, 50*time.Millisecond
	}
	res := Run(ctx, p, f, rec, o)
	if doc, err := f.store.Read(ctxT(f.t)); err == nil {
		f.doc = doc
	} else {
		f.t.Fatal(err)
	}
	return res
}

// apply plans everything and runs it, failing the test on any failure.
func (f *fixture) apply() *Result {
	f.t.Helper()
	p := f.plan(plan.Scope{})
	res := f.run(ctxT(f.t), p, Options{})
	if res.Err != nil || len(res.Failed) > 0 {
		f.t.Fatalf("apply: %v %v", res.Err, res.Errors())
	}
	f.probe.reset() // what a test looks at is its own run
	return res
}

// Bindings over the launched clients, each wrapped in the probe.

func (f *fixture) Group(_ context.Context, name string) (Group, error) {
	g, err := f.instances(name)
	if err != nil {
		return nil, err
	}
	cfg := f.stack.Group(name)
	if cfg == nil {
		cfg = f.doc.Stack.Group(name)
	}
	return &probedGroup{g: g, p: f.probe, provider: cfg.Instance.Provider}, nil
}

func (f *fixture) LoadBalancer(_ context.Context, provider, name string) (loadbalancer.L4, error) {
	c := f.clients[provider]
	if c == nil {
		return nil, fmt.Errorf("no provider %q", provider)
	}
	return &probedLB{l4: c.LoadBalancer(name), p: f.probe, provider: provider, name: name}, nil
}

func (f *fixture) Authorizer(_ context.Context, provider, typ string) (nfs.Authorizer, error) {
	c := f.clients[provider]
	if c == nil {
		return nil, fmt.Errorf("no provider %q", provider)
	}
	return &probedAuthorizer{a: c.Authorizer(typ), p: f.probe, provider: provider}, nil
}

// live lists the compute instances of the simulator at key, whatever their tags.
func (f *fixture) live(key string) map[instance.ID]instance.Description {
	f.t.Helper()
	descs, err := f.clients[key].Instance("compute").DescribeInstances(ctxT(f.t), nil, false)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[instance.ID]instance.Description{}
	for _, d := range descs {
		out[d.ID] = d
	}
	return out
}

// backends lists the backends of load balancer name at the simulator.
func (f *fixture) backends(name string) map[instance.ID]string {
	f.t.Helper()
	bs, err := f.clients["simulator"].LoadBalancer(name).Backends(ctxT(f.t))
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[instance.ID]string{}
	for _, b := range bs {
		out[b.ID] = b.Address
	}
	return out
}

// stepsOf are p's steps of kind.
func stepsOf(p *plan.Plan, kind plan.StepKind) []plan.Step {
	var out []plan.Step
	for _, s := range p.Steps {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// doneSteps are the steps res reports done.
func doneSteps(p *plan.Plan, res *Result) []plan.Step {
	var out []plan.Step
	for i, st := range res.Status {
		if st == StatusDone {
			out = append(out, p.Steps[i])
		}
	}
	return out
}

// checkCounts checks that res.Done counts exactly the steps res reports
// done, and that every step ended.
// checkStatuses checks that each step of p ended as want says.
func checkStatuses(t *testing.T, p *plan.Plan, res *Result, want func(plan.Step) Status) {
	t.Helper()
	for _, s := range p.Steps {
		if got, want := res.Status[s.ID-1], want(s); got != want {
			t.Errorf("step %s: %s, want %s", s, got, want)
		}
	}
}

func checkCounts(t *testing.T, p *plan.Plan, res *Result) {
	t.Helper()
	if got, want := res.Done, plan.CountSteps(doneSteps(p, res)); got != want {
		t.Errorf("Result.Done = %+v, want CountSteps of the done steps %+v", got, want)
	}
	for i, st := range res.Status {
		if st == "" {
			t.Errorf("step %s has no status", p.Steps[i])
		}
	}
}
