package watch

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

const (
	oldHash = "old"
	newHash = "new"
)

func member(id, hash string, st instance.State, h flavor.Health) group.Member {
	return group.Member{ID: instance.ID(id), ConfigHash: hash, State: st, Health: h}
}

func TestViewRoll(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	running, pending := instance.StateRunning, instance.StatePending
	healthy, unknown := flavor.HealthHealthy, flavor.HealthUnknown
	members := []group.Member{
		member("o1", oldHash, running, healthy),
		member("o2", oldHash, running, healthy),
		member("o3", oldHash, running, healthy),
		member("n1", newHash, running, healthy), // replaced o1: done
		member("n2", newHash, pending, unknown), // replacing o2: waits
		member("n3", newHash, running, unknown), // replacing o3: too long
	}
	inflight := []replacement{
		{New: "n1", Old: "o1", Since: now.Add(-time.Second)},
		{New: "n2", Old: "o2", Since: now.Add(-time.Second)},
		{New: "n3", Old: "o3", Since: now.Add(-time.Hour)},
		{New: "gone", Old: "o1", Since: now},    // the replacement vanished
		{New: "n2", Old: "none", Since: now},    // the old one vanished
		{New: "p1", LogicalID: "a", Since: now}, // a pet not listed
	}
	v := viewRoll(members, inflight, now, time.Minute, true)
	if want := inflight[:1]; !slices.Equal(v.Finish, want) {
		t.Errorf("Finish = %v, want %v", v.Finish, want)
	}
	if len(v.Pending) != 1 || v.Pending[0].New != "n2" {
		t.Errorf("Pending = %v, want n2 only", v.Pending)
	}
	if len(v.TimedOut) != 1 || v.TimedOut[0].New != "n3" {
		t.Errorf("TimedOut = %v, want n3", v.TimedOut)
	}
	if len(v.Lost) != 3 {
		t.Errorf("Lost = %v, want the three whose members are not listed", v.Lost)
	}
	states := map[instance.ID]instance.State{}
	for _, m := range v.Members {
		states[m.ID] = m.State
	}
	// o1 finishes and o2 waits for its replacement: both are on their way
	// out. o3's replacement timed out: o3 counts again.
	want := map[instance.ID]instance.State{"o1": instance.StateTerminating, "o2": instance.StateTerminating,
		"o3": running, "n1": running, "n2": pending, "n3": running}
	for id, st := range want {
		if states[id] != st {
			t.Errorf("%s: state %s, want %s", id, states[id], st)
		}
	}
	if members[0].State != running || members[1].State != running {
		t.Error("viewRoll changed its input")
	}

	// Braked: nothing finishes, the healthy replacement keeps waiting.
	v = viewRoll(members, inflight[:1], now, time.Minute, false)
	if len(v.Finish) != 0 || len(v.Pending) != 1 {
		t.Errorf("braked: Finish %v Pending %v, want none finishing and one pending", v.Finish, v.Pending)
	}
}

// passWork makes Decide's destroys of unhealthy members, with the creates
// Decide asks for them, replacements (cattle and pets alike: the plan
// orders a pet's destroy first), keeps the other destroys and creates,
// adds the roll batch as replacements and the finished ones as Finish.
func TestPassWork(t *testing.T) {
	size := 3
	cattle := group.Desired{Size: &size, ConfigHash: newHash}
	members := []group.Member{{ID: "w"}, {ID: "x"}, {ID: "y"}, {ID: "z"}}
	dec := group.Decision{
		Destroy: []group.Destroy{{ID: "w", Reason: group.ReasonScaleDown}, {ID: "x", Reason: group.ReasonUnhealthy}},
		Create:  []group.Create{{}},
	}
	rv := rollView{Members: members, Finish: []replacement{{New: "n", Old: "z", Reason: group.ReasonRollingUpdate}}}
	w := passWork(cattle, dec, rv, []instance.ID{"y"})
	if want := []group.Destroy{{ID: "w", Reason: group.ReasonScaleDown}}; !slices.Equal(w.Destroy, want) {
		t.Errorf("cattle Destroy = %v, want %v", w.Destroy, want)
	}
	if len(w.Create) != 0 {
		t.Errorf("cattle Create = %v, want none: the create is x's replacement", w.Create)
	}
	if want := []plan.Replacement{{Old: "x", Reason: group.ReasonUnhealthy}, {Old: "y", Reason: group.ReasonRollingUpdate}}; !slices.Equal(w.Replace, want) {
		t.Errorf("cattle Replace = %v, want %v", w.Replace, want)
	}
	if want := []plan.Replacement{{Old: "z", New: "n", Reason: group.ReasonRollingUpdate}}; !slices.Equal(w.Finish, want) {
		t.Errorf("cattle Finish = %v, want %v", w.Finish, want)
	}

	pets := group.Desired{LogicalIDs: []string{"a", "b", "c"}, ConfigHash: newHash}
	pm := []group.Member{{ID: "x", LogicalID: "a"}, {ID: "y", LogicalID: "b"}}
	dec = group.Decision{
		Destroy: []group.Destroy{{ID: "y", Reason: group.ReasonUnhealthy}},
		Create:  []group.Create{{LogicalID: "b"}, {LogicalID: "c"}},
	}
	w = passWork(pets, dec, rollView{Members: pm}, []instance.ID{"x"})
	if want := []group.Create{{LogicalID: "c"}}; !slices.Equal(w.Create, want) || len(w.Destroy) != 0 {
		t.Errorf("pets: Create %v Destroy %v, want c created and nothing destroyed alone", w.Create, w.Destroy)
	}
	if want := []plan.Replacement{{Old: "y", LogicalID: "b", Reason: group.ReasonUnhealthy}, {Old: "x", LogicalID: "a", Reason: group.ReasonRollingUpdate}}; !slices.Equal(w.Replace, want) {
		t.Errorf("pets Replace = %v, want %v", w.Replace, want)
	}

	// An unhealthy destroy Decide gave no create for stays a destroy.
	w = passWork(cattle, group.Decision{Destroy: []group.Destroy{{ID: "x", Reason: group.ReasonUnhealthy}}}, rollView{Members: members}, nil)
	if len(w.Destroy) != 1 || len(w.Replace) != 0 {
		t.Errorf("unpaired unhealthy destroy: %+v", w)
	}
}

// A rolling update driven one pass at a time as a pass drives it
// (viewRoll, Decide, nextBatch, passWork) against a world where
// replacements start pending, turn healthy at random, and some provisions
// fail; each plan's replacements are carried out as the executor does with
// awaits deferred (cattle: the new member is provisioned, the old one taken
// away by a later Finish; a pet is destroyed and provisioned again). Cattle
// never drop below their size in healthy members nor exceed it by more than
// max_parallel, even while a pass's creates run before its destroys; pets never lose more than max_unavailable healthy members
// at once; nothing is replaced twice; and the roll ends with every member
// current.
func TestRollProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pets := rapid.Bool().Draw(t, "pets")
		n := rapid.IntRange(1, 8).Draw(t, "size")
		d := group.Desired{
			ConfigHash:     newHash,
			MaxParallel:    rapid.IntRange(0, 4).Draw(t, "max_parallel"),
			MaxUnavailable: rapid.IntRange(0, 4).Draw(t, "max_unavailable"),
		}
		var members []group.Member
		for i := range n {
			m := member(fmt.Sprintf("m%02d", i), rapid.SampledFrom([]string{oldHash, newHash}).Draw(t, "hash"),
				instance.StateRunning, flavor.HealthHealthy)
			if pets {
				m.LogicalID = fmt.Sprintf("p%d", i)
				d.LogicalIDs = append(d.LogicalIDs, m.LogicalID)
			}
			members = append(members, m)
		}
		if !pets {
			d.Size = &n
		}
		k := max(min(d.MaxParallel, d.MaxUnavailable), 1)
		var inflight []replacement
		replaced := map[instance.ID]bool{}
		seq := 0
		now := time.Unix(0, 0)
		provision := func(lid string) (group.Member, bool) {
			if rapid.IntRange(0, 9).Draw(t, "fail") == 0 {
				return group.Member{}, false
			}
			seq++
			return group.Member{ID: instance.ID(fmt.Sprintf("r%03d", seq)), LogicalID: lid, ConfigHash: newHash,
				State: instance.StatePending, Health: flavor.HealthUnknown}, true
		}
		for step := 0; ; step++ {
			if step > 300 {
				t.Fatalf("the roll did not end in 300 passes: %v", members)
			}
			now = now.Add(time.Second)
			v := viewRoll(members, inflight, now, time.Hour, true)
			inflight = v.Pending
			if len(v.Lost)+len(v.TimedOut) > 0 {
				t.Fatalf("lost %v timed out %v", v.Lost, v.TimedOut)
			}
			dec := group.Decide(d, v.Members)
			if len(dec.Roll) == 0 && len(inflight) == 0 && len(v.Finish) == 0 && dec.Settled() {
				break
			}
			var batch []instance.ID
			if dec.Settled() {
				batch, _ = nextBatch(d, v)
			}
			w := passWork(d, dec, v, batch)
			gone := map[instance.ID]bool{}
			for _, r := range w.Finish {
				gone[r.Old] = true
			}
			for _, x := range w.Destroy {
				gone[x.ID] = true
			}
			var created []group.Member
			for _, c := range w.Create {
				if m, ok := provision(c.LogicalID); ok {
					created = append(created, m)
				}
			}
			for _, r := range w.Replace {
				if pets {
					gone[r.Old] = true // the old pet goes first
				}
				m, ok := provision(r.LogicalID)
				if !ok {
					continue
				}
				if replaced[r.Old] {
					t.Fatalf("%s replaced twice", r.Old)
				}
				replaced[r.Old] = true
				created = append(created, m)
				rp := replacement{New: m.ID, LogicalID: m.LogicalID, Reason: r.Reason, Since: now}
				if !pets {
					rp.Old = r.Old
				}
				inflight = append(inflight, rp)
			}
			// The executor may make the new members before it takes the
			// old ones away.
			if peak := len(members) + len(created); !pets && peak > n+max(d.MaxParallel, 1) {
				t.Fatalf("pass %d: %d members at once, size %d, max_parallel %d", step, peak, n, d.MaxParallel)
			}
			var next []group.Member
			for _, m := range members {
				if !gone[m.ID] {
					next = append(next, m)
				}
			}
			members = append(next, created...)

			healthy := 0
			for _, m := range members {
				if m.State == instance.StateRunning && m.Health == flavor.HealthHealthy {
					healthy++
				}
			}
			switch {
			case !pets && healthy < n:
				t.Fatalf("pass %d: %d healthy of %d cattle", step, healthy, n)
			case !pets && len(members) > n+max(d.MaxParallel, 1):
				t.Fatalf("pass %d: %d members, size %d, max_parallel %d", step, len(members), n, d.MaxParallel)
			case pets && healthy < n-k:
				t.Fatalf("pass %d: %d healthy of %d pets, %d may be down", step, healthy, n, k)
			}

			// The world: some starting members turn running and healthy.
			for i := range members {
				if members[i].State == instance.StatePending && rapid.Bool().Draw(t, "ready") {
					members[i].State, members[i].Health = instance.StateRunning, flavor.HealthHealthy
				}
			}
		}
		if len(members) != n {
			t.Fatalf("the roll ended with %d members, want %d", len(members), n)
		}
		for _, m := range members {
			if m.ConfigHash != newHash {
				t.Fatalf("the roll ended with %s out of date", m.ID)
			}
		}
	})
}
