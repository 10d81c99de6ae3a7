package watch

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/autoscale"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// autoscaleBlock is a group's autoscale block on the simulator's metric
// "load", quick enough for a test: an evaluation a second, no cooldown and
// no stabilization, scale-up at most 2 a step.
const autoscaleBlock = `autoscale {
    min                 = 2
    max                 = 6
    evaluation_interval = "1s"
    cooldown            = "0s"
    check "load" {
      source              = simulator
      query               = "load"
      target_per_instance = 10
    }
    scale_down {
      stabilization = "0s"
    }
    scale_up {
      max_step = 2
    }
  }`

// setLoad writes the simulator metric the check reads; "" removes it (no data).
func (w *workdir) setLoad(v string) {
	w.t.Helper()
	writeLoad(w.t, filepath.Join(w.dir, ".infrakit", "simulator", "metrics"), v)
}

// writeLoad writes metric "load" into a simulator's metrics directory.
func writeLoad(t *testing.T, dir, v string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "load")
	if v == "" {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return
	}
	// A rename, so the provider never reads half a value.
	if err := os.WriteFile(path+".tmp", []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func (w *workdir) storedSize() int {
	w.t.Helper()
	g := w.readState().Stack.Group("web")
	if g == nil || g.Size == nil {
		w.t.Fatal("the state holds no size of group web")
	}
	return *g.Size
}

// The leader's autoscaler follows the check: load above target grows the
// group (by at most max_step per evaluation, never past max), missing data
// keeps the size, and no load shrinks it back to min. Every decision is in
// the status and the events; the size it sets is stored in the state.
func TestAutoscale(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(2, "a", "vanilla", autoscaleBlock))
	w.apply()
	r := start(t, testOptions(w))

	w.setLoad("100") // wants 10, more than max
	testwait.For(t, 30*time.Second, "the group grown to max 6", func() bool {
		return len(w.instances()) == 6 && w.storedSize() == 6
	})
	var ups []autoscale.Decision
	for _, e := range r.events() {
		if e.Kind == status.EventAutoscale && e.Reason == status.ActionScaleUp && e.Autoscale != nil {
			ups = append(ups, *e.Autoscale)
		}
	}
	if len(ups) < 2 {
		t.Fatalf("scale-up events: %+v, want 2 or more (max_step 2 from 2 to 6)", ups)
	}
	for _, d := range ups {
		if d.Desired-d.Current > 2 || d.Desired > 6 || len(d.Checks) != 1 || d.Checks[0].Value != 100 {
			t.Errorf("scale-up decision %+v: more than max_step 2, past max 6, or without the metric value 100", d)
		}
	}
	if last := ups[len(ups)-1]; last.Desired != 6 || (last.Limit != autoscale.LimitMax && last.Limit != autoscale.LimitMaxStep) {
		t.Errorf("last scale-up %+v: want desired 6, capped by max or max_step", last)
	}

	w.setLoad("") // no data: the size stays
	testwait.For(t, 30*time.Second, "a no-data decision in the status", func() bool {
		a := r.group().Autoscale
		return a != nil && len(a.Decisions) > 0 && a.Decisions[len(a.Decisions)-1].Limit == autoscale.LimitNoData
	})
	if n, size := len(w.instances()), w.storedSize(); n != 6 || size != 6 {
		t.Fatalf("after no data: %d instances, stored size %d; want 6 and 6", n, size)
	}

	w.setLoad("0")
	testwait.For(t, 30*time.Second, "the group shrunk to min 2", func() bool {
		return len(w.instances()) == 2 && w.storedSize() == 2
	})
	evs := r.events()
	if !slices.ContainsFunc(evs, func(e status.Event) bool {
		return e.Kind == status.EventAutoscale && e.Reason == status.ActionScaleDown && e.Autoscale != nil && e.Autoscale.Desired == 2
	}) {
		t.Error("no scale-down event to 2")
	}
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`infrakit_autoscale_desired_size{group="web"} 2`,
		`infrakit_autoscale_metric_value{check="load",group="web"} 0`,
		`infrakit_autoscale_evaluations_total{action="scale-up",group="web"}`,
		`infrakit_autoscale_no_data_total{check="load",group="web"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// With several watch processes on etcd only the leader evaluates: the
// followers' status never shows a decision. A new leader takes the
// autoscaling over from the size the state holds.
func TestHAAutoscaleLeaderOnly(t *testing.T) {
	ep := etcdEndpoint(t)
	c := newHACluster(t, 2, 2, "vanilla", autoscaleBlock, func(int) string { return ep })
	c.dirs[0].apply()
	setLoadIn(t, c.simDir, "40") // wants 4
	for i := range c.ws {
		c.start(i, time.Second)
	}
	first := c.leader("one leader of two")
	testwait.For(t, 30*time.Second, "the leader to grow the group to 4", func() bool { return len(c.instances()) == 4 })
	follower := 1 - first
	if a := c.ws[follower].group().Autoscale; a != nil {
		t.Fatalf("the follower decided: %+v", a)
	}
	if a := c.ws[first].group().Autoscale; a == nil || len(a.Decisions) == 0 {
		t.Fatal("the leader's status shows no decision")
	}

	c.stopWatch(first)
	if next := c.leader("the follower leads"); next != follower {
		t.Fatalf("watch %d leads, want %d", next, follower)
	}
	setLoadIn(t, c.simDir, "0")
	testwait.For(t, 30*time.Second, "the new leader to shrink the group to min 2", func() bool { return len(c.instances()) == 2 })
	a := c.ws[follower].group().Autoscale
	if a == nil || len(a.Decisions) == 0 || a.Decisions[0].Current != 4 {
		t.Fatalf("the new leader's decisions: %+v; want them to start from the stored size 4", a)
	}
}

// setLoadIn writes the simulator metric "load" of the store at simDir.
func setLoadIn(t *testing.T, simDir, v string) {
	t.Helper()
	writeLoad(t, filepath.Join(simDir, "metrics"), v)
}
