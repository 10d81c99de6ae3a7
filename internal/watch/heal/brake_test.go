package heal

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
)

func TestBrakeEngages(t *testing.T) {
	tests := []struct {
		name  string
		size  int
		grace time.Duration
		// first and second observations
		first, second []group.Member
		want          bool
	}{
		{"6 of 10 vanish", 10, 0, fleet(10), without(fleet(10), "i00", "i01", "i02", "i03", "i04", "i05"), true},
		{"5 of 10 vanish: not more than half", 10, 0, fleet(10), without(fleet(10), "i00", "i01", "i02", "i03", "i04"), false},
		{"2 of 3 vanish: fewer than 3", 3, 0, fleet(3), without(fleet(3), "i00", "i01"), false},
		{"3 of 4 vanish", 4, 0, fleet(4), fleet(1), true},
		{"the listing comes back empty", 5, 0, fleet(5), nil, true},
		{"4 of 6 unhealthy past grace at once", 6, time.Second, with(fleet(6), unhealthy, "i00", "i01", "i02", "i03"), with(fleet(6), unhealthy, "i00", "i01", "i02", "i03"), true},
		{"4 of 6 unhealthy within grace", 6, time.Hour, fleet(6), with(fleet(6), unhealthy, "i00", "i01", "i02", "i03"), false},
		{"2 vanished and 2 unhealthy of 6", 6, 0, fleet(6), with(without(fleet(6), "i00", "i01"), unhealthy, "i02", "i03"), true},
		// Members never created are not dead: a new group or a scale-up
		// never brakes.
		{"a new group", 10, 0, nil, nil, false},
		{"a scale-up", 10, 0, fleet(2), fleet(2), false},
		// 3 of the 4 that exist vanish: the 6 never created do not dilute.
		{"3 of 4 vanish during a scale-up", 10, 0, fleet(4), fleet(1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker("g", Policy{Grace: tt.grace}, t0)
			d := cattle(tt.size)
			tr.Adjust(t0, d, tt.first)
			adj, dec, evs := pass(tr, t0.Add(time.Second), d, tt.second)
			if adj.Braked != tt.want || hasEvent(evs, KindBrakeEngaged) != tt.want {
				t.Fatalf("braked %v, events %v; want braked %v", adj.Braked, kinds(evs), tt.want)
			}
			if tt.want && (len(dec.Create) > 0 || len(dec.Destroy) > 0) {
				t.Fatalf("braked, yet decision %+v", dec)
			}
			if st := tr.Status(t0.Add(time.Second)); st.Braked != tt.want || (tt.want && !st.BrakedSince.Equal(t0.Add(time.Second))) {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// TestBrakeMin: a group's health { brake_min } sets the fewest dead that
// engage the brake. A 3-member quorum system (etcd) sets 2: 2 of 3 lost
// at once is its mass failure, which the default (3) lets through.
func TestBrakeMin(t *testing.T) {
	trio := []group.Member{pet("m0", "a", healthy), pet("m1", "b", healthy), pet("m2", "c", healthy)}
	// The survivor of a lost quorum: its flavor cannot tell, so unknown.
	survivor := []group.Member{pet("m0", "a", unknown)}
	tests := []struct {
		name     string
		brakeMin int // health { brake_min }; 0 when the block leaves it out
		d        group.Desired
		first    []group.Member
		second   []group.Member
		want     bool
	}{
		{"default: 2 of 3 pets vanish", 0, pets("a", "b", "c"), trio, survivor, false},
		{"brake_min 2: 2 of 3 pets vanish", 2, pets("a", "b", "c"), trio, survivor, true},
		{"brake_min 2: 1 of 3 pets vanishes", 2, pets("a", "b", "c"), trio, trio[:2], false},
		{"brake_min 3: 2 of 3 pets vanish", 3, pets("a", "b", "c"), trio, survivor, false},
		{"default: 2 of 3 cattle vanish", 0, cattle(3), fleet(3), fleet(1), false},
		{"brake_min 2: 2 of 3 cattle vanish", 2, cattle(3), fleet(3), fleet(1), true},
		// Still more than half of the known members: 2 of 5 is no mass failure.
		{"brake_min 2: 2 of 5 cattle vanish", 2, cattle(5), fleet(5), fleet(3), false},
		{"brake_min 1: the only member vanishes", 1, cattle(1), fleet(1), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := configHealth(0, 0)
			h.BrakeMin = tt.brakeMin
			p := PolicyFromConfig(h)
			if p.BrakeMin != tt.brakeMin {
				t.Fatalf("PolicyFromConfig: BrakeMin %d, want %d", p.BrakeMin, tt.brakeMin)
			}
			tr := NewTracker("g", p, t0)
			if got, want := tr.Policy().BrakeMin, cmp.Or(tt.brakeMin, DefaultBrakeMin); got != want {
				t.Fatalf("the tracker's BrakeMin is %d, want %d", got, want)
			}
			tr.Adjust(t0, tt.d, tt.first)
			adj, dec, evs := pass(tr, t0.Add(time.Second), tt.d, tt.second)
			if adj.Braked != tt.want || hasEvent(evs, KindBrakeEngaged) != tt.want {
				t.Fatalf("braked %v, events %v; want braked %v", adj.Braked, kinds(evs), tt.want)
			}
			if tt.want && (len(dec.Create) > 0 || len(dec.Destroy) > 0) {
				t.Fatalf("braked, yet decision %+v", dec)
			}
			if !tt.want && len(dec.Create) != len(tt.first)-len(tt.second) {
				t.Fatalf("not braked, decision %+v; want the %d vanished replaced", dec, len(tt.first)-len(tt.second))
			}
		})
	}
}

func TestBrakeReleasesAfterConsistentObservations(t *testing.T) {
	for _, k := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			tr := NewTracker("g", Policy{BrakeConfirm: k}, t0)
			d := cattle(10)
			pass(tr, t0, d, fleet(10))
			obs := fleet(4)
			adj, _, evs := pass(tr, t0.Add(time.Second), d, obs)
			if !adj.Braked {
				t.Fatal("6 of 10 vanished: not braked")
			}
			e := findEvent(t, evs, KindBrakeEngaged)
			if !strings.Contains(e.Message, "6 of 10") || len(e.IDs) != 6 {
				t.Errorf("brake event %+v", e)
			}
			// The engaging observation is the first of the run: the K-th
			// agreeing one releases the brake.
			for i := 2; i < k; i++ {
				adj, dec, _ := pass(tr, t0.Add(time.Duration(i)*time.Second), d, obs)
				if !adj.Braked || !dec.Empty() {
					t.Fatalf("observation %d of %d: braked %v, decision %+v", i, k, adj.Braked, dec)
				}
				if st := tr.Status(t0.Add(time.Duration(i) * time.Second)); st.Consistent != i {
					t.Fatalf("observation %d: status %+v", i, st)
				}
			}
			adj, dec, evs := pass(tr, t0.Add(time.Duration(k)*time.Second), d, obs)
			if adj.Braked || len(dec.Create) != 6 || !hasEvent(evs, KindBrakeReleased) {
				t.Fatalf("after %d agreeing observations: braked %v, decision %+v, events %v", k, adj.Braked, dec, kinds(evs))
			}
		})
	}
}

func TestBrakeConfirmBelowTwo(t *testing.T) {
	// One observation agrees with nothing: K below 2 means 2.
	if got := NewTracker("g", Policy{BrakeConfirm: 1}, t0).Policy().BrakeConfirm; got != 2 {
		t.Fatalf("BrakeConfirm 1 became %d, want 2", got)
	}
}

func TestBrakeAFlappingListingRecreatesNothing(t *testing.T) {
	tr := NewTracker("g", Policy{}, t0)
	d := cattle(5)
	pass(tr, t0, d, fleet(5))
	if adj, dec, _ := pass(tr, t0.Add(1*time.Second), d, nil); !adj.Braked || !dec.Empty() {
		t.Fatalf("empty listing: braked %v, decision %+v", adj.Braked, dec)
	}
	// The listing is back; it changed, so the run starts again.
	for i := 2; i <= 4; i++ {
		adj, dec, evs := pass(tr, t0.Add(time.Duration(i)*time.Second), d, fleet(5))
		if !dec.Empty() {
			t.Fatalf("observation %d: decision %+v", i, dec)
		}
		if got, want := adj.Braked, i < 4; got != want {
			t.Fatalf("observation %d: braked %v, want %v (events %v)", i, got, want, kinds(evs))
		}
	}
	if st := tr.Status(t0.Add(4 * time.Second)); st.Owed != 0 || st.Replacements != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestBrakeChangeRestartsTheRun(t *testing.T) {
	tr := NewTracker("g", Policy{Grace: 5 * time.Second}, t0)
	d := cattle(10)
	pass(tr, t0, d, fleet(10))
	obs := fleet(4)
	pass(tr, t0.Add(1*time.Second), d, obs) // engaged: 1
	pass(tr, t0.Add(2*time.Second), d, obs) // 2
	// A member turns unhealthy: within its grace it is alive, nothing changes.
	obs = with(obs, unhealthy, "i00")
	if adj, _, _ := pass(tr, t0.Add(3*time.Second), d, obs); adj.Braked {
		t.Fatal("still braked after 3 agreeing observations")
	}

	tr = NewTracker("g", Policy{Grace: 2 * time.Second}, t0)
	pass(tr, t0, d, fleet(10))
	obs = with(fleet(4), unhealthy, "i00")
	pass(tr, t0.Add(1*time.Second), d, obs) // engaged, i00 in grace: 1
	pass(tr, t0.Add(2*time.Second), d, obs) // 2
	// i00 is now past its grace: dead, so the observations disagree.
	if adj, _, _ := pass(tr, t0.Add(3*time.Second), d, obs); !adj.Braked {
		t.Fatal("released although i00 died")
	}
	pass(tr, t0.Add(4*time.Second), d, obs) // 2
	adj, dec, _ := pass(tr, t0.Add(5*time.Second), d, obs)
	if adj.Braked || len(dec.Create) != 7 || !slices.Equal(destroyed(dec, group.ReasonUnhealthy), ids("i00")) {
		t.Fatalf("braked %v, decision %+v; want 6 vanished and i00 replaced", adj.Braked, dec)
	}
}

func TestBrakeHoldsAllButScaleDown(t *testing.T) {
	tr := NewTracker("g", Policy{BrakeConfirm: 10}, t0)
	d := cattle(10)
	d.ConfigHash = "new"
	pass(tr, t0, d, fleet(10))
	obs := with(fleet(4), unhealthy, "i00")
	if adj, _, _ := pass(tr, t0.Add(time.Second), d, obs); !adj.Braked {
		t.Fatal("not braked")
	}
	// A scale-up, the unhealthy i00 and the out-of-date members all wait.
	up := d
	n := 12
	up.Size = &n
	if _, dec, _ := pass(tr, t0.Add(2*time.Second), up, obs); !dec.Empty() {
		t.Fatalf("braked scale-up: %+v", dec)
	}
	// Scale-down is what the user asked for: it goes on.
	down := d
	n = 2
	down.Size = &n
	_, dec, _ := pass(tr, t0.Add(3*time.Second), down, obs)
	if len(dec.Destroy) != 2 || len(destroyed(dec, group.ReasonScaleDown)) != 2 || len(dec.Create) != 0 || len(dec.Roll) != 0 {
		t.Fatalf("braked scale-down: %+v", dec)
	}
}

func TestBrakeDoesNotReengageOnHeldReplacements(t *testing.T) {
	// The budget holds most of the dead after the brake releases: they stay
	// dead, but nobody new died, so the brake stays off.
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1}, t0)
	d := cattle(10)
	pass(tr, t0, d, fleet(10))
	obs := fleet(4)
	for i := 1; i <= 2; i++ {
		pass(tr, t0.Add(time.Duration(i)*time.Second), d, obs)
	}
	for i := 3; i < 20; i++ {
		adj, dec, evs := pass(tr, t0.Add(time.Duration(i)*time.Second), d, obs)
		if adj.Braked {
			t.Fatalf("observation %d: braked again (events %v)", i, kinds(evs))
		}
		made := created(dec, fmt.Sprintf("n%d-", i))
		tr.Issued(t0.Add(time.Duration(i)*time.Second), made, nil)
		obs = append(obs, asListed(made, healthy)...)
	}
	if len(obs) != 5 {
		t.Fatalf("%d members, want 5 (one replacement in the hour)", len(obs))
	}
}

func TestBrakeReengagesOnNewDeaths(t *testing.T) {
	tr := NewTracker("g", Policy{}, t0)
	d := cattle(10)
	pass(tr, t0, d, fleet(10))
	obs := fleet(4)
	for i := 1; i <= 3; i++ {
		pass(tr, t0.Add(time.Duration(i)*time.Second), d, obs)
	}
	// Released; the pass replaced the 6, which the provider lists at once.
	obs = append(obs, asListed(created(group.Decision{Create: make([]group.Create, 6)}, "n"), healthy)...)
	tr.Issued(t0.Add(3*time.Second), asListed(obs[4:], healthy), nil)
	if adj, _, _ := pass(tr, t0.Add(4*time.Second), d, obs); adj.Braked {
		t.Fatal("braked with all back")
	}
	adj, _, _ := pass(tr, t0.Add(5*time.Second), d, obs[:3])
	if !adj.Braked {
		t.Fatal("7 of 10 vanished again: not braked")
	}
}
