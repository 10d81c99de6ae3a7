package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/haproxy/haproxytest"
	"github.com/infrakit/infrakit/plugins/process/proc"
)

// realStack is testdata/real in a workdir, set up to run beside other
// tests: HAProxy on a free loopback port, its state (and sockets) in a
// short directory of its own, the exports file in the workdir, and
// `webserver` found in PATH.
type realStack struct {
	*workdir
	lbPort     int
	haproxyDir string
	exports    string
}

var realLBPort = regexp.MustCompile(`lb_port(\s*)=\s*18090`)

// newRealStack copies testdata/real into a new workdir. Its cleanup, which
// runs after that of a watch started later (cleanups run last first),
// kills what the stack left running: the webserver processes the process
// provider recorded and the HAProxy the haproxy provider started, each
// only once /proc shows it is that process.
func newRealStack(t *testing.T) *realStack {
	t.Helper()
	realNeedHAProxy(t)
	w := newWorkdir(t)
	w.copyStack("testdata/real")
	s := &realStack{workdir: w, lbPort: haproxytest.FreePort(t), exports: filepath.Join(w.dir, "exports", "infrakit.exports")}
	b, err := os.ReadFile(filepath.Join(w.dir, "stack.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !realLBPort.Match(b) {
		t.Fatal("testdata/real/stack.hcl: no lb_port = 18090 to replace")
	}
	w.writeFile("stack.hcl", realLBPort.ReplaceAllString(string(b), fmt.Sprintf("lb_port$1= %d", s.lbPort)))

	// Unix socket paths are at most 107 bytes: t.TempDir() may be too deep.
	s.haproxyDir, err = os.MkdirTemp("", "ik-")
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range w.env {
		if strings.HasPrefix(kv, "PATH=") {
			w.env[i] = "PATH=" + binDir + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		}
	}
	w.env = append(w.env,
		"INFRAKIT_HAPROXY_DIR="+s.haproxyDir,
		"INFRAKIT_NFS_EXPORTS_FILE="+s.exports,
		"INFRAKIT_NFS_EXPORTFS=none",
	)
	t.Cleanup(s.cleanup)
	return s
}

// realNeedHAProxy skips the test when HAProxy is not installed, except in
// CI, which installs it (.ci/run).
func realNeedHAProxy(t *testing.T) {
	t.Helper()
	if haproxytest.Installed() {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("haproxy is not installed; .ci/run installs it")
	}
	t.Skip("haproxy is not installed (apt-get install haproxy)")
}

// realRecord is the part of the process provider's instance record
// (.infrakit/process/instances/<id>.json) the tests read.
type realRecord struct {
	ID string `json:"id"`
	proc.Identity
	Port        int  `json:"port"`
	Terminating bool `json:"terminating"`
}

// records reads the process provider's records by instance ID, skipping one
// removed or replaced while reading.
func (s *realStack) records() map[string]realRecord {
	s.t.Helper()
	files, err := filepath.Glob(filepath.Join(s.dir, ".infrakit", "process", "instances", "*.json"))
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]realRecord{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r realRecord
		if json.Unmarshal(b, &r) == nil && r.ID != "" {
			out[r.ID] = r
		}
	}
	return out
}

// alive lists the IDs of the recorded instances whose process runs (and is
// not being destroyed), sorted: what the group's members are, read from the
// provider's files and /proc, without infrakit.
func (s *realStack) alive() []string {
	var ids []string
	for id, r := range s.records() {
		if st, err := r.Identity.Check(); err == nil && st == proc.Running && !r.Terminating {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// exported lists the instance IDs the exports file exports a volume to,
// sorted: the stack exports /srv/web/<member ID> to each member's host.
func (s *realStack) exported() []string {
	s.t.Helper()
	b, err := os.ReadFile(s.exports)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		id, ok := strings.CutPrefix(f[0], "/srv/web/")
		if len(f) != 2 || !ok || !strings.HasPrefix(f[1], "127.0.0.1(") {
			s.t.Fatalf("exports file line %q: want /srv/web/<id> 127.0.0.1(<options>)", line)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// converged waits until the group has n live members that are exactly
// HAProxy's backends and the exports file's entries, and returns them.
func (s *realStack) converged(n int, d time.Duration, what string) []string {
	s.t.Helper()
	var members, backends, exported []string
	took := within(s.t, d, fmt.Sprintf("%s: %d members, as backends and in the exports file", what, n), func() bool {
		members, exported = s.alive(), s.exported()
		if len(members) != n || !slices.Equal(members, exported) {
			return false
		}
		backends = s.backends("web")
		return slices.Equal(members, backends)
	})
	s.t.Logf("%s: %d members %v, backends and exports equal to them after %s", what, n, members, took.Round(time.Millisecond))
	if g := s.groups()["web"].ids(); !slices.Equal(g, members) {
		s.t.Fatalf("%s: group ls web lists %v; the provider runs %v", what, g, members)
	}
	return members
}

// cleanup kills whatever the stack left running, by identity: each
// recorded webserver's process group, then HAProxy (SIGTERM to the master
// named in haproxy.pid, which stops its workers), and removes HAProxy's
// directory.
func (s *realStack) cleanup() {
	for _, r := range s.records() {
		if _, err := proc.SignalGroup(r.Identity, syscall.SIGKILL); err != nil {
			s.t.Logf("cleanup: instance %s: %v", r.ID, err)
		}
	}
	haproxytest.StopDir(s.t, s.haproxyDir)
	_ = os.RemoveAll(s.haproxyDir)
}

// realAnswer is one request sent through HAProxy.
type realAnswer struct {
	at       time.Time
	instance string // who answered, when it succeeded
	err      error
}

// realClient sends requests through HAProxy, each on a new connection, as
// separate clients would; no connection outlives a request.
var realClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
}

var realAnswerLine = regexp.MustCompile(`^instance (process-[0-9a-f]+) pid \d+ port \d+\n$`)

// get sends GET / through HAProxy and says which instance answered.
func (s *realStack) get() realAnswer {
	a := realAnswer{at: time.Now()}
	resp, err := realClient.Get(fmt.Sprintf("http://127.0.0.1:%d/", s.lbPort))
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch m := realAnswerLine.FindStringSubmatch(string(b)); {
	case err != nil:
		a.err = err
	case resp.StatusCode != http.StatusOK:
		a.err = fmt.Errorf("status %d: %q", resp.StatusCode, b)
	case m == nil:
		a.err = fmt.Errorf("answer %q is no webserver's", b)
	default:
		a.instance = m[1]
	}
	return a
}

// requests sends n requests one after the other; every one must succeed,
// answered by one of members. It returns the answers per instance.
func (s *realStack) requests(n int, members []string) map[string]int {
	s.t.Helper()
	by := map[string]int{}
	for i := range n {
		a := s.get()
		if a.err != nil {
			s.t.Fatalf("request %d of %d through HAProxy: %v", i+1, n, a.err)
		}
		if !slices.Contains(members, a.instance) {
			s.t.Fatalf("request %d answered by %s, not a member of web %v", i+1, a.instance, members)
		}
		by[a.instance]++
	}
	return by
}

// realLoad sends requests through HAProxy from a few workers until stopped, and
// keeps every answer.
type realLoad struct {
	stop    chan struct{}
	halt    sync.Once
	done    sync.WaitGroup
	mu      sync.Mutex
	answers []realAnswer
}

func (s *realStack) startLoad(workers int) *realLoad {
	l := &realLoad{stop: make(chan struct{})}
	for range workers {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				a := s.get()
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	s.t.Cleanup(func() { l.end() }) // a test that fails midway stops them too
	return l
}

// end stops the workers and returns every answer.
func (l *realLoad) end() []realAnswer {
	l.halt.Do(func() { close(l.stop) })
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answers
}

// total is how many requests were answered or failed so far.
func (l *realLoad) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}

// firstAnswer returns when instance first answered, if it did.
func (l *realLoad) firstAnswer(instance string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.answers {
		if a.instance == instance {
			return a.at, true
		}
	}
	return time.Time{}, false
}

// realTally counts the answers by instance and collects the failures.
func realTally(answers []realAnswer) (by map[string]int, failures []realAnswer) {
	by = map[string]int{}
	for _, a := range answers {
		if a.err != nil {
			failures = append(failures, a)
			continue
		}
		by[a.instance]++
	}
	return by, failures
}

// realWithout returns ids less drop.
func realWithout(ids []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(drop, id) })
}

// realNewcomers returns the IDs of now not in before.
func realNewcomers(before, now []string) []string {
	return slices.DeleteFunc(slices.Clone(now), func(id string) bool { return slices.Contains(before, id) })
}

// TestRealStack runs testdata/real with the real providers and `infrakit
// watch`: three webserver processes behind a real HAProxy, health-checked
// over HTTP, enrolled into an exports file. It shows what issue 7 asks:
// 200 requests through HAProxy answered by the group's processes; a
// SIGKILLed process replaced by watch, with HAProxy's backends following
// and requests sent all along still succeeding; `group scale web 5` and
// requests reaching all five; a process that answers but fails its HTTP
// health check replaced; the exports file listing exactly the running
// members at every step; and destroy leaving nothing running.
func TestRealStack(t *testing.T) {
	t.Parallel()
	s := newRealStack(t)
	s.init()
	s.ok("validate")
	s.ok("apply", "-auto-approve")
	members := s.converged(3, 30*time.Second, "after apply")

	// 200 requests, every one answered by a member, each member in turn.
	by := s.requests(200, members)
	t.Logf("200 requests through HAProxy on 127.0.0.1:%d, answered by %v", s.lbPort, by)
	if len(by) != 3 {
		t.Fatalf("200 requests reached %d of the 3 members: %v", len(by), by)
	}

	p := s.startWatch(nil, "-interval", "2s")
	// A kill is a vanished member only to a watch that has listed the
	// group before: wait for a pass that saw all three, and healthy.
	within(t, 30*time.Second, "watch seeing 3 healthy members", func() bool {
		st := p.status()
		return len(st.Groups) == 1 && st.Groups[0].Actual == 3 && st.Groups[0].Health.Healthy == 3
	})

	// SIGKILL one webserver while requests flow: watch replaces it, the
	// backends follow, and no request fails.
	l := s.startLoad(3)
	within(t, 30*time.Second, "requests flowing before the kill", func() bool { return l.total() >= 30 })
	victim := members[0]
	rec := s.records()[victim]
	killed := time.Now()
	if err := syscall.Kill(rec.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var replacement string
	took := within(t, 30*time.Second, "the killed process replaced", func() bool {
		now := s.alive()
		if len(now) != 3 || slices.Contains(now, victim) {
			return false
		}
		replacement = realNewcomers(members, now)[0]
		return true
	})
	t.Logf("SIGKILL of %s (pid %d): replacement %s running after %s", victim, rec.PID, replacement, took.Round(time.Millisecond))
	took = within(t, 30*time.Second, "HAProxy's backends following the replacement", func() bool {
		b := s.backends("web")
		return slices.Contains(b, replacement) && !slices.Contains(b, victim)
	})
	t.Logf("backends (lb backends ls) list %s and not %s %s after the kill", replacement, victim, time.Since(killed).Round(time.Millisecond))
	within(t, 30*time.Second, "a request answered by the replacement", func() bool {
		_, ok := l.firstAnswer(replacement)
		return ok
	})
	first, _ := l.firstAnswer(replacement)
	t.Logf("the replacement answered its first request through HAProxy %s after the kill", first.Sub(killed).Round(time.Millisecond))
	// And requests keep flowing after it.
	after := l.total()
	within(t, 30*time.Second, "requests flowing after the replacement answered", func() bool { return l.total() >= after+50 })
	answers := l.end()
	by, failures := realTally(answers)
	t.Logf("%d requests sent during the replacement, %d failed: %v", len(answers), len(failures), by)
	for _, f := range failures {
		t.Errorf("request at +%s failed: %v", f.at.Sub(killed).Round(time.Millisecond), f.err)
	}
	for id := range by {
		if id != victim && id != replacement && !slices.Contains(members, id) {
			t.Errorf("a request was answered by %s, never a member", id)
		}
	}
	if by[replacement] == 0 {
		t.Errorf("the replacement %s answered none of the requests: %v", replacement, by)
	}
	members = s.converged(3, 30*time.Second, "after the kill")
	if !strings.Contains(strings.Join(p.eventKinds(), " "), "replaced/vanished") {
		t.Errorf("watch's events lack the replacement: %v", p.eventKinds())
	}

	// Scale to 5 with watch running: requests reach all five.
	start := time.Now()
	s.ok("group", "scale", "web", "5")
	t.Logf("group scale web 5 returned after %s", time.Since(start).Round(time.Millisecond))
	members = s.converged(5, 30*time.Second, "after scale 5")
	by = map[string]int{}
	within(t, 60*time.Second, "requests reaching all 5 members", func() bool {
		for id, n := range s.requests(10, members) {
			by[id] += n
		}
		return len(by) == 5
	})
	t.Logf("requests after scale 5 answered by %v", by)

	// A process that answers but fails its HTTP health check: while
	// fail/<id> exists its GET /health is 500. watch replaces it once its
	// 2 s grace is over.
	sick := members[len(members)-1]
	if err := os.MkdirAll(filepath.Join(s.dir, "fail"), 0o755); err != nil {
		t.Fatal(err)
	}
	marked := time.Now()
	s.writeFile(filepath.Join("fail", sick), "")
	if resp, err := realClient.Get(fmt.Sprintf("http://127.0.0.1:%d/health", s.records()[sick].Port)); err != nil || resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("%s's /health: %v %v; want 500 once fail/%s exists", sick, resp, err, sick)
	} else {
		resp.Body.Close()
	}
	took = within(t, 60*time.Second, "the failing process replaced", func() bool {
		now := s.alive()
		return len(now) == 5 && !slices.Contains(now, sick)
	})
	t.Logf("%s failing its health check: replaced after %s (2 failing probes, one per 2s pass, then the 2s grace)", sick, took.Round(time.Millisecond))
	before := members
	members = s.converged(5, 30*time.Second, "after the unhealthy replacement")
	if !slices.Equal(realWithout(before, sick), realWithout(members, realNewcomers(before, members)...)) {
		t.Errorf("members went from %v to %v: only %s should have been replaced", before, members, sick)
	}
	if !strings.Contains(strings.Join(p.eventKinds(), " "), "replaced/unhealthy") {
		t.Errorf("watch's events lack the unhealthy replacement: %v", p.eventKinds())
	}
	t.Logf("marked at %s; watch events: %v", marked.Format("15:04:05.000"), p.eventKinds())
	s.requests(50, members)

	// Stop watch, destroy: no process, no backend, no export left.
	if code, took := p.terminate(); code != 0 {
		t.Fatalf("watch exited %d after SIGTERM (%s)", code, took)
	}
	recs := s.records()
	s.ok("destroy", "-auto-approve")
	for id, r := range recs {
		if st, err := r.Identity.Check(); err != nil || st == proc.Running {
			t.Errorf("after destroy, %s (pid %d) is %v %v", id, r.PID, st, err)
		}
	}
	if left := s.records(); len(left) != 0 {
		t.Errorf("after destroy the process provider still records %v", left)
	}
	if ex := s.exported(); len(ex) != 0 {
		t.Errorf("after destroy the exports file still lists %v", ex)
	}
	if res := s.ok("lb", "routes", "ls", "web", "-json"); strings.Contains(res.stdout, strconv.Itoa(s.lbPort)) {
		t.Errorf("after destroy the route is still published:\n%s", res)
	}
	if a := s.get(); a.err == nil {
		t.Errorf("after destroy a request through HAProxy was answered by %s", a.instance)
	}
}
