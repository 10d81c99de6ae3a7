//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/plugins/process/proc"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestJudgesProcessInstances runs both binaries as the host does: the
// process provider runs a webserver, and the healthcheck provider judges it
// by the Address the process provider describes, keeping its counters
// between calls. The webserver keeps answering while its fail file exists,
// but fails its HTTP check: the case watch must replace.
func TestJudgesProcessInstances(t *testing.T) {
	hcBin := builder.Build(t, ".")
	procBin := builder.Build(t, "../process")
	webserver := builder.Build(t, "../../testdata/webserver")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Run("Run", func(t *testing.T) {
		stateDir, failFile := t.TempDir(), filepath.Join(t.TempDir(), "fail")

		procs := start(t, "process", procBin, "INFRAKIT_PROCESS_DIR="+stateDir)
		checks := start(t, "healthcheck", hcBin)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()

		tags := map[string]string{"infrakit.group": "web"}
		props := fmt.Sprintf(`{"command": %q, "env": {"WEBSERVER_FAIL_FILE": %q}, "ports": {"from": 28000, "to": 28999}}`, webserver, failFile)
		id, err := procs.Instance("process").Provision(ctx, instance.Spec{Properties: json.RawMessage(props), Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		killOnCleanup(t, filepath.Join(stateDir, "instances", string(id)+".json"))
		t.Cleanup(func() { _ = procs.Instance("process").Destroy(context.Background(), id, instance.ReasonTerminate) })
		ds, err := procs.Instance("process").DescribeInstances(ctx, tags, false)
		if err != nil || len(ds) != 1 {
			t.Fatalf("describe: %v, %v", ds, err)
		}
		d := ds[0]

		hc := checks.Flavor("healthcheck")
		check := json.RawMessage(`{"http": {"path": "/health"}, "timeout": "500ms", "healthy_threshold": 1, "unhealthy_threshold": 2}`)
		judge := func() flavor.Health {
			t.Helper()
			h, err := hc.Healthy(ctx, check, d)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		deadline := time.Now().Add(10 * time.Second)
		for judge() != flavor.HealthHealthy { // until it listens
			if time.Now().After(deadline) {
				t.Fatal("the webserver never became healthy")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := os.WriteFile(failFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if h := judge(); h != flavor.HealthHealthy {
			t.Fatalf("one failed probe gives %s; the threshold is 2", h)
		}
		if h := judge(); h != flavor.HealthUnhealthy {
			t.Fatalf("two failed probes give %s, want unhealthy", h)
		}
		if err := os.Remove(failFile); err != nil {
			t.Fatal(err)
		}
		if h := judge(); h != flavor.HealthHealthy {
			t.Fatalf("a passing probe gives %s, want healthy", h)
		}
	})
}

func start(t *testing.T, name, bin string, env ...string) *plugin.Client {
	t.Helper()
	logs := providertest.LogWriter(t) // registered first, so it runs after Kill
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name: name, Path: bin, Env: env, Dir: t.TempDir(),
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// killOnCleanup kills the instance recorded at path when the test ends, if
// its group is still provably the one recorded: instances outlive their
// provider, so a failed test must not leave one running.
func killOnCleanup(t *testing.T, path string) {
	var rec struct{ proc.Identity }
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		t.Fatalf("instance record: %v", err)
	}
	t.Cleanup(func() { _, _ = proc.SignalGroup(rec.Identity, syscall.SIGKILL) })
}
