package watch

import (
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

func instanceOf(m group.Member) state.Instance {
	return state.Instance{ID: string(m.ID), LogicalID: m.LogicalID, ConfigHash: m.ConfigHash, State: string(m.State), Address: m.Address}
}

// recordOf is what the state records of members: the live ones, by ID.
func recordOf(members []group.Member) []state.Instance {
	out := make([]state.Instance, 0, len(members))
	for _, m := range group.Live(members) {
		out = append(out, instanceOf(m))
	}
	return out
}

// sameMembers reports whether two records hold the same members (IDs,
// logical IDs, configuration hashes). A member's state or address changing
// alone is not worth a state write: every write moves the serial, and a
// plan made just before it would then be refused as stale.
func sameMembers(a, b []state.Instance) bool {
	return slices.EqualFunc(a, b, func(x, y state.Instance) bool {
		return x.ID == y.ID && x.LogicalID == y.LogicalID && x.ConfigHash == y.ConfigHash
	})
}

// applyActions is live (sorted by ID) after a pass destroyed and created
// members.
func applyActions(live []state.Instance, created []group.Member, destroyed []instance.ID) []state.Instance {
	if len(created) == 0 && len(destroyed) == 0 {
		return live
	}
	gone := make(map[string]bool, len(destroyed))
	for _, id := range destroyed {
		gone[string(id)] = true
	}
	out := make([]state.Instance, 0, len(live)+len(created))
	for _, in := range live {
		if !gone[in.ID] {
			out = append(out, in)
		}
	}
	for _, m := range created {
		out = append(out, instanceOf(m))
	}
	return slices.CompactFunc(sortedInstances(out), func(a, b state.Instance) bool { return a.ID == b.ID })
}

// listedOnly keeps the members of adjusted that the provider listed in
// observed (Adjust appends the creates it still expects).
func listedOnly(adjusted, observed []group.Member) []group.Member {
	listed := make(map[instance.ID]bool, len(observed))
	for _, m := range observed {
		listed[m.ID] = true
	}
	out := make([]group.Member, 0, len(observed))
	for _, m := range adjusted {
		if listed[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// markDestroyed is members with those a pass destroyed terminating, for
// the status.
func markDestroyed(members []group.Member, destroyed []instance.ID) []group.Member {
	if len(destroyed) == 0 {
		return members
	}
	gone := make(map[instance.ID]bool, len(destroyed))
	for _, id := range destroyed {
		gone[id] = true
	}
	out := make([]group.Member, len(members))
	for i, m := range members {
		if gone[m.ID] {
			m.State = instance.StateTerminating
		}
		out[i] = m
	}
	return out
}

// isRolling reports whether r is a rolling update's replacement (not the
// heal of an unhealthy member).
func isRolling(r replacement) bool { return r.Reason == group.ReasonRollingUpdate }

// outdatedInFlight counts the out-of-date members of the rolling update's
// cattle replacements in rs: still there, on their way out.
func outdatedInFlight(rs []replacement) int {
	n := 0
	for _, r := range rs {
		if r.Old != "" && isRolling(r) {
			n++
		}
	}
	return n
}

// rollingInFlight counts the rolling update's replacements in rs.
func rollingInFlight(rs []replacement) int {
	n := 0
	for _, r := range rs {
		if isRolling(r) {
			n++
		}
	}
	return n
}

// unfinished are the replacements of finished whose old member is not
// among destroyed.
func unfinished(finished []replacement, destroyed []instance.ID) []replacement {
	var out []replacement
	for _, r := range finished {
		if !slices.Contains(destroyed, r.Old) {
			out = append(out, r)
		}
	}
	return out
}

// providerKeys are the provider keys a group uses, each once.
func providerKeys(g *config.Group) []string {
	keys := []string{g.Instance.Provider}
	for _, f := range g.Flavors {
		if !slices.Contains(keys, f.Provider) {
			keys = append(keys, f.Provider)
		}
	}
	return keys
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
