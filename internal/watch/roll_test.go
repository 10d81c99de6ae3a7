package watch

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
	if want := []group.Destroy{{ID: "o1", Reason: group.ReasonRollingUpdate}}; !slices.Equal(v.Finish, want) {
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

func TestRollDecisionAndPairs(t *testing.T) {
	size := 3
	cattle := group.Desired{Size: &size, ConfigHash: newHash}
	pets := group.Desired{LogicalIDs: []string{"a", "b"}, ConfigHash: newHash}
	members := []group.Member{{ID: "x", LogicalID: "a"}, {ID: "y", LogicalID: "b"}}
	now := time.Now()

	if dec := rollDecision(cattle, []instance.ID{"x", "y"}, members); len(dec.Create) != 2 || len(dec.Destroy) != 0 {
		t.Errorf("cattle: %+v, want two creates and no destroy", dec)
	}
	dec := rollDecision(pets, []instance.ID{"y"}, members)
	if len(dec.Destroy) != 1 || dec.Destroy[0] != (group.Destroy{ID: "y", Reason: group.ReasonRollingUpdate}) ||
		len(dec.Create) != 1 || dec.Create[0].LogicalID != "b" {
		t.Errorf("pets: %+v, want y destroyed and b created", dec)
	}

	// A failed create leaves the rest of the batch to a later pass.
	got := pairReplacements(cattle, []instance.ID{"x", "y"}, []group.Member{{ID: "n"}}, now)
	if len(got) != 1 || got[0] != (replacement{New: "n", Old: "x", Since: now}) {
		t.Errorf("cattle pairs: %+v", got)
	}
	got = pairReplacements(pets, []instance.ID{"y"}, []group.Member{{ID: "n", LogicalID: "b"}}, now)
	if len(got) != 1 || got[0] != (replacement{New: "n", LogicalID: "b", Since: now}) {
		t.Errorf("pet pairs: %+v", got)
	}
}

// A rolling update driven one pass at a time (viewRoll, Decide,
// NextRollBatch, rollDecision) against a world where replacements start
// pending and turn healthy at random: cattle never drop below their size in
// healthy members nor exceed it by more than max_parallel; pets never lose
// more than max_unavailable healthy members at once; nothing is replaced
// twice; and the roll ends with every member current.
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
		for step := 0; ; step++ {
			if step > 200 {
				t.Fatalf("the roll did not end in 200 passes: %v", members)
			}
			now = now.Add(time.Second)
			v := viewRoll(members, inflight, now, time.Hour, true)
			inflight = v.Pending
			if len(v.Lost)+len(v.TimedOut) > 0 {
				t.Fatalf("lost %v timed out %v", v.Lost, v.TimedOut)
			}
			dec := group.Decide(d, v.Members)
			if !dec.Settled() {
				t.Fatalf("the roll unsettled the group: %+v", dec)
			}
			if len(dec.Roll) == 0 && len(inflight) == 0 && len(v.Finish) == 0 {
				break
			}
			batch, _ := group.NextRollBatch(d, v.Members)
			for _, id := range batch {
				if replaced[id] {
					t.Fatalf("%s picked twice", id)
				}
				replaced[id] = true
			}
			act := rollDecision(d, batch, v.Members)
			gone := map[instance.ID]bool{}
			for _, x := range slices.Concat(v.Finish, act.Destroy) {
				gone[x.ID] = true
			}
			var next []group.Member
			for _, m := range members {
				if !gone[m.ID] {
					next = append(next, m)
				}
			}
			var created []group.Member
			for _, c := range act.Create {
				seq++
				m := group.Member{ID: instance.ID(fmt.Sprintf("r%03d", seq)), LogicalID: c.LogicalID, ConfigHash: newHash,
					State: instance.StatePending, Health: flavor.HealthUnknown}
				created = append(created, m)
				next = append(next, m)
			}
			inflight = append(inflight, pairReplacements(d, batch, created, now)...)
			members = next

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
