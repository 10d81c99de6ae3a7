package watch

import (
	"slices"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A member that dies keeps its load balancer backend until something
// deregisters it, and requests the load balancer sends it meanwhile wait
// for a connection that never comes. So a pass that sees members leave
// behind its back — gone from the listing, or terminating — plans their
// deregistration (plan.GroupWork.Gone) with the rest of its work: those
// steps wait for nothing and run first. Members the pass itself takes
// away are deregistered and revoked by their own steps before they are
// drained and destroyed, and a replacement is registered and authorized
// before the member it replaces is touched.
//
// An enrollment keeps its rule that a replacement is authorized before the
// authorization it replaces is revoked: the authorization of a member that
// vanished is held (enrollment.Diff's Deferred) until a replacement runs and
// is authorized: the plan revokes it once the replacement's authorization is
// made, in this pass or a later one. And nothing is taken out on a membership the pass does not trust: a pass
// whose listing failed never gets here, and one the mass-failure brake holds
// (the listing may be a provider's glitch) plans no Gone.

// followed reports whether an ingress or an enrollment of doc's stack
// that doc does not mark freed follows the group named.
func followed(doc *state.Document, name string) bool {
	for _, in := range doc.Stack.Ingresses {
		if st := doc.Ingresses[in.Name]; st != nil && st.Freed {
			continue
		}
		for _, r := range in.Rules {
			if slices.Contains(r.Groups, name) {
				return true
			}
		}
	}
	for _, e := range doc.Stack.Enrollments {
		if st := doc.Enrollments[e.Name]; e.Source == name && (st == nil || !st.Freed) {
			return true
		}
	}
	return false
}

// goneMembers are the members that left behind the pass's back: those the
// state records or the provider lists that are not live in what the pass
// decides on (adjusted: gone, or terminating), less those it takes away
// itself (leaving). Sorted, each once.
func goneMembers(recorded []state.Instance, listed, adjusted []group.Member, leaving map[instance.ID]bool) []instance.ID {
	live := make(map[instance.ID]bool, len(adjusted))
	for _, m := range adjusted {
		if m.State != instance.StateTerminating {
			live[m.ID] = true
		}
	}
	var out []instance.ID
	for _, in := range recorded {
		if id := instance.ID(in.ID); !live[id] && !leaving[id] {
			out = append(out, id)
		}
	}
	for _, m := range listed {
		if !live[m.ID] && !leaving[m.ID] {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// memberKey is what the load balancers and authorizations of a live member
// depend on.
type memberKey struct {
	state   instance.State
	address string
}

// joinedMembers reports whether listed holds a live member that seen does
// not, or one whose state or address changed, and returns the live members
// of listed to remember.
func joinedMembers(seen map[instance.ID]memberKey, listed []group.Member) (bool, map[instance.ID]memberKey) {
	now := make(map[instance.ID]memberKey, len(listed))
	joined := false
	for _, m := range listed {
		if m.State == instance.StateTerminating {
			continue
		}
		k := memberKey{state: m.State, address: m.Address}
		now[m.ID] = k
		if was, ok := seen[m.ID]; !ok || was != k {
			joined = true
		}
	}
	return joined, now
}
