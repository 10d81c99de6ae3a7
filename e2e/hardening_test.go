package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The reproductions of issue 14, turned around.

// groupBrake is the brake of group web in the status.
type groupBrake struct {
	Engaged   bool       `json:"engaged"`
	Since     *time.Time `json:"since"`
	ReleaseAt *time.Time `json:"release_at"`
	RateLimit int        `json:"rate_limit"`
}

func (p *watchProc) brake() groupBrake {
	p.t.Helper()
	var s struct {
		Groups []struct {
			Name  string     `json:"name"`
			Brake groupBrake `json:"brake"`
		} `json:"groups"`
	}
	p.get("/v1/status", &s)
	for _, g := range s.Groups {
		if g.Name == "web" {
			return g.Brake
		}
	}
	return groupBrake{}
}

// A leader frozen (SIGSTOP) right after it took the state lock to act (its
// listing slowed to 1 s, so it is frozen before its plan runs) is deposed;
// on SIGCONT it stops acting and creates nothing: throughout, the
// simulator never holds more instances than the group's size. Twice, so
// each of the two watches is the frozen one once.
func TestHADeposedLeaderNeverActs(t *testing.T) {
	e := startEtcdProc(t)
	const size = 20
	prefix := "/infrakit/deposed"
	dirs, simDir := etcdDirs(t, 2, etcdStack(size, e.endpoint(), prefix), "INFRAKIT_SIMULATOR_DESCRIBE_DELAY=1s")
	dirs[0].ok("apply", "-auto-approve")
	client := e.newClient()
	defer client.Close()
	f := &failoverSet{t: t, dirs: dirs, procs: make([]*watchProc, len(dirs)), paused: map[*watchProc]bool{}}
	for i := range dirs {
		f.start(i)
	}
	s := f.sample(simDir)
	for round := range 2 {
		leader, _ := f.waitLeader("one leader, named by both", 30*time.Second)
		within(t, 30*time.Second, "the group at its size", func() bool { return len(simIDs(simDir)) == size })
		// The leader takes the state lock only to act: its lock key is the
		// moment to freeze it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		locks := client.Watch(ctx, prefix+"/lock/", clientv3.WithPrefix(), clientv3.WithRev(currentRevision(t, client)+1))
		for _, id := range simIDs(simDir)[:5] {
			if err := os.Remove(simDir + "/instances/compute/" + id + ".json"); err != nil {
				t.Fatal(err)
			}
		}
		frozeAt := waitLockPut(t, locks)
		f.pause(leader, true)
		cancel()
		next, took := f.waitLeader("a leader while the old one is frozen", 30*time.Second)
		within(t, 30*time.Second, "the new leader healed the group", func() bool { return len(simIDs(simDir)) == size })
		t.Logf("round %d: pid %d frozen %s after the removals took the lock; pid %d leads %s later and healed",
			round+1, leader.pid, time.Since(frozeAt).Round(time.Millisecond), next.pid, took.Round(time.Millisecond))
		mark := len(leader.stderr.String())
		f.pause(leader, false)
		within(t, 30*time.Second, "the resumed watch follows and says it stopped leading", func() bool {
			st, err := leadershipOf(leader)
			return err == nil && !st.Leader && strings.Contains(leader.stderr.String()[mark:], "no longer the leader")
		})
		// Two passes of its own as a follower: the pass it was frozen in
		// has ended by then.
		passes := leader.status().Passes
		within(t, 30*time.Second, "two more passes of the resumed watch", func() bool { return leader.status().Passes >= passes+2 })
		after := leader.stderr.String()[mark:]
		if n := strings.Count(after[strings.Index(after, "no longer the leader"):], "created instance"); n > 0 {
			t.Errorf("round %d: the deposed leader created %d instances after it stopped leading:\n%s", round+1, n, tailOf(after, 4000))
		}
		t.Logf("round %d: what the resumed watch said of acting:\n%s", round+1, grepLines(after, "lead"))
		if n := len(simIDs(simDir)); n != size {
			t.Errorf("round %d: %d instances after the resume, want %d", round+1, n, size)
		}
	}
	peak, two := s.finish()
	if peak > size {
		t.Errorf("the simulator held %d instances at one point; the group's size is %d", peak, size)
	}
	if len(two) > 0 {
		t.Errorf("two watches said they led at once: %v", two)
	}
	t.Logf("simulator peak: %d instances (size %d)", peak, size)
}

// waitLockPut waits for a lock key to be created and returns when it was.
func waitLockPut(t *testing.T, locks clientv3.WatchChan) time.Time {
	t.Helper()
	for wr := range locks {
		if err := wr.Err(); err != nil {
			t.Fatalf("watching the lock keys: %v", err)
		}
		for _, ev := range wr.Events {
			if ev.IsCreate() {
				return time.Now()
			}
		}
	}
	t.Fatal("no watch took the state lock")
	return time.Time{}
}

// The mass-failure brake holds. Members removed one at a time, each
// replaced before the next goes, engage it at the 4th of 7; all 7 files
// removed at once engage it, and nothing is replaced before the settle
// time has passed since it engaged; then all are replaced.
func TestWatchBrakeHolds(t *testing.T) {
	t.Parallel()
	const size = 7
	w := newWorkdir(t)
	w.writeFile("main.hcl", watchStack(size, "brake", ""))
	w.init()
	w.ok("apply", "-auto-approve")

	// One at a time, within a settle time of 20 s.
	p := w.startWatch(nil, "-interval", "1s", "-brake-settle", "20s")
	within(t, 30*time.Second, "the first pass", func() bool { return p.status().Passes > 0 })
	// Only the applied instances are removed: a replacement removed before
	// watch lists it is a create still expected (a slow provider's), not
	// a vanished member.
	originals := w.simulatorInstances("compute")
	for i, victim := range originals[:4] {
		if err := os.Remove(w.instancePath(victim)); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			break
		}
		within(t, 30*time.Second, fmt.Sprintf("removal %d replaced", i+1), func() bool {
			now := w.simulatorInstances("compute")
			return len(now) == size && !slices.Contains(now, victim)
		})
		if p.brake().Engaged {
			t.Fatalf("braked after %d removals of %d", i+1, size)
		}
	}
	within(t, 30*time.Second, "the brake engaged at the 4th removal", func() bool { return p.brake().Engaged })
	if n := len(w.simulatorInstances("compute")); n != size-1 {
		t.Errorf("braked, the group holds %d instances; want %d (the 4th removal not replaced)", n, size-1)
	}
	// group describe shows it, as the running watch reports it (the
	// settle time, 20 s, keeps it engaged meanwhile).
	if out := w.ok("group", "describe", "web").stdout; !strings.Contains(out, "Brake: engaged since") ||
		!strings.Contains(out, fmt.Sprintf("watch pid %d", p.pid)) {
		t.Errorf("group describe while braked:\n%s", out)
	}
	var described struct {
		Brake *struct {
			Engaged   bool       `json:"engaged"`
			ReleaseAt *time.Time `json:"release_at"`
		} `json:"brake"`
	}
	if err := json.Unmarshal([]byte(w.ok("group", "describe", "web", "-json").stdout), &described); err != nil ||
		described.Brake == nil || !described.Brake.Engaged || described.Brake.ReleaseAt == nil {
		t.Errorf("group describe -json while braked: %+v, %v", described.Brake, err)
	}
	if code, _ := p.terminate(); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
	w.ok("apply", "-auto-approve") // back to 7

	// All at once, with a settle time of 3 s.
	const settle = 3 * time.Second
	p = w.startWatch(nil, "-interval", "1s", "-brake-settle", settle.String())
	within(t, 30*time.Second, "the first pass", func() bool { return p.status().Passes > 1 })
	for _, id := range w.simulatorInstances("compute") {
		if err := os.Remove(w.instancePath(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing is replaced before the confirming re-list: not before the
	// release time the status gives while the brake holds (which a change
	// of the world only moves later). The files go one by one, so watch
	// may replace the first few before the brake engages (deaths within a
	// settle time count together): those are what the group holds when
	// the brake is first seen; any instance beyond them is a replacement
	// made under the brake.
	var releaseAt, first time.Time
	var since *time.Time
	var before []string
	within(t, time.Minute, "a replacement under the brake", func() bool {
		now := w.simulatorInstances("compute")
		if before == nil {
			if b := p.brake(); b.Engaged && b.ReleaseAt != nil {
				releaseAt, since, before = *b.ReleaseAt, b.Since, append([]string{}, w.simulatorInstances("compute")...)
			}
			return false
		}
		if b := p.brake(); b.Engaged && b.ReleaseAt != nil && b.ReleaseAt.After(releaseAt) {
			releaseAt = *b.ReleaseAt
		}
		for _, id := range now {
			if !slices.Contains(before, id) {
				first = time.Now()
				return true
			}
		}
		return false
	})
	if first.Before(releaseAt) {
		t.Errorf("a replacement came at %s, under the brake, before its release time %s (the group held %v when it engaged)",
			first.Format(time.RFC3339Nano), releaseAt.Format(time.RFC3339Nano), before)
	}
	within(t, time.Minute, "all 7 replaced", func() bool { return len(w.simulatorInstances("compute")) == size })
	t.Logf("7 of 7 removed: the brake held %s (settle %s), then all were replaced by %s",
		first.Sub(*since).Round(time.Millisecond), settle, time.Since(*since).Round(time.Millisecond))
	resp, err := p.request(quickClient, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(metrics), `infrakit_brake_engaged_total{group="web"} 1`) {
		t.Errorf("/metrics does not count the engagement:\n%s", grepLines(string(metrics), "brake"))
	}
	if kinds := strings.Join(p.eventKinds(), " "); !strings.Contains(kinds, "brake/") || !strings.Contains(kinds, "brake-released/") {
		t.Errorf("events lack the brake's: %s", kinds)
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
