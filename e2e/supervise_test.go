package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/proctest"
)

// processesIn lists the live (not zombie) processes whose command line
// names something under dir: the providers installed in a workdir.
func processesIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			if s := proctest.State(pid); s != 0 && s != 'Z' {
				out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
			}
		}
	}
	return out
}

// TestWatchFrozenProvider freezes the simulator provider (SIGSTOP) under
// watch and deletes 5 of its 30 instances: the pass that lists the group
// runs out of time (-call-timeout 3s), the provider does not answer a ping
// either, and it is killed and relaunched, and the group healed. Then the
// new provider is frozen too and watch gets SIGTERM: it exits 0, and no
// provider process is left. The provider never sees a secret of watch's
// environment.
func TestWatchFrozenProvider(t *testing.T) {
	t.Parallel()
	const callTimeout = 3 * time.Second
	w := newWorkdir(t)
	w.env = append(w.env, "INFRAKIT_ETCD_PASSWORD=s3cret")
	w.writeFile("main.hcl", watchStack(30, "frozen", ""))
	w.init()
	w.ok("apply", "-auto-approve")
	p := w.startWatch(nil, "-interval", "1s", "-call-timeout", callTimeout.String())
	within(t, 30*time.Second, "the first pass", func() bool { return p.status().Passes > 0 })
	pid, _ := p.providerPID("simulator")
	if pid == 0 {
		t.Fatalf("no simulator pid in /v1/status: %+v", p.status())
	}

	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte("INFRAKIT_ETCD_PASSWORD")) || bytes.Contains(env, []byte("s3cret")) {
		t.Errorf("the provider inherited INFRAKIT_ETCD_PASSWORD")
	}
	if !bytes.Contains(env, []byte("\x00PATH=")) && !bytes.HasPrefix(env, []byte("PATH=")) {
		t.Errorf("the provider has no PATH: %q", env)
	}

	proctest.Freeze(t, pid)
	for _, id := range w.simulatorInstances("compute")[:5] {
		if err := os.Remove(w.instancePath(id)); err != nil {
			t.Fatal(err)
		}
	}
	var now int
	took := within(t, 2*time.Minute, "30 running again under a relaunched provider", func() bool {
		now, _ = p.providerPID("simulator")
		return now != 0 && now != pid && w.running() == 30
	})
	t.Logf("frozen provider %d replaced by %d and 5 of 30 instances healed %s after their removal (call deadline %s; deadline + 5s = %s)",
		pid, now, took.Round(time.Millisecond), callTimeout, callTimeout+5*time.Second)
	within(t, 10*time.Second, "the frozen provider reaped", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	if !strings.Contains(p.stderr.String(), "provider does not answer; killing it") {
		t.Errorf("watch's log does not say it killed the provider")
	}
	if kinds := strings.Join(p.eventKinds(), " "); !strings.Contains(kinds, "provider-restart/") {
		t.Errorf("no provider-restart event: %s", kinds)
	}

	// SIGTERM with the provider frozen: watch stops it anyway.
	proctest.Freeze(t, now)
	code, stopped := p.terminate() // fails the test past 35s
	t.Logf("SIGTERM with a frozen provider: exit %d after %s", code, stopped.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("SIGTERM: exit %d\n%s", code, tailOf(p.stderr.String(), 4000))
	}
	if left := processesIn(t, w.dir); len(left) > 0 {
		t.Errorf("processes left after watch exited: %v", left)
	}
}
