package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest/embedded"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// One embedded etcd serves the HA tests, started by the first of them and
// stopped by TestMain (so that tests that need none do not pay for it).
var (
	etcdOnce sync.Once
	etcdSrv  *etcdtest.Server
	etcdDir  string
	etcdErr  error
)

func etcdEndpoint(t *testing.T) string {
	t.Helper()
	etcdOnce.Do(func() {
		etcdDir, etcdErr = os.MkdirTemp("", "watch-etcd-")
		if etcdErr == nil {
			etcdSrv, etcdErr = embedded.Start(etcdDir)
		}
	})
	if etcdErr != nil {
		t.Fatal(etcdErr)
	}
	return etcdSrv.Endpoints[0]
}

func closeEtcd() {
	if etcdSrv != nil {
		etcdSrv.Close()
	}
	if etcdDir != "" {
		os.RemoveAll(etcdDir)
	}
}

// haTTL is the lease TTL of the HA tests, as the issue asks.
const haTTL = 2 * time.Second

// haStack is stackOf with the etcd backend block.
func haStack(size int, flavor, extra, endpoint, prefix string) string {
	return strings.Replace(stackOf(size, "ha", flavor, extra), `stack "test" {}`, fmt.Sprintf(`stack "test" {
  backend "etcd" {
    endpoints = [%q]
    prefix    = %q
    lease_ttl = %q
  }
}`, endpoint, prefix, haTTL.String()), 1)
}

// haCluster is several stack directories whose `init` recorded one etcd
// backend, each with a watch of its own, over one simulator store: what
// several machines running watch against one etcd look like.
type haCluster struct {
	t      *testing.T
	simDir string
	prefix string
	dirs   []*workdir
	ws     []*running
	ids    []string
}

// newHACluster makes n directories; endpoint(i) is the etcd endpoint the
// i-th records (a proxy in front of etcd, to cut it off).
func newHACluster(t *testing.T, n, size int, flavor, extra string, endpoint func(i int) string) *haCluster {
	t.Helper()
	prefix := "/test/" + t.Name()
	return newClusterOf(t, n, prefix, func(i int) string { return haStack(size, flavor, extra, endpoint(i), prefix) })
}

// newClusterOf makes n directories of the stacks stackOf(i) (each with an
// etcd backend block under prefix) over one simulator store, recording
// each one's backend as `init` does; env is added to the providers'
// environment of directory i.
func newClusterOf(t *testing.T, n int, prefix string, stackOf func(i int) string, env ...func(i int) []string) *haCluster {
	t.Helper()
	c := &haCluster{t: t, simDir: filepath.Join(t.TempDir(), "sim"), prefix: prefix}
	for i := range n {
		extraEnv := []string{"INFRAKIT_SIMULATOR_DIR=" + c.simDir}
		for _, e := range env {
			extraEnv = append(extraEnv, e(i)...)
		}
		w := newWorkdir(t, stackOf(i), extraEnv...)
		st, diags := config.Load(w.dir)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		if err := stateetcd.WriteRecord(w.dir, st.Backend); err != nil {
			t.Fatal(err)
		}
		c.dirs = append(c.dirs, w)
		c.ws = append(c.ws, nil)
		c.ids = append(c.ids, fmt.Sprintf("w%d", i))
	}
	return c
}

// start starts the i-th watch.
func (c *haCluster) start(i int, interval time.Duration) *running {
	c.t.Helper()
	opts := testOptions(c.dirs[i])
	opts.Identity = c.ids[i]
	opts.Interval = interval
	c.ws[i] = start(c.t, opts)
	return c.ws[i]
}

// instances lists the simulator's compute instances.
func (c *haCluster) instances() []string {
	files, _ := filepath.Glob(filepath.Join(c.simDir, "instances", "compute", "*.json"))
	var ids []string
	for _, f := range files {
		ids = append(ids, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	slices.Sort(ids)
	return ids
}

// notUnhealthy counts the instances whose file is not marked unhealthy.
// A cattle member is replaced with its replacement's create beside its
// destroy (group.Controller.Execute), so the unhealthy member and its
// replacement may coexist for a moment by design; a second acting leader
// would still show as one healthy instance too many.
func (c *haCluster) notUnhealthy() int {
	files, _ := filepath.Glob(filepath.Join(c.simDir, "instances", "compute", "*.json"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // destroyed since the glob
		}
		var rec struct {
			Health string `json:"health"`
		}
		if json.Unmarshal(b, &rec) == nil && rec.Health == "unhealthy" {
			continue
		}
		n++
	}
	return n
}

// fetchStatus reads a watch's status without failing the test (for
// monitors running beside it).
func fetchStatus(addr string) (status.Status, error) {
	var s status.Status
	resp, err := http.Get("http://" + addr + status.PathStatus)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// leader waits until exactly one running watch leads and every running one
// names it as the leader, and returns its index.
func (c *haCluster) leader(what string) int {
	c.t.Helper()
	found := -1
	testwait.For(c.t, 20*time.Second, what, func() bool {
		found = -1
		var sts []status.Status
		for i, r := range c.ws {
			if r == nil {
				continue
			}
			s, err := fetchStatus(r.addr)
			if err != nil {
				return false
			}
			if s.Identity != c.ids[i] {
				c.t.Fatalf("watch %d says it is %q", i, s.Identity)
			}
			if s.Leader {
				if found >= 0 {
					return false
				}
				found = i
			}
			sts = append(sts, s)
		}
		if found < 0 {
			return false
		}
		for _, s := range sts {
			if s.LeaderIdentity != c.ids[found] {
				return false
			}
		}
		return true
	})
	return found
}

// stopWatch stops the i-th watch (SIGTERM's path: it resigns).
func (c *haCluster) stopWatch(i int) {
	c.t.Helper()
	if err := c.ws[i].stop(); err != nil {
		c.t.Fatal(err)
	}
	c.ws[i] = nil
}

// monitor polls every running watch and the simulator until stop, and
// remembers whether two watches ever said they lead at once and the most
// instances the simulator held.
type monitor struct {
	mu         sync.Mutex
	twoLeaders []string
	maxInst    int
	stop       chan struct{}
	done       chan struct{}
}

// watchInvariants starts a monitor of the watches running now (one that
// stops no longer answers, and is skipped).
func (c *haCluster) watchInvariants() *monitor {
	m := &monitor{stop: make(chan struct{}), done: make(chan struct{})}
	var addrs []string
	for _, r := range c.ws {
		if r != nil {
			addrs = append(addrs, r.addr)
		}
	}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
			var leading []string
			for _, a := range addrs {
				if s, err := fetchStatus(a); err == nil && s.Leader {
					leading = append(leading, s.Identity)
				}
			}
			n := c.notUnhealthy()
			m.mu.Lock()
			if len(leading) > 1 {
				m.twoLeaders = append(m.twoLeaders, strings.Join(leading, "+"))
			}
			m.maxInst = max(m.maxInst, n)
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *monitor) finish() (twoLeaders []string, maxInst int) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.twoLeaders, m.maxInst
}

// leaderEvents counts the "leader" events of a watch: became, lost.
func leaderEvents(evs []status.Event) (became, lost int) {
	for _, e := range evs {
		if e.Kind != status.EventLeader {
			continue
		}
		if strings.HasSuffix(e.Message, "became the leader") {
			became++
		} else {
			lost++
		}
	}
	return became, lost
}

// Three watch processes (in one test process) share a stack through etcd:
// exactly one leads and every one names it; the followers show the group
// read-only and never act; the leader heals; stopping the leader (the
// SIGTERM path: it resigns) hands leadership to another at once, twice
// over; the new leader judges nothing unhealthy for one interval; the
// simulator never holds more instances than the group's size.
func TestHAFailover(t *testing.T) {
	ep := etcdEndpoint(t)
	const size = 3
	interval := 2 * time.Second
	c := newHACluster(t, 3, size, "simulator", `health {
    grace = "0s"
  }`, func(int) string { return ep })
	c.dirs[0].apply()
	if n := len(c.instances()); n != size {
		t.Fatalf("apply made %d instances, want %d", n, size)
	}
	for i := range c.ws {
		c.start(i, interval)
	}
	mon := c.watchInvariants()
	first := c.leader("one leader among three, named by all")
	t.Logf("%s leads", c.ids[first])

	// Followers observe: their status shows the group as it is.
	for i, r := range c.ws {
		if i == first {
			continue
		}
		testwait.For(t, 10*time.Second, "a follower shows the group", func() bool {
			g := r.group()
			return g.Desired == size && g.Actual == size
		})
	}

	// The leader heals; nobody else acts. (Two passes of its own first:
	// what is missing at a new leader's first listing is simply created,
	// as apply would, not reported as replaced.)
	passes := c.ws[first].status().Passes
	testwait.For(t, 10*time.Second, "two passes of the leader", func() bool { return c.ws[first].status().Passes >= passes+2 })
	gone := c.instances()[0]
	if err := os.Remove(filepath.Join(c.simDir, "instances", "compute", gone+".json")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the vanished instance replaced", func() bool {
		ids := c.instances()
		return len(ids) == size && !slices.Contains(ids, gone)
	})
	testwait.For(t, 5*time.Second, "the leader's replaced event", func() bool {
		n := countEvents(c.ws[first].events(), status.EventReplaced, string(status.ReasonVanished))
		if n > 1 {
			t.Fatalf("%d replaced events for one vanished instance: %+v", n, c.ws[first].events())
		}
		return n == 1
	})

	// Stop the leader: it resigns, another leads at once.
	stopped := time.Now()
	c.stopWatch(first)
	second := c.leader("a new leader after the first stopped")
	t.Logf("%s stopped (resigned); %s leads %s later", c.ids[first], c.ids[second], time.Since(stopped).Round(time.Millisecond))

	// A new leader trusts no health for one interval: an instance turned
	// unhealthy now is replaced, but not before the interval has passed
	// since it began to lead.
	var becameAt time.Time
	for _, e := range c.ws[second].events() {
		if e.Kind == status.EventLeader && strings.HasSuffix(e.Message, "became the leader") {
			becameAt = e.Time
		}
	}
	sick := c.instances()[0]
	setHealthIn(t, filepath.Join(c.simDir, "instances", "compute", sick+".json"), "unhealthy")
	testwait.For(t, 20*time.Second, "the unhealthy instance replaced", func() bool {
		return !slices.Contains(c.instances(), sick) && len(c.instances()) == size
	})
	var replacedAt time.Time
	for _, e := range c.ws[second].events() {
		if e.Kind == status.EventReplaced && string(e.Instance) == sick {
			replacedAt = e.Time
		}
	}
	if replacedAt.IsZero() || becameAt.IsZero() {
		t.Fatalf("no replaced event for %s or no leader event", sick)
	}
	if replacedAt.Sub(becameAt) < interval {
		t.Errorf("the new leader replaced an unhealthy instance %s after leading: within its quiet period (%s)",
			replacedAt.Sub(becameAt), interval)
	}
	t.Logf("new leader replaced the unhealthy %s %s after it began to lead (quiet period %s)",
		sick, replacedAt.Sub(becameAt).Round(time.Millisecond), interval)

	stopped = time.Now()
	c.stopWatch(second)
	third := c.leader("the last watch leads")
	t.Logf("%s stopped; %s leads %s later", c.ids[second], c.ids[third], time.Since(stopped).Round(time.Millisecond))

	// Followers never acted: the actions are all in the leaders' events.
	for i, r := range c.ws {
		if r == nil || i == third {
			continue
		}
		t.Fatalf("watch %d still running", i)
	}
	for _, e := range c.ws[third].events() {
		if (e.Kind == status.EventCreated || e.Kind == status.EventDestroyed) && e.Time.Before(stopped) {
			t.Errorf("%s acted while following: %+v", c.ids[third], e)
		}
	}
	two, most := mon.finish()
	if len(two) > 0 {
		t.Errorf("two watches said they led at once: %v", two)
	}
	if most > size {
		t.Errorf("the simulator held %d instances not marked unhealthy, more than the size %d", most, size)
	}
}

// setHealthIn writes a health into an instance file, replacing it at once
// as the simulator does (a file written in place can be read half
// written, and the instance would seem to vanish for a listing).
func setHealthIn(t *testing.T, path, health string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["health"] = health
	b, _ = json.Marshal(m)
	// A dot file: the simulator ignores it while it is written.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A leader cut off from etcd (its connection holds, nothing comes back)
// stops acting before its lease runs out, so two never act at once;
// another leads and heals; when the connection comes back the old leader
// follows, without taking leadership back.
func TestHACutOff(t *testing.T) {
	ep := etcdEndpoint(t)
	proxy, err := etcdtest.NewProxy(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	const size = 3
	c := newHACluster(t, 2, size, "vanilla", "", func(i int) string {
		if i == 0 {
			return proxy.Endpoint()
		}
		return ep
	})
	c.dirs[1].apply()
	c.start(0, time.Second)
	if l := c.leader("the first watch leads alone"); l != 0 {
		t.Fatalf("watch %d leads", l)
	}
	c.start(1, time.Second)
	c.leader("both agree the first leads")
	mon := c.watchInvariants()

	cut := time.Now()
	proxy.Cut()
	testwait.For(t, 30*time.Second, "the cut-off leader stops leading", func() bool { return !c.ws[0].status().Leader })
	stoppedAfter := time.Since(cut)
	testwait.For(t, 30*time.Second, "the other leads", func() bool { return c.ws[1].status().Leader })
	t.Logf("cut off: the leader stopped acting %s after the cut (lease TTL %s); the other led %s after it",
		stoppedAfter.Round(time.Millisecond), haTTL, time.Since(cut).Round(time.Millisecond))

	gone := c.instances()[0]
	if err := os.Remove(filepath.Join(c.simDir, "instances", "compute", gone+".json")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the new leader replaced the vanished instance", func() bool {
		ids := c.instances()
		return len(ids) == size && !slices.Contains(ids, gone)
	})

	proxy.Restore()
	// c.leader waits until both name one leader: the old leader has read
	// etcd again, so it campaigns again.
	l := c.leader("one leader after the reconnect, named by both")
	// On a loaded machine (a full `make test`) the new leader may itself
	// fail to renew its 2 s lease in time and lose it: that is the lease
	// doing its job, not a flap, and the safety checks below still hold.
	// Only while it never lost it must the old leader not lead again.
	if became, lost := leaderEvents(c.ws[1].events()); lost == 0 {
		if l != 1 || became != 1 {
			t.Errorf("watch %d leads after the reconnect, the second became the leader %d times; want the second to keep leading", l, became)
		}
		if became, _ := leaderEvents(c.ws[0].events()); became != 1 {
			t.Errorf("the old leader became the leader %d times; want once (no flapping back while the new one leads)", became)
		}
	} else {
		t.Logf("the new leader lost its lease %d times (a loaded machine: renewal overdue); leadership moved on safely", lost)
	}
	for _, e := range c.ws[0].events() {
		if e.Kind == status.EventCreated && e.Time.After(cut) {
			t.Errorf("the cut-off leader acted after the cut: %+v", e)
		}
	}
	two, most := mon.finish()
	if len(two) > 0 {
		t.Errorf("two watches said they led at once: %v", two)
	}
	if most > size {
		t.Errorf("the simulator held %d instances not marked unhealthy, more than the size %d", most, size)
	}
}

// A deposed leader's lease refuses to act and its state writes fail on the
// fence: what a leader that was frozen (SIGSTOP) past its lease meets when
// it resumes.
func TestHAFencedLease(t *testing.T) {
	ep := etcdEndpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := etcdtest.Client(t, []string{ep})
	prefix := "/test/" + t.Name()
	be := stateetcd.New(cl, stateetcd.Options{Prefix: prefix, LeaseTTL: haTTL})
	doc := state.NewDocument()
	size := 1
	doc.Stack = &config.Stack{Name: "s", Groups: []*config.Group{{Name: "g", Size: &size}}}
	if err := be.Write(ctx, doc); err != nil {
		t.Fatal(err)
	}

	lead, err := election.New(cl, election.Options{Prefix: prefix, TTL: haTTL}).Campaign(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Resign(ctx)
	l := newLease(be.Fenced(lead.Fence()), newSerials(), time.Second)
	l.term, l.verify, l.writeTimeout = lead.Context(), lead.Verify, lead.TTL()
	if err := l.acquire(ctx, doc.Lineage, doc.Serial); err != nil {
		t.Fatal(err)
	}
	// Its leader key goes, as when its lease expires while it is frozen.
	if _, err := cl.Delete(ctx, lead.Fence().Key); err != nil {
		t.Fatal(err)
	}
	_, err = l.record("g", []state.Instance{{ID: "late"}})
	if !errors.Is(err, stateetcd.ErrFenced) || !deposed(err) {
		t.Fatalf("a deposed leader's write = %v, want ErrFenced", err)
	}
	l.release()
	got, err := be.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Serial != doc.Serial || len(got.Group("g").Instances) != 0 {
		t.Errorf("the fenced write landed: serial %d, instances %v", got.Serial, got.Group("g").Instances)
	}
	err = l.acquire(ctx, doc.Lineage, doc.Serial)
	if !deposed(err) {
		t.Fatalf("a deposed leader's lease = %v, want it refused", err)
	}
	select {
	case <-lead.Lost():
	default:
		t.Error("the verification did not declare the leadership lost")
	}
}

// The status never shows a leadership that has ended, even before the loop
// has heard of it; a lone watch is its own leader.
func TestStatusLeaderCheck(t *testing.T) {
	lone := status.NewRecorder(status.Options{Identity: "a/1"})
	if s := lone.Status(); !s.Leader || s.LeaderIdentity != "a/1" {
		t.Errorf("a lone watch: leader %v leader_identity %q", s.Leader, s.LeaderIdentity)
	}
	r := status.NewRecorder(status.Options{Identity: "b/2", Follower: true})
	if s := r.Status(); s.Leader || s.LeaderIdentity != "" {
		t.Errorf("a new follower: leader %v leader_identity %q", s.Leader, s.LeaderIdentity)
	}
	r.SetLeaderIdentity("a/1")
	standing := true
	r.SetLeaderCheck(func() bool { return standing })
	r.SetLeader(true, "")
	if s := r.Status(); !s.Leader || s.LeaderIdentity != "b/2" {
		t.Errorf("leading: leader %v leader_identity %q", s.Leader, s.LeaderIdentity)
	}
	standing = false
	if s := r.Status(); s.Leader || s.LeaderIdentity != "" {
		t.Errorf("after the leadership ended: leader %v leader_identity %q", s.Leader, s.LeaderIdentity)
	}
	r.SetLeader(false, "")
	r.SetLeaderCheck(nil)
	r.SetLeaderIdentity("c/3")
	if s := r.Status(); s.Leader || s.LeaderIdentity != "c/3" {
		t.Errorf("following again: leader %v leader_identity %q", s.Leader, s.LeaderIdentity)
	}
}
