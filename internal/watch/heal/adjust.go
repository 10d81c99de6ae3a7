package heal

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Adjusted is one observation as the policy makes Decide see it.
type Adjusted struct {
	// Members are the observed members, then the expected creates not listed
	// yet (pending, health unknown). Members destroyed by infrakit and still
	// listed are terminating; members unhealthy within their grace (or
	// during the quiet period) have unknown health.
	Members []group.Member
	// Events are what this observation changed.
	Events []Event
	// Braked reports whether replacement is paused (see Filter).
	Braked bool
}

// Adjust takes one observation of the group (what its instance provider
// listed, with the flavors' health) at time now, updates what the tracker
// remembers, and returns the members to pass to group.Decide. observed is
// not changed. A member listed twice counts once (its first listing).
//
// Call it only with a complete listing: a DescribeInstances that failed is
// no observation (an empty one would read as every member vanished, which
// the brake would catch, but at the cost of a pause). Ask for health when
// d.ReplaceUnhealthy is set; without it members have unknown health, which
// leaves every grace clock as it is.
//
// Cost is dominated by one sort of the members by ID (group.Live).
func (t *Tracker) Adjust(now time.Time, d group.Desired, observed []group.Member) Adjusted {
	pets := d.IsPets()
	var evs []Event

	out := make([]group.Member, 0, len(observed)+len(t.creates))
	// The two maps of every member are the costly part of an observation
	// of a large group: they are kept from one Adjust to the next, cleared.
	listed := t.listed
	if listed == nil {
		listed = make(map[instance.ID]int, len(observed))
		t.listed = listed
	}
	clear(listed)
	for _, m := range observed {
		if _, dup := listed[m.ID]; dup {
			continue
		}
		listed[m.ID] = len(out)
		out = append(out, m)
	}
	nListed := len(out)

	// Vanished: alive at the previous observation, and now gone or
	// terminating, though infrakit did not destroy it. Decided before the
	// destroy expectations are settled below, which forgets those that
	// are gone.
	var vanished []instance.ID
	vanishedBy := map[string]int{}
	for id, k := range t.prevLive {
		if i, ok := listed[id]; ok && out[i].State != instance.StateTerminating {
			continue
		}
		if _, ours := t.destroys[id]; ours {
			continue
		}
		vanished = append(vanished, id)
		vanishedBy[k]++
	}

	// Destroy expectations: met once the member is no longer listed.
	var expired []instance.ID
	for id, at := range t.destroys {
		i, ok := listed[id]
		switch {
		case !ok:
			delete(t.destroys, id)
		case now.Sub(at) >= t.policy.ExpectTimeout:
			// Counted alive again, so Decide may destroy it again.
			delete(t.destroys, id)
			expired = append(expired, id)
		default:
			out[i].State = instance.StateTerminating
		}
	}
	if len(expired) > 0 {
		evs = append(evs, t.event(now, KindExpectationExpired, expired,
			"%d destroyed members are still listed after %s; counted alive again", len(expired), t.policy.ExpectTimeout))
	}

	// Create expectations: met once the member is listed. One never listed
	// is lost as a vanished member is (it may well have vanished before any
	// observation saw it), so re-creating it is a replacement too.
	expired = nil
	for id, c := range t.creates {
		if _, ok := listed[id]; ok {
			delete(t.creates, id)
			continue
		}
		if now.Sub(c.at) >= t.policy.ExpectTimeout {
			delete(t.creates, id)
			expired = append(expired, id)
			vanishedBy[key(pets, c.member.LogicalID)]++
			continue
		}
		m := c.member
		m.State, m.Health = instance.StatePending, flavor.HealthUnknown
		out = append(out, m)
	}
	slices.SortFunc(out[nListed:], func(a, b group.Member) int { return cmp.Compare(a.ID, b.ID) })
	if len(expired) > 0 {
		evs = append(evs, t.event(now, KindExpectationExpired, expired,
			"%d created members were never listed in %s; counted as vanished", len(expired), t.policy.ExpectTimeout))
	}
	lost := slices.Concat(vanished, expired)

	// Grace, on the members the provider lists alive.
	quiet := now.Sub(t.start) < t.policy.Quiet
	dead := map[instance.ID]bool{}
	var entered []instance.ID
	prevLive := t.spareLive
	if prevLive == nil {
		prevLive = make(map[instance.ID]string, nListed)
	}
	clear(prevLive)
	for i := range out[:nListed] {
		m := &out[i]
		if m.State == instance.StateTerminating {
			continue
		}
		prevLive[m.ID] = key(pets, m.LogicalID)
		switch {
		case m.Health == flavor.HealthHealthy:
			delete(t.unhealthySince, m.ID)
		case m.Health == flavor.HealthUnhealthy && m.State == instance.StateRunning:
			since, ok := t.unhealthySince[m.ID]
			if !ok {
				since = now
				t.unhealthySince[m.ID] = now
				entered = append(entered, m.ID)
			}
			if quiet || now.Sub(since) < t.policy.Grace {
				m.Health = flavor.HealthUnknown
			} else if d.ReplaceUnhealthy {
				dead[m.ID] = true
			}
		}
	}
	for id := range t.unhealthySince {
		if i, ok := listed[id]; !ok || out[i].State == instance.StateTerminating {
			delete(t.unhealthySince, id)
		}
	}
	if len(vanished) > 0 {
		evs = append(evs, t.event(now, KindVanished, vanished,
			"%s vanished from the provider's listing", members(len(vanished))))
	}
	if len(entered) > 0 {
		then := "not replaced (replace_unhealthy is off)"
		if d.ReplaceUnhealthy {
			then = fmt.Sprintf("each is replaced once unhealthy for %s", t.policy.Grace)
		}
		evs = append(evs, t.event(now, KindUnhealthy, entered, "%s turned unhealthy; %s", members(len(entered)), then))
	}

	// Owed replacements: vanished members whose place is still empty.
	live := group.Live(out)
	missing := missingByKey(d, live)
	owed := make(map[string]int, len(missing))
	owedTotal, newlyDead := 0, 0
	for k, miss := range missing {
		o := min(t.owed[k]+vanishedBy[k], miss)
		if o > 0 {
			owed[k] = o
			owedTotal += o
			newlyDead += min(vanishedBy[k], o)
		}
	}
	for id := range dead {
		if !t.prevDead[id] {
			newlyDead++
		}
	}

	// The brake.
	fp := fingerprint(live, dead)
	deadTotal := owedTotal + len(dead)
	known := len(live) + owedTotal
	var change brakeChange
	t.brake, change = stepBrake(t.policy, t.brake, brakeSeen{now: now, newlyDead: newlyDead, deadNow: deadTotal, known: known, fingerprint: fp})
	switch change {
	case brakeEngaged:
		evs = append(evs, t.event(now, KindBrakeEngaged, deadIDs(lost, dead),
			"%s", engagedMessage(t.policy, deadTotal, known, owedTotal, len(dead), len(t.brake.deaths))))
	case brakeReleased:
		evs = append(evs, t.event(now, KindBrakeReleased, nil, "%s", releasedMessage(t.policy, t.brake, owedTotal, len(dead))))
	}

	t.spareLive = t.prevLive
	t.prevLive, t.prevDead, t.owed = prevLive, dead, owed
	t.last = observation{pets: pets, members: out}
	return Adjusted{Members: out, Events: evs, Braked: t.brake.braked}
}

// missingByKey counts, per owed-key, the members the group lacks: for
// cattle its size less its live members, for pets each desired logical ID
// without a live member.
func missingByKey(d group.Desired, live []group.Member) map[string]int {
	if !d.IsPets() {
		return map[string]int{"": max(*d.Size-len(live), 0)}
	}
	have := make(map[string]bool, len(live))
	for _, m := range live {
		have[m.LogicalID] = true
	}
	missing := map[string]int{}
	for _, lid := range d.LogicalIDs {
		if lid != "" && !have[lid] {
			missing[lid] = 1
		}
	}
	return missing
}

// fingerprint identifies which live members are alive and which dead, for
// telling whether observations agree. live is sorted by ID.
func fingerprint(live []group.Member, dead map[instance.ID]bool) uint64 {
	h := fnv.New64a()
	for _, m := range live {
		mark := "+"
		if dead[m.ID] {
			mark = "-"
		}
		h.Write([]byte(mark))
		h.Write([]byte(m.ID))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func deadIDs(vanished []instance.ID, dead map[instance.ID]bool) []instance.ID {
	ids := slices.Clone(vanished)
	for id := range dead {
		ids = append(ids, id)
	}
	return ids
}

// event builds an event; IDs are sorted (they come from maps).
func (t *Tracker) event(now time.Time, kind Kind, ids []instance.ID, format string, args ...any) Event {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return Event{
		Time:    now,
		Group:   t.group,
		Kind:    kind,
		Message: strings.TrimSpace(fmt.Sprintf(format, args...)),
		IDs:     ids,
	}
}

// members is "1 member" or "N members", for events' messages.
func members(n int) string {
	if n == 1 {
		return "1 member"
	}
	return fmt.Sprintf("%d members", n)
}
