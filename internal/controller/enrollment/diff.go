package enrollment

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// Diff decides what the enrollment called name needs so that every running
// member of source has exactly one up-to-date authorization and nothing else
// of the enrollment's remains, except what is held for replacements that
// want (what the source group wants) still awaits (see the package doc for
// the rules). observed is what the target authorizer lists, the
// enrollment's and others'; render gives a member's target properties, and
// is called once per running member. Its cost is linear in members and
// authorizations (plus sorting).
func Diff(name string, source []group.Member, want Want, observed []nfs.Authorization,
	render func(group.Member) (json.RawMessage, error)) Changes {
	return DiffRendered(name, source, want, observed, func(m group.Member) (Rendered, error) {
		props, err := render(m)
		return RenderedOf(props), err
	})
}

// DiffRendered is Diff with render giving properties already read
// (RenderedOf).
func DiffRendered(name string, source []group.Member, want Want, observed []nfs.Authorization,
	render func(group.Member) (Rendered, error)) Changes {
	ch := Changes{Enrollment: name}
	ours := make(map[instance.ID][]nfs.Authorization, len(observed))
	for _, a := range observed {
		if Ours(name, a) {
			id := SourceOf(a)
			ours[id] = append(ours[id], a)
		}
	}
	for _, as := range ours {
		slices.SortFunc(as, func(a, b nfs.Authorization) int { return cmp.Compare(a.ID, b.ID) })
	}

	handled := make(map[instance.ID]bool, len(source))
	running := 0
	runningPets := map[string]bool{}
	for _, m := range source {
		if m.ID == "" || handled[m.ID] {
			continue
		}
		switch m.State {
		case instance.StateRunning, "": // no state: taken as running, as group does
			running++
			if m.LogicalID != "" {
				runningPets[m.LogicalID] = true
			}
		case instance.StatePending:
			// Not authorized yet; what it has (if anything) stays.
			handled[m.ID] = true
			continue
		default:
			continue // terminating: it left, as if gone
		}
		handled[m.ID] = true
		props, err := render(m)
		if err != nil {
			ch.Failed = append(ch.Failed, RenderFailure{Member: m.ID, Err: err, Error: err.Error()})
			continue
		}
		// have are m's own (SourceOf), so only what they carry is compared.
		have := ours[m.ID]
		keep := slices.IndexFunc(have, func(a nfs.Authorization) bool { return holds(a, props) })
		switch {
		case len(have) == 0:
			ch.Authorize = append(ch.Authorize, AuthorizationFor(name, m, props))
		case keep < 0:
			ch.Reauthorize = append(ch.Reauthorize, Replacement{Old: have[0], New: AuthorizationFor(name, m, props)})
			keep = 0
		}
		for i, a := range have {
			if i != keep {
				ch.Revoke = append(ch.Revoke, Revocation{Authorization: a, Reason: ReasonDuplicate})
			}
		}
	}
	// Members that left: their authorizations are revoked, or the first
	// (lowest ID) of each is held for their replacements.
	var left []nfs.Authorization
	for id, as := range ours {
		if handled[id] {
			continue
		}
		left = append(left, as[0])
		for _, a := range as[1:] {
			ch.Revoke = append(ch.Revoke, Revocation{Authorization: a, Reason: ReasonMemberGone})
		}
	}
	bySource(left)
	var gone []nfs.Authorization
	ch.Deferred, gone = held(left, want, running, runningPets)
	for _, a := range gone {
		ch.Revoke = append(ch.Revoke, Revocation{Authorization: a, Reason: ReasonMemberGone})
	}

	ch.sort()
	return ch
}

// sort puts each list of changes in member order, so that equal inputs
// give equal changes.
func (c *Changes) sort() {
	slices.SortFunc(c.Authorize, func(a, b nfs.Authorization) int { return cmp.Compare(a.SourceID, b.SourceID) })
	slices.SortFunc(c.Reauthorize, func(a, b Replacement) int { return cmp.Compare(a.New.SourceID, b.New.SourceID) })
	slices.SortFunc(c.Revoke, func(a, b Revocation) int {
		return cmp.Or(cmp.Compare(SourceOf(a.Authorization), SourceOf(b.Authorization)), cmp.Compare(a.Authorization.ID, b.Authorization.ID))
	})
	slices.SortFunc(c.Failed, func(a, b RenderFailure) int { return cmp.Compare(a.Member, b.Member) })
}

// held splits the authorizations of members that left (one per member,
// sorted by member) into those held for replacements the group still
// awaits and those to revoke. running is how many members run, and runningPets the
// logical IDs they have. A pet's authorization (tagged with its logical
// ID) is held while want has the logical ID and no running member does,
// one per logical ID, whatever the counts; of the others, the first are
// held, as many as the group runs fewer members than it wants, less those
// held for pets.
func held(left []nfs.Authorization, want Want, running int, runningPets map[string]bool) (hold, revoke []nfs.Authorization) {
	if len(left) == 0 {
		return nil, nil
	}
	wanted := make(map[string]bool, len(want.LogicalIDs))
	for _, l := range want.LogicalIDs {
		wanted[l] = true
	}
	heldPets := map[string]bool{}
	var untagged []nfs.Authorization
	for _, a := range left {
		l := a.Tags[tags.LogicalID]
		switch {
		case l == "":
			untagged = append(untagged, a)
		case wanted[l] && !runningPets[l] && !heldPets[l]:
			heldPets[l] = true
			hold = append(hold, a)
		default:
			revoke = append(revoke, a)
		}
	}
	n := min(max(want.Size-running-len(heldPets), 0), len(untagged))
	hold = append(hold, untagged[:n]...)
	revoke = append(revoke, untagged[n:]...)
	bySource(hold)
	return hold, revoke
}

// bySource sorts authorizations by member, then ID.
func bySource(as []nfs.Authorization) {
	slices.SortFunc(as, func(a, b nfs.Authorization) int {
		return cmp.Or(cmp.Compare(SourceOf(a), SourceOf(b)), cmp.Compare(a.ID, b.ID))
	})
}

// Teardown is what revoking every authorization of the enrollment called
// name means: one revocation (with reason) per authorization of it in observed.
func Teardown(name string, observed []nfs.Authorization, reason string) Changes {
	ch := Changes{Enrollment: name}
	for _, a := range observed {
		if Ours(name, a) {
			ch.Revoke = append(ch.Revoke, Revocation{Authorization: a, Reason: reason})
		}
	}
	slices.SortFunc(ch.Revoke, func(a, b Revocation) int {
		return cmp.Or(cmp.Compare(SourceOf(a.Authorization), SourceOf(b.Authorization)), cmp.Compare(a.Authorization.ID, b.Authorization.ID))
	})
	return ch
}

// Retarget decides what an enrollment whose target changed (another
// provider or type: see TargetChanged) revokes at its old target: every
// authorization of it (by the name tag) that old lists, except those the
// new target lists too, by ID. Those are one store seen through both (two
// aliases of one provider process, say): they are the new target's, which
// Diff keeps or replaces, so revoking them would only take access away.
func Retarget(name string, old, current []nfs.Authorization) Changes {
	both := map[string]bool{}
	for _, a := range current {
		if Ours(name, a) {
			both[a.ID] = true
		}
	}
	ch := Teardown(name, old, ReasonRetarget)
	ch.Revoke = slices.DeleteFunc(ch.Revoke, func(r Revocation) bool { return both[r.Authorization.ID] })
	return ch
}

// TargetChanged reports whether an enrollment's target is another
// authorizer from old (as applied) to new (as the stack has it): another
// provider (alias included) or type. Properties are not the target: a
// change of them re-authorizes at the same target (Diff).
func TargetChanged(old, new *config.Enrollment) bool {
	return old != nil && new != nil && (old.Target.Provider != new.Target.Provider || old.Target.Type != new.Target.Type)
}
