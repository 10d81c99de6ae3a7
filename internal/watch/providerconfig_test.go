package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/syncbuf"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// withSimulatorConfig is stackOf with attr = "x" in the simulator's block.
func withSimulatorConfig(attr string) string {
	return strings.Replace(stackOf(1, "a", "vanilla", ""), `provider "simulator" {}`, `provider "simulator" { `+attr+` = "x" }`, 1)
}

// The applied stack's provider blocks configure watch's providers: a block
// changed by an apply reaches the running process at its next use, and
// stack files a reload validates do not. The simulator takes no
// configuration, so the SDK answers each attribute with a warning, which
// the host logs: the log shows which configuration the process was given.
func TestWatchConfiguresProvidersFromAppliedStack(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, withSimulatorConfig("zone"))
	w.apply()

	var logs syncbuf.Buffer
	opts := testOptions(w)
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	reload := make(chan struct{})
	opts.Reload = reload
	r := start(t, opts)
	given := func(attr string) bool { return strings.Contains(logs.String(), "so "+attr+" has no effect") }
	testwait.For(t, 10*time.Second, "the simulator configured with zone", func() bool { return given("zone") })
	pid := simulatorPID(t, r)

	// An apply changes the block; watch's next pass hands it over.
	w.writeStack(withSimulatorConfig("region"))
	w.apply()
	testwait.For(t, 20*time.Second, "the simulator configured with region", func() bool { return given("region") })
	if now := simulatorPID(t, r); now != pid {
		t.Errorf("the simulator was relaunched (pid %d, was %d) instead of configured", now, pid)
	}

	// Files not applied yet are validated by a reload, not handed over.
	w.writeStack(withSimulatorConfig("shard"))
	reload <- struct{}{}
	testwait.For(t, 10*time.Second, "the reload", func() bool {
		for _, e := range r.events() {
			if e.Kind == status.EventReload {
				return true
			}
		}
		return false
	})
	passes := r.status().Passes
	testwait.For(t, 10*time.Second, "a pass after the reload", func() bool { return r.status().Passes > passes })
	if given("shard") {
		t.Errorf("the stack files' block, not applied, reached the provider:\n%s", logs.String())
	}
}

func simulatorPID(t *testing.T, r *running) int {
	t.Helper()
	for _, p := range r.status().Providers {
		if p.Key == "simulator" {
			return p.PID
		}
	}
	t.Fatal("no simulator in the status")
	return 0
}
