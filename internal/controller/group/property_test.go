package group

import (
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// The properties below drive Decide and NextRollBatch with random groups and a
// simulated world: the caller applies a decision (destroyed members turn
// terminating, created ones appear pending), then the world advances
// (terminating members vanish, pending ones run and turn healthy, unknown
// health resolves to healthy; unhealthy members stay unhealthy).

var petPool = []string{"p0", "p1", "p2", "p3", "p4"}

func genDesired(t *rapid.T, petsOnly bool) Desired {
	d := Desired{
		ConfigHash:       rapid.SampledFrom([]string{cur, cur, cur, ""}).Draw(t, "hash"),
		MaxParallel:      rapid.IntRange(0, 3).Draw(t, "max_parallel"),
		MaxUnavailable:   rapid.IntRange(0, 3).Draw(t, "max_unavailable"),
		ReplaceUnhealthy: rapid.Bool().Draw(t, "replace_unhealthy"),
	}
	if petsOnly || rapid.Bool().Draw(t, "pets") {
		d.LogicalIDs = rapid.SliceOfN(rapid.SampledFrom(petPool), 0, 4).Draw(t, "logical_ids")
	} else {
		size := rapid.IntRange(0, 8).Draw(t, "size")
		d.Size = &size
	}
	return d
}

// genCase draws a group and its members; often the group is already at its
// size (or has exactly its pets), so that rolls get exercised too.
func genCase(t *rapid.T, petsOnly bool) (Desired, []Member) {
	return genCaseSettled(t, petsOnly, rapid.Bool().Draw(t, "settled"))
}

// genCaseSettled draws a group that, when settled is set, has exactly the
// live members it wants (it may still replace unhealthy ones).
func genCaseSettled(t *rapid.T, petsOnly, settled bool) (Desired, []Member) {
	d, members := genDesired(t, petsOnly), genMembers(t)
	if settled {
		live := Live(members)
		if d.IsPets() {
			d.LogicalIDs = nil
			for _, m := range live {
				if m.LogicalID != "" {
					d.LogicalIDs = append(d.LogicalIDs, m.LogicalID)
				}
			}
		} else {
			n := len(live)
			d.Size = &n
		}
	}
	return d, members
}

func genMembers(t *rapid.T) []Member {
	// Distinct IDs: a provider listing one instance twice with different
	// contents is a glitch the tables cover, not a world to converge.
	nums := rapid.SliceOfNDistinct(rapid.IntRange(0, 30), 0, 12, rapid.ID[int]).Draw(t, "ids")
	out := make([]Member, len(nums))
	for i, n := range nums {
		out[i] = Member{
			ID:         instance.ID(fmt.Sprintf("i%02d", n)),
			LogicalID:  rapid.SampledFrom(append([]string{"", "zz"}, petPool...)).Draw(t, "logical_id"),
			ConfigHash: rapid.SampledFrom([]string{cur, old, ""}).Draw(t, "config_hash"),
			State:      rapid.SampledFrom([]instance.State{pending, running, running, terminating}).Draw(t, "state"),
			Health:     rapid.SampledFrom([]flavor.Health{healthyH, healthyH, unhealthyH, unknownH}).Draw(t, "health"),
		}
	}
	return out
}

// world is the simulated provider: it hands out fresh IDs.
type world struct{ next int }

func (w *world) create(d Desired, logicalID string) Member {
	w.next++
	return Member{ID: instance.ID(fmt.Sprintf("n%04d", w.next)), LogicalID: logicalID,
		ConfigHash: d.ConfigHash, State: pending, Health: unknownH}
}

// apply acts on a decision without the world moving.
func (w *world) apply(d Desired, members []Member, dec Decision) []Member {
	out := terminate(members, func(id instance.ID) bool {
		for _, x := range dec.Destroy {
			if x.ID == id {
				return true
			}
		}
		return false
	})
	for _, c := range dec.Create {
		out = append(out, w.create(d, c.LogicalID))
	}
	return out
}

// roll replaces each member of batch: destroy the old, create its replacement.
func (w *world) roll(d Desired, members []Member, batch []instance.ID) []Member {
	replaced := map[instance.ID]bool{}
	for _, id := range batch {
		replaced[id] = true
	}
	out := terminate(members, func(id instance.ID) bool { return replaced[id] })
	for _, m := range members {
		if replaced[m.ID] {
			out = append(out, w.create(d, m.LogicalID))
			delete(replaced, m.ID) // a member listed twice is replaced once
		}
	}
	return out
}

func terminate(members []Member, destroyed func(instance.ID) bool) []Member {
	out := make([]Member, 0, len(members))
	for _, m := range members {
		if destroyed(m.ID) {
			m.State = terminating
		}
		out = append(out, m)
	}
	return out
}

func advance(members []Member) []Member {
	var out []Member
	seen := map[instance.ID]bool{}
	for _, m := range members {
		if m.State == terminating || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		if m.State == pending {
			m.State, m.Health = running, healthyH
		}
		if m.Health == unknownH {
			m.Health = healthyH
		}
		out = append(out, m)
	}
	return out
}

func liveByLID(members []Member) map[string]int {
	n := map[string]int{}
	for _, m := range Live(members) {
		n[m.LogicalID]++
	}
	return n
}

func wantedSet(d Desired) map[string]bool {
	w := map[string]bool{}
	for _, l := range d.LogicalIDs {
		w[l] = true
	}
	return w
}

// healthyCurrent counts live members that are healthy and current; for pets,
// only the desired logical IDs covered by one.
func healthyCurrent(d Desired, members []Member) int {
	covered := map[string]bool{}
	n := 0
	for _, m := range Live(members) {
		if !healthy(m) || d.outdated(m) {
			continue
		}
		if !d.IsPets() {
			n++
		} else if wantedSet(d)[m.LogicalID] && !covered[m.LogicalID] {
			covered[m.LogicalID] = true
			n++
		}
	}
	return n
}

// (a) After applying a decision, or a roll batch, no pet has two live copies
// and every live member of a pet group is a desired pet.
func TestPropertyOnePetPerLogicalID(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genCase(t, true)
		w := &world{}
		after := w.apply(d, members, Decide(d, members))
		check := func(stage string, ms []Member) {
			for l, n := range liveByLID(ms) {
				if n > 1 {
					t.Fatalf("%s: pet %q has %d live copies: %+v", stage, l, n, ms)
				}
				if !wantedSet(d)[l] || l == "" {
					t.Fatalf("%s: live member of unknown pet %q survives", stage, l)
				}
			}
		}
		check("after decision", after)
		batch, _ := NextRollBatch(d, after)
		check("after roll batch", w.roll(d, after, batch))
	})
}

// (b) A step never takes the group below its healthy, current members: cattle
// keep min(before, size) of them; pets keep every pet that had one.
func TestPropertyNeverBelowMinHealthy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genCase(t, false)
		dec := Decide(d, members)
		live := Live(members)
		before := healthyCurrent(d, members)
		after := healthyCurrent(d, (&world{}).apply(d, members, dec))
		want := before
		if !d.IsPets() {
			want = min(before, max(*d.Size, 0))
		}
		if after < want {
			t.Fatalf("healthy current members %d -> %d, want at least %d; decision %+v", before, after, want, dec)
		}
		if !d.IsPets() && len(live) <= max(*d.Size, 0) {
			for _, x := range dec.Destroy {
				for _, m := range live {
					if m.ID == x.ID && healthy(m) && !d.outdated(m) {
						t.Fatalf("destroyed healthy current %s while at or below size", m.ID)
					}
				}
			}
		}
	})
}

// (b, rolls) A roll batch holds only live out-of-date members, never more than
// max_parallel replacements in flight, and takes down at most the healthy
// members that max_unavailable allows.
func TestPropertyRollBatchWithinPolicy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genCaseSettled(t, false, true)
		live := Live(members)
		batch, _ := NextRollBatch(d, members)
		byID := map[instance.ID]Member{}
		unavailable, inFlight := 0, 0
		for _, m := range live {
			byID[m.ID] = m
			if !healthy(m) {
				unavailable++
				if !d.outdated(m) && !failed(m) {
					inFlight++
				}
			}
		}
		takenHealthy := 0
		for _, id := range batch {
			m, ok := byID[id]
			if !ok || !d.outdated(m) {
				t.Fatalf("roll batch holds %s, which is not a live out-of-date member", id)
			}
			if healthy(m) {
				takenHealthy++
			}
		}
		if len(batch) > 0 && inFlight+len(batch) > max(d.MaxParallel, 1) {
			t.Fatalf("roll batch of %d with %d in flight exceeds max_parallel %d", len(batch), inFlight, d.MaxParallel)
		}
		if takenHealthy > 0 && unavailable+takenHealthy > max(d.MaxUnavailable, 1) {
			t.Fatalf("roll takes %d healthy members down with %d unavailable (max_unavailable %d)", takenHealthy, unavailable, d.MaxUnavailable)
		}
	})
}

// (c) Acting on Decide, and when settled on NextRollBatch, converges: sizes
// and pets within 3 passes, a roll of n members within ceil(n/k)+2 passes
// where k = min(max_parallel, max_unavailable). (d) Once converged the
// decision is empty and stays empty.
func TestPropertyConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genCase(t, false)
		// Without replace_unhealthy an unhealthy current member would hold a
		// roll back forever, which is the point of max_unavailable.
		d.ReplaceUnhealthy = true
		outdated := 0
		for _, m := range Live(members) {
			if d.outdated(m) {
				outdated++
			}
		}
		k := min(max(d.MaxParallel, 1), max(d.MaxUnavailable, 1))
		bound := 3
		if outdated > 0 {
			bound = (outdated+k-1)/k + 2
		}
		w := &world{}
		passes := 0
		for {
			passes++
			if passes > bound {
				t.Fatalf("not converged after %d passes (bound %d, %d out of date, k %d): %+v", passes-1, bound, outdated, k, members)
			}
			dec := Decide(d, members)
			if !dec.Settled() {
				members = w.apply(d, members, dec)
			} else if batch, st := NextRollBatch(d, members); len(batch) > 0 {
				members = w.roll(d, members, batch)
			} else if dec.Empty() && allHealthy(members) {
				break
			} else if !dec.Empty() && st.Wait == "" {
				t.Fatalf("roll of %d members stalled without saying why", st.Outdated)
			}
			members = advance(members)
		}

		// Converged: the right members, all healthy and current.
		live := Live(members)
		if d.IsPets() {
			if want := len(wantedSet(d)) - btoi(wantedSet(d)[""]); len(live) != want {
				t.Fatalf("converged pets have %d live members, want %d", len(live), want)
			}
		} else if len(live) != max(*d.Size, 0) {
			t.Fatalf("converged cattle have %d live members, want %d", len(live), *d.Size)
		}
		for _, m := range live {
			if !healthy(m) || d.outdated(m) {
				t.Fatalf("converged group holds %+v", m)
			}
		}
		// (d) Idempotent: nothing more to do, however often asked.
		for range 2 {
			if dec := Decide(d, members); !dec.Empty() {
				t.Fatalf("converged group decides %+v", dec)
			}
			if batch, st := NextRollBatch(d, members); batch != nil || st.Outdated != 0 {
				t.Fatalf("converged group rolls %v (%+v)", batch, st)
			}
		}
	})
}

// A decision is never issued twice: right after acting on it, before the
// world moves (instances still pending, destroyed ones still terminating),
// Decide asks for no further creates or destroys. This is why pending
// members count and terminating ones do not.
func TestPropertyNoDoubleIssue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genCase(t, false)
		acted := (&world{}).apply(d, members, Decide(d, members))
		if again := Decide(d, acted); !again.Settled() {
			t.Fatalf("second decision before the world moved: %+v", again)
		}
	})
}

// Decide does not depend on the order members are listed in.
func TestPropertyOrderIndependent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genCase(t, false)
		shuffled := rapid.Permutation(members).Draw(t, "shuffled")
		if a, b := Decide(d, members), Decide(d, shuffled); !reflect.DeepEqual(a, b) {
			t.Fatalf("order changed the decision:\n  %+v\n  %+v", a, b)
		}
	})
}

func allHealthy(members []Member) bool {
	for _, m := range Live(members) {
		if !healthy(m) {
			return false
		}
	}
	return true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// genSettled draws a small group with exactly the live members it wants,
// cattle or pets, of random health, state and outdatedness, with a random
// update policy; terminating members and repeated entries may be listed
// too. Decide has nothing to create or destroy for it, so it is a group as
// a roll starts (see RollSchedule).
func genSettled(t *rapid.T) (Desired, []Member) {
	d := Desired{
		ConfigHash:     rapid.SampledFrom([]string{cur, cur, cur, ""}).Draw(t, "hash"),
		MaxParallel:    rapid.IntRange(0, 4).Draw(t, "max_parallel"),
		MaxUnavailable: rapid.IntRange(0, 4).Draw(t, "max_unavailable"),
	}
	isPets := rapid.Bool().Draw(t, "pets")
	n := rapid.IntRange(0, len(petPool)).Draw(t, "n")
	nums := rapid.SliceOfNDistinct(rapid.IntRange(0, 30), n, n, rapid.ID[int]).Draw(t, "ids")
	var members []Member
	anyFailed := false
	for i, num := range nums {
		m := Member{
			ID:         instance.ID(fmt.Sprintf("i%02d", num)),
			ConfigHash: rapid.SampledFrom([]string{cur, old, old, ""}).Draw(t, "config_hash"),
			State:      rapid.SampledFrom([]instance.State{pending, running, running, running}).Draw(t, "state"),
			Health:     rapid.SampledFrom([]flavor.Health{healthyH, healthyH, unhealthyH, unknownH}).Draw(t, "health"),
		}
		if isPets {
			m.LogicalID = petPool[i]
			d.LogicalIDs = append(d.LogicalIDs, m.LogicalID)
		}
		anyFailed = anyFailed || failed(m)
		members = append(members, m)
	}
	if isPets {
		// Declared in any order, a logical ID perhaps twice.
		d.LogicalIDs = rapid.Permutation(d.LogicalIDs).Draw(t, "logical_ids")
		if len(d.LogicalIDs) > 0 && rapid.Bool().Draw(t, "declared_twice") {
			d.LogicalIDs = append(d.LogicalIDs, d.LogicalIDs[0])
		}
	} else {
		d.Size = &n
	}
	// replace_unhealthy would replace a failed member instead of settling.
	d.ReplaceUnhealthy = !anyFailed && rapid.Bool().Draw(t, "replace_unhealthy")
	for i := range rapid.IntRange(0, 2).Draw(t, "terminating") {
		members = append(members, Member{
			ID:         instance.ID(fmt.Sprintf("t%02d", i)),
			LogicalID:  rapid.SampledFrom(append([]string{""}, petPool...)).Draw(t, "terminating.logical_id"),
			ConfigHash: old, State: terminating, Health: unhealthyH,
		})
	}
	if len(members) > 0 && rapid.Bool().Draw(t, "listed_twice") {
		members = append(members, members[rapid.IntRange(0, len(members)-1).Draw(t, "twice")])
	}
	return d, rapid.Permutation(members).Draw(t, "order")
}

// RollSchedule is the roll NextRollBatch paces, pass after pass, when each
// batch's replacements come up healthy and current and the members they
// replace leave: the same batches, in order, and when the roll stops
// early the same reason to wait.
func TestPropertyRollScheduleIsNextRollBatchIterated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genSettled(t)
		if dec := Decide(d, members); !dec.Settled() {
			t.Fatalf("generated group is not settled: %+v", dec)
		}
		var want [][]instance.ID
		wantWait := ""
		w := &world{}
		ms := members
		for pass := 0; ; pass++ {
			if pass > len(members)+1 {
				t.Fatalf("NextRollBatch did not finish in %d passes: %v", pass, want)
			}
			batch, st := NextRollBatch(d, ms)
			if len(batch) == 0 {
				wantWait = st.Wait
				if st.Outdated == 0 && st.Wait != "" {
					t.Fatalf("nothing out of date, yet waits: %q", st.Wait)
				}
				break
			}
			want = append(want, batch)
			ms = w.replace(d, ms, batch)
		}
		got, wait := RollSchedule(d, members)
		if !reflect.DeepEqual(got, want) || wait != wantWait {
			t.Fatalf("RollSchedule = %v, %q\nNextRollBatch iterated = %v, %q\ndesired %+v\nmembers %+v", got, wait, want, wantWait, d, members)
		}
		for i, b := range got {
			if len(b) == 0 {
				t.Fatalf("batch %d of %v is empty", i, got)
			}
		}
	})
}

// replace is a batch done: each replaced member has left (every entry of
// it) and its replacement (the same pet) runs, healthy and current.
func (w *world) replace(d Desired, members []Member, batch []instance.ID) []Member {
	replaced := map[instance.ID]bool{}
	for _, id := range batch {
		replaced[id] = true
	}
	var out []Member
	for _, m := range members {
		if !replaced[m.ID] {
			out = append(out, m)
		}
	}
	for _, m := range Live(members) {
		if replaced[m.ID] {
			n := w.create(d, m.LogicalID)
			n.State, n.Health = running, healthyH
			out = append(out, n)
		}
	}
	return out
}
