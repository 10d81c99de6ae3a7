package watch

import (
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A pass must not block, so watch rolls a group one step per pass rather
// than through group.Controller.Roll, which waits (holding the state lock,
// for up to the update policy's health_timeout) for each batch to turn
// healthy. The pacing is the same: group.NextRollBatch picks each batch;
// watch remembers the replacements in flight between passes (below) and
// finishes each one in the first pass that finds it healthy. Cattle get the
// replacement first and lose the out-of-date member once it runs healthy; a
// pet is destroyed and re-created in the same pass (never two copies).

// replacement is one member a rolling update is replacing. For cattle, New
// was created to replace the out-of-date Old, which is destroyed once New
// runs healthy. For a pet, New is the pet re-created after its out-of-date
// instance was destroyed (Old is empty), watched until it is healthy.
type replacement struct {
	New, Old  instance.ID
	LogicalID string
	// Since is when New was created; the health timeout counts from it.
	Since time.Time
}

// rollView is the rolling update's reading of one observation.
type rollView struct {
	// Members are the observed members, with the out-of-date member of each
	// cattle replacement in flight (and each one finishing now) marked
	// terminating: it is on its way out, so Decide and NextRollBatch see the
	// group as it is about to be. The slot counts as unavailable until its
	// replacement is healthy, as NextRollBatch requires.
	Members []group.Member
	// Finish are the out-of-date members to destroy now, their replacement
	// running healthy.
	Finish []group.Destroy
	// Pending are the replacements still in flight.
	Pending []replacement
	// TimedOut are the replacements not healthy within the health timeout;
	// the roll halts. Their old member (if any) counts as live again: the
	// group is then over its size, and Decide's scale-down picks a pending
	// or unhealthy replacement before the out-of-date member.
	TimedOut []replacement
	// Lost are the replacements that ended because New, or Old, is no longer
	// listed (destroyed by a scale-down, vanished): nothing is left to do.
	Lost []replacement
}

// viewRoll reads members (as heal.Tracker.Adjust returns them) against the
// replacements in flight. With finish false (the mass-failure brake holds
// the group) healthy replacements stay pending instead of finishing. It
// does not change members.
func viewRoll(members []group.Member, inflight []replacement, now time.Time, timeout time.Duration, finish bool) rollView {
	v := rollView{Members: members}
	if len(inflight) == 0 {
		return v
	}
	live := make(map[instance.ID]group.Member, len(members))
	for _, m := range members {
		if m.State != instance.StateTerminating {
			if _, dup := live[m.ID]; !dup {
				live[m.ID] = m
			}
		}
	}
	leaving := map[instance.ID]bool{}
	for _, r := range inflight {
		n, hasNew := live[r.New]
		_, hasOld := live[r.Old]
		cattle := r.Old != ""
		switch {
		case !hasNew || (cattle && !hasOld):
			v.Lost = append(v.Lost, r)
		case n.State == instance.StateRunning && n.Health == flavor.HealthHealthy && finish:
			if cattle {
				v.Finish = append(v.Finish, group.Destroy{ID: r.Old, Reason: group.ReasonRollingUpdate})
				leaving[r.Old] = true
			}
		case timeout > 0 && now.Sub(r.Since) >= timeout:
			v.TimedOut = append(v.TimedOut, r)
		default:
			v.Pending = append(v.Pending, r)
			if cattle {
				leaving[r.Old] = true
			}
		}
	}
	if len(leaving) > 0 {
		v.Members = make([]group.Member, len(members))
		copy(v.Members, members)
		for i := range v.Members {
			if leaving[v.Members[i].ID] {
				v.Members[i].State = instance.StateTerminating
			}
		}
	}
	return v
}

// rollDecision is what starting batch (from NextRollBatch) takes: for
// cattle one create per member (the old ones are destroyed in a later pass,
// once their replacements run healthy); for pets the destroy of each and
// the create of its logical ID (the group controller destroys before it
// creates for pets).
func rollDecision(d group.Desired, batch []instance.ID, members []group.Member) group.Decision {
	var dec group.Decision
	if !d.IsPets() {
		dec.Create = make([]group.Create, len(batch))
		return dec
	}
	lid := make(map[instance.ID]string, len(members))
	for _, m := range members {
		lid[m.ID] = m.LogicalID
	}
	for _, id := range batch {
		dec.Destroy = append(dec.Destroy, group.Destroy{ID: id, Reason: group.ReasonRollingUpdate})
		dec.Create = append(dec.Create, group.Create{LogicalID: lid[id]})
	}
	return dec
}

// pairReplacements turns the members a batch created into replacements in
// flight: for cattle the i-th created replaces batch[i] (creates that
// failed leave the rest of the batch as they are, to be picked again); for
// pets each created member is tracked by itself.
func pairReplacements(d group.Desired, batch []instance.ID, created []group.Member, now time.Time) []replacement {
	out := make([]replacement, 0, len(created))
	for i, m := range created {
		r := replacement{New: m.ID, LogicalID: m.LogicalID, Since: now}
		if !d.IsPets() {
			if i >= len(batch) {
				break
			}
			r.Old = batch[i]
		}
		out = append(out, r)
	}
	return out
}
