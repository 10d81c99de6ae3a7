//go:build linux

package process

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/plugins/process/proc"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// builder builds testdata/webserver once for the package's tests.
var builder *providertest.Builder

func TestMain(m *testing.M) {
	// Orphaned grandchildren of the instances (a shell's sleep outliving
	// the shell) become this process's children instead of init's, so the
	// tests can reap them: an init that does not reap (a container's) would
	// keep them as zombies.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
	}
	builder = providertest.NewBuilder()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		builder.Close()
		os.Exit(code)
	}))
}

func webserverBin(t *testing.T) string {
	t.Helper()
	return builder.Build(t, "../../../testdata/webserver")
}

// portRange is a range of 100 ports of its own for one test, so tests (and
// other packages' tests running at the same time) rarely compete for ports.
func portRange() PortRange {
	from := 22000 + 100*rand.IntN(70)
	return PortRange{from, from + 99}
}

// newProvider opens a provider on dir and closes it when the test ends,
// after the instances' cleanups (registered later, so run earlier).
func newProvider(t *testing.T, dir string) *Provider {
	t.Helper()
	p, err := New(Config{Dir: dir, WorkDir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// props encodes instance properties.
func props(t *testing.T, v map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func webserverProps(t *testing.T, env map[string]string) json.RawMessage {
	r := portRange()
	return props(t, map[string]any{
		"command": webserverBin(t),
		"ports":   map[string]int{"from": r.From, "to": r.To},
		"env":     env,
	})
}

// provision provisions spec and kills what it started when the test ends,
// whatever the test did to it.
func provision(t *testing.T, p *Provider, spec instance.Spec) instance.ID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := p.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	rec := readRecord(t, p.Dir(), id)
	killOnCleanup(t, rec.Identity)
	return id
}

// killOnCleanup kills the process group of id when the test ends (only if
// it is still provably ours) and reaps the leader if it is this process's
// child.
func killOnCleanup(t *testing.T, id proc.Identity) {
	t.Cleanup(func() {
		_, _ = proc.SignalGroup(id, syscall.SIGKILL)
		reap(id.PID)
	})
}

// reap collects pid if it is an exited child of the test process (an
// instance started by a provider that was closed since).
func reap(pid int) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if err != nil || got == pid {
			return // not our child (ECHILD), or reaped
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readRecord(t *testing.T, dir string, id instance.ID) record {
	t.Helper()
	rec, found, err := store{dir: dir}.read(id)
	if err != nil || !found {
		t.Fatalf("record of %s: found=%v, %v", id, found, err)
	}
	return rec
}

func describe(t *testing.T, p *Provider, tags map[string]string) []instance.Description {
	t.Helper()
	ds, err := p.DescribeInstances(context.Background(), tags, false)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// get fetches http://addr/path and returns the body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// awaitHTTP waits until addr answers GET path.
func awaitHTTP(t *testing.T, addr, path string) string {
	t.Helper()
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	t.Fatalf("%s never answered: %v", addr, last)
	return ""
}

// awaitEvent reads events until one matches, failing after within.
func awaitEvent(t *testing.T, events <-chan instance.Event, within time.Duration, match func(instance.Event) bool) instance.Event {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the watch channel closed")
			}
			if match(e) {
				return e
			}
		case <-timer.C:
			t.Fatalf("no matching event within %v", within)
		}
	}
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	s, err := proc.ReadStat(pid)
	return err == nil && !s.Exited()
}

func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testwait.For(t, 5*time.Second, "pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		_, err = fmt.Sscan(strings.TrimSpace(string(b)), &pid)
		return err == nil && pid > 0
	})
	// A grandchild is not ours to reap, but it is ours to kill while it is
	// still the process we saw.
	if id, err := proc.Identify(pid); err == nil {
		t.Cleanup(func() {
			if st, err := id.Check(); err == nil && st == proc.Running {
				_ = syscall.Kill(id.PID, syscall.SIGKILL)
			}
			reap(id.PID)
		})
	}
	return pid
}

// testLogger logs to t until the test ends.
func testLogger(t *testing.T) hclog.Logger {
	w := providertest.LogWriter(t)
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Debug})
}
