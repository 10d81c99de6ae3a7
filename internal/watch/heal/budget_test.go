package heal

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
)

func TestBudgetVanished(t *testing.T) {
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 2}, t0)
	d := cattle(10)
	pass(tr, t0, d, fleet(10))

	// 3 of 10 vanish (not enough to brake): 2 are replaced, 1 held.
	now := t0.Add(time.Minute)
	obs := without(fleet(10), "i01", "i02", "i03")
	_, dec, evs := pass(tr, now, d, obs)
	if len(dec.Create) != 2 {
		t.Fatalf("decision %+v, want 2 creates", dec)
	}
	e := findEvent(t, evs, KindBudgetExhausted)
	if !strings.Contains(e.Message, now.Add(time.Hour).Format(time.RFC3339)) || !strings.Contains(e.Message, "1 vanished") {
		t.Errorf("budget event %q should say 1 vanished held and when the budget frees up", e.Message)
	}
	made := created(dec, "n")
	tr.Issued(now, made, nil)
	obs = append(obs, asListed(made, healthy)...)
	if st := tr.Status(now); st.Replacements != 2 || !st.BudgetFreesAt.Equal(now.Add(time.Hour)) {
		t.Errorf("status %+v", st)
	}

	// Still held, and said once only.
	_, dec, evs = pass(tr, now.Add(10*time.Minute), d, obs)
	if len(dec.Create) != 0 || len(evs) != 0 {
		t.Fatalf("decision %+v, events %v; want the vanished one still held, silently", dec, kinds(evs))
	}
	if st := tr.Status(now.Add(10 * time.Minute)); st.Owed != 1 || st.ReplacementsTotal != 2 {
		t.Errorf("status %+v, want 1 owed", st)
	}
	// A scale-up is no replacement: it passes though the budget is spent.
	_, dec, _ = pass(tr, now.Add(20*time.Minute), cattle(12), obs)
	if len(dec.Create) != 2 {
		t.Fatalf("scale-up by 2 while one replacement is held: %+v, want 2 creates", dec)
	}
	// An hour after the two replacements, the third goes.
	_, dec, _ = pass(tr, now.Add(time.Hour), d, obs)
	if len(dec.Create) != 1 {
		t.Fatalf("an hour later: %+v, want 1 create", dec)
	}
	act(tr, now.Add(time.Hour), dec, "m")
	if st := tr.Status(now.Add(time.Hour)); st.Replacements != 1 || st.ReplacementsTotal != 3 {
		t.Fatalf("status %+v: want 1 in the last hour, 3 in all", st)
	}
}

func TestBudgetUnhealthy(t *testing.T) {
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1, Grace: 2 * time.Second}, t0)
	d := cattle(10)
	obs := with(fleet(10), unhealthy, "i07")
	pass(tr, t0, d, obs)
	obs = with(obs, unhealthy, "i03")
	pass(tr, t0.Add(time.Second), d, obs)

	// Both past grace: i07, unhealthy longest, is replaced; i03 held.
	_, dec, evs := pass(tr, t0.Add(3*time.Second), d, obs)
	if got := destroyed(dec, group.ReasonUnhealthy); !slices.Equal(got, ids("i07")) || len(dec.Create) != 1 {
		t.Fatalf("decision %+v, want i07 replaced", dec)
	}
	if e := findEvent(t, evs, KindBudgetExhausted); !slices.Equal(e.IDs, ids("i03")) {
		t.Fatalf("budget event %+v, want i03 held", e)
	}
	made := created(dec, "n")
	tr.Issued(t0.Add(3*time.Second), made, ids("i07"))
	// Another turns unhealthy while the budget is spent: said once.
	obs = with(without(obs, "i07"), unhealthy, "i05")
	obs = append(obs, asListed(made, healthy)...)
	if _, dec, evs = pass(tr, t0.Add(6*time.Second), d, obs); !dec.Empty() || !slices.Equal(kinds(evs), []Kind{KindUnhealthy}) {
		t.Fatalf("decision %+v, events %v; want nothing but i05's grace starting", dec, kinds(evs))
	}
	_, dec, evs = pass(tr, t0.Add(8*time.Second), d, obs)
	if !dec.Empty() {
		t.Fatalf("decision %+v, want everything held", dec)
	}
	if e := findEvent(t, evs, KindReplaceHeld); !slices.Equal(e.IDs, ids("i05")) {
		t.Fatalf("replace-held event %+v, want i05", e)
	}
	_, _, evs = pass(tr, t0.Add(9*time.Second), d, obs)
	if hasEvent(evs, KindReplaceHeld) || hasEvent(evs, KindBudgetExhausted) {
		t.Fatalf("held events repeated: %v", kinds(evs))
	}
}

func TestBudgetVanishedBeforeUnhealthy(t *testing.T) {
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1, Grace: time.Second}, t0)
	d := cattle(6)
	obs := with(fleet(6), unhealthy, "i00")
	pass(tr, t0, d, obs)
	_, dec, _ := pass(tr, t0.Add(time.Second), d, without(obs, "i05"))
	if len(dec.Create) != 1 || len(dec.Destroy) != 0 {
		t.Fatalf("decision %+v, want the vanished one replaced and i00 held", dec)
	}
}

// A replacement whose create failed was not made: it costs no budget, the
// member stays owed, and the next pass tries again as a replacement.
func TestBudgetFailedCreateIsRetried(t *testing.T) {
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1}, t0)
	d := cattle(4)
	obs := with(fleet(4), unhealthy, "i02")
	_, dec, _ := pass(tr, t0, d, obs)
	if len(dec.Destroy) != 1 || len(dec.Create) != 1 {
		t.Fatalf("decision %+v", dec)
	}
	// The destroy succeeded, the create failed.
	tr.Issued(t0, nil, ids("i02"))
	if st := tr.Status(t0); st.Replacements != 0 {
		t.Fatalf("status %+v: a failed create spent the budget", st)
	}
	_, dec, evs := pass(tr, t0.Add(time.Minute), d, without(obs, "i02"))
	if len(dec.Create) != 1 || hasEvent(evs, KindBudgetExhausted) {
		t.Fatalf("decision %+v, events %v; want the replacement tried again", dec, kinds(evs))
	}
	made := act(tr, t0.Add(time.Minute), dec, "n")
	if st := tr.Status(t0.Add(time.Minute)); st.Replacements != 1 || st.ReplacementsTotal != 1 {
		t.Fatalf("status %+v: want the replacement made counted once", st)
	}
	// Now the budget is spent: the next unhealthy member is held.
	obs = append(with(without(obs, "i02"), unhealthy, "i03"), asListed(made, healthy)...)
	_, dec, evs = pass(tr, t0.Add(2*time.Minute), d, obs)
	if !dec.Empty() || !hasEvent(evs, KindBudgetExhausted) {
		t.Fatalf("decision %+v, events %v; want i03 held", dec, kinds(evs))
	}
}

// Only replacements actually made spend the budget: whatever a pass does
// not do (it did not act, a call failed) is still there to do within it.
func TestBudgetCountsOnlyReplacementsMade(t *testing.T) {
	type step struct {
		// vanish and sicken change the fleet before the pass; size, when
		// set, changes the group's size.
		vanish, sicken []string
		size           int
		// creates and destroys are how many of the decision's creates
		// and destroys the pass makes (-1: all of them).
		creates, destroys int
		// skip: the pass does not act at all (stale state, shutdown, lost
		// lease): Issued is not called.
		skip bool
		// The pass's decision, and the budget spent after it.
		wantCreates, wantSpent int
	}
	tests := []struct {
		name  string
		limit int
		size  int
		steps []step
	}{
		{"a pass that does not act spends nothing", 2, 10, []step{
			{vanish: []string{"i00", "i01"}, skip: true, wantCreates: 2, wantSpent: 0},
			{skip: true, wantCreates: 2, wantSpent: 0},
			{creates: -1, wantCreates: 2, wantSpent: 2},
		}},
		{"failed creates spend nothing and are tried again", 2, 10, []step{
			{vanish: []string{"i00", "i01"}, creates: 0, wantCreates: 2, wantSpent: 0},
			{creates: 1, wantCreates: 2, wantSpent: 1},
			{creates: -1, wantCreates: 1, wantSpent: 2},
		}},
		{"a scale-up made beside a failed replacement is not one", 3, 10, []step{
			{vanish: []string{"i00"}, creates: 0, wantCreates: 1, wantSpent: 0},
			{size: 12, creates: 2, wantCreates: 3, wantSpent: 1},
		}},
		{"unhealthy: destroyed, its replacement failed, then made", 1, 6, []step{
			{sicken: []string{"i03"}, destroys: -1, creates: 0, wantCreates: 1, wantSpent: 0},
			{creates: -1, wantCreates: 1, wantSpent: 1},
			{sicken: []string{"i04"}, wantCreates: 0, wantSpent: 1},
		}},
		{"unhealthy: drain failed, the replacement made counts", 1, 6, []step{
			{sicken: []string{"i03"}, destroys: 0, creates: -1, wantCreates: 1, wantSpent: 1},
		}},
		{"unhealthy: a pass that does not act keeps it for the next", 1, 6, []step{
			{sicken: []string{"i03"}, skip: true, wantCreates: 1, wantSpent: 0},
			{destroys: -1, creates: -1, wantCreates: 1, wantSpent: 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker("g", Policy{MaxReplacementsPerHour: tc.limit}, t0)
			d := cattle(tc.size)
			obs := fleet(tc.size)
			pass(tr, t0, d, obs)
			now := t0
			for i, st := range tc.steps {
				now = now.Add(time.Minute)
				if st.size > 0 {
					d = cattle(st.size)
				}
				obs = with(without(obs, st.vanish...), unhealthy, st.sicken...)
				_, dec, _ := pass(tr, now, d, obs)
				if len(dec.Create) != st.wantCreates {
					t.Fatalf("step %d: decision %+v, want %d creates", i, dec, st.wantCreates)
				}
				if !st.skip {
					mk := dec
					if st.creates >= 0 {
						mk.Create = mk.Create[:min(st.creates, len(mk.Create))]
					}
					if st.destroys >= 0 {
						mk.Destroy = mk.Destroy[:min(st.destroys, len(mk.Destroy))]
					}
					made := act(tr, now, mk, fmt.Sprintf("s%d-", i))
					for _, x := range mk.Destroy {
						obs = without(obs, string(x.ID))
					}
					obs = append(obs, asListed(made, healthy)...)
				}
				if got := tr.Status(now).Replacements; got != st.wantSpent {
					t.Fatalf("step %d: %d replacements counted, want %d", i, got, st.wantSpent)
				}
			}
		})
	}
}

func TestBudgetPets(t *testing.T) {
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1, Grace: time.Second}, t0)
	d := pets("a", "b", "c", "d", "e", "f")
	all := []group.Member{
		pet("u", "a", healthy), pet("v", "b", healthy), pet("w", "c", healthy),
		pet("x", "d", healthy), pet("y", "e", unhealthy), pet("z", "f", healthy),
	}
	pass(tr, t0, d, all)
	// b vanished and e is unhealthy: b (vanished) goes first.
	_, dec, _ := pass(tr, t0.Add(time.Second), d, without(all, "v"))
	if len(dec.Create) != 1 || dec.Create[0].LogicalID != "b" || len(dec.Destroy) != 0 {
		t.Fatalf("decision %+v, want b created and e held", dec)
	}
}

func TestBudgetUnlimited(t *testing.T) {
	tr := NewTracker("g", Policy{}, t0)
	pass(tr, t0, cattle(8), fleet(8))
	_, dec, _ := pass(tr, t0.Add(time.Second), cattle(8), with(without(fleet(8), "i00", "i01"), unhealthy, "i02", "i03"))
	if len(dec.Create) != 4 || len(dec.Destroy) != 2 {
		t.Fatalf("decision %+v, want 2 vanished and 2 unhealthy replaced", dec)
	}
	act(tr, t0.Add(time.Second), dec, "n")
	if st := tr.Status(t0.Add(time.Second)); st.Replacements != 4 || !st.BudgetFreesAt.IsZero() {
		t.Fatalf("status %+v", st)
	}
}

func TestBudgetWindowSlides(t *testing.T) {
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 2}, t0)
	d := cattle(10)
	obs := fleet(10)
	pass(tr, t0, d, obs)
	n := 0
	// One vanish every 20 minutes: the third in an hour waits until the
	// first has left the window.
	for i, at := range []time.Duration{20 * time.Minute, 40 * time.Minute, 60 * time.Minute, 80 * time.Minute} {
		obs = without(obs, string(obs[0].ID))
		_, dec, _ := pass(tr, t0.Add(at), d, obs)
		want := 1
		if i == 2 {
			want = 0
		}
		if len(dec.Create) != want {
			t.Fatalf("vanish %d at %s: %d creates, want %d", i, at, len(dec.Create), want)
		}
		made := created(dec, "n"+string(rune('a'+n)))
		n++
		tr.Issued(t0.Add(at), made, nil)
		obs = append(obs, asListed(made, healthy)...)
		if i == 2 {
			// At 20m+1h the first replacement leaves the window.
			_, dec, _ = pass(tr, t0.Add(80*time.Minute-time.Nanosecond), d, obs)
			if len(dec.Create) != 0 {
				t.Fatalf("just before the window frees: %+v", dec)
			}
		}
	}
}

func TestSetPolicy(t *testing.T) {
	tr := NewTracker("g", Policy{}, t0)
	if p := tr.Policy(); p.ExpectTimeout != DefaultExpectTimeout || p.BrakeMin != DefaultBrakeMin || p.BrakeConfirm != DefaultBrakeConfirm {
		t.Fatalf("defaults %+v", p)
	}
	pass(tr, t0, cattle(10), fleet(10))
	_, dec, _ := pass(tr, t0.Add(time.Second), cattle(10), without(fleet(10), "i00", "i01"))
	if len(dec.Create) != 2 {
		t.Fatalf("decision %+v", dec)
	}
	act(tr, t0.Add(time.Second), dec, "n")
	// Lowered below what was spent this hour: nothing more until the
	// window has one fewer than the new limit.
	tr.SetPolicy(Policy{MaxReplacementsPerHour: 1})
	if st := tr.Status(t0.Add(time.Second)); !st.BudgetFreesAt.Equal(t0.Add(time.Second + time.Hour)) {
		t.Fatalf("status %+v", st)
	}
}

func TestPolicyFromConfig(t *testing.T) {
	p := PolicyFromConfig(configHealth(45*time.Second, 7))
	if p.Grace != 45*time.Second || p.MaxReplacementsPerHour != 7 {
		t.Fatalf("policy %+v", p)
	}
}

func TestBudgetHoldsTheRoll(t *testing.T) {
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1}, t0)
	d := cattle(4)
	d.ConfigHash = "new"
	pass(tr, t0, d, fleet(4))
	_, dec, _ := pass(tr, t0.Add(time.Second), d, with(fleet(4), unhealthy, "i00"))
	made := asListed(act(tr, t0.Add(time.Second), dec, "n"), healthy)
	// Out of date, and a second replacement held: no roll meanwhile.
	obs := append(with(without(fleet(4), "i00"), unhealthy, "i01"), made...)
	_, dec, _ = pass(tr, t0.Add(2*time.Second), d, obs)
	if !dec.Empty() {
		t.Fatalf("decision %+v, want nothing (i01 held, roll waiting)", dec)
	}
	// Once nothing is held, the roll is back.
	_, dec, _ = pass(tr, t0.Add(3*time.Second), d, append(without(fleet(4), "i00"), made...))
	if len(dec.Roll) != 4 || !dec.Settled() {
		t.Fatalf("decision %+v, want the 4 out-of-date members to roll", dec)
	}
}
