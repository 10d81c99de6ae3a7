package heal

import (
	"fmt"
	"time"
)

// The mass-failure brake, decided as a pure function of what it remembers
// (brakeState) and what one observation saw (brakeSeen): Adjust feeds it
// every observation, Filter asks it how many replacements may go now.
//
//   - Engage: at an observation where at least one member died, the dead
//     are at least Policy.BrakeMin and more than half of the known
//     members. The dead are those dead now, or, when more, those that died
//     within the last Policy.BrakeSettle (a sliding window): members that
//     die one at a time, each replaced before the next dies, brake as
//     surely as members that die at once.
//   - Hold: replacement pauses (Filter lets only scale-down through) until
//     a confirming re-list: the Policy.BrakeConfirm-th consecutive
//     observation that agrees with the one before on which members are
//     alive and which dead, made at least Policy.BrakeSettle after the
//     engaging observation or after the last that disagreed. Observations
//     in quick succession (a provider's events, follow-ups) never release
//     it alone.
//   - Release, rate-limited: once released, replacements go at most
//     max(BrakeMin-1, known/2) per BrakeSettle (the share of the group
//     that may die without engaging it), until an observation finds
//     nothing left to replace; the deaths that engaged it are forgotten.
//
// With BrakeSettle zero there is no window (only the dead of one
// observation count), no settle time and no rate limit.

// brakeState is what the brake remembers from one observation to the next.
type brakeState struct {
	braked bool
	// since is when it engaged; changed when the observations last
	// disagreed (the settle time counts from there).
	since, changed time.Time
	fingerprint    uint64
	consistent     int
	// deaths are when members died, within the window, oldest first.
	deaths []time.Time
	// rate, while positive, bounds the replacements per BrakeSettle after
	// a release made at released.
	rate     int
	released time.Time
}

// brakeSeen is one observation as the brake takes it.
type brakeSeen struct {
	now time.Time
	// newlyDead died since the previous observation; deadNow are dead
	// now (owed a replacement, or unhealthy past grace); known are the
	// members alive and dead.
	newlyDead, deadNow, known int
	// fingerprint says which members are alive and which dead.
	fingerprint uint64
}

// brakeChange is what an observation did to the brake.
type brakeChange int

const (
	brakeKept brakeChange = iota
	brakeEngaged
	brakeReleased
)

// stepBrake is the brake's decision on one observation.
func stepBrake(p Policy, s brakeState, in brakeSeen) (brakeState, brakeChange) {
	s.deaths = windowOf(s.deaths, in.now, p.BrakeSettle)
	for range in.newlyDead {
		s.deaths = append(s.deaths, in.now)
	}
	if !s.braked {
		if s.rate > 0 && in.deadNow == 0 {
			s.rate = 0 // nothing left to replace: the limit ends
		}
		dead := max(in.deadNow, len(s.deaths))
		if in.newlyDead > 0 && dead >= p.BrakeMin && 2*dead > in.known {
			s.braked, s.since, s.changed = true, in.now, in.now
			s.fingerprint, s.consistent = in.fingerprint, 1
			s.rate = 0
			return s, brakeEngaged
		}
		return s, brakeKept
	}
	if in.fingerprint == s.fingerprint {
		s.consistent++
	} else {
		s.fingerprint, s.consistent, s.changed = in.fingerprint, 1, in.now
	}
	if s.consistent < p.BrakeConfirm || in.now.Sub(s.changed) < p.BrakeSettle {
		return s, brakeKept
	}
	s.braked, s.consistent, s.deaths = false, 0, nil
	if p.BrakeSettle > 0 {
		s.rate, s.released = releaseRate(p, in.known), in.now
	}
	return s, brakeReleased
}

// releaseRate is how many replacements may go per settle time after a
// release: as many as may die without engaging the brake.
func releaseRate(p Policy, known int) int {
	return max(p.BrakeMin-1, known/2, 1)
}

// windowOf is deaths less those older than the window.
func windowOf(deaths []time.Time, now time.Time, window time.Duration) []time.Time {
	i := 0
	for i < len(deaths) && now.Sub(deaths[i]) >= window {
		i++
	}
	return deaths[i:]
}

// releaseAt is when a confirming re-list may release the brake (zero when
// it is not engaged).
func (s brakeState) releaseAt(p Policy) time.Time {
	if !s.braked {
		return time.Time{}
	}
	return s.changed.Add(p.BrakeSettle)
}

// allowance is how many replacements may go at now given when the last
// ones were made (oldest first), and when the next is allowed once none
// may: unlimited (-1) while no release limit holds.
func (s brakeState) allowance(p Policy, now time.Time, made []time.Time) (int, time.Time) {
	if s.braked || s.rate <= 0 {
		return -1, time.Time{}
	}
	// Those of the last settle time, (now-BrakeSettle, now], made since
	// the release.
	var counted []time.Time
	for _, at := range made {
		if at.After(now.Add(-p.BrakeSettle)) && !at.Before(s.released) {
			counted = append(counted, at)
		}
	}
	if left := s.rate - len(counted); left > 0 {
		return left, time.Time{}
	}
	return 0, counted[len(counted)-s.rate].Add(p.BrakeSettle)
}

// engagedMessage and releasedMessage are the brake's events.
func engagedMessage(p Policy, dead, known, gone, unhealthy, recent int) string {
	msg := fmt.Sprintf("%d of %d members look dead at once (%d gone, %d unhealthy past grace)", dead, known, gone, unhealthy)
	if recent > dead {
		msg = fmt.Sprintf("%d of %d members died within %s (%d gone now, %d unhealthy past grace)", recent, known, p.BrakeSettle, gone, unhealthy)
	}
	if p.BrakeSettle > 0 {
		return msg + fmt.Sprintf("; replacement paused until %d consecutive observations agree, the last at least %s after the world last changed",
			p.BrakeConfirm, p.BrakeSettle)
	}
	return msg + fmt.Sprintf("; replacement paused until %d consecutive observations agree", p.BrakeConfirm)
}

func releasedMessage(p Policy, s brakeState, gone, unhealthy int) string {
	msg := fmt.Sprintf("%d consecutive observations agree", p.BrakeConfirm)
	if p.BrakeSettle > 0 {
		msg += fmt.Sprintf(" over %s", p.BrakeSettle)
	}
	msg += fmt.Sprintf("; replacement resumes (%d gone, %d unhealthy to replace)", gone, unhealthy)
	if s.rate > 0 {
		msg += fmt.Sprintf(", at most %d per %s", s.rate, p.BrakeSettle)
	}
	return msg
}
