package watch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/ownership"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// soStack is a stack of groups g1..gN of size cattle each (the simulator's
// flavor: health from the instance file, no grace) with the etcd backend,
// scale_out as given.
func soStack(groups, size int, endpoint, prefix string, scaleOut bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `stack "test" {
  backend "etcd" {
    endpoints = [%q]
    prefix    = %q
    lease_ttl = %q
    scale_out = %v
  }
}

provider "simulator" {}
provider "vanilla" {}
`, endpoint, prefix, haTTL.String(), scaleOut)
	for i := 1; i <= groups; i++ {
		fmt.Fprintf(&b, `
group "g%d" {
  size = %d
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
  health {
    grace = "0s"
  }
}
`, i, size)
	}
	return b.String()
}

// groupInstances lists the simulator's instances by group.
func (c *haCluster) groupInstances() map[string][]string {
	files, _ := filepath.Glob(filepath.Join(c.simDir, "instances", "compute", "*.json"))
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // destroyed since the glob
		}
		var r record
		if json.Unmarshal(b, &r) == nil {
			out[r.Tags["infrakit.group"]] = append(out[r.Tags["infrakit.group"]], r.ID)
		}
	}
	return out
}

// converged reports whether every group g1..gN has size instances.
func (c *haCluster) converged(groups, size int) bool {
	by := c.groupInstances()
	for i := 1; i <= groups; i++ {
		if len(by[fmt.Sprintf("g%d", i)]) != size {
			return false
		}
	}
	return true
}

// owned is, from a scale-out status, the groups this process owns.
func owned(s status.Status) []string {
	var out []string
	if s.ScaleOut == nil {
		return nil
	}
	for _, o := range s.ScaleOut.Objects {
		if o.Kind == "group" && o.Mine {
			out = append(out, o.Name)
		}
	}
	return out
}

// shared waits until the running watches own every one of the groups,
// each as many as want(i) says, all agreeing on who owns what, and
// returns each one's groups.
func (c *haCluster) shared(what string, groups int, want func(i int) int) map[int][]string {
	c.t.Helper()
	var got map[int][]string
	testwait.For(c.t, 30*time.Second, what, func() bool {
		got = map[int][]string{}
		all := map[string]int{}
		running := 0
		for i, r := range c.ws {
			if r == nil {
				continue
			}
			running++
			s, err := fetchStatus(r.addr)
			if err != nil || s.ScaleOut == nil || s.ScaleOut.LeasesHeld != want(i) || len(s.ScaleOut.Members) != c.running() {
				return false
			}
			for _, o := range s.ScaleOut.Objects {
				if o.Owner == "" {
					return false // moving
				}
			}
			got[i] = owned(s)
			for _, g := range got[i] {
				all[g]++
			}
			if len(got[i]) != want(i) {
				return false
			}
		}
		if len(all) != groups {
			return false
		}
		for _, n := range all {
			if n != 1 {
				return false
			}
		}
		return true
	})
	return got
}

// running counts the watches running.
func (c *haCluster) running() int {
	n := 0
	for _, r := range c.ws {
		if r != nil {
			n++
		}
	}
	return n
}

// groupPasses scrapes infrakit_group_passes_total of a watch, by group.
func groupPasses(t *testing.T, r *running) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + status.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return scrape(t, resp, status.MetricGroupPasses+`{group="`)
}

// scrape reads the samples of the lines starting with prefix, by the
// label value that follows it (the whole line's value for a metric
// without labels: key "").
func scrape(t *testing.T, resp *http.Response, prefix string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		label, value := "", rest
		if !strings.HasSuffix(prefix, " ") {
			label, value, _ = strings.Cut(rest, " ")
			label, _, _ = strings.Cut(label, `"`)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[label] = v
	}
	return out
}

// metricValue scrapes one metric without labels.
func metricValue(t *testing.T, r *running, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + status.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return scrape(t, resp, name+" ")[""]
}

// Three scale-out watches share six groups: each owns two, and only an
// owner passes a group (the others do not even list it); the status names
// each group's owner. One stops (SIGTERM's path): its groups move to the
// other two, which heal them.
func TestScaleOutShares(t *testing.T) {
	ep := etcdEndpoint(t)
	const groups, size = 6, 1
	prefix := "/test/" + t.Name()
	c := newClusterOf(t, 3, prefix, func(int) string { return soStack(groups, size, ep, prefix, true) })
	c.dirs[0].apply()
	if !c.converged(groups, size) {
		t.Fatalf("apply made %v", c.groupInstances())
	}
	for i := range c.ws {
		c.start(i, time.Second)
	}
	mine := c.shared("each of three owns two groups", groups, func(int) int { return 2 })

	// Passes per process, from a moment the shares stand: every owned
	// group is passed, and no other.
	before := map[int]map[string]float64{}
	for i, r := range c.ws {
		before[i] = groupPasses(t, r)
	}
	testwait.For(t, 30*time.Second, "two more passes of every group by its owner", func() bool {
		for i, r := range c.ws {
			now := groupPasses(t, r)
			for _, g := range mine[i] {
				if now[g] < before[i][g]+2 {
					return false
				}
			}
		}
		return true
	})
	after := map[int]map[string]float64{}
	for i, r := range c.ws {
		after[i] = groupPasses(t, r)
	}
	if again := c.shared("the shares still stand", groups, func(int) int { return 2 }); !maps.EqualFunc(again, mine, slices.Equal) {
		t.Fatalf("ownership moved while counting: %v, then %v", mine, again)
	}
	for i := range c.ws {
		for g, n := range after[i] {
			if n > before[i][g] && !slices.Contains(mine[i], g) {
				t.Errorf("watch %d passed %s (%v -> %v), which %v owns", i, g, before[i][g], n, mine)
			}
		}
		s := c.ws[i].status()
		var listed []string
		for _, g := range s.Groups {
			listed = append(listed, g.Name)
			if g.Owner != c.ids[i] {
				t.Errorf("watch %d shows group %s owned by %q, want %q", i, g.Name, g.Owner, c.ids[i])
			}
		}
		if !slices.Equal(listed, mine[i]) {
			t.Errorf("watch %d reports groups %v, owns %v", i, listed, mine[i])
		}
	}
	t.Logf("owners: %v", mine)

	// Stop the third: its two groups move, one to each of the others
	// (bounded load: 3 each).
	moved := mine[2]
	c.stopWatch(2)
	// One of them turns unhealthy as it moves: its new owner judges no
	// health for one interval after it acquired it.
	sick := c.groupInstances()[moved[1]][0]
	setHealthIn(t, filepath.Join(c.simDir, "instances", "compute", sick+".json"), "unhealthy")
	now := c.shared("the other two own three each", groups, func(i int) int { return 3 })
	for _, g := range moved {
		if !slices.Contains(now[0], g) && !slices.Contains(now[1], g) {
			t.Fatalf("group %s of the stopped watch not taken: %v", g, now)
		}
	}
	// A moved group is healed by its new owner.
	gone := c.groupInstances()[moved[0]][0]
	if err := os.Remove(filepath.Join(c.simDir, "instances", "compute", gone+".json")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the moved group healed", func() bool {
		ids := c.groupInstances()[moved[0]]
		return len(ids) == size && !slices.Contains(ids, gone)
	})
	testwait.For(t, 30*time.Second, "every group converged", func() bool { return c.converged(groups, size) })

	testwait.For(t, 30*time.Second, "the unhealthy instance of the moved group replaced", func() bool {
		ids := c.groupInstances()[moved[1]]
		return len(ids) == size && !slices.Contains(ids, sick)
	})
	owner := 0
	if slices.Contains(now[1], moved[1]) {
		owner = 1
	}
	var acquiredAt, replacedAt time.Time
	for _, e := range c.ws[owner].events() {
		switch {
		case e.Kind == status.EventLease && e.Message == "acquired group "+moved[1]:
			acquiredAt = e.Time
		case e.Kind == status.EventReplaced && string(e.Instance) == sick:
			replacedAt = e.Time
		}
	}
	if acquiredAt.IsZero() || replacedAt.IsZero() {
		t.Fatalf("no lease event of %s or no replaced event of %s at its owner", moved[1], sick)
	}
	t.Logf("%s moved; its unhealthy %s replaced %s after its new owner acquired it", moved[1], sick, replacedAt.Sub(acquiredAt))
	if replacedAt.Sub(acquiredAt) < time.Second {
		t.Errorf("the new owner replaced an unhealthy instance %s after it acquired the group: within its quiet period (1s)",
			replacedAt.Sub(acquiredAt))
	}
	for i := range 2 {
		if held := metricValue(t, c.ws[i], status.MetricLeasesHeld); held != 3 {
			t.Errorf("watch %d: %s = %v, want 3", i, status.MetricLeasesHeld, held)
		}
	}
}

// A scale-out watch whose session is revoked behind its back stops acting
// on its objects at once (they count as released), joins again under a
// new member ID, and the two share the groups again, converged.
func TestScaleOutSessionLost(t *testing.T) {
	ep := etcdEndpoint(t)
	const groups, size = 2, 1
	prefix := "/test/" + t.Name()
	c := newClusterOf(t, 2, prefix, func(int) string { return soStack(groups, size, ep, prefix, true) })
	c.dirs[1].apply()
	if !c.converged(groups, size) {
		t.Fatalf("apply made %v", c.groupInstances())
	}
	c.start(0, time.Second)
	c.start(1, time.Second)
	c.shared("one group each", groups, func(int) int { return 1 })
	victim := c.ws[0].status().ScaleOut.Member

	cl := etcdtest.Client(t, []string{ep})
	revoke(t, cl, victim)
	testwait.For(t, 30*time.Second, "the victim released its group and joined again", func() bool {
		s := c.ws[0].status()
		return s.ScaleOut != nil && s.ScaleOut.Member != "" && s.ScaleOut.Member != victim &&
			leaseMoves(t, c.ws[0])[status.LeaseReleased] >= 1
	})
	c.shared("one group each again", groups, func(int) int { return 1 })
	for _, r := range c.ws {
		for _, m := range r.status().ScaleOut.Members {
			if m.ID == victim {
				t.Errorf("the revoked member %s is still listed by %s", victim, r.status().Identity)
			}
		}
	}
	gone := c.groupInstances()["g1"][0]
	if err := os.Remove(filepath.Join(c.simDir, "instances", "compute", gone+".json")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "g1 healed", func() bool {
		ids := c.groupInstances()["g1"]
		return len(ids) == size && !slices.Contains(ids, gone)
	})
}

// revoke revokes a member's session lease, as etcd does when it expires.
func revoke(t *testing.T, cl *clientv3.Client, member string) {
	t.Helper()
	id, err := strconv.ParseInt(member, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Revoke(ctx, clientv3.LeaseID(id)); err != nil {
		t.Fatal(err)
	}
}

// leaseMoves scrapes infrakit_lease_moves_total of a watch, by direction.
func leaseMoves(t *testing.T, r *running) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + status.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return scrape(t, resp, status.MetricLeaseMoves+`{direction="`)
}

// Modes never mix: a scale-out watch refuses to start beside a
// leader-mode one, and a leader-mode one beside scale-out members, each
// naming the other mode.
func TestScaleOutRefusesMixedModes(t *testing.T) {
	ep := etcdEndpoint(t)
	prefix := "/test/" + t.Name()
	c := newClusterOf(t, 2, prefix, func(i int) string { return soStack(1, 1, ep, prefix, i == 0) })
	c.dirs[0].apply()

	// A scale-out member runs; a leader-mode watch refuses.
	c.start(0, time.Second)
	c.shared("the member owns the group", 1, func(int) int { return 1 })
	err := runOnce(t, c, 1)
	if !errors.Is(err, ErrOtherMode) || !strings.Contains(err.Error(), "scale-out") {
		t.Fatalf("a leader-mode watch beside a scale-out member: %v, want a refusal naming scale-out", err)
	}

	// A leader-mode watch runs; a scale-out one refuses.
	c.stopWatch(0)
	c.start(1, time.Second)
	c.leader("the leader-mode watch leads")
	err = runOnce(t, c, 0)
	if !errors.Is(err, ErrOtherMode) || !strings.Contains(err.Error(), "leader-mode") {
		t.Fatalf("a scale-out watch beside a leader: %v, want a refusal naming leader mode", err)
	}
}

// runOnce runs the i-th watch expecting it to refuse to start, and
// returns its error.
func runOnce(t *testing.T, c *haCluster, i int) error {
	t.Helper()
	opts := testOptions(c.dirs[i])
	opts.Identity = c.ids[i]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts.Ready = func(net.Addr) { cancel() } // it started: stop it, and fail below
	return Run(ctx, opts)
}

// An owner whose session was revoked behind its back (as when it was
// frozen past its lease): its gate refuses the next provider call, its
// write in flight is refused by the group's fence and leaves the state as
// it was, it may not join the state lease again, and the loop stops
// acting on the group.
func TestScaleOutFencedWrite(t *testing.T) {
	ep := etcdEndpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := etcdtest.Client(t, []string{ep})
	prefix := fmt.Sprintf("/test/%s/%d", t.Name(), time.Now().UnixNano()) // a new state on each run
	be := stateetcd.New(cl, stateetcd.Options{Prefix: prefix, LeaseTTL: haTTL})
	doc := state.NewDocument()
	size := 1
	doc.Stack = &config.Stack{Name: "s", Groups: []*config.Group{{Name: "g", Size: &size}}}
	if err := be.Write(ctx, doc); err != nil {
		t.Fatal(err)
	}
	sess, err := ownership.Join(ctx, cl, ownership.Options{Prefix: prefix, TTL: haTTL}, "victim")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Leave(ctx)
	obj := groupObject("g")
	fence, err := sess.Acquire(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	tm := ownedTerm(cl, acquiredObj{obj: obj, fence: fence, sess: sess, lease: sessionLease(be, sess, newSerials(), time.Second)})
	spec := groupSpec{cfg: doc.Stack.Groups[0], lineage: doc.Lineage, serial: doc.Serial, doc: doc}
	gs := newGroupState("g", time.Now())
	if err := tm.acquireLease(ctx, gs, spec); err != nil {
		t.Fatal(err)
	}
	step := plan.Step{Kind: plan.StepProvision, Group: "g"}
	if err := tm.gate.check(tm.ctx)(ctx, step); err != nil {
		t.Fatalf("the gate refused a call while the group is owned: %v", err)
	}

	revoke(t, cl, sess.ID())
	// The gate verifies with etcd at most verifyEvery after its last check.
	testwait.For(t, 10*time.Second, "the gate refusing calls", func() bool {
		return deposed(tm.gate.check(tm.ctx)(ctx, step))
	})
	_, werr := tm.lease.record("g", []state.Instance{{ID: "late"}}, tm.fences()...)
	if !errors.Is(werr, stateetcd.ErrFenced) || !deposed(werr) {
		t.Fatalf("the write in flight = %v, want ErrFenced", werr)
	}
	tm.lease.release()
	got, err := be.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Serial != doc.Serial || len(got.Group("g").Instances) != 0 {
		t.Errorf("the fenced write landed: serial %d, instances %v", got.Serial, got.Group("g").Instances)
	}
	if err := tm.acquireLease(ctx, gs, spec); !deposed(err) {
		t.Fatalf("joining the state lease after the revocation = %v, want a refusal", err)
	}

	// The loop stops acting on the group.
	rec := status.NewRecorder(status.Options{Identity: "victim", Follower: true})
	s := &service{log: hclog.NewNullLogger(), rec: rec, so: newScaleOut(be, "victim"), groups: map[string]*groupSched{}}
	s.so.owned[obj] = tm
	s.fenceRefused(ctx, tm, werr)
	if s.so.owned[obj] != nil || s.passes("g") {
		t.Error("still acting on the group after its write was refused")
	}
	if tm.ctx.Err() == nil {
		t.Error("the group's term was not ended")
	}
}
