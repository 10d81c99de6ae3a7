package heal

import (
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
)

func TestCreateExpectations(t *testing.T) {
	s := time.Second
	tests := []struct {
		name string
		// listedAt is when the provider first lists the created member; 0
		// means never.
		listedAt time.Duration
		// at each pass time, how many creates the pass makes
		passes []time.Duration
		want   []int
	}{
		// A slow provider (lists 2 s after Provision returned): the member
		// is pending meanwhile, so nothing is created twice.
		{"slow provider", 2 * s, []time.Duration{0, s, 2 * s, 3 * s}, []int{1, 0, 0, 0}},
		{"listed at once", s, []time.Duration{0, s, 2 * s}, []int{1, 0, 0}},
		// Never listed: counted until the timeout, then created again.
		{"never listed", 0, []time.Duration{0, 30 * s, 59 * s, 60 * s, 61 * s}, []int{1, 0, 0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker("g", Policy{ExpectTimeout: time.Minute}, t0)
			d := cattle(3)
			var made []group.Member
			for i, at := range tt.passes {
				obs := fleet(2)
				if tt.listedAt > 0 && at >= tt.listedAt && len(made) > 0 {
					obs = append(obs, asListed(made[:1], healthy)...)
				}
				adj, dec, evs := pass(tr, t0.Add(at), d, obs)
				if len(dec.Create) != tt.want[i] {
					t.Fatalf("pass at %s: %d creates, want %d (members %+v)", at, len(dec.Create), tt.want[i], adj.Members)
				}
				if tt.name == "never listed" && at == 60*s && !hasEvent(evs, KindExpectationExpired) {
					t.Errorf("no expectation-expired event: %v", kinds(evs))
				}
				c := created(dec, "n"+string(rune('a'+i)))
				made = append(made, c...)
				tr.Issued(t0.Add(at), c, nil)
			}
		})
	}
}

func TestCreateExpectationKeepsThePet(t *testing.T) {
	tr := NewTracker("g", Policy{}, t0)
	d := pets("a", "b")
	_, dec, _ := pass(tr, t0, d, []group.Member{pet("x", "a", healthy)})
	if len(dec.Create) != 1 || dec.Create[0].LogicalID != "b" {
		t.Fatalf("decision %+v, want one create of b", dec)
	}
	tr.Issued(t0, created(dec, "n"), nil)
	adj, dec, _ := pass(tr, t0.Add(time.Second), d, []group.Member{pet("x", "a", healthy)})
	if !dec.Empty() {
		t.Fatalf("b is being created: decision %+v, want none", dec)
	}
	want := group.Member{ID: "n0", LogicalID: "b", State: pending, Health: unknown}
	if !slices.Contains(adj.Members, want) {
		t.Fatalf("members %+v lack the expected %+v", adj.Members, want)
	}
	if st := tr.Status(t0.Add(time.Second)); st.Pending != 1 {
		t.Fatalf("Status.Pending = %d, want 1", st.Pending)
	}
}

func TestDestroyExpectations(t *testing.T) {
	tr := NewTracker("g", Policy{ExpectTimeout: time.Minute}, t0)
	d := cattle(2)
	obs := fleet(3)
	_, dec, _ := pass(tr, t0, d, obs)
	gone := destroyed(dec, group.ReasonScaleDown)
	if len(gone) != 1 {
		t.Fatalf("decision %+v, want one scale-down", dec)
	}
	tr.Issued(t0, nil, gone)

	// Still listed (the cloud is slow to terminate): terminating, not
	// destroyed again.
	adj, dec, _ := pass(tr, t0.Add(10*time.Second), d, obs)
	if stateOf(adj.Members, string(gone[0])) != terminate || !dec.Empty() {
		t.Fatalf("members %+v, decision %+v; want %s terminating and nothing to do", adj.Members, dec, gone[0])
	}
	if st := tr.Status(t0.Add(10 * time.Second)); st.Terminating != 1 {
		t.Fatalf("Status.Terminating = %d, want 1", st.Terminating)
	}
	// Gone: that is no vanish, nothing to replace.
	_, dec, evs := pass(tr, t0.Add(20*time.Second), d, without(obs, string(gone[0])))
	if !dec.Empty() || len(evs) != 0 {
		t.Fatalf("decision %+v, events %v; want nothing", dec, kinds(evs))
	}
	if st := tr.Status(t0.Add(20 * time.Second)); st.Terminating != 0 || st.Owed != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestDestroyExpectationTimesOut(t *testing.T) {
	tr := NewTracker("g", Policy{ExpectTimeout: time.Minute}, t0)
	d := cattle(2)
	obs := fleet(3)
	_, dec, _ := pass(tr, t0, d, obs)
	tr.Issued(t0, nil, destroyed(dec, group.ReasonScaleDown))
	_, dec, evs := pass(tr, t0.Add(time.Minute), d, obs)
	if !hasEvent(evs, KindExpectationExpired) || len(dec.Destroy) != 1 {
		t.Fatalf("after the timeout: decision %+v, events %v; want the destroy again", dec, kinds(evs))
	}
}

func TestDestroyingAnExpectedCreate(t *testing.T) {
	tr := NewTracker("g", Policy{}, t0)
	tr.Issued(t0, []group.Member{{ID: "n0", State: pending}}, nil)
	tr.Issued(t0, nil, ids("n0"))
	adj := tr.Adjust(t0.Add(time.Second), cattle(2), fleet(1))
	if stateOf(adj.Members, "n0") != "" {
		t.Fatalf("a destroyed create is still expected: %+v", adj.Members)
	}
}

func TestDuplicateListingCountsOnce(t *testing.T) {
	tr := NewTracker("g", Policy{}, t0)
	obs := append(fleet(2), mem("i00", unhealthy))
	adj := tr.Adjust(t0, cattle(2), obs)
	if len(adj.Members) != 2 || healthOf(adj.Members, "i00") != healthy {
		t.Fatalf("members %+v, want i00 (its first listing) and i01", adj.Members)
	}
}

func TestAdjustDoesNotChangeItsInput(t *testing.T) {
	tr := NewTracker("g", Policy{Grace: time.Hour}, t0)
	obs := with(fleet(3), unhealthy, "i01")
	keep := slices.Clone(obs)
	tr.Issued(t0, nil, ids("i02"))
	tr.Adjust(t0, cattle(3), obs)
	if !slices.Equal(obs, keep) {
		t.Fatalf("Adjust changed its input: %+v", obs)
	}
}

func TestVanish(t *testing.T) {
	t.Run("replaced and counted", func(t *testing.T) {
		tr := NewTracker("g", Policy{}, t0)
		pass(tr, t0, cattle(5), fleet(5))
		_, dec, evs := pass(tr, t0.Add(time.Second), cattle(5), without(fleet(5), "i02"))
		if len(dec.Create) != 1 {
			t.Fatalf("decision %+v, want one create", dec)
		}
		if e := findEvent(t, evs, KindVanished); !slices.Equal(e.IDs, ids("i02")) {
			t.Errorf("vanished event %+v", e)
		}
		act(tr, t0.Add(time.Second), dec, "n")
		if st := tr.Status(t0.Add(time.Second)); st.Replacements != 1 {
			t.Errorf("Status.Replacements = %d, want 1", st.Replacements)
		}
	})
	t.Run("listed terminating by the provider", func(t *testing.T) {
		tr := NewTracker("g", Policy{}, t0)
		pass(tr, t0, cattle(3), fleet(3))
		obs := fleet(3)
		obs[1].State = terminate
		_, dec, evs := pass(tr, t0.Add(time.Second), cattle(3), obs)
		if len(dec.Create) != 1 || !hasEvent(evs, KindVanished) {
			t.Fatalf("decision %+v, events %v", dec, kinds(evs))
		}
		// When it is gone at last, it is not counted twice.
		_, _, evs = pass(tr, t0.Add(2*time.Second), cattle(3), append(without(fleet(3), "i01"), mem("n0", healthy)))
		if hasEvent(evs, KindVanished) {
			t.Fatalf("vanished twice: %+v", evs)
		}
	})
	t.Run("destroy-instances lowers the size: nothing owed, no brake", func(t *testing.T) {
		tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1}, t0)
		pass(tr, t0, cattle(5), fleet(5))
		adj, dec, _ := pass(tr, t0.Add(time.Second), cattle(2), fleet(2))
		if adj.Braked || !dec.Empty() {
			t.Fatalf("braked %v, decision %+v", adj.Braked, dec)
		}
		// Growing again afterwards is a scale-up, outside the budget.
		_, dec, _ = pass(tr, t0.Add(2*time.Second), cattle(5), fleet(2))
		if len(dec.Create) != 3 {
			t.Fatalf("scale-up: %+v, want 3 creates", dec)
		}
		if st := tr.Status(t0.Add(2 * time.Second)); st.Replacements != 0 {
			t.Fatalf("scale-up charged the budget: %+v", st)
		}
	})
	t.Run("a pet", func(t *testing.T) {
		tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1}, t0)
		d := pets("a", "b", "c")
		all := []group.Member{pet("x", "a", healthy), pet("y", "b", healthy), pet("z", "c", healthy)}
		pass(tr, t0, d, all)
		_, dec, _ := pass(tr, t0.Add(time.Second), d, all[:2])
		if len(dec.Create) != 1 || dec.Create[0].LogicalID != "c" {
			t.Fatalf("decision %+v, want c created", dec)
		}
		// A pet added to the stack is no replacement: the budget (spent)
		// does not hold it.
		d2 := pets("a", "b", "c", "d")
		tr.Issued(t0.Add(time.Second), created(dec, "n"), nil)
		_, dec, _ = pass(tr, t0.Add(2*time.Second), d2, all[:2])
		if len(dec.Create) != 1 || dec.Create[0].LogicalID != "d" {
			t.Fatalf("decision %+v, want d created", dec)
		}
	})
	t.Run("an expected create never listed counts as vanished", func(t *testing.T) {
		// It may have vanished before any observation saw it: re-creating
		// it is a replacement, within the budget.
		tr := NewTracker("g", Policy{ExpectTimeout: time.Minute, MaxReplacementsPerHour: 1}, t0)
		pass(tr, t0, cattle(3), fleet(3))
		_, dec, _ := pass(tr, t0.Add(time.Second), cattle(3), fleet(2))
		tr.Issued(t0.Add(time.Second), created(dec, "n"), nil)
		pass(tr, t0.Add(2*time.Second), cattle(3), fleet(2))
		_, dec, evs := pass(tr, t0.Add(time.Minute+time.Second), cattle(3), fleet(2))
		if !hasEvent(evs, KindExpectationExpired) || len(dec.Create) != 0 || !hasEvent(evs, KindBudgetExhausted) {
			t.Fatalf("decision %+v, events %v; want the re-create held by the budget", dec, kinds(evs))
		}
		if st := tr.Status(t0.Add(time.Minute + time.Second)); st.Owed != 1 {
			t.Fatalf("status %+v", st)
		}
	})
}

func TestIssuedIgnoresEmptyIDs(t *testing.T) {
	tr := NewTracker("g", Policy{}, t0)
	tr.Issued(t0, []group.Member{{}}, []instance.ID{})
	if st := tr.Status(t0); st.Pending != 0 {
		t.Fatalf("status %+v", st)
	}
}
