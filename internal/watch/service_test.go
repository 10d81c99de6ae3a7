package watch

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// Instances removed out of band are replaced at once: the provider's event
// stream, not the one-second interval, triggers the pass.
func TestHealVanished(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(10, "a", "vanilla", ""))
	w.apply()
	opts := testOptions(w)
	opts.Interval = time.Minute // only an event can make this quick
	r := start(t, opts)
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })

	before := w.instances()
	for _, in := range before[:3] {
		w.removeInstance(in.ID)
	}
	removed := time.Now()
	testwait.For(t, 10*time.Second, "the group back to 10", func() bool { return len(w.instances()) == 10 })
	t.Logf("healed in %s", time.Since(removed).Round(time.Millisecond))
	// The provider holds the new members before the pass that made them
	// publishes its status, so the status is awaited, not read once.
	testwait.For(t, 5*time.Second, "status desired 10 actual 10", func() bool {
		g := r.group()
		return g.Desired == 10 && g.Actual == 10
	})
	testwait.For(t, 5*time.Second, "three replaced events", func() bool {
		return countEvents(r.events(), status.EventReplaced, string(status.ReasonVanished)) == 3
	})
	// The state records the new members.
	testwait.For(t, 5*time.Second, "the state to record the members", func() bool {
		recorded := w.readState().Groups["web"].Instances
		ins := w.instances()
		if len(recorded) != len(ins) {
			return false
		}
		for i := range ins {
			if recorded[i].ID != ins[i].ID {
				return false
			}
		}
		return true
	})
}

// A member that stays unhealthy past its grace is replaced; within it, it
// is not. The replacement is made before the member is taken away: the
// group never runs fewer than its size, and the victim is drained and
// destroyed only once its replacement was created.
func TestReplaceUnhealthy(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(4, "a", "simulator", `health { grace = "1s" }`))
	w.apply()
	r := start(t, testOptions(w))
	// (The quiet period, one interval, only delays the judgement: the
	// grace counts from the first pass that sees the member unhealthy.)
	testwait.For(t, 10*time.Second, "two passes", func() bool { return r.status().Passes > 1 })

	victim := w.instances()[0].ID
	w.setHealth(victim, "unhealthy")
	marked := time.Now()
	fewest := 4
	testwait.For(t, 10*time.Second, "the unhealthy member replaced", func() bool {
		ins := w.instances()
		fewest = min(fewest, len(ins))
		return len(ins) == 4 && !slices.ContainsFunc(ins, func(in record) bool { return in.ID == victim })
	})
	if took := time.Since(marked); took < time.Second {
		t.Errorf("replaced after %s, within the 1s grace", took)
	}
	if fewest < 4 {
		t.Errorf("the group ran %d members while a member was replaced (size 4): the victim went before its replacement came", fewest)
	}
	testwait.For(t, 5*time.Second, "one replaced, one drained and one destroyed event for reason unhealthy", func() bool {
		evs := r.events()
		return countEvents(evs, status.EventReplaced, string(group.ReasonUnhealthy)) == 1 &&
			countEvents(evs, status.EventDrained, string(group.ReasonUnhealthy)) == 1 &&
			countEvents(evs, status.EventDestroyed, string(group.ReasonUnhealthy)) == 1
	})
	// In order: replaced (announced), the replacement created, then the
	// victim drained and destroyed.
	var kinds []status.EventKind
	for _, e := range r.events() {
		switch {
		case string(e.Instance) == victim && slices.Contains([]status.EventKind{status.EventReplaced, status.EventDrained, status.EventDestroyed}, e.Kind),
			e.Kind == status.EventCreated:
			kinds = append(kinds, e.Kind)
		}
	}
	want := []status.EventKind{status.EventReplaced, status.EventCreated, status.EventDrained, status.EventDestroyed}
	if !slices.Equal(kinds, want) {
		t.Errorf("events of the replacement: %v, want %v", kinds, want)
	}
}

// A rolling update that reaches watch through the state (an apply that
// only recorded it) is carried out batch by batch: replacements first,
// at most max_parallel at once, never fewer than size-max_unavailable
// healthy current-or-old members, and never more than size+max_parallel.
func TestRollFromState(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(6, "old", "simulator", `update {
    max_parallel    = 2
    max_unavailable = 2
  }`), "INFRAKIT_SIMULATOR_PROVISION_DELAY=300ms")
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "six running", func() bool {
		for _, in := range w.instances() {
			if in.PendingUntil != nil && time.Now().Before(*in.PendingUntil) {
				return false
			}
		}
		return r.status().Passes > 0
	})

	oldHash := w.readState().Stack.Group("web").ConfigHash()
	w.editState(func(doc *state.Document) {
		doc.Stack.Group("web").Instance.Properties = json.RawMessage(`{"note":"new"}`)
	})
	newHash := w.readState().Stack.Group("web").ConfigHash()
	if newHash == oldHash {
		t.Fatal("the edit did not change the configuration hash")
	}

	deadline := time.Now().Add(20 * time.Second)
	minRunning, maxTotal, maxPending := 6, 0, 0
	for {
		ins := w.instances()
		running, pending, current := 0, 0, 0
		now := time.Now()
		for _, in := range ins {
			if in.PendingUntil != nil && now.Before(*in.PendingUntil) {
				pending++
			} else {
				running++
			}
			if in.Tags["infrakit.config.hash"] == newHash {
				current++
			}
		}
		minRunning, maxTotal, maxPending = min(minRunning, running), max(maxTotal, len(ins)), max(maxPending, pending)
		if current == 6 && len(ins) == 6 && pending == 0 {
			break
		}
		if now.After(deadline) {
			t.Fatalf("roll not done in 20s: %d instances, %d current, %d pending; status %+v", len(ins), current, pending, r.group())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if minRunning < 4 {
		t.Errorf("at one observation only %d instances were running (max_unavailable 2 of 6)", minRunning)
	}
	if maxTotal > 8 || maxPending > 2 {
		t.Errorf("at one observation %d instances, %d starting (max_parallel 2 over 6)", maxTotal, maxPending)
	}
	testwait.For(t, 5*time.Second, "roll-done", func() bool { return countEvents(r.events(), status.EventRollDone, "") == 1 })
	evs := r.events()
	if n := countEvents(evs, status.EventReplaced, string(group.ReasonRollingUpdate)); n != 6 {
		t.Errorf("%d replaced events for rolling-update, want 6", n)
	}
	if n := countEvents(evs, status.EventRollStarted, ""); n != 1 {
		t.Errorf("%d roll-started events, want 1", n)
	}
	testwait.For(t, 5*time.Second, "no outdated or in-flight members in the status", func() bool {
		g := r.group()
		return g.Rolling.Outdated == 0 && g.Rolling.InFlight == 0
	})
}

// A size change that comes with a new configuration: shrinking removes
// out-of-date members (they are never replaced only to be destroyed);
// growing creates current ones (never out-of-date ones).
func TestResizeWithRoll(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(6, "v1", "vanilla", `update {
    max_parallel    = 2
    max_unavailable = 2
  }`))
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })

	resize := func(size int, note string) {
		w.editState(func(doc *state.Document) {
			g := doc.Stack.Group("web")
			g.Size = &size
			g.Instance.Properties = json.RawMessage(`{"note":"` + note + `"}`)
		})
		hash := w.readState().Stack.Group("web").ConfigHash()
		testwait.For(t, 20*time.Second, "converged", func() bool {
			ins := w.instances()
			for _, in := range ins {
				if in.Tags["infrakit.config.hash"] != hash {
					return false
				}
			}
			return len(ins) == size
		})
	}

	resize(4, "v2")
	evs := r.events()
	if n := countEvents(evs, status.EventDestroyed, string(group.ReasonScaleDown)); n != 2 {
		t.Errorf("shrink 6 to 4: %d destroyed for scale-down, want 2", n)
	}
	if n := countEvents(evs, status.EventReplaced, string(group.ReasonRollingUpdate)); n != 4 {
		t.Errorf("shrink 6 to 4: %d replaced for rolling-update, want 4 (the out-of-date members destroyed first)", n)
	}

	resize(6, "v3")
	evs = r.events()
	if n := countEvents(evs, status.EventReplaced, string(group.ReasonRollingUpdate)); n != 8 {
		t.Errorf("grow 4 to 6: %d replaced for rolling-update in all, want 4+4 (growth is created current)", n)
	}
	if n := countEvents(evs, status.EventCreated, ""); n != 4+2+4 {
		t.Errorf("%d created events, want 10 (4 rolled, then 2 grown and 4 rolled)", n)
	}
}

// `group stop-update` (the UpdateStopped mark) halts a roll: the group
// keeps its size and its mix of old and new members.
func TestStopUpdate(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(4, "old", "vanilla", `update {
    max_parallel    = 1
    max_unavailable = 1
  }`), "INFRAKIT_SIMULATOR_PROVISION_DELAY=500ms")
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })
	w.editState(func(doc *state.Document) {
		doc.Stack.Group("web").Instance.Properties = json.RawMessage(`{"note":"new"}`)
	})
	hash := w.readState().Stack.Group("web").ConfigHash()
	current := func() int {
		n := 0
		for _, in := range w.instances() {
			if in.Tags["infrakit.config.hash"] == hash {
				n++
			}
		}
		return n
	}
	testwait.For(t, 10*time.Second, "the first replacement", func() bool { return current() >= 1 })
	w.editState(func(doc *state.Document) { doc.Group("web").UpdateStopped = true })
	testwait.For(t, 5*time.Second, "the roll stopped", func() bool {
		g := r.group()
		return g.Rolling.Stopped && g.Rolling.InFlight == 0
	})
	// The replacement in flight is finished (the group keeps its size);
	// nothing more is replaced.
	stopped := current()
	morePasses(t, r, 3)
	if n := current(); n != stopped || n == 4 {
		t.Errorf("after stop-update: %d current members, then %d (of 4)", stopped, n)
	}
	if n := len(w.instances()); n != 4 {
		t.Errorf("after stop-update the group has %d members, want 4", n)
	}
	g := r.group()
	if g.Rolling.Outdated != 4-stopped || !strings.Contains(g.Rolling.Wait, "stop-update") {
		t.Errorf("rolling status %+v, want %d outdated and a wait naming stop-update", g.Rolling, 4-stopped)
	}
	if countEvents(r.events(), status.EventRollStopped, "") != 1 {
		t.Errorf("want one roll-stopped event")
	}
	// The next apply (here: clearing the mark) resumes.
	w.editState(func(doc *state.Document) { doc.Group("web").UpdateStopped = false })
	testwait.For(t, 20*time.Second, "the roll done", func() bool { return current() == 4 && len(w.instances()) == 4 })
}

// A provider slow to start instances (2s pending) never makes the group
// grow past its size while it heals: pending members count, and creates
// not listed yet are remembered.
func TestSlowProvisionNeverAboveSize(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(6, "a", "vanilla", ""), "INFRAKIT_SIMULATOR_PROVISION_DELAY=2s")
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })
	for _, in := range w.instances()[:2] {
		w.removeInstance(in.ID)
	}
	most := 0
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		most = max(most, len(w.instances()))
		time.Sleep(5 * time.Millisecond)
	}
	if most > 6 {
		t.Fatalf("the group reached %d instances; its size is 6", most)
	}
	if n := len(w.instances()); n != 6 {
		t.Fatalf("the group has %d instances, want 6", n)
	}
}

// A provider killed with SIGKILL is relaunched; its groups keep healing.
func TestProviderKilled(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(3, "a", "vanilla", ""))
	w.apply()
	r := start(t, testOptions(w))
	var pid int
	testwait.For(t, 10*time.Second, "the simulator's pid in the status", func() bool {
		for _, p := range r.status().Providers {
			if p.Key == "simulator" && p.PID != 0 {
				pid = p.PID
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "the simulator relaunched", func() bool {
		for _, p := range r.status().Providers {
			if p.Key == "simulator" && p.Restarts >= 1 && p.PID != 0 && p.PID != pid {
				return true
			}
		}
		return false
	})
	// A pass lists every instance first (see the e2e test of the same).
	passes := r.status().Passes
	testwait.For(t, 10*time.Second, "a pass after the relaunch", func() bool { return r.status().Passes > passes+1 })
	passes = r.status().Passes
	w.removeInstance(w.instances()[0].ID)
	testwait.For(t, 10*time.Second, "healing after the relaunch", func() bool {
		return len(w.instances()) == 3 && r.status().Passes > passes
	})
	if countEvents(r.events(), status.EventProviderRestart, "") < 1 {
		t.Error("no provider-restart event")
	}
}

// A second watch on the same state refuses to start and names the first;
// once the first stops, the lock is free again.
func TestSecondWatchRefused(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(1, "a", "vanilla", ""))
	w.apply()
	first := start(t, testOptions(w))
	err := Run(context.Background(), testOptions(w))
	var running *RunningError
	if !errors.As(err, &running) || !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second watch: %v, want a RunningError", err)
	}
	if running.Holder.PID != os.Getpid() || running.Holder.Listen != first.addr || !strings.Contains(err.Error(), first.addr) {
		t.Errorf("the refusal does not name the first watch (pid %d, %s): %v", os.Getpid(), first.addr, err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	start(t, testOptions(w))
}

// Stopping records the state and leaves nothing running: Run returns nil
// within the shutdown bound and the state loads.
func TestStopRecordsState(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(3, "a", "vanilla", ""))
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })
	// Grow the group through the state and stop at once: what the pass
	// created before stopping is recorded.
	w.editState(func(doc *state.Document) {
		n := 30
		doc.Stack.Group("web").Size = &n
	})
	testwait.For(t, 10*time.Second, "creates under way", func() bool { return len(w.instances()) > 3 })
	begin := time.Now()
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > DefaultShutdown {
		t.Errorf("stopping took %s", took)
	}
	recorded := map[string]bool{}
	for _, in := range w.readState().Groups["web"].Instances {
		recorded[in.ID] = true
	}
	for _, in := range w.instances() {
		if !recorded[in.ID] {
			t.Errorf("instance %s exists but the state does not record it", in.ID)
		}
	}
}

// The CLI keeps working while watch runs, and watch follows what it does:
// after a scale recorded in the state, watch converges to the new size and
// never fights it.
func TestFollowsTheState(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(2, "a", "vanilla", ""))
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })
	w.writeStack(stackOf(5, "a", "vanilla", ""))
	w.apply() // takes the lock between passes, then watch re-reads the state
	testwait.For(t, 10*time.Second, "status desired 5", func() bool { return r.group().Desired == 5 })
	morePasses(t, r, 3)
	if n := len(w.instances()); n != 5 {
		t.Fatalf("%d instances after apply to 5 with watch running", n)
	}
	w.editState(func(doc *state.Document) {
		n := 1
		doc.Stack.Group("web").Size = &n
	})
	testwait.For(t, 10*time.Second, "scaled to 1", func() bool { return len(w.instances()) == 1 })
}

// SIGHUP with stack files that do not load keeps the applied stack and
// says why; with files that differ, it says that apply would change them.
func TestReload(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(2, "a", "vanilla", ""))
	w.apply()
	opts := testOptions(w)
	reload := make(chan struct{})
	opts.Reload = reload
	r := start(t, opts)
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })

	lastReload := func() string {
		msg := ""
		for _, e := range r.events() {
			if e.Kind == status.EventReload {
				msg = e.Message
			}
		}
		return msg
	}
	w.writeStack("group {")
	reload <- struct{}{}
	testwait.For(t, 10*time.Second, "a reload event", func() bool { return lastReload() != "" })
	if msg := lastReload(); !strings.Contains(msg, "do not load") {
		t.Errorf("reload of broken files: %q", msg)
	}
	morePasses(t, r, 3)
	if n := len(w.instances()); n != 2 || r.group().Desired != 2 {
		t.Errorf("after a broken reload: %d instances, desired %d; want the applied 2", n, r.group().Desired)
	}

	w.writeStack(stackOf(3, "a", "vanilla", ""))
	reload <- struct{}{}
	testwait.For(t, 10*time.Second, "a second reload event", func() bool { return strings.Contains(lastReload(), "differ") })
	if n := len(w.instances()); n != 2 {
		t.Errorf("reload applied the files: %d instances", n)
	}
}

// A new configuration applied in the middle of a roll halts it and plans
// it again: the roll ends with every member on the newest configuration,
// having replaced few on the one in between.
func TestRollReplanned(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(4, "v1", "vanilla", `update {
    max_parallel    = 1
    max_unavailable = 1
  }`), "INFRAKIT_SIMULATOR_PROVISION_DELAY=300ms")
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })
	note := func(n string) string {
		w.editState(func(doc *state.Document) {
			doc.Stack.Group("web").Instance.Properties = json.RawMessage(`{"note":"` + n + `"}`)
		})
		return w.readState().Stack.Group("web").ConfigHash()
	}
	count := func(hash string) int {
		n := 0
		for _, in := range w.instances() {
			if in.Tags["infrakit.config.hash"] == hash {
				n++
			}
		}
		return n
	}
	v2 := note("v2")
	testwait.For(t, 10*time.Second, "the first v2 replacement", func() bool { return count(v2) >= 1 })
	v3 := note("v3")
	testwait.For(t, 30*time.Second, "every member on v3", func() bool { return count(v3) == 4 && len(w.instances()) == 4 })
	evs := r.events()
	if countEvents(evs, status.EventRollStopped, "") < 1 || countEvents(evs, status.EventRollStarted, "") < 2 {
		t.Errorf("want the roll stopped and started again; events %+v", evs)
	}
	if created := countEvents(evs, status.EventCreated, ""); created > 4+2 {
		t.Errorf("%d members created to roll 4 (at most 2 on the configuration in between)", created)
	}
}

// A freed group is not managed: what vanishes from it stays gone, and it
// leaves the status.
func TestFreedGroupSkipped(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, stackOf(3, "a", "vanilla", ""))
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "the group in the status", func() bool { return r.group().Name == "web" })
	w.editState(func(doc *state.Document) { doc.Group("web").Freed = true })
	testwait.For(t, 5*time.Second, "the group gone from the status", func() bool { return len(r.status().Groups) == 0 })
	w.removeInstance(w.instances()[0].ID)
	morePasses(t, r, 3) // passes that would have healed a managed group
	if n := len(w.instances()); n != 2 {
		t.Fatalf("a freed group was healed: %d instances", n)
	}
}

// followerStack is "web" with an ingress and an enrollment that follow it.
const followerStack = `
stack "test" {}

provider "simulator" {}
provider "simulator" { alias = "nfs-auth" }
provider "vanilla" {}

group "web" {
  size = 3
  instance {
    provider   = simulator
    type       = "compute"
    properties = {}
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo web"] }
  }
}

loadbalancer "lb1" { provider = simulator }

ingress "site" {
  sync_interval = "1s"
  rule {
    loadbalancer = loadbalancer.lb1
    groups       = [group.web]
    route {
      lb_port     = 80
      lb_protocol = "http"
      port        = 8080
      protocol    = "http"
    }
  }
}

enrollment "nfs" {
  source = group.web
  target {
    provider   = simulator.nfs-auth
    type       = "disk"
    properties = { host = member.id }
  }
  sync_interval = "1s"
}
`

// The load balancer's backends and the NFS authorizations follow the
// group as watch heals it.
func TestFollowersSynced(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, followerStack)
	w.apply()
	r := start(t, testOptions(w))
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := operation.New(ctx, operation.Options{WorkDir: w.dir, HostEnv: w.env})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	following := func() bool {
		want := map[string]bool{}
		for _, in := range w.instances() {
			want[in.ID] = true
		}
		backends, err := cli.LoadBalancerBackends(ctx, "lb1")
		if err != nil || len(backends) != len(want) {
			return false
		}
		for _, b := range backends {
			if !want[string(b.ID)] {
				return false
			}
		}
		view, err := describeEnrollment(ctx, cli, "nfs")
		if err != nil || len(view.Authorizations) != len(want) {
			return false
		}
		for _, a := range view.Authorizations {
			if !want[string(a.SourceID)] {
				return false
			}
		}
		return true
	}
	testwait.For(t, 10*time.Second, "backends and authorizations equal to the members", following)

	gone := w.instances()[0].ID
	w.removeInstance(gone)
	testwait.For(t, 10*time.Second, "the group healed", func() bool {
		ins := w.instances()
		return len(ins) == 3 && !slices.ContainsFunc(ins, func(in record) bool { return in.ID == gone })
	})
	testwait.For(t, 10*time.Second, "backends and authorizations following the new member", following)
	// A sync's event is recorded once all its steps are done: the
	// providers can show its work before it.
	testwait.For(t, 10*time.Second, "a synced event", func() bool {
		return countEvents(r.events(), EventSynced, "") > 0
	})
}
