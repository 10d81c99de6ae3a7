package watch

import (
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A pass must not block, so watch steps a rolling update, and a heal of an
// unhealthy member, one pass at a time rather than waiting (holding the
// state lock, for up to the update policy's health_timeout) for each
// replacement to turn healthy, as apply does. The replacement is the same
// plan's (plan.GroupWork.Replace, executed with awaits deferred): the
// pass provisions the new member; watch remembers the replacements in
// flight between passes (below), and the first pass that finds the new
// member healthy finishes it (plan.GroupWork.Finish): the new member is
// registered and authorized, then the old one deregistered, revoked,
// drained and destroyed. A replacement whose old member that pass did not
// destroy (a follower it could not observe, a step that failed, a state
// that moved under it) stays in flight, for the next pass to finish. The
// pacing of a roll is apply's too:
// group.NextRollBatch picks each batch. A pet is destroyed and re-created
// in one pass (never two copies) and watched until its new instance is
// healthy.

// replacement is one member a rolling update is replacing. For cattle, New
// was created to replace the out-of-date Old, which is destroyed once New
// runs healthy. For a pet, New is the pet re-created after its out-of-date
// instance was destroyed (Old is empty), watched until it is healthy.
type replacement struct {
	New, Old  instance.ID
	LogicalID string
	// Reason is why Old is replaced: a rolling update, or its health.
	Reason instance.DestroyReason
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
	// Finish are the cattle replacements whose new member runs healthy:
	// their old member is taken away now.
	Finish []replacement
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
				v.Finish = append(v.Finish, r)
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
