package heal

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/controller/group"
)

const settle = 30 * time.Second

func settled() Policy {
	return Policy{BrakeSettle: settle}.withDefaults()
}

// obs is one observation for stepBrake, at t0+at.
type obs struct {
	at                        time.Duration
	newlyDead, deadNow, known int
	fp                        uint64
}

func (o obs) seen() brakeSeen {
	return brakeSeen{now: t0.Add(o.at), newlyDead: o.newlyDead, deadNow: o.deadNow, known: o.known, fingerprint: o.fp}
}

// The brake's decision, observation by observation: deaths in quick
// succession engage it as deaths at once do, a burst of agreeing
// observations never releases it before the settle time, and a change
// restarts the settle time.
func TestStepBrake(t *testing.T) {
	tests := []struct {
		name string
		seq  []obs
		// want is the brake after each observation.
		want []bool
	}{
		{"7 of 7 at once", []obs{{0, 7, 7, 7, 1}}, []bool{true}},
		{"4 of 7 one at a time, each replaced", []obs{
			{0, 1, 1, 7, 1}, {2 * time.Second, 1, 1, 7, 2}, {4 * time.Second, 1, 1, 7, 3}, {6 * time.Second, 1, 1, 7, 4},
		}, []bool{false, false, false, true}},
		{"4 of 7 one at a time, a settle time apart", []obs{
			{0, 1, 1, 7, 1}, {settle, 1, 1, 7, 2}, {2 * settle, 1, 1, 7, 3}, {3 * settle, 1, 1, 7, 4},
		}, []bool{false, false, false, false}},
		{"3 of 7 in quick succession: not more than half", []obs{
			{0, 1, 1, 7, 1}, {time.Second, 1, 1, 7, 2}, {2 * time.Second, 1, 1, 7, 3},
		}, []bool{false, false, false}},
		{"2 of 3: fewer than BrakeMin", []obs{{0, 2, 2, 3, 1}}, []bool{false}},
		{"agreeing re-lists within the settle time hold it", []obs{
			{0, 7, 7, 7, 1}, {100 * time.Millisecond, 0, 7, 7, 1}, {240 * time.Millisecond, 0, 7, 7, 1}, {time.Second, 0, 7, 7, 1},
			{settle - time.Millisecond, 0, 7, 7, 1},
		}, []bool{true, true, true, true, true}},
		{"the confirming re-list after the settle time releases it", []obs{
			{0, 7, 7, 7, 1}, {time.Second, 0, 7, 7, 1}, {2 * time.Second, 0, 7, 7, 1}, {settle, 0, 7, 7, 1},
		}, []bool{true, true, true, false}},
		{"a change restarts the settle time", []obs{
			{0, 5, 5, 7, 1}, {10 * time.Second, 1, 6, 7, 2}, {settle, 0, 6, 7, 2}, {settle + 5*time.Second, 0, 6, 7, 2},
			{10*time.Second + settle, 0, 6, 7, 2},
		}, []bool{true, true, true, true, false}},
		{"one re-list after the settle time is not enough", []obs{
			{0, 7, 7, 7, 1}, {settle, 0, 7, 7, 1}, {settle + time.Second, 0, 7, 7, 1},
		}, []bool{true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := settled()
			var s brakeState
			for i, o := range tt.seq {
				s, _ = stepBrake(p, s, o.seen())
				if s.braked != tt.want[i] {
					t.Fatalf("observation %d (%+v): braked %v, want %v", i, o, s.braked, tt.want[i])
				}
			}
		})
	}
}

// After a release the replacements go at most the tolerated share per
// settle time, until nothing is left to replace.
func TestBrakeReleaseRate(t *testing.T) {
	p := settled()
	var s brakeState
	s, _ = stepBrake(p, s, obs{0, 7, 7, 7, 1}.seen())
	for _, at := range []time.Duration{time.Second, 2 * time.Second, settle} {
		s, _ = stepBrake(p, s, obs{at, 0, 7, 7, 1}.seen())
	}
	if s.braked || s.rate != 3 {
		t.Fatalf("after the confirming re-list: braked %v, rate %d; want released at 3 per %s", s.braked, s.rate, settle)
	}
	rel := t0.Add(settle)
	if left, _ := s.allowance(p, rel, nil); left != 3 {
		t.Fatalf("at the release %d may go, want 3", left)
	}
	made := []time.Time{rel, rel, rel}
	left, next := s.allowance(p, rel.Add(time.Second), made)
	if left != 0 || !next.Equal(rel.Add(settle)) {
		t.Fatalf("after 3 replacements: %d may go, the next at %s; want 0 until %s", left, next, rel.Add(settle))
	}
	if left, _ := s.allowance(p, rel.Add(settle), made); left != 3 {
		t.Fatalf("a settle time later %d may go, want 3", left)
	}
	s, _ = stepBrake(p, s, obs{2 * settle, 0, 0, 7, 2}.seen())
	if left, _ := s.allowance(p, t0.Add(2*settle), made); left != -1 || s.rate != 0 {
		t.Fatalf("nothing left to replace: allowance %d, rate %d; want the limit gone", left, s.rate)
	}
}

// Properties of the brake over random observation sequences: it releases
// only at the BrakeConfirm-th agreeing observation made at least a settle
// time after the world last changed; it engages whenever the deaths of one
// settle time are at least BrakeMin and more than half the group; and
// after a release no settle time sees more replacements than the rate.
func TestBrakeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Policy{
			BrakeSettle:  time.Duration(rapid.IntRange(1, 60).Draw(t, "settle_s")) * time.Second,
			BrakeMin:     rapid.IntRange(2, 4).Draw(t, "brake_min"),
			BrakeConfirm: rapid.IntRange(2, 4).Draw(t, "confirm"),
		}.withDefaults()
		known := rapid.IntRange(1, 12).Draw(t, "known")
		var s brakeState
		now := t0
		var deaths []time.Time // the model's, all of them
		var changed time.Time
		var lastFP uint64
		agree := 0
		var made []time.Time
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := range steps {
			now = now.Add(time.Duration(rapid.IntRange(0, 20000).Draw(t, fmt.Sprintf("gap%d", i))) * time.Millisecond)
			newly := rapid.IntRange(0, min(3, known)).Draw(t, fmt.Sprintf("newly%d", i))
			in := brakeSeen{now: now, newlyDead: newly, known: known,
				deadNow:     rapid.IntRange(newly, known).Draw(t, fmt.Sprintf("dead%d", i)),
				fingerprint: uint64(rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("fp%d", i)))}
			for range newly {
				deaths = append(deaths, now)
			}
			recent := 0
			for _, d := range deaths {
				if now.Sub(d) < p.BrakeSettle {
					recent++
				}
			}
			was := s
			next, change := stepBrake(p, s, in)
			switch {
			case !was.braked:
				dead := max(in.deadNow, recent)
				want := newly > 0 && dead >= p.BrakeMin && 2*dead > known
				if next.braked != want {
					t.Fatalf("step %d: %d dead of %d (%d in the window): braked %v, want %v", i, dead, known, recent, next.braked, want)
				}
				if want {
					changed, lastFP, agree = now, in.fingerprint, 1
				}
			default:
				if in.fingerprint == lastFP {
					agree++
				} else {
					changed, lastFP, agree = now, in.fingerprint, 1
				}
				if change == brakeReleased && (agree < p.BrakeConfirm || now.Sub(changed) < p.BrakeSettle) {
					t.Fatalf("step %d: released after %d agreeing observations, %s after the last change", i, agree, now.Sub(changed))
				}
				if next.braked && agree >= p.BrakeConfirm && now.Sub(changed) >= p.BrakeSettle {
					t.Fatalf("step %d: still braked after %d agreeing observations over %s", i, agree, now.Sub(changed))
				}
				if change == brakeReleased {
					deaths, made = nil, nil
				}
			}
			s = next
			// Replacements as Filter would let them through.
			if left, _ := s.allowance(p, now, made); left != 0 && !s.braked {
				n := rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("made%d", i))
				if left > 0 {
					n = min(n, left)
				}
				for range n {
					made = append(made, now)
				}
			}
			if s.rate > 0 {
				inWindow := 0
				for _, at := range made {
					if now.Sub(at) < p.BrakeSettle && !at.Before(s.released) {
						inWindow++
					}
				}
				if inWindow > s.rate {
					t.Fatalf("step %d: %d replacements within %s of the release, above the rate %d", i, inWindow, p.BrakeSettle, s.rate)
				}
			}
		}
	})
}

// Through the Tracker, the reproduction of issue 14: all 7 members' files
// removed; re-lists in quick succession hold the brake; the one after the
// settle time releases it; the replacements then go 3 per settle time.
func TestBrakeHoldsForTheSettleTime(t *testing.T) {
	tr := NewTracker("g", Policy{BrakeSettle: settle}, t0)
	d := cattle(7)
	pass(tr, t0, d, fleet(7))
	adj, dec, evs := pass(tr, t0.Add(time.Second), d, nil)
	if !adj.Braked || !dec.Empty() || !hasEvent(evs, KindBrakeEngaged) {
		t.Fatalf("7 of 7 gone: braked %v, decision %+v, events %v", adj.Braked, dec, kinds(evs))
	}
	for _, at := range []time.Duration{1240 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Second, 10 * time.Second, settle} {
		if adj, dec, _ := pass(tr, t0.Add(at), d, nil); !adj.Braked || !dec.Empty() {
			t.Fatalf("re-list at %s: braked %v, decision %+v", at, adj.Braked, dec)
		}
	}
	if st := tr.Status(t0.Add(settle)); !st.ReleaseAt.Equal(t0.Add(time.Second + settle)) {
		t.Fatalf("status %+v, want release at %s", st, t0.Add(time.Second+settle))
	}
	now := t0.Add(time.Second + settle)
	adj, dec, evs = pass(tr, now, d, nil)
	if adj.Braked || len(dec.Create) != 3 || !hasEvent(evs, KindBrakeReleased) {
		t.Fatalf("the confirming re-list: braked %v, %d creates, events %v; want released, 3 creates", adj.Braked, len(dec.Create), kinds(evs))
	}
	made := act(tr, now, dec, "a")
	listed := asListed(made, healthy)
	if _, dec, _ := pass(tr, now.Add(time.Second), d, listed); len(dec.Create) != 0 {
		t.Fatalf("within the settle time after the release: %d creates, want none", len(dec.Create))
	}
	if st := tr.Status(now.Add(time.Second)); st.RateLimit != 3 || !st.RateFreesAt.Equal(now.Add(settle)) {
		t.Fatalf("status %+v", st)
	}
	_, dec, _ = pass(tr, now.Add(settle), d, listed)
	if len(dec.Create) != 3 {
		t.Fatalf("a settle time after the release: %d creates, want 3", len(dec.Create))
	}
}

// Through the Tracker: members removed one at a time, each replaced before
// the next goes, engage the brake at the fourth of seven.
func TestBrakeDeathsInQuickSuccession(t *testing.T) {
	tr := NewTracker("g", Policy{BrakeSettle: settle}, t0)
	d := cattle(7)
	members := fleet(7)
	pass(tr, t0, d, members)
	for i := range 4 {
		now := t0.Add(time.Duration(i+1) * 2 * time.Second)
		members = members[1:]
		adj, dec, evs := pass(tr, now, d, members)
		if want := i == 3; adj.Braked != want {
			t.Fatalf("removal %d: braked %v, want %v (events %v)", i+1, adj.Braked, want, kinds(evs))
		}
		if adj.Braked {
			e := findEvent(t, evs, KindBrakeEngaged)
			if e.Message == "" || !hasEvent(evs, KindBrakeEngaged) {
				t.Fatalf("event %+v", e)
			}
			return
		}
		if len(dec.Create) != 1 {
			t.Fatalf("removal %d: %d creates, want the one replacement", i+1, len(dec.Create))
		}
		members = append(members, asListed(act(tr, now, dec, fmt.Sprintf("r%d-", i)), healthy)...)
		pass(tr, now.Add(time.Second), d, members)
	}
	t.Fatal("the fourth removal did not brake")
}

var _ = group.Decision{}
