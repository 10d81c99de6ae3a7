package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/syncbuf"
)

// watchStack is one cattle group over the simulator, whose own flavor
// reads health from the instance files, so a test can make one unhealthy.
func watchStack(size int, note, extra string) string {
	return fmt.Sprintf(`
stack "watching" {}

provider "simulator" {}

group "web" {
  size = %d
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = %q }
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "1s"
  }
  %s
}
`, size, note, extra)
}

// watchProc is `infrakit watch` running as a subprocess.
type watchProc struct {
	t              *testing.T
	cmd            *exec.Cmd
	pid            int
	addr           string
	token          string // the API token, from the workdir's token file
	stdout, stderr *syncbuf.Buffer
	exited         chan struct{}
	code           int // once exited is closed
}

var servingLine = regexp.MustCompile(`serving https?://([^/ ]+)/v1/status \(pid (\d+)\)`)

// startWatch runs `infrakit watch -listen 127.0.0.1:0 args...` in the
// workdir, with extra environment, and waits until it serves. The end of
// the test stops it (SIGTERM, then SIGKILL).
func (w *workdir) startWatch(env []string, args ...string) *watchProc {
	w.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "infrakit"), append([]string{"watch", "-listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = w.dir
	cmd.Env = append(append([]string{}, w.env...), env...)
	p := &watchProc{t: w.t, cmd: cmd, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		if err != nil && p.code == 0 {
			p.code = -1
		}
		close(p.exited)
	}()
	w.t.Cleanup(func() {
		p.kill()
		if w.t.Failed() {
			w.t.Logf("infrakit watch's stderr:\n%s", tailOf(p.stderr.String(), 8000))
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		if m := servingLine.FindStringSubmatch(p.stdout.String()); m != nil {
			p.addr = m[1]
			p.pid, _ = strconv.Atoi(m[2])
			token, err := os.ReadFile(filepath.Join(w.dir, ".infrakit", "api-token"))
			if err != nil {
				w.t.Fatalf("watch serves, but its API token: %v", err)
			}
			p.token = strings.TrimSpace(string(token))
			return p
		}
		select {
		case <-p.exited:
			w.t.Fatalf("infrakit watch exited %d before serving\n%s%s", p.code, p.stdout, p.stderr)
		case <-deadline:
			w.t.Fatalf("infrakit watch did not serve within 30s\n%s%s", p.stdout, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// terminate sends SIGTERM and returns the exit code and how long it took.
func (p *watchProc) terminate() (int, time.Duration) {
	p.t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
		return p.code, time.Since(start)
	case <-time.After(35 * time.Second):
		p.t.Fatalf("infrakit watch did not exit within 35s of SIGTERM\n%s", p.stderr)
	}
	return 0, 0
}

func (p *watchProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(35 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// watchStatus is the part of GET /v1/status the tests read, declared as a
// user's script would.
type watchStatus struct {
	Passes int `json:"passes"`
	Groups []struct {
		Name    string `json:"name"`
		Desired int    `json:"desired"`
		Actual  int    `json:"actual"`
		Health  struct {
			Healthy int `json:"healthy"`
		} `json:"health"`
		Rolling struct {
			Outdated int `json:"outdated"`
		} `json:"rolling"`
		LastError string `json:"last_error"`
	} `json:"groups"`
	Providers []struct {
		Key      string `json:"key"`
		PID      int    `json:"pid"`
		Restarts int    `json:"restarts"`
	} `json:"providers"`
}

func (p *watchProc) status() watchStatus {
	p.t.Helper()
	var s watchStatus
	p.get("/v1/status", &s)
	return s
}

// eventKinds returns the kinds of the recent events with their reasons
// ("replaced/vanished").
func (p *watchProc) eventKinds() []string {
	p.t.Helper()
	var evs []struct {
		Kind, Reason string
	}
	p.get("/v1/events", &evs)
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind+"/"+e.Reason)
	}
	return out
}

// newRequest is method path of the watch's API, sending token (none when
// empty) and body.
func (p *watchProc) newRequest(method, path, token string, body io.Reader) *http.Request {
	p.t.Helper()
	req, err := http.NewRequest(method, "http://"+p.addr+path, body)
	if err != nil {
		p.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// request GETs path of the watch's API with its token.
func (p *watchProc) request(c *http.Client, path string) (*http.Response, error) {
	return c.Do(p.newRequest(http.MethodGet, path, p.token, nil))
}

func (p *watchProc) get(path string, v any) {
	p.t.Helper()
	resp, err := p.request(http.DefaultClient, path)
	if err != nil {
		p.t.Fatalf("GET %s: %v\n%s", path, err, p.stderr)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		p.t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		p.t.Fatalf("GET %s: %v\n%s", path, err, b)
	}
}

func (p *watchProc) providerPID(key string) (pid, restarts int) {
	for _, pr := range p.status().Providers {
		if pr.Key == key {
			return pr.PID, pr.Restarts
		}
	}
	return 0, 0
}

// within polls cond every 10ms until it holds, or fails the test after d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// simInstance is one simulator instance file as a user reads it.
type simInstance struct {
	ID           string            `json:"id"`
	Tags         map[string]string `json:"tags"`
	Health       string            `json:"health"`
	PendingUntil *time.Time        `json:"pending_until"`
}

// readInstances reads every instance file of type compute (skipping one
// removed or replaced while reading).
func (w *workdir) readInstances() []simInstance {
	w.t.Helper()
	var out []simInstance
	for _, id := range w.simulatorInstances("compute") {
		b, err := os.ReadFile(w.instancePath(id))
		if err != nil {
			continue
		}
		var in simInstance
		if json.Unmarshal(b, &in) == nil {
			out = append(out, in)
		}
	}
	return out
}

// running counts the instances running (past their provision delay) and
// not marked unhealthy: what the simulator's flavor calls healthy.
func (w *workdir) running() int {
	n := 0
	now := time.Now()
	for _, in := range w.readInstances() {
		if in.Health != "unhealthy" && (in.PendingUntil == nil || now.After(*in.PendingUntil)) {
			n++
		}
	}
	return n
}

func (w *workdir) instancePath(id string) string {
	return filepath.Join(w.dir, ".infrakit", "simulator", "instances", "compute", id+".json")
}

// TestWatchHeals runs the service as a user would and breaks things under
// it: instances removed out of band come back on the provider's event
// stream alone (a watch whose interval is ten minutes heals them), an
// instance marked unhealthy is replaced once past its grace, a SIGKILLed
// provider is relaunched and the passes go on, a second watch refuses to
// start naming the first, and SIGTERM exits 0 leaving a state that loads.
func TestWatchHeals(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t)
	w.writeFile("main.hcl", watchStack(10, "heal", ""))
	w.init()
	w.ok("apply", "-auto-approve")

	// Remove 3 of 10 under a watch that lists the group every ten minutes:
	// only the provider's events can bring them back within the test.
	events := w.startWatch(nil, "-interval", "10m")
	within(t, 30*time.Second, "the first pass", func() bool { return events.status().Passes > 0 })
	for _, id := range w.simulatorInstances("compute")[:3] {
		if err := os.Remove(w.instancePath(id)); err != nil {
			t.Fatal(err)
		}
	}
	took := within(t, time.Minute, "10 instances again, with a 10m interval", func() bool { return len(w.simulatorInstances("compute")) == 10 })
	t.Logf("3 removed instances replaced in %s (interval 10m: the provider's event stream)", took.Round(time.Millisecond))
	if kinds := strings.Join(events.eventKinds(), " "); !strings.Contains(kinds, "replaced/vanished") {
		t.Errorf("watch's events lack the replacements of the removed instances: %s", kinds)
	}
	if code, took := events.terminate(); code != 0 {
		t.Fatalf("watch -interval 10m: exit %d after SIGTERM (%s)\n%s", code, took, events.stderr)
	}

	p := w.startWatch(nil, "-interval", "3s")
	within(t, 30*time.Second, "the first pass", func() bool { return p.status().Passes > 0 })

	// Mark one unhealthy: replaced after the 1 s grace, not before.
	victim := w.simulatorInstances("compute")[0]
	b, err := os.ReadFile(w.instancePath(victim))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec["health"] = "unhealthy"
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(w.instancePath(victim), b, 0o644); err != nil {
		t.Fatal(err)
	}
	took = within(t, time.Minute, "the unhealthy instance replaced", func() bool {
		ids := w.simulatorInstances("compute")
		for _, id := range ids {
			if id == victim {
				return false
			}
		}
		return len(ids) == 10
	})
	t.Logf("unhealthy instance replaced %s after it was marked", took.Round(time.Millisecond))
	if took < time.Second {
		t.Errorf("replaced after %s, within its 1s grace", took)
	}
	if kinds := strings.Join(p.eventKinds(), " "); !strings.Contains(kinds, "replaced/unhealthy") {
		t.Errorf("events lack the replacement of the unhealthy instance: %s", kinds)
	}

	// SIGKILL the simulator provider: relaunched, and passes go on.
	pid, _ := p.providerPID("simulator")
	if pid == 0 {
		t.Fatalf("no simulator pid in /v1/status: %+v", p.status())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	within(t, time.Minute, "the simulator relaunched", func() bool {
		now, restarts := p.providerPID("simulator")
		return now != 0 && now != pid && restarts >= 1
	})
	// Let a pass list every instance first: one created just before the
	// kill and removed before any listing saw it would count as a create
	// still expected (a slow provider), not as a vanished instance.
	passes := p.status().Passes
	within(t, 30*time.Second, "a pass after the relaunch", func() bool { return p.status().Passes > passes+1 })
	passes = p.status().Passes
	if err := os.Remove(w.instancePath(w.simulatorInstances("compute")[0])); err != nil {
		t.Fatal(err)
	}
	within(t, time.Minute, "healing after the relaunch", func() bool {
		return len(w.simulatorInstances("compute")) == 10 && p.status().Passes > passes
	})

	// A second watch refuses, naming the first.
	res := w.expect(1, "watch", "-listen", "127.0.0.1:0")
	if !strings.Contains(res.stderr, fmt.Sprintf("pid %d", p.pid)) || !strings.Contains(res.stderr, p.addr) {
		t.Errorf("the second watch does not name the first (pid %d, %s):\n%s", p.pid, p.addr, res)
	}

	// SIGTERM: exit 0, in time, with a state that loads.
	code, took := p.terminate()
	if code != 0 || took > 30*time.Second {
		t.Fatalf("SIGTERM: exit %d after %s\n%s", code, took, p.stderr)
	}
	if !strings.Contains(p.stdout.String(), "infrakit watch stopped.") {
		t.Errorf("stdout does not say it stopped:\n%s", p.stdout)
	}
	show := w.ok("show")
	if !strings.Contains(show.stdout, "web") {
		t.Errorf("infrakit show after watch:\n%s", show)
	}
	g := w.groups()["web"]
	if len(g.Instances) != 10 {
		t.Errorf("after watch stopped: %d instances", len(g.Instances))
	}
}

// TestWatchRollingUpdate changes the stack and applies it while watch
// runs. apply rolls the 6 instances (batches of max_parallel 2, each
// replacement created and healthy before the old one goes); the test
// interrupts apply mid-roll, and watch, which rolls whatever is out of
// date, finishes the job. Sampled continuously from the simulator's files,
// the group never has fewer than 4 running healthy instances nor more
// than 8 instances.
func TestWatchRollingUpdate(t *testing.T) {
	t.Parallel()
	update := `update {
    max_parallel    = 2
    max_unavailable = 2
  }`
	w := newWorkdir(t)
	w.env = append(w.env, "INFRAKIT_SIMULATOR_PROVISION_DELAY=500ms")
	w.writeFile("main.hcl", watchStack(6, "v1", update))
	w.init()
	w.ok("apply", "-auto-approve")
	p := w.startWatch(nil, "-interval", "2s")
	within(t, time.Minute, "6 running instances", func() bool {
		s := p.status()
		return len(s.Groups) == 1 && s.Groups[0].Actual == 6 && s.Groups[0].Health.Healthy == 6 && w.running() == 6
	})
	oldHash := w.readInstances()[0].Tags["infrakit.config.hash"]

	type sample struct{ healthy, total int }
	var mu sync.Mutex
	var samples []sample
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := sample{total: len(w.readInstances()), healthy: w.running()}
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	w.writeFile("main.hcl", watchStack(6, "v2", update))
	apply := exec.Command(filepath.Join(binDir, "infrakit"), "apply", "-auto-approve")
	apply.Dir, apply.Env = w.dir, w.env
	var applyOut syncbuf.Buffer
	apply.Stdout, apply.Stderr = &applyOut, &applyOut
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt apply once its first batch is in.
	within(t, time.Minute, "apply's first replacement", func() bool {
		for _, in := range w.readInstances() {
			if in.Tags["infrakit.config.hash"] != oldHash {
				return true
			}
		}
		return false
	})
	_ = apply.Process.Signal(syscall.SIGINT)
	_ = apply.Wait()
	t.Logf("apply exited %d:\n%s", apply.ProcessState.ExitCode(), applyOut.String())

	within(t, 2*time.Minute, "every instance rolled", func() bool {
		s := p.status()
		return len(s.Groups) == 1 && s.Groups[0].Rolling.Outdated == 0 && s.Groups[0].Actual == 6 &&
			len(w.simulatorInstances("compute")) == 6 && w.plan()["web"] == "no-op"
	})
	close(stop)
	<-sampled
	mu.Lock()
	defer mu.Unlock()
	least, most := 6, 0
	for _, s := range samples {
		least, most = min(least, s.healthy), max(most, s.total)
	}
	t.Logf("%d observations: at least %d healthy, at most %d instances; watch events: %s",
		len(samples), least, most, strings.Join(p.eventKinds(), " "))
	if least < 4 {
		t.Errorf("an observation saw only %d healthy instances (6, max_unavailable 2)", least)
	}
	if most > 8 {
		t.Errorf("an observation saw %d instances (6, max_parallel 2)", most)
	}
}

// TestWatchSlowProvider: with a provider that keeps new instances pending
// for 2 s, healing never takes the group above its size: pending instances
// count, and creates not yet listed are remembered.
func TestWatchSlowProvider(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t)
	w.env = append(w.env, "INFRAKIT_SIMULATOR_PROVISION_DELAY=2s")
	w.writeFile("main.hcl", watchStack(6, "slow", ""))
	w.init()
	w.ok("apply", "-auto-approve")
	p := w.startWatch(nil, "-interval", "1s")
	within(t, 30*time.Second, "the first pass", func() bool { return p.status().Passes > 0 })
	for _, id := range w.simulatorInstances("compute")[:2] {
		if err := os.Remove(w.instancePath(id)); err != nil {
			t.Fatal(err)
		}
	}
	most := 0
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		most = max(most, len(w.simulatorInstances("compute")))
		time.Sleep(2 * time.Millisecond)
	}
	if most > 6 {
		t.Fatalf("the group reached %d instances; its size is 6", most)
	}
	within(t, time.Minute, "6 running", func() bool {
		s := p.status()
		return len(s.Groups) == 1 && s.Groups[0].Actual == 6 && s.Groups[0].Health.Healthy == 6
	})

	// A second signal exits at once: once the first is acknowledged, watch
	// no longer catches SIGTERM, so the second ends it by the signal (unless
	// it had stopped already). The state is still valid.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	within(t, 30*time.Second, "watch acknowledging the first SIGTERM", func() bool {
		return strings.Contains(p.stderr.String(), "SIGTERM received")
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have stopped already
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("watch did not end after a second SIGTERM\n%s", p.stderr)
	}
	t.Logf("after two SIGTERMs: %v", p.cmd.ProcessState)
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !(ws.Signaled() && ws.Signal() == syscall.SIGTERM) && !(ws.Exited() && ws.ExitStatus() == 0) {
		t.Errorf("after two SIGTERMs watch ended with %v; want killed by the second, or exit 0 if the first had stopped it already", p.cmd.ProcessState)
	}
	if res := w.ok("show"); !strings.Contains(res.stdout, "web") {
		t.Errorf("infrakit show after two signals:\n%s", res)
	}
}

// TestWatchFollowers runs watch over the design's example stack: when it
// heals a group, the load balancer's backends and the NFS authorizations
// that follow the group change with it, as `infrakit lb backends ls` and
// `infrakit enrollment describe` (which ask the providers) show. The pass
// that heals the group plans them too: with the ingress's and the
// enrollment's sync_interval at ten minutes, they still follow. While the
// members are replaced, every listing of the authorizations holds one per
// wanted member at least: a replacement is authorized before the member it
// replaces is revoked.
func TestWatchFollowers(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	b, err := os.ReadFile(filepath.Join(w.dir, "stack.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	syncs := regexp.MustCompile(`sync_interval = "[0-9]+s"`)
	if n := len(syncs.FindAll(b, -1)); n != 2 {
		t.Fatalf("testdata/e2e/stack.hcl has %d sync_interval attributes, want the ingress's and the enrollment's", n)
	}
	w.writeFile("stack.hcl", syncs.ReplaceAllString(string(b), `sync_interval = "10m"`))
	w.init()
	w.ok("apply", "-auto-approve")
	p := w.startWatch(nil, "-interval", "2s")
	within(t, 30*time.Second, "the first pass", func() bool { return p.status().Passes > 0 })

	cattle := w.groups()["cattle"].ids()
	if len(cattle) != 10 {
		t.Fatalf("cattle has %d instances after apply", len(cattle))
	}
	removed := cattle[:3]
	for _, id := range removed {
		if err := os.Remove(w.instancePath(id)); err != nil {
			t.Fatal(err)
		}
	}
	fewest := len(cattle)
	// Long before either sync interval: the pass that replaces the members
	// registers and authorizes the new ones and takes the vanished out.
	within(t, time.Minute, "cattle healed, with lb3's backends and nfs's authorizations following it", func() bool {
		now := w.groups()["cattle"].ids()
		var sources []string
		for _, a := range w.authorizations("nfs").Authorizations {
			sources = append(sources, a.SourceID)
		}
		fewest = min(fewest, len(sources))
		slices.Sort(sources)
		want := strings.Join(now, " ")
		return len(now) == 10 && !slices.ContainsFunc(removed, func(id string) bool { return slices.Contains(now, id) }) &&
			strings.Join(w.backends("lb3"), " ") == want && strings.Join(sources, " ") == want
	})
	if fewest < len(cattle) {
		t.Errorf("a listing during the heal held %d authorizations, fewer than the %d wanted members", fewest, len(cattle))
	}
}
