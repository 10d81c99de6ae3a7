package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// These tests drive the built binary the way the host does, for what only
// the simulator promises: processes sharing one store, faults injected by
// editing files, knobs from the environment, the version from -ldflags.

func startSimulator(t *testing.T, bin string, env ...string) *plugin.Client {
	t.Helper()
	logs := providertest.LogWriter(t) // registered first, so it runs after Kill
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name: "simulator", Path: bin, Env: env,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// TestSimulatorBinary builds the binary once for its subtests.
func TestSimulatorBinary(t *testing.T) {
	bin := providertest.Build(t, ".")
	t.Run("SharesStoreAcrossProcesses", func(t *testing.T) { testSharesStoreAcrossProcesses(t, bin) })
	t.Run("Knobs", func(t *testing.T) { testKnobs(t, bin) })
	t.Run("DefaultDir", func(t *testing.T) { testDefaultDir(t, bin) })
}

func testSharesStoreAcrossProcesses(t *testing.T, bin string) {
	dir := t.TempDir()
	env := "INFRAKIT_SIMULATOR_DIR=" + dir
	cli, watch := startSimulator(t, bin, env), startSimulator(t, bin, env)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	md, err := cli.Metadata(ctx)
	if err != nil || md.Name != "simulator" || md.Version != "0.1.0" {
		t.Fatalf("metadata = %+v, %v; want simulator 0.1.0", md, err)
	}
	events, err := watch.Instance("compute").(instance.Watcher).Watch(ctx, map[string]string{"infrakit.group": "miners"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := cli.Instance("compute").Provision(ctx, instance.Spec{
		Properties: json.RawMessage(`{"note": "custom field for miners"}`),
		Tags:       map[string]string{"infrakit.group": "miners"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := watch.Instance("compute").DescribeInstances(ctx, map[string]string{"infrakit.group": "miners"}, true)
	if err != nil || len(ds) != 1 || ds[0].ID != id || ds[0].State != instance.StateRunning || !strings.HasPrefix(ds[0].Address, "10.") {
		t.Fatalf("the other process describes %+v, %v", ds, err)
	}
	waitEvent(t, events, id, instance.EventChanged)

	// "health": "unhealthy" written by hand reaches the flavor in the other process.
	path := filepath.Join(dir, "instances", "compute", string(id)+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "{", `{"health": "unhealthy",`, 1)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := watch.Flavor("simulator").Healthy(ctx, nil, ds[0])
	if err != nil || h != flavor.HealthUnhealthy {
		t.Fatalf("Healthy after the edit = %s, %v; want unhealthy", h, err)
	}

	// Removing the file makes the instance vanish, pushed by Watch.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, id, instance.EventGone)

	// Load balancer state is shared as well.
	if err := cli.LoadBalancer("lb1").RegisterBackends(ctx, []loadbalancer.Backend{{ID: id, Address: ds[0].Address}}); err != nil {
		t.Fatal(err)
	}
	bs, err := watch.LoadBalancer("lb1").Backends(ctx)
	if err != nil || len(bs) != 1 || bs[0].ID != id {
		t.Fatalf("backends seen by the other process = %+v, %v", bs, err)
	}

	// Validation errors cross the wire as diagnostics.
	err = cli.Instance("compute").Validate(ctx, json.RawMessage(`["not an object"]`))
	var diags provider.Diagnostics
	if !errors.As(err, &diags) || !diags.HasErrors() {
		t.Fatalf("Validate = %v, want provider.Diagnostics", err)
	}
}

func waitEvent(t *testing.T, events <-chan instance.Event, id instance.ID, typ instance.EventType) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("watch ended waiting for %s %s", typ, id)
			}
			if ev.ID == id && ev.Type == typ {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event for %s", typ, id)
		}
	}
}

func testKnobs(t *testing.T, bin string) {
	c := startSimulator(t, bin,
		"INFRAKIT_SIMULATOR_DIR="+t.TempDir(),
		"INFRAKIT_SIMULATOR_CAPACITY=1",
		"INFRAKIT_SIMULATOR_PROVISION_DELAY=1h",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := c.Instance("net")
	if _, err := p.Provision(ctx, instance.Spec{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Provision(ctx, instance.Spec{}); err == nil || !strings.Contains(err.Error(), "out of capacity") {
		t.Fatalf("provision beyond capacity = %v", err)
	}
	ds, err := p.DescribeInstances(ctx, nil, false)
	if err != nil || len(ds) != 1 || ds[0].State != instance.StatePending {
		t.Fatalf("with a provision delay: %+v, %v; want one pending", ds, err)
	}

	// A malformed knob stops the provider before the handshake, with a
	// message naming the variable.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	var logs strings.Builder
	bad, err := plugin.Start(ctx2, plugin.ClientConfig{
		Name: "simulator", Path: bin, Env: []string{"INFRAKIT_SIMULATOR_FAILURE_RATE=often"},
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs}),
	})
	if err == nil {
		bad.Kill()
		t.Fatal("started with INFRAKIT_SIMULATOR_FAILURE_RATE=often")
	}
	if !strings.Contains(err.Error()+logs.String(), "INFRAKIT_SIMULATOR_FAILURE_RATE") {
		t.Errorf("the failure does not name the variable: %v\n%s", err, logs.String())
	}
}

// Without INFRAKIT_SIMULATOR_DIR the store is .infrakit/simulator in the
// provider's working directory.
func testDefaultDir(t *testing.T, bin string) {
	wd := t.TempDir()
	t.Chdir(wd) // the provider inherits the host's working directory
	t.Setenv("INFRAKIT_SIMULATOR_DIR", "")
	c := startSimulator(t, bin)
	id, err := c.Instance("disk").Provision(context.Background(), instance.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wd, ".infrakit", "simulator", "instances", "disk", string(id)+".json")); err != nil {
		t.Fatal(err)
	}
}

func TestSimulatorBinaryVersionFromLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "infrakit-provider-simulator")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version=1.2.3", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	md, err := startSimulator(t, bin, "INFRAKIT_SIMULATOR_DIR="+t.TempDir()).Metadata(context.Background())
	if err != nil || md.Version != "1.2.3" {
		t.Fatalf("metadata = %+v, %v; want version 1.2.3", md, err)
	}
}
