package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/infrakit/infrakit/plugins/haproxy/runtimeapi"
	"github.com/infrakit/infrakit/plugins/process/proc"
)

// mbbStack is the stack of TestMakeBeforeBreak: testdata/real's group of
// webserver processes behind HAProxy and enrolled into the exports file,
// with six members, a rolling update of two at a time, and release as an
// environment variable of every process (changing it rolls the group).
// With spare, a second group of two webservers, not enrolled, stands
// behind the same load balancer, so that while `group destroy web` runs
// there is something left for requests to reach.
//
// drain_delay is left at its default (3s): the test shows the order as
// users get it, and no check depends on how long the delay is (the poller
// judges order, not time).
//
// The followers' sync_interval is long on purpose: the heal checks that the
// watch pass that re-creates a killed member deregisters it itself, which a
// periodic sync landing in the few milliseconds between the kill and that
// pass would do first. Nothing else here waits on a periodic sync: the CLI
// verbs and apply plan their followers' steps themselves, and watch syncs at
// once after a pass that lists a new member.
func mbbStack(lbPort int, release string, spare bool) string {
	groups := "[group.web]"
	spareGroup := ""
	if spare {
		groups = "[group.web, group.spare]"
		spareGroup = `
group "spare" {
  size = 2
  tags = { tier = "spare" }
  instance {
    provider   = process
    type       = "process"
    properties = {
      command      = "webserver"
      ports        = { from = 21000, to = 21999 }
      kill_timeout = "2s"
    }
  }
  flavor {
    provider   = healthcheck
    properties = { http = { path = "/health" }, timeout = "1s", healthy_threshold = 1, unhealthy_threshold = 2 }
  }
}
`
	}
	return fmt.Sprintf(`stack "real" {}

provider "process" {}
provider "healthcheck" {}
provider "haproxy" {}
provider "nfsexports" {}

group "web" {
  size = 6
  tags = { tier = "web" }

  instance {
    provider = process
    type     = "process"
    properties = {
      command      = "/bin/sh"
      args         = ["-c", "export WEBSERVER_FAIL_FILE=\"fail/$INFRAKIT_INSTANCE_ID\"; exec webserver"]
      env          = { RELEASE = %q }
      ports        = { from = 21000, to = 21999 }
      kill_timeout = "2s"
    }
  }

  flavor {
    provider = healthcheck
    properties = {
      http                = { path = "/health" }
      timeout             = "1s"
      healthy_threshold   = 1
      unhealthy_threshold = 2
    }
  }

  update {
    max_parallel    = 2
    max_unavailable = 2
  }

  health {
    grace = "2s"
  }
}
%s
loadbalancer "web" { provider = haproxy }

ingress "web" {
  sync_interval = "10m"
  rule {
    loadbalancer = loadbalancer.web
    groups       = %s
    route {
      lb_port     = %d
      lb_protocol = "http"
      port        = 80
      protocol    = "http"
    }
  }
}

enrollment "exports" {
  source = group.web
  target {
    provider = nfsexports
    type     = "exports"
    properties = {
      host    = member.address
      volume  = "/srv/web/${member.id}"
      options = ["rw", "sync", "no_subtree_check"]
    }
  }
  sync_interval = "10m"
}
`, release, spareGroup, groups, lbPort)
}

// mbbRecord is the part of a process provider record the poller reads; it
// adds the tags (which group) and the properties (which release) to
// realRecord.
type mbbRecord struct {
	realRecord
	Tags       map[string]string `json:"tags"`
	Properties struct {
		Env map[string]string `json:"env"`
	} `json:"properties"`
}

// mbbRecords reads the process provider's records, as records does, without
// failing the test: the poller calls it from its own goroutine.
func mbbRecords(dir string) (map[string]mbbRecord, error) {
	files, err := filepath.Glob(filepath.Join(dir, ".infrakit", "process", "instances", "*.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]mbbRecord{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // removed while listing
		}
		var r mbbRecord
		if json.Unmarshal(b, &r) == nil && r.ID != "" {
			out[r.ID] = r
		}
	}
	return out, nil
}

// mbbAlive lists the live (running, not terminating) instances of group,
// sorted.
func (s *realStack) mbbAlive(group string) []string {
	s.t.Helper()
	recs, err := mbbRecords(s.dir)
	if err != nil {
		s.t.Fatal(err)
	}
	var ids []string
	for id, r := range recs {
		if r.Tags["infrakit.group"] != group || r.Terminating {
			continue
		}
		if st, err := r.Identity.Check(); err == nil && st == proc.Running {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// mbbLBRecord is the part of the haproxy provider's state.json the poller
// reads: the backends each load balancer has registered, which is what
// `lb backends ls` answers.
type mbbLBRecord struct {
	LoadBalancers map[string]struct {
		Backends []struct {
			ID string `json:"id"`
		} `json:"backends"`
	} `json:"load_balancers"`
}

// mbbState is what the poller knows about one instance it has seen.
type mbbState struct {
	id    string
	group string
	port  int
	// seq orders instances by when the poller first saw their record.
	seq int
	// firstRegistered and lastRegistered are the samples at which HAProxy
	// (or the provider's record) first and last had it registered.
	firstRegistered, lastRegistered time.Time
	// destroyed is the first sample at which it was found terminating or
	// gone, during the phase destroyedIn.
	destroyed   time.Time
	destroyedIn string
	violation   bool
}

// mbbPhase is what the poller saw during one phase of the test.
type mbbPhase struct {
	name       string
	samples    int
	incomplete int // samples HAProxy's runtime API did not answer (a reload)
	// minServing is the fewest servers HAProxy had up (registered, passing
	// its check) and pointing at a live member, over the complete samples.
	minServing int
	// maxRegistered is the most instances registered at one sample;
	// maxPresent the most instances of the web group that had a record
	// (live, terminating or not yet cleaned up).
	maxRegistered, maxPresent int
	violations                []string
}

// mbbPoller samples, as often as it can, the process provider's records
// and /proc, then HAProxy's servers (runtime API, "show servers state")
// and the haproxy provider's record of its backends (state.json), and
// records a violation for every instance found destroyed (terminating, or
// its process gone) while still registered.
//
// The provider is read first: an instance destroyed by then stays destroyed
// (terminating lasts until the process is gone; a gone process never comes
// back), so if the load balancer, read after, still has it registered, both
// held at the moment of that later read. The other order would report an
// instance deregistered and destroyed between the two reads.
//
// HAProxy's servers are slots pointing at an address; every instance is
// 127.0.0.1:<port>, and a port may be handed on (see mbbSlotHolder); the
// provider's record names instances by ID and has no such ambiguity.
type mbbPoller struct {
	dir, haproxyDir string
	lbName          string
	master          runtimeapi.Master
	stop, done      chan struct{}

	mu     sync.Mutex
	phase  *mbbPhase
	exempt map[string]bool
	seen   map[string]*mbbState
	errs   []string
}

func (s *realStack) mbbStartPoller() *mbbPoller {
	p := &mbbPoller{
		dir: s.dir, haproxyDir: s.haproxyDir, lbName: "web",
		master: s.mbbMaster(),
		stop:   make(chan struct{}), done: make(chan struct{}),
		exempt: map[string]bool{}, seen: map[string]*mbbState{},
	}
	p.phase = &mbbPhase{name: "setup", minServing: -1}
	go p.run()
	s.t.Cleanup(p.end)
	return p
}

func (p *mbbPoller) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		p.sample()
		time.Sleep(2 * time.Millisecond) // pacing only
	}
}

// end stops the poller and waits for its goroutine.
func (p *mbbPoller) end() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// begin starts a new phase: what is sampled from now on is counted under name.
func (p *mbbPoller) begin(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase = &mbbPhase{name: name, minServing: -1}
}

// exemptFrom excludes id from the violations: the member a test kills is
// dead before anyone could deregister it.
func (p *mbbPoller) exemptFrom(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exempt[id] = true
}

// current returns a copy of the current phase's figures.
func (p *mbbPoller) current() mbbPhase {
	p.mu.Lock()
	defer p.mu.Unlock()
	return *p.phase
}

// state returns a copy of what the poller knows about id.
func (p *mbbPoller) state(id string) (mbbState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.seen[id]
	if !ok {
		return mbbState{}, false
	}
	return *st, true
}

// samples counts the samples taken in the current phase.
func (p *mbbPoller) samples() int { return p.current().samples }

// sample takes one sample; see mbbPoller.
func (p *mbbPoller) sample() {
	at := time.Now()
	recs, err := mbbRecords(p.dir)
	if err != nil {
		p.fail("list the process provider's records: %v", err)
		return
	}
	live := map[string]bool{}
	destroyed := map[string]string{}
	for id, r := range recs {
		st, err := r.Identity.Check()
		switch {
		case err != nil:
			p.fail("check the process of %s: %v", id, err)
			return
		case r.Terminating:
			destroyed[id] = "terminating"
		case st != proc.Running:
			destroyed[id] = "its process " + st.String()
		default:
			live[id] = true
		}
	}

	servers, rerr := p.master.ServersState(context.Background(), "")
	var lb mbbLBRecord
	b, lerr := os.ReadFile(filepath.Join(p.haproxyDir, "state.json"))
	if lerr == nil {
		lerr = json.Unmarshal(b, &lb)
	} else if errors.Is(lerr, os.ErrNotExist) {
		lerr = nil // nothing registered yet
	}
	// Instances whose record appeared since the first read: one of them
	// may be what HAProxy's slot now points at (a port handed on). Their
	// records were written before they could be registered, so every
	// instance registered by now is in this second read.
	newcomers, err := mbbRecords(p.dir)
	if err != nil {
		p.fail("list the process provider's records: %v", err)
		return
	}
	for id := range recs {
		delete(newcomers, id)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	ph := p.phase
	ph.samples++
	for _, rs := range []map[string]mbbRecord{recs, newcomers} {
		for id, r := range rs {
			if _, ok := p.seen[id]; !ok {
				p.seen[id] = &mbbState{id: id, group: r.Tags["infrakit.group"], port: r.Port, seq: len(p.seen)}
			}
		}
	}
	for id := range p.seen {
		_, listed := recs[id]
		if _, isNew := newcomers[id]; !listed && !isNew {
			destroyed[id] = "its record removed (process gone)"
		}
	}
	for id := range destroyed {
		if st := p.seen[id]; st.destroyed.IsZero() {
			st.destroyed, st.destroyedIn = at, ph.name
		}
	}

	// registered: instance -> where it was found registered.
	registered := map[string][]string{}
	if lerr != nil {
		p.errs = append(p.errs, fmt.Sprintf("read the haproxy provider's state.json: %v", lerr))
	} else {
		for _, be := range lb.LoadBalancers[p.lbName].Backends {
			registered[be.ID] = append(registered[be.ID], "in the haproxy provider's record (lb backends ls)")
		}
	}
	serving := 0
	if rerr != nil {
		ph.incomplete++
	} else {
		prefix := "be_" + p.lbName + "_"
		for _, srv := range servers {
			if !strings.HasPrefix(srv.Backend, prefix) || srv.Maint() || srv.Addr == "0.0.0.0" {
				continue
			}
			if srv.Addr != "127.0.0.1" {
				continue // not one of this stack's instances
			}
			id, current := mbbSlotHolder(srv.Port, p.seen, func(id string) bool {
				_, isNew := newcomers[id]
				return live[id] || isNew
			})
			if id == "" {
				continue // not one of this stack's instances
			}
			if current && srv.Up() {
				serving++
			}
			registered[id] = append(registered[id], fmt.Sprintf("in HAProxy (%s/%s %s:%d, op state %d)", srv.Backend, srv.Name, srv.Addr, srv.Port, srv.OpState))
		}
		if ph.minServing < 0 || serving < ph.minServing {
			ph.minServing = serving
		}
	}
	ph.maxRegistered = max(ph.maxRegistered, len(registered))
	present := 0
	for _, r := range recs {
		if r.Tags["infrakit.group"] == "web" {
			present++
		}
	}
	ph.maxPresent = max(ph.maxPresent, present)
	for id, where := range registered {
		st, ok := p.seen[id]
		if !ok {
			continue // registered before the poller saw its record: not destroyed, then
		}
		if st.firstRegistered.IsZero() {
			st.firstRegistered = at
		}
		st.lastRegistered = at
		if how, gone := destroyed[id]; gone && !st.violation && !p.exempt[id] {
			st.violation = true
			ph.violations = append(ph.violations, fmt.Sprintf("%s (group %s) was destroyed (%s) while still registered %s",
				id, st.group, how, strings.Join(slices.Compact(where), " and ")))
		}
	}
}

func (p *mbbPoller) fail(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

// drainGaps returns, for the instances found destroyed during phase, the
// time from the last sample that had them registered to the first that
// found them destroyed (the drain as the poller saw it), sorted; and those
// the poller never saw registered, for which it could judge nothing.
func (p *mbbPoller) drainGaps(phase string) (gaps []time.Duration, unjudged []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.seen {
		switch {
		case st.destroyedIn != phase || p.exempt[st.id] || st.violation:
		case st.lastRegistered.IsZero():
			unjudged = append(unjudged, st.id)
		default:
			gaps = append(gaps, st.destroyed.Sub(st.lastRegistered))
		}
	}
	slices.Sort(gaps)
	slices.Sort(unjudged)
	return gaps, unjudged
}

// mbbFigures are one scenario's figures.
type mbbFigures struct {
	name         string
	sent, failed int
	took         time.Duration
	samples      int
	minServing   int
	lb           mbbLBCounters
	reloaded     bool // HAProxy reloaded: lb is not comparable
	// maxRegistered and maxPresent: see mbbPhase.
	maxRegistered, maxPresent int
	violations                int
	drain                     []time.Duration
	answeredBy                int
}

func (f mbbFigures) String() string {
	s := fmt.Sprintf("%-26s %5d requests (answered by %d instances), %d failed, HAProxy retried %d, redispatched %d, %d connection errors; took %7s; poller: %4d samples, %d violations, serving >= %d, registered <= %d, web instances <= %d",
		f.name, f.sent, f.answeredBy, f.failed, f.lb.retries, f.lb.redispatches, f.lb.connErrors, f.took.Round(time.Millisecond), f.samples, f.violations, f.minServing, f.maxRegistered, f.maxPresent)
	if len(f.drain) > 0 {
		s += fmt.Sprintf("; %d destroyed, deregistered → destroyed %s..%s", len(f.drain), f.drain[0].Round(time.Millisecond), f.drain[len(f.drain)-1].Round(time.Millisecond))
	}
	return s
}

// mbbRun runs the scenarios of TestMakeBeforeBreak on one stack.
type mbbRun struct {
	s    *realStack
	poll *mbbPoller
	figs []mbbFigures
}

// mbbWorkers is how many clients send requests during each scenario.
const mbbWorkers = 4

// mbbAnswers is how many answers l holds so far.
func mbbAnswers(l *realLoad) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}

// scenario runs act while mbbWorkers clients send requests through
// HAProxy (each on a new connection) and the poller samples: requests and
// samples flow before act starts and go on after it returns. Every request
// must succeed and the poller must find no instance destroyed while still
// registered. It returns, and logs, the scenario's figures; act's
// duration is the scenario's time.
func (r *mbbRun) scenario(name string, act func()) mbbFigures {
	t := r.s.t
	t.Helper()
	r.poll.begin(name)
	before, worker := r.s.mbbCounters()
	l := r.s.startLoad(mbbWorkers)
	within(t, 30*time.Second, name+": requests flowing and the poller sampling before it starts", func() bool {
		return mbbAnswers(l) >= 50 && r.poll.samples() >= 20
	})
	start := time.Now()
	act()
	took := time.Since(start)
	n, samples := mbbAnswers(l), r.poll.samples()
	within(t, 30*time.Second, name+": requests flowing and the poller sampling after it", func() bool {
		return mbbAnswers(l) >= n+50 && r.poll.samples() >= samples+20
	})
	answers := l.end()
	after, worker2 := r.s.mbbCounters()
	reloaded := !slices.Equal(worker, worker2)
	if reloaded {
		t.Logf("%s: HAProxy reloaded (workers %v, then %v): its counters start again", name, worker, worker2)
	}
	lb := after.sub(before)
	ph := r.poll.current()
	by, failures := realTally(answers)
	gaps, unjudged := r.poll.drainGaps(name)
	f := mbbFigures{name: name, sent: len(answers), failed: len(failures), took: took, samples: ph.samples,
		minServing: ph.minServing, maxRegistered: ph.maxRegistered, maxPresent: ph.maxPresent, violations: len(ph.violations), drain: gaps, answeredBy: len(by), lb: lb, reloaded: reloaded}
	t.Logf("%s", f)
	if len(unjudged) > 0 {
		t.Errorf("%s: the poller never saw %v registered before they were destroyed: it could not judge their order", name, unjudged)
	}
	for i, a := range failures {
		if i == 10 {
			t.Errorf("%s: ... and %d more failed requests", name, len(failures)-i)
			break
		}
		t.Errorf("%s: request at +%s failed: %v", name, a.at.Sub(start).Round(time.Millisecond), a.err)
	}
	for _, v := range ph.violations {
		t.Errorf("%s: %s", name, v)
	}
	if ph.samples-ph.incomplete < 20 {
		t.Errorf("%s: only %d of the poller's %d samples had HAProxy's servers", name, ph.samples-ph.incomplete, ph.samples)
	}
	r.figs = append(r.figs, f)
	return f
}

// leave runs a scenario in which members leave and none dies on its own
// (a scale-down, destroy-instances, a roll, group destroy). Beyond what
// scenario checks, HAProxy must not have retried or redispatched a single
// connection: a member that leaves is out of HAProxy before it stops
// listening, so no request depends on HAProxy's retries to succeed.
func (r *mbbRun) leave(name string, act func()) mbbFigures {
	r.s.t.Helper()
	f := r.scenario(name, act)
	if f.lb != (mbbLBCounters{}) && !f.reloaded {
		r.s.t.Errorf("%s: HAProxy retried %d connections, redispatched %d and counted %d connection errors: a request reached a member that no longer listened",
			name, f.lb.retries, f.lb.redispatches, f.lb.connErrors)
	}
	return f
}

// mbbServing counts HAProxy's servers of the web load balancer that are up
// (registered and passing HAProxy's check) and point at a live member.
func (s *realStack) mbbServing() (int, error) {
	recs, err := mbbRecords(s.dir)
	if err != nil {
		return 0, err
	}
	ports := map[int]bool{}
	for _, r := range recs {
		if st, err := r.Identity.Check(); err == nil && st == proc.Running && !r.Terminating {
			ports[r.Port] = true
		}
	}
	servers, err := s.mbbMaster().ServersState(context.Background(), "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, srv := range servers {
		if strings.HasPrefix(srv.Backend, "be_web_") && srv.Up() && srv.Addr == "127.0.0.1" && ports[srv.Port] {
			n++
		}
	}
	return n, nil
}

// mbbWaitServing waits until HAProxy has exactly n servers up for live members.
func (s *realStack) mbbWaitServing(n int, what string) {
	s.t.Helper()
	took := within(s.t, 60*time.Second, fmt.Sprintf("%s: HAProxy serving %d live members", what, n), func() bool {
		got, err := s.mbbServing()
		return err == nil && got == n
	})
	s.t.Logf("%s: HAProxy serves %d live members (after %s)", what, n, took.Round(time.Millisecond))
}

// mbbEvent is one of watch's /v1/events, as a user's script reads it.
type mbbEvent struct {
	Seq      uint64 `json:"seq"`
	Kind     string `json:"kind"`
	Group    string `json:"group"`
	Instance string `json:"instance"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
}

func (e mbbEvent) String() string {
	return fmt.Sprintf("#%d %s group=%q instance=%q reason=%q %q", e.Seq, e.Kind, e.Group, e.Instance, e.Reason, e.Message)
}

// mbbEvents returns watch's recent events, oldest first.
func (p *watchProc) mbbEvents() []mbbEvent {
	p.t.Helper()
	var evs []mbbEvent
	p.get("/v1/events", &evs)
	slices.SortFunc(evs, func(a, b mbbEvent) int { return cmp.Compare(a.Seq, b.Seq) })
	return evs
}

// mbbMaster is the master CLI socket of the stack's HAProxy.
func (s *realStack) mbbMaster() runtimeapi.Master {
	return runtimeapi.Master{Socket: filepath.Join(s.haproxyDir, "master.sock")}
}

// mbbLBCounters are HAProxy's counters of the web load balancer's backend
// section ("show stat"): connection attempts HAProxy retried (wretr) or
// redispatched to another server (wredis), and connection errors (econ).
// Requests that never reached a dead or stopping member cost none.
type mbbLBCounters struct{ retries, redispatches, connErrors int }

func (c mbbLBCounters) sub(d mbbLBCounters) mbbLBCounters {
	return mbbLBCounters{c.retries - d.retries, c.redispatches - d.redispatches, c.connErrors - d.connErrors}
}

// mbbCounters reads mbbLBCounters, and the worker that counted them: HAProxy
// keeps them per worker, so they start again at a reload (which nothing in
// TestMakeBeforeBreak should cause: the backend never has more members
// than its 16 server slots).
func (s *realStack) mbbCounters() (mbbLBCounters, []int) {
	s.t.Helper()
	procs, err := s.mbbMaster().Processes(context.Background())
	if err != nil {
		s.t.Fatalf("haproxy show proc: %v", err)
	}
	out, err := s.mbbMaster().Worker(context.Background(), "show stat")
	if err != nil {
		s.t.Fatalf("haproxy show stat: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	col := map[string]int{}
	for i, name := range strings.Split(strings.TrimPrefix(lines[0], "# "), ",") {
		col[name] = i
	}
	for _, name := range []string{"pxname", "svname", "wretr", "wredis", "econ"} {
		if _, ok := col[name]; !ok {
			s.t.Fatalf("haproxy show stat: no %s column in %q", name, lines[0])
		}
	}
	num := func(f []string, name string) int {
		var n int
		fmt.Sscan(f[col[name]], &n) // empty for counters a row lacks: 0
		return n
	}
	for _, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) > col["econ"] && strings.HasPrefix(f[col["pxname"]], "be_web_") && f[col["svname"]] == "BACKEND" {
			return mbbLBCounters{num(f, "wretr"), num(f, "wredis"), num(f, "econ")}, procs.Workers
		}
	}
	s.t.Fatalf("haproxy show stat: no be_web_* BACKEND line in\n%s", out)
	return mbbLBCounters{}, nil
}
