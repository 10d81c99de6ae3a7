package group

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// testBin holds the provider binaries TestMain builds: the simulator and
// vanilla.
var testBin string

// TestMain builds the real providers the Instances tests run against (as
// go-plugin subprocesses) and checks that no test leaves a goroutine
// behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "group-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBin = dir
	for _, name := range []string{"simulator", "vanilla"} {
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

// startProvider launches a built provider on the simulator store simDir,
// with the given extra environment; it is killed when the test ends.
func startProvider(t *testing.T, name, simDir string, env ...string) *plugin.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name: name,
		Path: filepath.Join(testBin, "infrakit-provider-"+name),
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

func (s *sim) file(id instance.ID) string {
	return filepath.Join(s.dir, "instances", "compute", string(id)+".json")
}

// record reads an instance's file as the simulator stores it.
func (s *sim) record(t *testing.T, id instance.ID) map[string]any {
	t.Helper()
	b, err := os.ReadFile(s.file(id))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// setField edits an instance file the way a person injects a fault.
func (s *sim) setField(t *testing.T, id instance.ID, field, value string) {
	t.Helper()
	rec := s.record(t, id)
	rec[field] = value
	s.write(t, id, rec)
}

func (s *sim) write(t *testing.T, id instance.ID, rec map[string]any) {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(s.file(id)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.file(id), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// judge makes this simulator's flavor judge instance id as health (its
// own store holds a file of that ID: the simulator flavor reads health
// from the file named by the ID), so a second simulator process can be a
// second flavor with verdicts of its own. health "corrupt" writes a file
// the flavor cannot read, so its Healthy fails.
func (s *sim) judge(t *testing.T, id instance.ID, health string) {
	t.Helper()
	if health == "corrupt" {
		if err := os.MkdirAll(filepath.Dir(s.file(id)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.file(id), []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	s.write(t, id, map[string]any{
		"id": string(id), "type": "compute", "tags": map[string]string{},
		"created_at": time.Now().UTC().Format(time.RFC3339Nano), "health": health,
	})
}

func cattleGroup(name string, size int, props string) *config.Group {
	return &config.Group{
		Name:     name,
		Size:     &size,
		Tags:     map[string]string{"project": "test", "tier": "user"},
		Instance: config.Plugin{Provider: "simulator", Type: "compute", Properties: json.RawMessage(props)},
		Flavors: []config.Plugin{{Provider: "simulator", Type: "simulator",
			Properties: json.RawMessage(`{"tags":{"tier":"flavor"}}`)}},
		Update:     config.DefaultUpdatePolicy(),
		Health:     config.DefaultHealthPolicy(),
		DrainDelay: config.DefaultDrainDelay,
	}
}

func petGroup(name string, props string, ids ...string) *config.Group {
	g := cattleGroup(name, 0, props)
	g.Size, g.LogicalIDs = nil, ids
	return g
}

// newInstances is the Instances of g with the simulator s as its instance
// plugin; flavor block i of g is served by plugins[i], or without plugins
// each block by s.
func newInstances(t *testing.T, s *sim, g *config.Group, opts Options, plugins ...flavor.Plugin) *Instances {
	t.Helper()
	if plugins == nil {
		for _, f := range g.Flavors {
			plugins = append(plugins, s.client.Flavor(f.Type))
		}
	}
	if len(plugins) != len(g.Flavors) {
		t.Fatalf("%d flavor plugins for %d flavor blocks", len(plugins), len(g.Flavors))
	}
	ps := Plugins{Instance: s.client.Instance(g.Instance.Type)}
	for i, f := range g.Flavors {
		ps.Flavors = append(ps.Flavors, Flavor{Plugin: plugins[i], Properties: f.Properties})
	}
	opts.Stack = "teststack"
	c, err := NewInstances(g, ps, opts)
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

// provision provisions n members (cattle) and returns their IDs in order.
func provision(t *testing.T, c *Instances, n int) []instance.ID {
	t.Helper()
	var out []instance.ID
	for range n {
		m, err := c.Provision(ctxT(t), "")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.ID)
	}
	return out
}

func liveIDs(t *testing.T, c *Instances) []instance.ID {
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
