// Package heal is the self-healing policy `infrakit watch` applies to a group
// on every pass, around the pure group decision (group.Decide): the guard
// rails of issue 4, decided as data in, data out, with the clock passed in.
//
// A pass of the watch loop, for one group, is
//
//	adj := tracker.Adjust(now, desired, observed) // members as Decide should see them
//	dec := group.Decide(desired, adj.Members)
//	dec, evs := tracker.Filter(now, dec)          // trimmed by the brake and the budget
//	... execute dec ...
//	tracker.Issued(now, created, destroyed)       // remembered as expectations
//
// and the Tracker carries, from one pass to the next, what those rules need:
//
//   - Expectations (as Kubernetes' ReplicaSet controller keeps them): a member
//     created and not listed yet is counted as a pending member, and one
//     destroyed but still listed is counted as terminating, until the listing
//     agrees or Policy.ExpectTimeout passes. A slow provider therefore never
//     makes the group over-provision, nor destroy twice.
//   - Grace: a running member its flavors judge unhealthy is reported to Decide
//     with unknown health until it has been unhealthy for Policy.Grace. The
//     clock starts at the first observation that finds it unhealthy and is
//     reset only by an observation that finds it healthy (unknown health
//     proves nothing either way, so it neither starts nor resets the clock).
//     Whether an unhealthy member is then replaced is Desired.ReplaceUnhealthy.
//   - Vanish: a member listed alive by the previous observation that is gone
//     (or that the provider now lists as terminating) although infrakit did not
//     destroy it has vanished; Decide grows the group back. Only vanishes that
//     leave a gap (the group is below its size, or the pet is missing) are
//     owed a replacement, so `group destroy-instances`, which lowers the size,
//     is no vanish to replace. A create never listed within
//     Policy.ExpectTimeout counts as vanished too.
//   - Budget (Policy.MaxReplacementsPerHour, 0 = unlimited): creates that
//     replace a vanished member or an unhealthy one are counted in a sliding
//     hour; creates for a scale-up or a rolling update are not. Only
//     replacements actually made count: Filter lets replacements through
//     within what is left of the budget, and Issued counts those the pass
//     then created, so a pass that does not act, or a create that fails,
//     costs nothing (the member stays owed and a later pass tries again).
//     When the budget is spent, Filter holds the rest: an unhealthy member
//     keeps running (its destroy and its replacement are left out), a
//     vanished one is not re-created, and an event says when the budget
//     frees up. Vanished members are replaced before unhealthy ones (they
//     restore capacity), and unhealthy ones longest-unhealthy first.
//   - Brake: when, at one observation, the group's dead members (vanished and
//     owed a replacement, plus running members unhealthy past grace when
//     ReplaceUnhealthy is on) are at least Policy.BrakeMin and more than half
//     of its known members (those alive now plus those dead), and at least
//     one of them died since the previous observation, replacement pauses.
//     Members still being created count as alive; members never created (a
//     scale-up, a new group) count as neither, so creating a group never
//     brakes. While braked Filter withholds every create and every destroy
//     except scale-down (ReasonScaleDown: the user asked for fewer, which is
//     always safe) and every roll. The brake releases at the
//     Policy.BrakeConfirm-th consecutive observation that agrees with the one
//     before on the set of alive members and the set of dead ones (the
//     engaging observation is the first of the run), made at least
//     Policy.BrakeSettle after the world last changed; then the owed
//     replacements go ahead, within the budget, and at a bounded rate for
//     a while. Members dead within Policy.BrakeSettle of each other count
//     together, so members that die one at a time brake too (brake.go has
//     the rules). A flapping provider listing (empty, then full again) thus
//     never re-creates the group, and a real outage is replaced once the
//     world holds still.
//   - Quiet period: while now − start < Policy.Quiet (start is when the
//     Tracker was made: a fresh start or a new leader), no member is judged
//     unhealthy: health a new process has only just begun to sample is not
//     trusted. Vanishes are still replaced: they are measured against this
//     process's own previous observation, and at the first observation there
//     is no previous one, so the listing is authoritative: what is missing
//     then is created like a scale-up, outside the budget and the brake.
//
// Nothing here calls a provider or starts a goroutine.
package heal

import (
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Defaults of Policy.
const (
	// DefaultExpectTimeout is twice the group controller's default call
	// timeout (5 minutes): a provider that took the whole timeout to return
	// an ID gets as long again to list it.
	DefaultExpectTimeout = 10 * time.Minute
	// DefaultBrakeMin is the fewest dead members that engage the brake.
	DefaultBrakeMin = 3
	// DefaultBrakeConfirm is how many consecutive agreeing observations
	// release the brake.
	DefaultBrakeConfirm = 3
	// DefaultBrakeSettle is watch's -brake-settle default.
	DefaultBrakeSettle = 30 * time.Second
)

// Window is the span of the replacement budget.
const Window = time.Hour

// Policy is the self-healing policy of one group. Zero values take the
// defaults, except Grace, Quiet and MaxReplacementsPerHour, whose zero
// means none (no grace, no quiet period, no limit).
type Policy struct {
	// Grace is how long a member stays unhealthy before it counts as dead.
	Grace time.Duration
	// MaxReplacementsPerHour bounds the replacement creates in any hour;
	// 0 means unlimited.
	MaxReplacementsPerHour int
	// ExpectTimeout is how long a create is counted as pending while the
	// provider does not list it, and a destroyed member as terminating while
	// the provider still lists it (DefaultExpectTimeout). Set it to twice
	// the provision call timeout.
	ExpectTimeout time.Duration
	// Quiet is the start-up period during which no member is judged
	// unhealthy; the watch loop sets it to one health interval.
	Quiet time.Duration
	// BrakeMin is the fewest dead members that engage the brake
	// (DefaultBrakeMin; a group's health { brake_min }). A quorum system
	// of 3 sets 2: losing a majority at once is its mass failure.
	BrakeMin int
	// BrakeConfirm is how many consecutive agreeing observations release
	// the brake, the engaging one counted (DefaultBrakeConfirm; values
	// below 2 mean 2).
	BrakeConfirm int
	// BrakeSettle is the brake's time (brake.go): deaths within it count
	// together, the confirming observation comes at least that long after
	// the world last changed, and after a release the replacements go at
	// a bounded rate per BrakeSettle. Zero means none of the three; the
	// watch loop sets it (-brake-settle, DefaultBrakeSettle).
	BrakeSettle time.Duration
}

// PolicyFromConfig is the policy of a group's health block, with the other
// fields at their defaults (brake_min absent, 0, is DefaultBrakeMin).
// (replace_unhealthy is not here: Decide applies it, from group.Desired.)
func PolicyFromConfig(h config.HealthPolicy) Policy {
	return Policy{Grace: time.Duration(h.Grace), MaxReplacementsPerHour: h.MaxReplacementsPerHour, BrakeMin: h.BrakeMin}
}

func (p Policy) withDefaults() Policy {
	if p.ExpectTimeout <= 0 {
		p.ExpectTimeout = DefaultExpectTimeout
	}
	if p.BrakeMin <= 0 {
		p.BrakeMin = DefaultBrakeMin
	}
	switch {
	case p.BrakeConfirm <= 0:
		p.BrakeConfirm = DefaultBrakeConfirm
	case p.BrakeConfirm < 2:
		// The engaging observation is the first of the run, and one
		// observation agrees with nothing.
		p.BrakeConfirm = 2
	}
	p.Grace = max(p.Grace, 0)
	p.BrakeSettle = max(p.BrakeSettle, 0)
	p.MaxReplacementsPerHour = max(p.MaxReplacementsPerHour, 0)
	return p
}

// Kind says what an Event reports.
type Kind string

// Event kinds.
const (
	// KindVanished: members alive at the previous observation are gone.
	KindVanished Kind = "vanished"
	// KindUnhealthy: members turned unhealthy; their grace starts.
	KindUnhealthy Kind = "unhealthy"
	// KindExpectationExpired: a create was never listed, or a destroyed
	// member was still listed, after Policy.ExpectTimeout.
	KindExpectationExpired Kind = "expectation-expired"
	// KindBudgetExhausted: max_replacements_per_hour is reached and
	// replacements are held.
	KindBudgetExhausted Kind = "budget-exhausted"
	// KindReplaceHeld: more unhealthy members are held while the budget
	// stays exhausted.
	KindReplaceHeld Kind = "replace-held"
	// KindBrakeEngaged: too many members look dead at once; replacement
	// pauses.
	KindBrakeEngaged Kind = "brake-engaged"
	// KindBrakeReleased: the observations agree again; replacement resumes.
	KindBrakeReleased Kind = "brake-released"
)

// Event is something the policy did or noticed, for the watch loop's
// /v1/events and log. Events are emitted on changes, not on every pass.
type Event struct {
	Time    time.Time     `json:"time"`
	Group   string        `json:"group"`
	Kind    Kind          `json:"kind"`
	Message string        `json:"message"`
	IDs     []instance.ID `json:"ids,omitempty"`
}

// Tracker is the self-healing memory of one group. The watch loop owns one
// per group, from the start of the process (or of its leadership) on, and
// calls Adjust, Filter and Issued in that order on each pass.
//
// A Tracker is not safe for concurrent use: the controller's Record
// callback runs on another goroutine, so the loop collects what it reports
// and calls Issued once the acting call has returned.
type Tracker struct {
	group  string
	policy Policy
	start  time.Time

	// creates and destroys are the expectations, by instance ID.
	creates  map[instance.ID]expectedCreate
	destroys map[instance.ID]time.Time
	// unhealthySince is when each listed member was first seen unhealthy.
	unhealthySince map[instance.ID]time.Time

	// prevLive maps the members the provider listed alive at the previous
	// observation to their owed-key (see key). spareLive and listed are
	// Adjust's scratch maps, kept to spare a large group's observations
	// two map allocations each.
	prevLive  map[instance.ID]string
	spareLive map[instance.ID]string
	listed    map[instance.ID]int
	// prevDead is the previous observation's unhealthy-past-grace set.
	prevDead map[instance.ID]bool
	// owed counts, per key, the members that vanished (or were destroyed
	// for their health) and whose replacement is still missing.
	owed map[string]int

	// brake is the mass-failure brake (brake.go).
	brake brakeState

	// replacements are the times of the replacement creates of the last
	// Window, oldest first.
	replacements      []time.Time
	replacementsTotal int
	// holding is set while the budget holds replacements; held are the
	// unhealthy members held.
	holding bool
	held    map[instance.ID]bool
	// grant is what the last Filter let through as replacements, for
	// Issued to count once they are made.
	grant grant

	// last is what the last Adjust saw, for Filter.
	last observation
}

// observation is what Adjust leaves for Filter.
type observation struct {
	pets    bool
	members []group.Member
}

// grant is the replacements one Filter let through.
type grant struct {
	// creates counts the replacement creates by owed-key.
	creates map[string]int
	// pairs are the unhealthy members whose destroy (with its
	// replacement) was let through, to their owed-key.
	pairs map[instance.ID]string
}

type expectedCreate struct {
	member group.Member
	at     time.Time
}

// NewTracker returns the tracker of the named group, started at start (the
// origin of the quiet period).
func NewTracker(groupName string, p Policy, start time.Time) *Tracker {
	return &Tracker{
		group:          groupName,
		policy:         p.withDefaults(),
		start:          start,
		creates:        map[instance.ID]expectedCreate{},
		destroys:       map[instance.ID]time.Time{},
		unhealthySince: map[instance.ID]time.Time{},
		owed:           map[string]int{},
		held:           map[instance.ID]bool{},
	}
}

// SetPolicy replaces the policy (the stack was reloaded). What is tracked
// is kept: grace clocks, expectations, the budget's window and the brake.
func (t *Tracker) SetPolicy(p Policy) { t.policy = p.withDefaults() }

// Policy returns the policy in force, defaults filled in.
func (t *Tracker) Policy() Policy { return t.policy }

// Issued records what the pass created and destroyed, as the group
// controller reports it (group.Record): created members are counted as
// pending until listed, destroyed ones as terminating while still listed.
// It includes a rolling update's creates and destroys, so that a member the
// roll destroyed is not mistaken for a vanished one.
//
// It also spends the replacement budget on what the last Filter let through
// as replacements and the pass made: per owed-key (the logical ID of a pet;
// cattle are interchangeable, so among their creates the replacements are
// counted first), at most as many as were let through and as were created.
// An unhealthy member whose destroy was let through and made leaves its
// place owed until its replacement is listed, so a replacement whose create
// failed is tried again as one.
func (t *Tracker) Issued(now time.Time, created []group.Member, destroyed []instance.ID) {
	made := map[string]int{}
	for _, m := range created {
		if m.ID != "" {
			t.creates[m.ID] = expectedCreate{member: m, at: now}
			made[key(t.last.pets, m.LogicalID)]++
		}
	}
	for _, id := range destroyed {
		t.destroys[id] = now
		delete(t.creates, id)
		delete(t.unhealthySince, id)
		if k, ok := t.grant.pairs[id]; ok {
			t.owed[k]++
		}
	}
	charged := 0
	for k, n := range t.grant.creates {
		charged += min(n, made[k])
	}
	for range charged {
		t.replacements = append(t.replacements, now)
	}
	t.replacementsTotal += charged
	t.grant = grant{}
}

// key is the owed-key of a member: its logical ID for pets, "" for cattle,
// whose members are interchangeable.
func key(pets bool, logicalID string) string {
	if pets {
		return logicalID
	}
	return ""
}
