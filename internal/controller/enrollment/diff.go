package enrollment

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// Diff decides what the enrollment called name needs so that every running
// member of source has exactly one up-to-date authorization and nothing else
// of the enrollment's remains (see the package doc for the rules). observed
// is what the target authorizer lists, the enrollment's and others';
// render gives a member's target properties, and is called once per running
// member. Its cost is linear in members and authorizations (plus sorting).
func Diff(name string, source []group.Member, observed []nfs.Authorization,
	render func(group.Member) (json.RawMessage, error)) Changes {
	ch := Changes{Enrollment: name}
	ours := map[instance.ID][]nfs.Authorization{}
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
	for _, m := range source {
		if m.ID == "" || handled[m.ID] {
			continue
		}
		switch m.State {
		case instance.StateRunning, "": // no state: taken as running, as group does
		case instance.StatePending:
			// Not authorized yet; what it has (if anything) stays.
			handled[m.ID] = true
			continue
		default:
			continue // terminating: its authorizations go
		}
		handled[m.ID] = true
		props, err := render(m)
		if err != nil {
			ch.Failed = append(ch.Failed, RenderFailure{Member: m.ID, Err: err, Error: err.Error()})
			continue
		}
		want := Authorization(name, m, props)
		have := ours[m.ID]
		keep := slices.IndexFunc(have, func(a nfs.Authorization) bool { return UpToDate(a, want) })
		switch {
		case len(have) == 0:
			ch.Authorize = append(ch.Authorize, want)
		case keep < 0:
			ch.Reauthorize = append(ch.Reauthorize, Replacement{Old: have[0], New: want})
			keep = 0
		}
		for i, a := range have {
			if i != keep {
				ch.Revoke = append(ch.Revoke, Revocation{Authorization: a, Reason: ReasonDuplicate})
			}
		}
	}
	for id, as := range ours {
		if !handled[id] {
			for _, a := range as {
				ch.Revoke = append(ch.Revoke, Revocation{Authorization: a, Reason: ReasonMemberGone})
			}
		}
	}

	slices.SortFunc(ch.Authorize, func(a, b nfs.Authorization) int { return cmp.Compare(a.SourceID, b.SourceID) })
	slices.SortFunc(ch.Reauthorize, func(a, b Replacement) int { return cmp.Compare(a.New.SourceID, b.New.SourceID) })
	slices.SortFunc(ch.Revoke, func(a, b Revocation) int {
		return cmp.Or(cmp.Compare(SourceOf(a.Authorization), SourceOf(b.Authorization)), cmp.Compare(a.Authorization.ID, b.Authorization.ID))
	})
	slices.SortFunc(ch.Failed, func(a, b RenderFailure) int { return cmp.Compare(a.Member, b.Member) })
	return ch
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
