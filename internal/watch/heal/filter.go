package heal

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Filter trims dec, the decision group.Decide made on the members the last
// Adjust returned, by the brake and the replacement budget, and returns what
// the pass may do.
//
// While braked it keeps only the scale-down destroys: no create (not even a
// scale-up), no other destroy, no roll. Otherwise it classifies dec's
// creates: one per destroy with group.ReasonUnhealthy replaces that member,
// and of the others, as many as the group has owed vanished members (per
// logical ID for pets) replace those; the rest (a scale-up, a new group, a
// pet added) pass untouched. Replacements pass within the budget, vanished
// first, then unhealthy members longest-unhealthy first; a held unhealthy
// member's destroy is left out along with its replacement.
//
// While it holds a replacement it also leaves Roll empty: the group is not
// settled (group.NextRollBatch, deciding on the members Adjust returned,
// would refuse to roll), so the rolling update waits, and a roll is never a
// way around the budget.
//
// Filter only decides: the budget is spent by Issued, on the replacements
// the pass then made. A pass that does not act on Filter's result (the
// state moved under it, watch is shutting down, it lost the lease) spends
// nothing, and a replacement whose create failed is still owed and is tried
// again by a later pass, within the budget. Call it once per pass, just
// before acting on its result; each call replaces what the previous one let
// through.
func (t *Tracker) Filter(now time.Time, dec group.Decision) (group.Decision, []Event) {
	t.grant = grant{}
	if t.brake.braked {
		var out group.Decision
		for _, x := range dec.Destroy {
			if x.Reason == group.ReasonScaleDown {
				out.Destroy = append(out.Destroy, x)
			}
		}
		return out, nil
	}
	t.prune(now)
	pets := t.last.pets

	var pairs []group.Destroy
	pairKey := map[instance.ID]string{}
	pairsBy := map[string]int{}
	for _, x := range dec.Destroy {
		if x.Reason == group.ReasonUnhealthy {
			pairs = append(pairs, x)
			pairKey[x.ID] = ""
		}
	}
	if pets && len(pairs) > 0 {
		for _, m := range t.last.members {
			if _, ok := pairKey[m.ID]; ok {
				pairKey[m.ID] = m.LogicalID
			}
		}
	}
	for _, k := range pairKey {
		pairsBy[k]++
	}
	createsBy := map[string]int{}
	var keys []string // in the decision's order, so the choice is deterministic
	for _, c := range dec.Create {
		k := key(pets, c.LogicalID)
		if createsBy[k] == 0 {
			keys = append(keys, k)
		}
		createsBy[k]++
	}

	limit := t.policy.MaxReplacementsPerHour
	remaining := math.MaxInt
	if limit > 0 {
		remaining = max(limit-len(t.replacements), 0)
	}
	// After a release the brake bounds the rate too (brake.go).
	if left, _ := t.brake.allowance(t.policy, now, t.replacements); left >= 0 {
		remaining = min(remaining, left)
	}
	drop := map[string]int{}
	g := grant{creates: map[string]int{}, pairs: map[instance.ID]string{}}
	heldVanished := 0
	for _, k := range keys {
		v := min(t.owed[k], max(createsBy[k]-pairsBy[k], 0))
		allowed := min(v, remaining)
		remaining -= allowed
		g.creates[k] += allowed
		drop[k] += v - allowed
		heldVanished += v - allowed
	}
	slices.SortFunc(pairs, func(a, b group.Destroy) int {
		return cmp.Or(t.unhealthySince[a.ID].Compare(t.unhealthySince[b.ID]), cmp.Compare(a.ID, b.ID))
	})
	held := map[instance.ID]bool{}
	var heldIDs []instance.ID
	for _, x := range pairs {
		k := pairKey[x.ID]
		if remaining > 0 {
			remaining--
			g.creates[k]++
			g.pairs[x.ID] = k
			continue
		}
		held[x.ID] = true
		heldIDs = append(heldIDs, x.ID)
		drop[k]++
	}

	out := group.Decision{Roll: dec.Roll}
	for _, x := range dec.Destroy {
		if x.Reason != group.ReasonUnhealthy || !held[x.ID] {
			out.Destroy = append(out.Destroy, x)
		}
	}
	for _, c := range dec.Create {
		if k := key(pets, c.LogicalID); drop[k] > 0 {
			drop[k]--
			continue
		}
		out.Create = append(out.Create, c)
	}
	t.grant = g
	granted := 0
	for _, n := range g.creates {
		granted += n
	}
	freesAt := t.budgetFreesAtWith(now, granted)

	var evs []Event
	switch {
	case heldVanished+len(heldIDs) == 0:
		t.holding = false
		clear(t.held)
	case !t.holding:
		evs = append(evs, t.event(now, KindBudgetExhausted, heldIDs,
			"max_replacements_per_hour (%d) reached: holding %d replacements (%d vanished, %d unhealthy); the next is possible at %s",
			limit, heldVanished+len(heldIDs), heldVanished, len(heldIDs), freesAt.Format(time.RFC3339)))
	default:
		var fresh []instance.ID
		for _, id := range heldIDs {
			if !t.held[id] {
				fresh = append(fresh, id)
			}
		}
		if len(fresh) > 0 {
			evs = append(evs, t.event(now, KindReplaceHeld, fresh,
				"max_replacements_per_hour (%d) still reached: %d more unhealthy members held; the next replacement is possible at %s",
				limit, len(fresh), freesAt.Format(time.RFC3339)))
		}
	}
	if len(held) > 0 || heldVanished > 0 {
		t.holding = true
		t.held = held
		out.Roll = nil
	}
	return out, evs
}

// prune forgets the replacements older than Window.
func (t *Tracker) prune(now time.Time) {
	i := 0
	for i < len(t.replacements) && now.Sub(t.replacements[i]) >= Window {
		i++
	}
	t.replacements = t.replacements[i:]
}

// budgetFreesAt is when the budget next allows a replacement: when the
// window has one fewer than the limit. Zero when it allows one now or is
// unlimited.
func (t *Tracker) budgetFreesAt() time.Time {
	return t.budgetFreesAtWith(time.Time{}, 0)
}

// budgetFreesAtWith is budgetFreesAt once extra more replacements are
// made at now: what Filter tells while the ones it lets through are not
// made yet.
func (t *Tracker) budgetFreesAtWith(now time.Time, extra int) time.Time {
	limit := t.policy.MaxReplacementsPerHour
	n := len(t.replacements) + extra
	if limit <= 0 || n < limit {
		return time.Time{}
	}
	if i := n - limit; i < len(t.replacements) {
		return t.replacements[i].Add(Window)
	}
	return now.Add(Window)
}

// Status is what the tracker holds for a group, for /v1/status and metrics.
type Status struct {
	// Braked reports whether replacement is paused; Consistent counts the
	// agreeing observations so far, toward the policy's BrakeConfirm.
	Braked      bool      `json:"braked"`
	BrakedSince time.Time `json:"braked_since,omitzero"`
	Consistent  int       `json:"consistent_observations,omitempty"`
	// ReleaseAt is, while braked, the earliest a confirming observation
	// may release the brake (the settle time); RateLimit, after a release,
	// bounds the replacements per settle time until none is owed, and
	// RateFreesAt is when the next may go while the limit is reached.
	ReleaseAt   time.Time `json:"brake_release_at,omitzero"`
	RateLimit   int       `json:"brake_rate_limit,omitempty"`
	RateFreesAt time.Time `json:"brake_rate_frees_at,omitzero"`
	// Replacements counts the replacement creates of the last hour;
	// ReplacementsTotal those since the tracker was made (a Prometheus
	// counter).
	Replacements      int `json:"replacements_last_hour"`
	ReplacementsTotal int `json:"replacements_total"`
	// BudgetFreesAt is set while the budget is exhausted.
	BudgetFreesAt time.Time `json:"budget_frees_at,omitzero"`
	// Pending and Terminating count the expectations: creates not listed
	// yet, destroyed members still listed.
	Pending     int `json:"pending"`
	Terminating int `json:"terminating"`
	// Unhealthy counts members seen unhealthy, within their grace or past.
	Unhealthy int `json:"unhealthy"`
	// Owed counts vanished members not replaced yet, as of the last Adjust.
	Owed int `json:"owed"`
	// Quiet reports whether the start-up quiet period is still on.
	Quiet bool `json:"quiet,omitempty"`
}

// Status reports the tracker's state at time now. Like every method, it
// must not run concurrently with the others: the watch loop takes it after
// each pass and publishes the copy.
func (t *Tracker) Status(now time.Time) Status {
	t.prune(now)
	st := Status{
		Braked:            t.brake.braked,
		Consistent:        t.brake.consistent,
		ReleaseAt:         t.brake.releaseAt(t.policy),
		RateLimit:         t.brake.rate,
		Replacements:      len(t.replacements),
		ReplacementsTotal: t.replacementsTotal,
		BudgetFreesAt:     t.budgetFreesAt(),
		Pending:           len(t.creates),
		Terminating:       len(t.destroys),
		Unhealthy:         len(t.unhealthySince),
		Quiet:             now.Sub(t.start) < t.policy.Quiet,
	}
	if t.brake.braked {
		st.BrakedSince = t.brake.since
	}
	if left, at := t.brake.allowance(t.policy, now, t.replacements); left == 0 {
		st.RateFreesAt = at
	}
	for _, n := range t.owed {
		st.Owed += n
	}
	return st
}
