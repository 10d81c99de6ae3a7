package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/proctest"
)

// These tests stop real provider processes that do not cooperate, and
// check by pid that nothing is left.

// childrenOf lists the live processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) && proctest.Alive(child) {
			out = append(out, child)
		}
	}
	return out
}

// reaped reports whether pid no longer exists at all: it ended and its
// parent (this test process, through go-plugin) collected it.
func reaped(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// killWithin runs stop in a goroutine and fails the test unless it returns
// within limit: a stop that hangs must fail the test, not hang it.
func killWithin(t *testing.T, limit time.Duration, stop func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("the stop did not return within %s", limit)
	}
}

// frozenWithChild starts a provider with a child process and freezes it
// (SIGSTOP); the test's end kills whatever is left of either.
func frozenWithChild(t *testing.T, stopTimeout time.Duration) (c *Client, pid, child int, logs fmt.Stringer) {
	t.Helper()
	c, buf := startTest(t, "with-child", func(cfg *ClientConfig) { cfg.StopTimeout = stopTimeout })
	if _, err := c.Metadata(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	pid = c.Pid()
	children := childrenOf(t, pid)
	if len(children) != 1 {
		t.Fatalf("provider %d has children %v, want its one sleep", pid, children)
	}
	child = children[0]
	t.Cleanup(func() {
		_ = syscall.Kill(child, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	})
	proctest.Freeze(t, pid)
	return c, pid, child, buf
}

// TestKillFrozen: Kill of a SIGSTOPped provider, which never answers
// go-plugin's graceful shutdown, returns after the stop timeout, and the
// process and the child it started are gone.
func TestKillFrozen(t *testing.T) {
	c, pid, child, logs := frozenWithChild(t, 300*time.Millisecond)
	killWithin(t, 300*time.Millisecond+reapTimeout+5*time.Second, c.Kill)
	if !reaped(pid) {
		t.Errorf("provider %d still exists after Kill", pid)
	}
	if !waitGone(child, 5*time.Second) {
		t.Errorf("the provider's child %d still runs after Kill", child)
	}
	if !c.Exited() {
		t.Error("Exited() is false after Kill")
	}
	if _, err := c.Metadata(ctxT(t)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("call after Kill: %v", err)
	}
	if !strings.Contains(logs.String(), "killing the provider process group") {
		t.Errorf("the log does not say the provider was killed:\n%s", logs)
	}
	killWithin(t, time.Second, c.Kill) // again: returns at once
}

// TestKillNowFrozen: KillNow does not wait for the graceful request at
// all: with a stop timeout of an hour it still returns, the process reaped.
func TestKillNowFrozen(t *testing.T) {
	c, pid, child, _ := frozenWithChild(t, time.Hour)
	var err error
	killWithin(t, reapTimeout+5*time.Second, func() { err = c.KillNow() })
	if err != nil {
		t.Fatal(err)
	}
	if !reaped(pid) {
		t.Errorf("provider %d still exists after KillNow", pid)
	}
	if !waitGone(child, 5*time.Second) {
		t.Errorf("the provider's child %d still runs after KillNow", child)
	}
	// A Kill that overlaps, or follows, waits for the same end.
	killWithin(t, time.Second, c.Kill)
}

// TestKillGraceful: a provider that answers exits on go-plugin's request,
// without being killed, within the stop timeout.
func TestKillGraceful(t *testing.T) {
	c, logs := startTest(t, "", func(cfg *ClientConfig) { cfg.StopTimeout = time.Hour })
	if _, err := c.Metadata(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	pid := c.Pid()
	killWithin(t, 30*time.Second, c.Kill)
	if !reaped(pid) {
		t.Errorf("provider %d still exists after Kill", pid)
	}
	if strings.Contains(logs.String(), "killing the provider process group") {
		t.Errorf("a provider that answers was killed:\n%s", logs)
	}
}

// TestInheritEnv: with InheritEnv the provider gets only the host's
// variables it accepts, plus Env and go-plugin's own, as the real child's
// /proc/PID/environ shows.
func TestInheritEnv(t *testing.T) {
	t.Setenv("PLUGIN_TEST_SECRET", "s3cret")
	t.Setenv("PLUGIN_TEST_KEPT", "kept")
	c, _ := startTest(t, "", func(cfg *ClientConfig) {
		cfg.InheritEnv = func(name string) bool { return name == "PLUGIN_TEST_KEPT" || name == "PATH" }
		cfg.Env = append(cfg.Env, "PLUGIN_TEST_EXPLICIT=given", "PLUGIN_TEST_KEPT=overridden")
	})
	env := environOf(t, c.Pid())
	for name, want := range map[string]string{
		"PLUGIN_TEST_KEPT":     "overridden", // Env wins
		"PLUGIN_TEST_EXPLICIT": "given",
		"PATH":                 os.Getenv("PATH"),
		envHostPID:             strconv.Itoa(os.Getpid()),
		"TESTPROVIDER_MODE":    "",
	} {
		if got, ok := env[name]; !ok || got != want {
			t.Errorf("%s=%q (set %v), want %q", name, got, ok, want)
		}
	}
	if v, ok := env["PLUGIN_TEST_SECRET"]; ok {
		t.Errorf("the provider inherited PLUGIN_TEST_SECRET=%q", v)
	}
	// go-plugin adds its handshake itself; nothing else is there.
	if _, ok := env["PLUGIN_PROTOCOL_VERSIONS"]; !ok {
		t.Errorf("go-plugin's variables are missing: %v", env)
	}
	for name := range env {
		switch {
		case name == "PATH", name == envHostPID, name == handshake.MagicCookieKey,
			strings.HasPrefix(name, "PLUGIN_"), strings.HasPrefix(name, "TESTPROVIDER_"):
		default:
			t.Errorf("the provider has %s, which it was not given", name)
		}
	}
}

// environOf reads a live process's environment.
func environOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Skipf("no /proc/%d/environ: %v", pid, err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}
