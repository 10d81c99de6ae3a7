package heal

import (
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// TestGrace drives one member "a" of a group of three through health
// observations and checks what Decide is shown and whether it is replaced.
func TestGrace(t *testing.T) {
	type step struct {
		at time.Duration
		// health of "a" as observed; "" means "a" is not listed.
		health flavor.Health
		state  instance.State // running unless set
		// want is the health Decide sees for "a"; replaced says whether the
		// pass destroys it as unhealthy.
		want     flavor.Health
		replaced bool
	}
	s := time.Second
	tests := []struct {
		name    string
		grace   time.Duration
		replace bool
		steps   []step
	}{
		{"unknown until the grace has passed", 30 * s, true, []step{
			{0, unhealthy, "", unknown, false},
			{29 * s, unhealthy, "", unknown, false},
			{30 * s, unhealthy, "", unhealthy, true},
		}},
		{"healthy resets the clock", 30 * s, true, []step{
			{0, unhealthy, "", unknown, false},
			{20 * s, healthy, "", healthy, false},
			{40 * s, unhealthy, "", unknown, false},
			{60 * s, unhealthy, "", unknown, false},
			{70 * s, unhealthy, "", unhealthy, true},
		}},
		{"unknown health neither starts nor resets the clock", 30 * s, true, []step{
			{0, unknown, "", unknown, false},
			{10 * s, unhealthy, "", unknown, false},
			{25 * s, unknown, "", unknown, false},
			{40 * s, unhealthy, "", unhealthy, true},
		}},
		{"a member no longer listed is forgotten", 30 * s, true, []step{
			{0, unhealthy, "", unknown, false},
			{20 * s, "", "", "", false},
			{40 * s, unhealthy, "", unknown, false},
			{60 * s, unhealthy, "", unknown, false},
			{70 * s, unhealthy, "", unhealthy, true},
		}},
		{"a pending member's health starts no clock", 30 * s, true, []step{
			{0, unhealthy, pending, unhealthy, false},
			{20 * s, unhealthy, "", unknown, false},
			{45 * s, unhealthy, "", unknown, false},
			{50 * s, unhealthy, "", unhealthy, true},
		}},
		{"no grace replaces at once", 0, true, []step{
			{0, unhealthy, "", unhealthy, true},
		}},
		{"replace_unhealthy off never replaces", 30 * s, false, []step{
			{0, unhealthy, "", unknown, false},
			{30 * s, unhealthy, "", unhealthy, false},
			{time.Hour, unhealthy, "", unhealthy, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker("g", Policy{Grace: tt.grace}, t0)
			d := cattle(3)
			d.ReplaceUnhealthy = tt.replace
			for i, st := range tt.steps {
				obs := []group.Member{mem("b", healthy), mem("c", healthy)}
				if st.health != "" {
					a := mem("a", st.health)
					if st.state != "" {
						a.State = st.state
					}
					obs = append(obs, a)
				}
				adj, dec, _ := pass(tr, t0.Add(st.at), d, obs)
				if got := healthOf(adj.Members, "a"); got != st.want {
					t.Errorf("step %d (%s): Decide sees a %q, want %q", i, st.at, got, st.want)
				}
				replaced := slices.Contains(destroyed(dec, group.ReasonUnhealthy), "a")
				if replaced != st.replaced {
					t.Errorf("step %d (%s): replaced = %v, want %v (decision %+v)", i, st.at, replaced, st.replaced, dec)
				}
				if st.health == "" && len(dec.Create) != 1 {
					// "a" is gone without being destroyed by us: it vanished.
					t.Errorf("step %d: a vanished, want one create, got %+v", i, dec)
				}
			}
		})
	}
}

func TestGraceEvents(t *testing.T) {
	tr := NewTracker("web", Policy{Grace: time.Minute}, t0)
	obs := with(fleet(4), unhealthy, "i01", "i03")
	_, _, evs := pass(tr, t0, cattle(4), obs)
	e := findEvent(t, evs, KindUnhealthy)
	if !slices.Equal(e.IDs, ids("i01", "i03")) || e.Group != "web" || !e.Time.Equal(t0) {
		t.Errorf("unhealthy event = %+v", e)
	}
	// Still unhealthy: no second event.
	if _, _, evs := pass(tr, t0.Add(10*time.Second), cattle(4), obs); hasEvent(evs, KindUnhealthy) {
		t.Errorf("unhealthy event repeated: %+v", evs)
	}
	if st := tr.Status(t0.Add(10 * time.Second)); st.Unhealthy != 2 {
		t.Errorf("Status.Unhealthy = %d, want 2", st.Unhealthy)
	}
}

func TestQuietPeriod(t *testing.T) {
	tr := NewTracker("g", Policy{Grace: 0, Quiet: 10 * time.Second}, t0)
	d := cattle(4)
	obs := with(fleet(4), unhealthy, "i00")

	adj, dec, _ := pass(tr, t0.Add(time.Second), d, obs)
	if healthOf(adj.Members, "i00") != unknown || !dec.Empty() {
		t.Fatalf("during the quiet period: health %q, decision %+v; want unknown, nothing", healthOf(adj.Members, "i00"), dec)
	}
	// A vanish is still replaced during the quiet period: it is measured
	// against this process's own previous observation.
	adj, dec, evs := pass(tr, t0.Add(5*time.Second), d, without(obs, "i03"))
	if len(dec.Create) != 1 || !hasEvent(evs, KindVanished) || healthOf(adj.Members, "i00") != unknown {
		t.Fatalf("vanish during quiet: decision %+v, events %v", dec, kinds(evs))
	}
	// Once the quiet period is over, the grace counted from the first
	// observation has passed.
	_, dec, _ = pass(tr, t0.Add(10*time.Second), d, append(without(obs, "i03"), mem("n0", healthy)))
	if got := destroyed(dec, group.ReasonUnhealthy); !slices.Equal(got, ids("i00")) {
		t.Fatalf("after the quiet period: destroys %v, want [i00]", got)
	}
}

func TestFirstObservationIsAuthoritative(t *testing.T) {
	// A fresh start finds 2 of 10: the 8 missing are created like a
	// scale-up, outside the budget and without braking.
	tr := NewTracker("g", Policy{MaxReplacementsPerHour: 1}, t0)
	adj, dec, evs := pass(tr, t0, cattle(10), fleet(2))
	if adj.Braked || len(dec.Create) != 8 || len(evs) != 0 {
		t.Fatalf("braked %v, %d creates, events %v; want no brake, 8 creates, no events", adj.Braked, len(dec.Create), kinds(evs))
	}
	if st := tr.Status(t0); st.Replacements != 0 || st.Owed != 0 {
		t.Fatalf("status %+v: a first observation owes no replacements", st)
	}
}
