package group

import (
	"cmp"
	"slices"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Decide returns what the group needs so that its members match d:
//
// Cattle (d.Size set): create Size−live members, or destroy live−Size,
// choosing first pending members (nothing runs on them yet), then unhealthy,
// then out-of-date, then those of unknown health, and healthy current members
// last; within each class by ID, so the choice is deterministic.
//
// Pets (d.Size nil): exactly one live member per logical ID. A missing ID is
// created; of several members with one ID the healthy, current, running one
// is kept and the others destroyed (ReasonDuplicate); members whose logical ID
// is empty or not desired are destroyed (ReasonUnknownLogicalID).
//
// In both, with d.ReplaceUnhealthy a running unhealthy member that is kept is
// destroyed (ReasonUnhealthy) and a replacement created; members out of date
// are listed in Roll, not destroyed.
//
// Terminating members are ignored; pending members count as live. A member
// listed twice (same ID) counts once. The result does not depend on the order
// of members, and is empty once the group has converged. Cost is linear in
// the number of members, plus one sort by ID.
func Decide(d Desired, members []Member) Decision {
	live := Live(members)
	if d.IsPets() {
		return decidePets(d, live)
	}
	return decideCattle(d, live)
}

// Live returns the members that count: those not terminating, sorted by ID,
// each ID once. members is not changed.
func Live(members []Member) []Member {
	live := make([]Member, 0, len(members))
	for _, m := range members {
		if m.State != instance.StateTerminating {
			live = append(live, m)
		}
	}
	byID := func(a, b Member) int { return cmp.Compare(a.ID, b.ID) }
	// Providers list in ID order, and a pass calls Live several times on
	// the same members: checking the order costs a tenth of sorting.
	if !slices.IsSortedFunc(live, byID) {
		slices.SortFunc(live, byID)
	}
	return slices.CompactFunc(live, func(a, b Member) bool { return a.ID == b.ID })
}

func decideCattle(d Desired, live []Member) Decision {
	size := max(*d.Size, 0)
	var dec Decision
	kept := live
	if excess := len(live) - size; excess > 0 {
		// Bucket by class rather than sort: linear, and stable, so ID order
		// holds within a class.
		var classes [numClasses][]Member
		for _, m := range live {
			c := scaleDownClass(d, m)
			classes[c] = append(classes[c], m)
		}
		ranked := slices.Concat(classes[:]...)
		for _, m := range ranked[:excess] {
			dec.Destroy = append(dec.Destroy, Destroy{ID: m.ID, Reason: ReasonScaleDown})
		}
		kept = ranked[excess:]
		slices.SortFunc(kept, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	} else {
		for range -excess {
			dec.Create = append(dec.Create, Create{})
		}
	}
	for _, m := range kept {
		switch {
		case d.ReplaceUnhealthy && failed(m):
			dec.Destroy = append(dec.Destroy, Destroy{ID: m.ID, Reason: ReasonUnhealthy})
			dec.Create = append(dec.Create, Create{})
		case d.outdated(m):
			dec.Roll = append(dec.Roll, m.ID)
		}
	}
	return dec
}

func decidePets(d Desired, live []Member) Decision {
	wanted := make(map[string]bool, len(d.LogicalIDs))
	for _, lid := range d.LogicalIDs {
		if lid != "" {
			wanted[lid] = true
		}
	}
	var dec Decision
	byLID := make(map[string][]Member, len(wanted))
	for _, m := range live {
		if !wanted[m.LogicalID] {
			dec.Destroy = append(dec.Destroy, Destroy{ID: m.ID, Reason: ReasonUnknownLogicalID})
			continue
		}
		byLID[m.LogicalID] = append(byLID[m.LogicalID], m)
	}
	for _, lid := range d.LogicalIDs {
		if !wanted[lid] {
			continue // empty, or a duplicate already handled
		}
		delete(wanted, lid)
		ms := byLID[lid]
		if len(ms) == 0 {
			dec.Create = append(dec.Create, Create{LogicalID: lid})
			continue
		}
		// ms is in ID order, so the first of equal rank is kept.
		best := 0
		for i := 1; i < len(ms); i++ {
			if keepRank(d, ms[i]) < keepRank(d, ms[best]) {
				best = i
			}
		}
		for i, m := range ms {
			if i != best {
				dec.Destroy = append(dec.Destroy, Destroy{ID: m.ID, Reason: ReasonDuplicate})
			}
		}
		switch k := ms[best]; {
		case d.ReplaceUnhealthy && failed(k):
			dec.Destroy = append(dec.Destroy, Destroy{ID: k.ID, Reason: ReasonUnhealthy})
			dec.Create = append(dec.Create, Create{LogicalID: lid})
		case d.outdated(k):
			dec.Roll = append(dec.Roll, k.ID)
		}
	}
	return dec
}

// Scale-down classes, destroyed first to last.
const (
	classPending = iota
	classUnhealthy
	classOutdated
	classUnknownHealth
	classHealthyCurrent
	numClasses
)

func scaleDownClass(d Desired, m Member) int {
	switch {
	case m.State == instance.StatePending:
		return classPending
	case m.Health == flavor.HealthUnhealthy:
		return classUnhealthy
	case d.outdated(m):
		return classOutdated
	case m.Health != flavor.HealthHealthy:
		return classUnknownHealth
	default:
		return classHealthyCurrent
	}
}

// keepRank orders duplicates of a pet, the lowest kept: healthy before
// unknown before unhealthy, then current before out of date, then running
// before pending. It packs the three criteria into one comparable int.
func keepRank(d Desired, m Member) int {
	rank := 0
	switch m.Health {
	case flavor.HealthHealthy:
	case flavor.HealthUnhealthy:
		rank += 200
	default:
		rank += 100
	}
	if d.outdated(m) {
		rank += 10
	}
	if m.State != instance.StateRunning {
		rank++
	}
	return rank
}

// outdated reports whether m was created from another configuration.
func (d Desired) outdated(m Member) bool {
	return d.ConfigHash != "" && m.ConfigHash != d.ConfigHash
}

// healthy reports whether m is running and its flavors judge it healthy.
func healthy(m Member) bool {
	return m.State == instance.StateRunning && m.Health == flavor.HealthHealthy
}

// failed reports whether m runs and is judged unhealthy; a pending member is
// still starting and is never replaced for its health.
func failed(m Member) bool {
	return m.State == instance.StateRunning && m.Health == flavor.HealthUnhealthy
}
