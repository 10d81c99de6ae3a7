package heal

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// The properties below run the watch loop's pass (Adjust, Decide, Filter,
// act, Issued) against a simulated provider: creates are listed only after
// a random delay, destroyed instances stay listed for a while, and between
// passes instances vanish and change health at random, sometimes many at
// once. Then the world holds still, and the group must converge.
//
// The group starts complete and its size never changes, so every create the
// loop makes replaces something: that is what lets property (b) count them
// without trusting the tracker's own classification.

// simInstance is one instance of the simulated provider.
type simInstance struct {
	id        instance.ID
	logicalID string
	listedAt  time.Time // Provision returned earlier; listed from here on
	health    flavor.Health
	vanished  bool
	destroyed bool
	goneAt    time.Time // a destroyed instance is listed until then
}

// alive reports whether the instance really exists (listed or not yet).
func (s *simInstance) alive() bool { return !s.vanished && !s.destroyed }

type simWorld struct {
	now       time.Time
	instances []*simInstance
	next      int
	maxDelay  time.Duration // creates are listed within this
	maxLinger time.Duration // destroyed instances are listed within this
}

func (w *simWorld) provision(t *rapid.T, c group.Create) group.Member {
	w.next++
	s := &simInstance{
		id:        instance.ID(fmt.Sprintf("w%03d", w.next)),
		logicalID: c.LogicalID,
		listedAt:  w.now.Add(drawDuration(t, "delay", w.maxDelay)),
		health:    flavor.HealthHealthy,
	}
	w.instances = append(w.instances, s)
	return group.Member{ID: s.id, LogicalID: s.logicalID, State: instance.StatePending, Health: flavor.HealthUnknown}
}

func (w *simWorld) destroy(t *rapid.T, id instance.ID) {
	for _, s := range w.instances {
		if s.id == id && !s.destroyed {
			s.destroyed = true
			s.goneAt = w.now.Add(drawDuration(t, "linger", w.maxLinger))
		}
	}
}

// list is what DescribeInstances returns, with the flavors' health.
func (w *simWorld) list() []group.Member {
	var out []group.Member
	for _, s := range w.instances {
		if s.vanished || w.now.Before(s.listedAt) || (s.destroyed && !w.now.Before(s.goneAt)) {
			continue
		}
		out = append(out, group.Member{ID: s.id, LogicalID: s.logicalID, State: instance.StateRunning, Health: s.health})
	}
	return out
}

// visible are the instances alive and listed: what chaos can strike.
func (w *simWorld) visible() []*simInstance {
	var out []*simInstance
	for _, s := range w.instances {
		if s.alive() && !w.now.Before(s.listedAt) {
			out = append(out, s)
		}
	}
	return out
}

// chaos strikes between passes: a few instances vanish or change health,
// or, now and then, many vanish at once.
func (w *simWorld) chaos(t *rapid.T) {
	vis := w.visible()
	if len(vis) == 0 {
		return
	}
	if rapid.IntRange(0, 9).Draw(t, "mass") == 0 {
		for _, i := range rapid.SliceOfDistinct(rapid.IntRange(0, len(vis)-1), rapid.ID[int]).Draw(t, "mass-vanish") {
			vis[i].vanished = true
		}
		return
	}
	for range rapid.IntRange(0, 3).Draw(t, "events") {
		s := vis[rapid.IntRange(0, len(vis)-1).Draw(t, "who")]
		switch rapid.IntRange(0, 4).Draw(t, "what") {
		case 0:
			s.vanished = true
		case 1, 2:
			s.health = flavor.HealthUnhealthy
		case 3:
			s.health = flavor.HealthHealthy
		default:
			s.health = flavor.HealthUnknown
		}
	}
}

func drawDuration(t *rapid.T, label string, upTo time.Duration) time.Duration {
	return time.Duration(rapid.Int64Range(0, int64(upTo/time.Second)).Draw(t, label)) * time.Second
}

// healthSeen is one observation of an instance's health.
type healthSeen struct {
	at     time.Time
	health flavor.Health
}

type simRun struct {
	d      group.Desired
	policy Policy
	tr     *Tracker
	w      *simWorld
	start  time.Time
	// creates are the times of every create the loop made.
	creates []time.Time
	// seen is each instance's observed health history.
	seen map[instance.ID][]healthSeen
	// lastListings are the listings so far, with the number of creates
	// still expected, for the brake's release check.
	lastListings []string
}

func newSimRun(t *rapid.T) *simRun {
	r := &simRun{
		start: t0,
		seen:  map[instance.ID][]healthSeen{},
		w: &simWorld{
			now:       t0,
			maxDelay:  drawDuration(t, "max_delay", 2*time.Minute),
			maxLinger: drawDuration(t, "max_linger", 2*time.Minute),
		},
		policy: Policy{
			Grace:                  drawDuration(t, "grace", 2*time.Minute),
			MaxReplacementsPerHour: rapid.IntRange(0, 4).Draw(t, "budget"),
			ExpectTimeout:          10 * time.Minute,
			Quiet:                  drawDuration(t, "quiet", time.Minute),
			BrakeMin:               rapid.IntRange(2, 4).Draw(t, "brake_min"),
			BrakeConfirm:           rapid.IntRange(2, 4).Draw(t, "brake_confirm"),
		},
	}
	r.tr = NewTracker("g", r.policy, r.start)
	r.d.ReplaceUnhealthy = rapid.Bool().Draw(t, "replace_unhealthy")
	// The group starts complete: every instance is there, listed, healthy.
	if rapid.Bool().Draw(t, "pets") {
		r.d.LogicalIDs = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h"}), 0, 8, rapid.ID[string]).Draw(t, "logical_ids")
		for _, lid := range r.d.LogicalIDs {
			r.w.provision(t, group.Create{LogicalID: lid})
		}
	} else {
		n := rapid.IntRange(0, 10).Draw(t, "size")
		r.d.Size = &n
		for range n {
			r.w.provision(t, group.Create{})
		}
	}
	for _, s := range r.w.instances {
		s.listedAt = t0
	}
	return r
}

// pass is one watch pass at the world's current time; it checks the
// properties that hold at every pass and returns what Adjust said.
func (r *simRun) pass(t *rapid.T) (Adjusted, group.Decision) {
	now := r.w.now
	listed := r.w.list()
	for _, m := range listed {
		r.seen[m.ID] = append(r.seen[m.ID], healthSeen{now, m.Health})
	}
	adj := r.tr.Adjust(now, r.d, listed)
	// What the brake compares: the listing, and the creates still expected
	// (one that expires unseen is lost too).
	r.lastListings = append(r.lastListings, fmt.Sprint(listed, r.tr.Status(now).Pending))

	dec, _ := r.tr.Filter(now, group.Decide(r.d, adj.Members))

	// (c) While braked, nothing is replaced (the size never changes here,
	// so there is no scale-down either).
	if adj.Braked && (len(dec.Create) > 0 || len(dec.Destroy) > 0) {
		t.Fatalf("%s: braked, yet decision %+v", now, dec)
	}
	// (e) An unhealthy member is replaced only once unhealthy for the grace
	// (and never during the quiet period).
	for _, x := range dec.Destroy {
		if x.Reason == group.ReasonUnhealthy {
			r.checkGrace(t, now, x.ID)
		}
	}

	var made []group.Member
	for _, c := range dec.Create {
		made = append(made, r.w.provision(t, c))
		r.creates = append(r.creates, now)
	}
	var gone []instance.ID
	for _, x := range dec.Destroy {
		r.w.destroy(t, x.ID)
		gone = append(gone, x.ID)
	}
	r.tr.Issued(now, made, gone)

	r.checkNoOverProvisioning(t)
	r.checkBudget(t)
	return adj, dec
}

// checkGrace: id was seen unhealthy at least the grace ago and never seen
// healthy since.
func (r *simRun) checkGrace(t *rapid.T, now time.Time, id instance.ID) {
	if now.Sub(r.start) < r.policy.Quiet {
		t.Fatalf("%s: %s replaced during the quiet period", now, id)
	}
	hist := r.seen[id]
	if len(hist) == 0 || hist[len(hist)-1].at != now || hist[len(hist)-1].health != flavor.HealthUnhealthy {
		t.Fatalf("%s: %s replaced as unhealthy but not seen unhealthy now: %v", now, id, hist)
	}
	ok := false
	for i := len(hist) - 1; i >= 0 && hist[i].health != flavor.HealthHealthy; i-- {
		if hist[i].health == flavor.HealthUnhealthy && now.Sub(hist[i].at) >= r.policy.Grace {
			ok = true
		}
	}
	if !ok {
		t.Fatalf("%s: %s replaced before its grace (%s): %v", now, id, r.policy.Grace, hist)
	}
}

// (a) checkNoOverProvisioning: the instances that really exist, listed or
// still on their way, never exceed the group.
func (r *simRun) checkNoOverProvisioning(t *rapid.T) {
	n := 0
	byLID := map[string]int{}
	for _, s := range r.w.instances {
		if s.alive() {
			n++
			byLID[s.logicalID]++
		}
	}
	if !r.d.IsPets() {
		if n > *r.d.Size {
			t.Fatalf("%s: %d instances for a size of %d", r.w.now, n, *r.d.Size)
		}
		return
	}
	for lid, c := range byLID {
		if c > 1 || !slices.Contains(r.d.LogicalIDs, lid) {
			t.Fatalf("%s: %d instances of pet %q (pets %v)", r.w.now, c, lid, r.d.LogicalIDs)
		}
	}
}

// (b) checkBudget: in any hour, at most the budget of replacements. Every
// create here is one. The latest create ends the only new window to check.
func (r *simRun) checkBudget(t *rapid.T) {
	limit := r.policy.MaxReplacementsPerHour
	if limit == 0 || len(r.creates) == 0 {
		return
	}
	last := r.creates[len(r.creates)-1]
	n := 0
	for _, c := range r.creates {
		if last.Sub(c) < time.Hour {
			n++
		}
	}
	if n > limit {
		t.Fatalf("%s: %d replacements within an hour, budget %d", last, n, limit)
	}
}

// stillFor reports whether the last n listings, and the creates expected
// after each, were identical.
func (r *simRun) stillFor(n int) bool {
	l := r.lastListings
	if len(l) < n {
		return false
	}
	for _, x := range l[len(l)-n:] {
		if x != l[len(l)-1] {
			return false
		}
	}
	return true
}

// converged reports whether the world is what the group wants: every
// instance there, listed and running, none to replace.
func (r *simRun) converged(dec group.Decision, adj Adjusted) bool {
	if adj.Braked || !dec.Empty() || r.tr.Status(r.w.now).Pending > 0 {
		return false
	}
	listed := r.w.list()
	want := len(r.d.LogicalIDs)
	if !r.d.IsPets() {
		want = *r.d.Size
	}
	alive := 0
	for _, s := range r.w.instances {
		if s.alive() {
			alive++
		}
	}
	if alive != want || len(listed) != want {
		return false
	}
	for _, m := range listed {
		if r.d.ReplaceUnhealthy && m.Health == flavor.HealthUnhealthy {
			return false
		}
	}
	return true
}

func TestPropertyWatchPasses(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := newSimRun(t)
		// The watch starts on the complete group: its first observation is
		// authoritative, so the budget and brake count from there.
		r.pass(t)

		// Chaos: passes at irregular intervals, the world changing between.
		for range rapid.IntRange(1, 60).Draw(t, "chaos_passes") {
			r.w.now = r.w.now.Add(time.Second + drawDuration(t, "interval", 90*time.Second))
			r.w.chaos(t)
			r.pass(t)
		}

		// Stillness: passes every 5 minutes (longer than any delay, linger
		// or grace), nothing strikes. (d) The brake releases once the
		// listings have held still, and the group converges and stays so.
		// Each replacement may wait for the budget: allow an hour each.
		// Only still passes count toward "held still": during the chaos,
		// passes come faster than the grace, so a member may die of its
		// grace running out while the listing does not change.
		r.lastListings = nil
		k := r.tr.Policy().BrakeConfirm
		limit := 50
		if b := r.policy.MaxReplacementsPerHour; b > 0 {
			limit += 12 * (12/b + 1)
		}
		convergedAt := -1
		for i := range limit {
			r.w.now = r.w.now.Add(5 * time.Minute)
			adj, dec := r.pass(t)
			if adj.Braked && r.stillFor(k+2) {
				t.Fatalf("%s: still braked after %d identical listings", r.w.now, k+2)
			}
			switch c := r.converged(dec, adj); {
			case c && convergedAt >= 0 && i-convergedAt >= 10:
				return // converged, and stayed so for 10 passes
			case c && convergedAt < 0:
				convergedAt = i
			case !c && convergedAt >= 0:
				t.Fatalf("%s: converged at pass %d, not any more (decision %+v, braked %v)", r.w.now, convergedAt, dec, adj.Braked)
			}
		}
		if convergedAt < 0 {
			t.Fatalf("not converged after %d still passes: status %+v, listing %v", limit, r.tr.Status(r.w.now), r.w.list())
		}
	})
}
