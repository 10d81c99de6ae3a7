package group

import (
	"fmt"

	"github.com/infrakit/infrakit/sdk/instance"
)

// RollStatus says how a rolling update stands after NextRollBatch.
type RollStatus struct {
	// Outdated counts the members still out of date, the batch included.
	Outdated int `json:"outdated"`
	// Unavailable counts live members that are not running and healthy.
	Unavailable int `json:"unavailable"`
	// Wait says why nothing is replaced now although members are out of
	// date; empty otherwise.
	Wait string `json:"wait,omitempty"`
}

// NextRollBatch returns the out-of-date members to replace now.
//
// The caller replaces each one by creating a member with the desired
// configuration (for a pet, with the same logical ID) and destroying the old
// one with ReasonRollingUpdate. For cattle it may create first and wait for
// the replacement to be healthy (up to the update policy's health_timeout)
// before destroying; for a pet it must destroy first, since two live copies of
// a pet must never exist. Either way the slot counts as unavailable until the
// replacement is healthy. A pass interrupted between the create and the
// destroy needs no memory: the group is then over its size, and Decide's
// scale-down takes the pending replacement or, once that runs, the out-of-date
// member. What paces the roll:
//
//   - nothing is replaced while the group is not settled (Decide has creates
//     or destroys to do first);
//   - at most MaxParallel (≥ 1) replacements are in flight: current members
//     still pending or of unknown health count against it;
//   - replacing a healthy member takes it down, so healthy ones are taken
//     only while the live members that are not healthy, plus those taken,
//     stay within MaxUnavailable (≥ 1);
//   - out-of-date members that are not healthy cost nothing and go first.
//
// Calling it again after each batch has been acted on, as members turn
// healthy, finishes a roll of n members in about ceil(n/k) passes, with k =
// min(MaxParallel, MaxUnavailable).
func NextRollBatch(d Desired, members []Member) ([]instance.ID, RollStatus) {
	dec := Decide(d, members)
	st := RollStatus{Outdated: len(dec.Roll)}
	if len(dec.Roll) == 0 {
		return nil, st
	}
	if !dec.Settled() {
		st.Wait = fmt.Sprintf("the group is not settled yet (%d to create, %d to destroy)", len(dec.Create), len(dec.Destroy))
		return nil, st
	}
	live := Live(members)
	byID := make(map[instance.ID]Member, len(live))
	inFlight := 0
	for _, m := range live {
		byID[m.ID] = m
		if healthy(m) {
			continue
		}
		st.Unavailable++
		if !d.outdated(m) && !failed(m) {
			inFlight++
		}
	}
	maxParallel, maxUnavailable := max(d.MaxParallel, 1), max(d.MaxUnavailable, 1)
	slots := maxParallel - inFlight
	budget := maxUnavailable - st.Unavailable

	var batch []instance.ID
	for _, id := range dec.Roll {
		if len(batch) >= slots {
			break
		}
		if !healthy(byID[id]) {
			batch = append(batch, id)
		}
	}
	for _, id := range dec.Roll {
		if len(batch) >= slots || budget <= 0 {
			break
		}
		if healthy(byID[id]) {
			batch = append(batch, id)
			budget--
		}
	}
	if len(batch) == 0 {
		if slots <= 0 {
			st.Wait = fmt.Sprintf("replacements still starting: %d (max_parallel %d)", inFlight, maxParallel)
		} else {
			st.Wait = fmt.Sprintf("members unavailable: %d (max_unavailable %d)", st.Unavailable, maxUnavailable)
		}
	}
	return batch, st
}

// RollSchedule is a whole rolling update of members, as apply runs it: the
// batches NextRollBatch would pick pass after pass, if every replacement
// turned healthy and every member it replaces then left. members are the
// group as it will be when the roll starts (after the creates and destroys
// Decide asks for); wait says why the out-of-date members left out of the
// batches are not replaced now ("" when none is left out).
//
// It follows NextRollBatch's pacing exactly without calling it once per
// batch (which would cost the group's size per batch): replacements are
// healthy, so the members in flight stay those that were, the slots per
// batch stay max_parallel less them, and each batch that replaces members
// that were not healthy frees that much of max_unavailable.
func RollSchedule(d Desired, members []Member) (batches [][]instance.ID, wait string) {
	live := Live(members)
	var roll []instance.ID
	for _, m := range live {
		if d.outdated(m) {
			roll = append(roll, m.ID)
		}
	}
	if d.IsPets() {
		roll = decidePets(d, live).Roll // one per logical ID, as Decide keeps them
	}
	if len(roll) == 0 {
		return nil, ""
	}
	byID := make(map[instance.ID]Member, len(live))
	inFlight, unavailable := 0, 0
	for _, m := range live {
		byID[m.ID] = m
		if healthy(m) {
			continue
		}
		unavailable++
		if !d.outdated(m) && !failed(m) {
			inFlight++
		}
	}
	var sick, well []instance.ID // out of date and not healthy; healthy
	for _, id := range roll {
		if healthy(byID[id]) {
			well = append(well, id)
		} else {
			sick = append(sick, id)
		}
	}
	maxParallel, maxUnavailable := max(d.MaxParallel, 1), max(d.MaxUnavailable, 1)
	slots := maxParallel - inFlight
	for len(sick)+len(well) > 0 {
		a := min(max(slots, 0), len(sick))
		budget := max(maxUnavailable-unavailable, 0)
		b := min(max(slots-a, 0), budget, len(well))
		if a+b == 0 {
			if slots <= 0 {
				wait = fmt.Sprintf("replacements still starting: %d (max_parallel %d)", inFlight, maxParallel)
			} else {
				wait = fmt.Sprintf("members unavailable: %d (max_unavailable %d)", unavailable, maxUnavailable)
			}
			break
		}
		batch := make([]instance.ID, 0, a+b)
		batch = append(append(batch, sick[:a]...), well[:b]...)
		sick, well = sick[a:], well[b:]
		unavailable -= a
		batches = append(batches, batch)
	}
	return batches, wait
}
