package watch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// The order in which watch acts on members behind a load balancer, as the
// simulator's files show it while watch runs: replacements are registered
// before the members they replace are deregistered, and a member is
// destroyed only once it is deregistered.

// ingressStack is a cattle group "web" of size behind load balancer lb1
// (ingress "site"), with flavor "vanilla" (always healthy) or "simulator"
// (health from the instance file), members drained 500ms after their
// deregistration, and extra in the group block.
func ingressStack(size int, note, flavor, extra string) string {
	fl := "provider = vanilla\n    properties = { init = [\"echo web\"] }"
	if flavor == "simulator" {
		fl = "provider = simulator\n    type     = \"simulator\""
	}
	return fmt.Sprintf(`
stack "test" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  size        = %d
  drain_delay = "500ms"
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = %q }
  }
  flavor {
    %s
  }
  %s
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
`, size, note, fl, extra)
}

// sample is one look at the simulator's store: its instances, read first,
// then the backends of lb1, read at backendsAt. Read in that order, a
// member destroyed at one sample while still registered shows as a backend
// without an instance, never the other way round (a member is registered
// only once it runs).
type sample struct {
	instances  map[string]record
	backends   map[string]bool
	backendsAt time.Time
}

// running reports whether member id runs at the sample (listed, past its
// pending time) and its flavor does not call it unhealthy.
func (s sample) running(id string) bool {
	in, ok := s.instances[id]
	return ok && (in.PendingUntil == nil || !in.PendingUntil.After(s.backendsAt)) && in.Health != "unhealthy"
}

// servingBackends counts the backends that are members running healthy.
func (s sample) servingBackends() int {
	n := 0
	for id := range s.backends {
		if s.running(id) {
			n++
		}
	}
	return n
}

func (s sample) String() string {
	return fmt.Sprintf("instances %v backends %v", slices.Sorted(maps.Keys(s.instances)), slices.Sorted(maps.Keys(s.backends)))
}

// sampler looks at w's simulator store every few milliseconds, from
// sampleStore until stop.
type sampler struct {
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
	samples []sample
}

func sampleStore(t *testing.T, w *workdir) *sampler {
	t.Helper()
	s := &sampler{done: make(chan struct{}), stopped: make(chan struct{})}
	instances := w.instanceDir()
	lb := filepath.Join(w.dir, ".infrakit", "simulator", "loadbalancers", "lb1.json")
	go func() {
		defer close(s.stopped)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if sm, ok := readStore(instances, lb); ok {
				s.samples = append(s.samples, sm)
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// stop ends the sampling and returns the samples taken.
func (s *sampler) stop() []sample {
	s.once.Do(func() { close(s.done) })
	<-s.stopped
	return s.samples
}

// readStore reads the instance files of dir, then load balancer file lb
// (false when one could not be read; the simulator replaces files at once,
// by a rename).
func readStore(dir, lb string) (sample, bool) {
	sm := sample{instances: map[string]record{}, backends: map[string]bool{}}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return sm, false
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // destroyed while listed
		}
		var r record
		if err != nil || json.Unmarshal(b, &r) != nil {
			return sm, false
		}
		sm.instances[r.ID] = r
	}
	sm.backendsAt = time.Now()
	b, err := os.ReadFile(lb)
	if err != nil {
		return sm, false
	}
	var rec struct {
		Backends []struct {
			ID string `json:"id"`
		} `json:"backends"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return sm, false
	}
	for _, be := range rec.Backends {
		sm.backends[be.ID] = true
	}
	return sm, true
}

// settledBehindLB starts watch on w and waits until lb1's backends are the
// running members, and the group is listed in the status.
func settledBehindLB(t *testing.T, w *workdir, size int) *running {
	t.Helper()
	r := start(t, testOptions(w))
	testwait.For(t, 20*time.Second, "the backends equal to the running members", func() bool {
		sm, ok := readStore(w.instanceDir(), filepath.Join(w.dir, ".infrakit", "simulator", "loadbalancers", "lb1.json"))
		if !ok || len(sm.instances) != size || len(sm.backends) != size {
			return false
		}
		for id := range sm.instances {
			if !sm.backends[id] || !sm.running(id) {
				return false
			}
		}
		return r.group().Actual == size
	})
	return r
}

// within polls cond every 20ms until it holds (true) or d has passed
// (false).
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// eventIndex is the index in evs of the first event after from that
// matches, or -1.
func eventIndex(evs []status.Event, from int, match func(status.Event) bool) int {
	for i := max(from, 0); i < len(evs); i++ {
		if match(evs[i]) {
			return i
		}
	}
	return -1
}

// A member behind a load balancer turns unhealthy and watch replaces it,
// make before break: the old member serves (stays registered) until its
// replacement is registered, and is destroyed only once deregistered.
// Sampled all along, lb1 always has the victim or its replacement, never a
// backend that is destroyed, and never fewer than size-1 serving members
// (the victim itself does not serve).
func TestHealUnhealthyBehindLB(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, ingressStack(3, "a", "simulator", `health { grace = "1s" }`), "INFRAKIT_SIMULATOR_PROVISION_DELAY=1s")
	w.apply()
	r := settledBehindLB(t, w, 3)
	ids := instanceIDs(w.instances())

	s := sampleStore(t, w)
	victim := ids[0]
	w.setHealth(victim, "unhealthy")
	var final []string
	testwait.For(t, 30*time.Second, "the victim replaced and lb1's backends equal to the members", func() bool {
		ins := w.instances()
		if len(ins) != 3 || slices.ContainsFunc(ins, func(in record) bool { return in.ID == victim }) {
			return false
		}
		final = instanceIDs(ins)
		sm, ok := readStore(w.instanceDir(), filepath.Join(w.dir, ".infrakit", "simulator", "loadbalancers", "lb1.json"))
		return ok && slices.Equal(slices.Sorted(maps.Keys(sm.backends)), final)
	})
	samples := s.stop()
	var fresh string
	for _, id := range final {
		if !slices.Contains(ids, id) {
			fresh = id
		}
	}
	if fresh == "" {
		t.Fatalf("members %v: no replacement of %s", final, victim)
	}

	oldServedBeside, newServedBeside := false, false
	for i, sm := range samples {
		switch {
		case !sm.backends[victim] && !sm.backends[fresh]:
			t.Fatalf("sample %d: neither the victim %s nor its replacement %s is registered: %v", i, victim, fresh, sm)
		case sm.backends[victim] && sm.instances[victim].ID == "":
			t.Fatalf("sample %d: the victim %s is destroyed while still registered: %v", i, victim, sm)
		case sm.servingBackends() < 2:
			t.Fatalf("sample %d: %d members serving, want at least 2 of 3: %v", i, sm.servingBackends(), sm)
		}
		if sm.backends[victim] && sm.instances[fresh].ID != "" {
			oldServedBeside = true // the replacement was starting
		}
		if sm.backends[fresh] && sm.instances[victim].ID != "" && !sm.backends[victim] {
			newServedBeside = true // the victim was being drained
		}
	}
	if !oldServedBeside || !newServedBeside {
		t.Errorf("%d samples never saw the victim registered beside its starting replacement (%v) or the replacement registered while the victim was drained (%v): the test did not look",
			len(samples), oldServedBeside, newServedBeside)
	}

	// The pass records the destroyed event once the call has returned.
	var evs []status.Event
	var created, destroyed int
	testwait.For(t, 10*time.Second, "the victim's destroyed event", func() bool {
		evs = r.events()
		destroyed = eventIndex(evs, 0, func(e status.Event) bool {
			return e.Kind == status.EventDestroyed && string(e.Instance) == victim && e.Reason == string(group.ReasonUnhealthy)
		})
		return destroyed >= 0
	})
	created = eventIndex(evs, 0, func(e status.Event) bool {
		return e.Kind == status.EventCreated && string(e.Instance) == fresh
	})
	if created < 0 || destroyed < created {
		t.Errorf("the replacement's created event at %d, the victim's destroyed event at %d: want created first", created, destroyed)
	}
	if n := countEvents(evs, status.EventReplaced, string(group.ReasonUnhealthy)); n != 1 {
		t.Errorf("%d replaced events for reason unhealthy, want 1", n)
	}
}

// A member that vanishes is taken out of the load balancer by the pass that
// re-creates it, not once its replacement runs: syncs are an hour apart, so
// only a pass can have deregistered it, and its replacement is still
// pending (for 2s) when it is gone from lb1. The replacement is registered
// once it runs.
func TestVanishedDeregisteredByTheHealingPass(t *testing.T) {
	t.Parallel()
	w, v, ids, r := startSettledWith(t, slowSyncStack, "INFRAKIT_SIMULATOR_PROVISION_DELAY=2s")

	s := sampleStore(t, w)
	victim := ids[0]
	now := removeAndReplaced(t, w, ids, victim)
	testwait.For(t, 20*time.Second, "the backends equal to the members", func() bool { return slices.Equal(v.backends(), now) })
	samples := s.stop()
	var fresh string
	for _, id := range now {
		if !slices.Contains(ids, id) {
			fresh = id
		}
	}

	// The pass: it announces the replacement, creates it, and reports the
	// deregistration it made, before any other pass acts.
	var evs []status.Event
	var replaced, created, synced int
	testwait.For(t, 10*time.Second, "the events of the pass", func() bool {
		evs = r.events()
		replaced = eventIndex(evs, 0, func(e status.Event) bool {
			return e.Kind == status.EventReplaced && string(e.Instance) == victim && e.Reason == string(status.ReasonVanished)
		})
		created = eventIndex(evs, replaced, func(e status.Event) bool { return e.Kind == status.EventCreated })
		synced = eventIndex(evs, replaced, func(e status.Event) bool {
			return e.Kind == EventSynced && strings.Contains(e.Message, "backend deregistered")
		})
		return replaced >= 0 && created >= 0 && synced >= 0
	})
	switch {
	case replaced < 0 || created < 0 || synced < 0:
		t.Fatalf("events: replaced %d, created %d, deregistration %d; want all", replaced, created, synced)
	case synced < created:
		t.Fatalf("the deregistration (event %d) came before the pass created the replacement (event %d)", synced, created)
	case string(evs[created].Instance) != fresh:
		t.Errorf("created %s, the replacement is %s", evs[created].Instance, fresh)
	case evs[synced].Group != "web":
		t.Errorf("the deregistration was reported by a sync (%q), not by the group's pass", evs[synced].Message)
	}
	for _, e := range evs[created+1 : synced] {
		if e.Group == "web" {
			t.Errorf("another event of the group between the create and the pass's deregistration: %s %s", e.Kind, e.Message)
		}
	}

	// Sampled: once the victim is out of lb1, its replacement was still
	// starting; no sample has the victim back.
	gone := slices.IndexFunc(samples, func(sm sample) bool { return !sm.backends[victim] })
	if gone < 0 {
		t.Fatalf("%d samples: the victim was never seen deregistered", len(samples))
	}
	if sm := samples[gone]; sm.backends[fresh] || sm.running(fresh) {
		t.Errorf("when the victim left lb1 its replacement ran or was registered already: the deregistration waited for it (%v)", sm)
	}
	for i, sm := range samples[gone:] {
		if sm.backends[victim] {
			t.Fatalf("sample %d: the victim is registered again: %v", gone+i, sm)
		}
	}
}

// A rolling update stepped by watch behind a load balancer (max_parallel 2,
// max_unavailable 1 of 4) never has fewer than 3 registered members that
// run healthy, and ends with lb1's backends equal to the (all current)
// members. Cattle are replaced make before break, so in fact it never has
// fewer than 4: each replacement is registered before the member it
// replaces is deregistered.
func TestRollBehindLB(t *testing.T) {
	t.Parallel()
	const size, maxUnavailable = 4, 1
	w := newWorkdir(t, ingressStack(size, "old", "vanilla", `update {
    max_parallel    = 2
    max_unavailable = 1
  }`), "INFRAKIT_SIMULATOR_PROVISION_DELAY=500ms")
	w.apply()
	r := settledBehindLB(t, w, size)

	s := sampleStore(t, w)
	w.editState(func(doc *state.Document) {
		doc.Stack.Group("web").Instance.Properties = json.RawMessage(`{"note":"new"}`)
	})
	hash := w.readState().Stack.Group("web").ConfigHash()
	done := within(60*time.Second, func() bool {
		ins := w.instances()
		if len(ins) != size || slices.ContainsFunc(ins, func(in record) bool { return in.Tags["infrakit.config.hash"] != hash }) {
			return false
		}
		sm, ok := readStore(w.instanceDir(), filepath.Join(w.dir, ".infrakit", "simulator", "loadbalancers", "lb1.json"))
		return ok && slices.Equal(slices.Sorted(maps.Keys(sm.backends)), instanceIDs(ins)) &&
			countEvents(r.events(), status.EventRollDone, "") == 1
	})
	samples := s.stop() // looked at even when the roll did not end

	fewest, most := size, 0
	for i, sm := range samples {
		n := sm.servingBackends()
		if n < size-maxUnavailable {
			t.Fatalf("sample %d: %d registered members run healthy, want at least %d (max_unavailable): %v", i, n, size-maxUnavailable, sm)
		}
		if n < size {
			t.Fatalf("sample %d: %d registered members run healthy, want %d: a member was deregistered before its replacement was registered: %v", i, n, size, sm)
		}
		fewest, most = min(fewest, n), max(most, len(sm.instances))
		for id := range sm.backends {
			if _, ok := sm.instances[id]; !ok {
				t.Fatalf("sample %d: backend %s is registered but destroyed: %v", i, id, sm)
			}
		}
	}
	if most <= size {
		t.Errorf("%d samples never saw a replacement beside the members it replaces: the test did not look", len(samples))
	}
	t.Logf("%d samples: at least %d of %d registered members serving, at most %d members", len(samples), fewest, size, most)
	if !done {
		t.Fatalf("not within 60s: the roll done, lb1's backends equal to the current members")
	}
	if n := countEvents(r.events(), status.EventReplaced, string(group.ReasonRollingUpdate)); n != size {
		t.Errorf("%d replaced events for rolling-update, want %d", n, size)
	}
}

// writeFile replaces a file of the simulator's store at once, as the
// simulator does.
func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// While the load balancer cannot be listed (its file is corrupt), a pass
// only adds members: the unhealthy member's replacement is created, but
// the member is not taken away while lb1 may route to it. Once lb1 can be
// listed again the replacement is finished as the heal it is: the victim
// is deregistered, drained and destroyed for its health.
func TestUnobservedLBTakesNoMember(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, ingressStack(3, "a", "simulator", `health { grace = "1s" }`))
	w.apply()
	r := settledBehindLB(t, w, 3)
	ids := instanceIDs(w.instances())
	lb := filepath.Join(w.dir, ".infrakit", "simulator", "loadbalancers", "lb1.json")
	good, err := os.ReadFile(lb)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, lb, []byte("{"))

	victim := ids[0]
	w.setHealth(victim, "unhealthy")
	testwait.For(t, 20*time.Second, "the replacement created", func() bool { return len(w.instances()) == 4 })
	passes := r.status().Passes
	testwait.For(t, 20*time.Second, "three more passes", func() bool { return r.status().Passes >= passes+3 })
	if !slices.Contains(instanceIDs(w.instances()), victim) {
		t.Fatalf("the victim %s was taken away while lb1 could not be listed", victim)
	}
	if n := countEvents(r.events(), status.EventDestroyed, ""); n != 0 {
		t.Fatalf("%d members destroyed while lb1 could not be listed", n)
	}

	writeFile(t, lb, good)
	var now []string
	testwait.For(t, 20*time.Second, "the victim replaced, lb1's backends equal to the members", func() bool {
		now = instanceIDs(w.instances())
		sm, ok := readStore(w.instanceDir(), lb)
		return ok && len(now) == 3 && !slices.Contains(now, victim) && slices.Equal(slices.Sorted(maps.Keys(sm.backends)), now)
	})
	var evs []status.Event
	i := -1
	testwait.For(t, 10*time.Second, "a destroyed event", func() bool {
		evs = r.events()
		i = eventIndex(evs, 0, func(e status.Event) bool { return e.Kind == status.EventDestroyed })
		return i >= 0
	})
	if e := evs[i]; string(e.Instance) != victim || e.Reason != string(group.ReasonUnhealthy) {
		t.Errorf("%s destroyed for %q, want the victim %s destroyed for its health (the heal finished)", e.Instance, e.Reason, victim)
	}
	if n := countEvents(evs, status.EventDestroyed, ""); n != 1 {
		t.Errorf("%d members destroyed, want the victim only", n)
	}
}
