//go:build unix

package pluginhost

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/proctest"
)

// These tests stop and relaunch real provider processes that no longer
// answer, and check by pid that none is left.

// returnsWithin fails the test unless f returns within limit.
func returnsWithin(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s did not return within %s", what, limit)
	}
}

// TestHostCloseFrozenProvider: Close returns although a provider is frozen
// (it never answers go-plugin's graceful shutdown), and every process is
// gone, the frozen one too.
func TestHostCloseFrozenProvider(t *testing.T) {
	ctx := context.Background()
	wd := initBoth(t)
	const stop = 300 * time.Millisecond
	h := newHost(t, wd, Options{StopTimeout: stop})
	var pids []int
	for _, key := range []string{"simulator", "vanilla"} {
		c, err := h.Client(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, c.Pid())
	}
	proctest.Freeze(t, pids[0])
	returnsWithin(t, stop+10*time.Second, "Close with a frozen provider", func() { _ = h.Close() })
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("provider %d outlived Close", pid)
		}
	}
}

// TestHostRelaunchesKilledFrozenProvider: what watch does to a provider
// that stops answering: KillNow, and the next Client launches a new
// process, which answers.
func TestHostRelaunchesKilledFrozenProvider(t *testing.T) {
	ctx := context.Background()
	wd := initBoth(t)
	h := newHost(t, wd, Options{StopTimeout: time.Hour})
	c, err := h.Client(ctx, "simulator")
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Pid()
	proctest.Freeze(t, pid)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.Metadata(cctx); err == nil {
		t.Fatal("a frozen provider answered")
	}
	returnsWithin(t, 10*time.Second, "KillNow of a frozen provider", func() {
		if err := c.KillNow(); err != nil {
			t.Error(err)
		}
	})
	if !processGone(pid) || !c.Exited() {
		t.Fatalf("after KillNow: pid %d gone %v, exited %v", pid, processGone(pid), c.Exited())
	}
	next, err := h.Client(ctx, "simulator")
	if err != nil {
		t.Fatal(err)
	}
	if next.Pid() == pid {
		t.Fatalf("Client after KillNow returned the killed process %d", pid)
	}
	if _, err := next.Metadata(ctx); err != nil {
		t.Errorf("the relaunched provider: %v", err)
	}
}

// TestHostProviderEnv: a provider inherits the allow-listed variables of
// infrakit's environment and those INFRAKIT_PROVIDER_ENV names, plus
// Options.Env, and not the rest (a secret), as the real child's
// /proc/PID/environ shows.
func TestHostProviderEnv(t *testing.T) {
	wd := initBoth(t)
	t.Setenv("INFRAKIT_ETCD_PASSWORD", "s3cret")
	t.Setenv("SOME_OTHER_TOKEN", "t0ken")
	t.Setenv("INFRAKIT_SIMULATOR_DIR", "") // the simulator's default
	t.Setenv("LC_ALL", "C")
	t.Setenv("MYCLOUD_REGION", "eu-1")
	t.Setenv("MYCLOUD_PROFILE", "dev")
	t.Setenv(EnvProviderEnv, "MYCLOUD_REGION,MYCLOUD_PRO*")
	h := newHost(t, wd, Options{Env: []string{"GIVEN=explicitly", "LC_ALL=POSIX"}})
	c, err := h.Client(context.Background(), "simulator")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.Pid()))
	if err != nil {
		t.Skipf("no environ: %v", err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for name, want := range map[string]string{
		"PATH":                   os.Getenv("PATH"),
		"INFRAKIT_SIMULATOR_DIR": "",
		"LC_ALL":                 "POSIX", // Options.Env wins
		"GIVEN":                  "explicitly",
		"MYCLOUD_REGION":         "eu-1",
		"MYCLOUD_PROFILE":        "dev",
	} {
		if got, ok := env[name]; !ok || got != want {
			t.Errorf("%s=%q (set %v), want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"INFRAKIT_ETCD_PASSWORD", "SOME_OTHER_TOKEN", EnvProviderEnv} {
		if v, ok := env[name]; ok {
			t.Errorf("the provider inherited %s=%q", name, v)
		}
	}
}
