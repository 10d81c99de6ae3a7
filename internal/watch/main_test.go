package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// testBin holds the real provider binaries TestMain builds: the tests run
// watch against them through go-plugin, as the command does.
var testBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "watch-test-bin-")
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
	code := m.Run()
	// The embedded etcd of the HA tests (ha_test.go) stops before the
	// goroutines are counted.
	closeEtcd()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// stackOf is a stack with one cattle group "web" over the simulator.
// flavor is "vanilla" (always healthy) or "simulator" (health from the
// instance file).
func stackOf(size int, note, flavor, extra string) string {
	fl := "provider = vanilla\n    properties = { init = [\"echo web\"] }"
	if flavor == "simulator" {
		fl = "provider = simulator\n    type     = \"simulator\""
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
    %s
  }
  %s
}
`, size, note, fl, extra)
}

// workdir is a stack directory with the providers installed.
type workdir struct {
	t   *testing.T
	dir string
	env []string
}

func newWorkdir(t *testing.T, stack string, env ...string) *workdir {
	t.Helper()
	w := &workdir{t: t, dir: t.TempDir()}
	w.env = append([]string{"INFRAKIT_SIMULATOR_DIR=" + filepath.Join(w.dir, ".infrakit", "simulator")}, env...)
	w.writeStack(stack)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pluginhost.Init(ctx, w.dir, []string{"simulator", "vanilla"}, pluginhost.InitOptions{
		SearchDirs: pluginhost.SearchDirs([]string{testBin}),
	}); err != nil {
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

// apply plans and applies the stack files, as `infrakit apply` does.
func (w *workdir) apply() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := operation.New(ctx, operation.Options{WorkDir: w.dir, HostEnv: w.env, LockTimeout: 30 * time.Second})
	if err != nil {
		w.t.Fatal(err)
	}
	defer r.Close()
	st, _, diags := r.LoadStack(ctx)
	if diags.HasErrors() {
		w.t.Fatalf("load stack: %s", diags.Error())
	}
	p, err := r.Plan(ctx, st, operation.PlanMode{})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := r.Apply(ctx, p); err != nil {
		w.t.Fatal(err)
	}
}

// editState changes the stored stack as an apply that only records would:
// watch must then do the work.
func (w *workdir) editState(edit func(doc *state.Document)) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := state.NewLocal(filepath.Join(w.dir, operation.StateFile))
	unlock, err := store.Lock(ctx, state.LockInfo{Operation: "test"})
	if err != nil {
		w.t.Fatal(err)
	}
	defer unlock()
	doc, err := store.Read(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	edit(doc)
	if err := store.Write(ctx, doc); err != nil {
		w.t.Fatal(err)
	}
}

func (w *workdir) readState() *state.Document {
	w.t.Helper()
	doc, err := state.NewLocal(filepath.Join(w.dir, operation.StateFile)).Read(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return doc
}

func (w *workdir) instanceDir() string {
	return filepath.Join(w.dir, ".infrakit", "simulator", "instances", "compute")
}

// record is one instance file of the simulator, as a user reads it.
type record struct {
	ID           string            `json:"id"`
	Tags         map[string]string `json:"tags"`
	Health       string            `json:"health,omitempty"`
	PendingUntil *time.Time        `json:"pending_until,omitempty"`
}

// instances reads the simulator's instance files (skipping one removed
// while reading).
func (w *workdir) instances() []record {
	w.t.Helper()
	files, err := filepath.Glob(filepath.Join(w.instanceDir(), "*.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	var out []record
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r record
		if json.Unmarshal(b, &r) == nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b record) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// setHealth writes a health into an instance file, as a user injecting a
// fault does.
// removeInstance deletes an instance's file from the simulator's store,
// behind watch's back: the instance vanished.
func (w *workdir) removeInstance(id string) {
	w.t.Helper()
	if err := os.Remove(filepath.Join(w.instanceDir(), id+".json")); err != nil {
		w.t.Fatal(err)
	}
}

func (w *workdir) setHealth(id, health string) {
	w.t.Helper()
	setHealthIn(w.t, filepath.Join(w.instanceDir(), id+".json"), health)
}

// running is one watch.Run in the background of a test.
type running struct {
	t      *testing.T
	addr   string
	cancel context.CancelFunc
	done   chan error
	reload chan struct{}
	once   sync.Once
	err    error
}

// testOptions are quick settings for tests: passes every second, the state
// looked at often, follow-ups soon.
func testOptions(w *workdir) Options {
	return Options{
		WorkDir:     w.dir,
		Interval:    time.Second,
		Listen:      "127.0.0.1:0",
		LockTimeout: 10 * time.Second,
		StatePoll:   50 * time.Millisecond,
		FollowUp:    100 * time.Millisecond,
		HostEnv:     w.env,
		Version:     "test",
	}
}

// start runs watch until the test ends (or stop).
func start(t *testing.T, opts Options) *running {
	t.Helper()
	ready := make(chan net.Addr, 1)
	opts.Ready = func(a net.Addr) { ready <- a }
	if opts.Reload == nil {
		opts.Reload = make(chan struct{})
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, opts) }()
	select {
	case a := <-ready:
		r.addr = a.String()
	case err := <-r.done:
		cancel()
		t.Fatalf("watch did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("watch did not start within 30s")
	}
	t.Cleanup(func() { r.stop() })
	// A failed test shows what watch did: most failures are a sequence of
	// events the test did not expect. (Registered after stop, so it runs
	// first, while the status server still answers.)
	t.Cleanup(func() {
		if t.Failed() {
			for _, e := range r.events() {
				t.Logf("event %s: %s %s %s: %s", e.Time.Format("15:04:05.000"), e.Kind, e.Instance, e.Reason, e.Message)
			}
		}
	})
	return r
}

// stop cancels the run and returns what Run returned.
func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(DefaultShutdown + 5*time.Second):
			r.t.Errorf("watch did not stop within %s", DefaultShutdown+5*time.Second)
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		}
	})
	return r.err
}

func (r *running) status() status.Status {
	r.t.Helper()
	var s status.Status
	r.get(status.PathStatus, &s)
	return s
}

func (r *running) events() []status.Event {
	r.t.Helper()
	var evs []status.Event
	r.get(status.PathEvents, &evs)
	return evs
}

func (r *running) get(path string, v any) {
	r.t.Helper()
	resp, err := http.Get("http://" + r.addr + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		r.t.Fatal(err)
	}
	if err := json.Unmarshal(b.Bytes(), v); err != nil {
		r.t.Fatalf("GET %s: %v\n%s", path, err, b.String())
	}
}

// group returns the status of the group "web".
func (r *running) group() status.Group {
	r.t.Helper()
	for _, g := range r.status().Groups {
		if g.Name == "web" {
			return g
		}
	}
	return status.Group{}
}

// morePasses waits until watch finished n more passes than it had: what a
// test that checks nothing happened waits for, instead of a while.
func morePasses(t *testing.T, r *running, n uint64) {
	t.Helper()
	from := r.status().Passes
	testwait.For(t, 30*time.Second, fmt.Sprintf("%d more passes", n), func() bool { return r.status().Passes >= from+n })
}

// countEvents counts the events of a kind (and reason, if given).
func countEvents(evs []status.Event, kind status.EventKind, reason string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind && (reason == "" || e.Reason == reason) {
			n++
		}
	}
	return n
}
