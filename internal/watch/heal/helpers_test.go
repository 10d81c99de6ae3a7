package heal

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	healthy   = flavor.HealthHealthy
	unhealthy = flavor.HealthUnhealthy
	unknown   = flavor.HealthUnknown
	running   = instance.StateRunning
	pending   = instance.StatePending
	terminate = instance.StateTerminating
)

func cattle(n int) group.Desired { return group.Desired{Size: &n, ReplaceUnhealthy: true} }

func pets(lids ...string) group.Desired {
	return group.Desired{LogicalIDs: lids, ReplaceUnhealthy: true}
}

func mem(id string, h flavor.Health) group.Member {
	return group.Member{ID: instance.ID(id), State: running, Health: h}
}

func pet(id, lid string, h flavor.Health) group.Member {
	m := mem(id, h)
	m.LogicalID = lid
	return m
}

// fleet is n healthy running members i00, i01, ...
func fleet(n int) []group.Member {
	out := make([]group.Member, n)
	for i := range out {
		out[i] = mem(fmt.Sprintf("i%02d", i), healthy)
	}
	return out
}

// without returns ms less the members with the given IDs.
func without(ms []group.Member, ids ...string) []group.Member {
	return slices.DeleteFunc(slices.Clone(ms), func(m group.Member) bool {
		return slices.Contains(ids, string(m.ID))
	})
}

// with returns ms with the members of the given IDs set to health h.
func with(ms []group.Member, h flavor.Health, ids ...string) []group.Member {
	out := slices.Clone(ms)
	for i := range out {
		if slices.Contains(ids, string(out[i].ID)) {
			out[i].Health = h
		}
	}
	return out
}

func ids(ss ...string) []instance.ID {
	out := make([]instance.ID, len(ss))
	for i, s := range ss {
		out[i] = instance.ID(s)
	}
	return out
}

// pass runs Adjust, Decide and Filter as the watch loop does, and returns
// the adjusted observation, the filtered decision and every event.
func pass(tr *Tracker, now time.Time, d group.Desired, observed []group.Member) (Adjusted, group.Decision, []Event) {
	adj := tr.Adjust(now, d, observed)
	dec, evs := tr.Filter(now, group.Decide(d, adj.Members))
	return adj, dec, append(slices.Clone(adj.Events), evs...)
}

func healthOf(ms []group.Member, id string) flavor.Health {
	for _, m := range ms {
		if m.ID == instance.ID(id) {
			return m.Health
		}
	}
	return ""
}

func stateOf(ms []group.Member, id string) instance.State {
	for _, m := range ms {
		if m.ID == instance.ID(id) {
			return m.State
		}
	}
	return ""
}

func destroyed(dec group.Decision, reason instance.DestroyReason) []instance.ID {
	var out []instance.ID
	for _, x := range dec.Destroy {
		if x.Reason == reason {
			out = append(out, x.ID)
		}
	}
	slices.Sort(out)
	return out
}

func kinds(evs []Event) []Kind {
	var out []Kind
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func findEvent(t *testing.T, evs []Event, k Kind) Event {
	t.Helper()
	for _, e := range evs {
		if e.Kind == k {
			return e
		}
	}
	t.Fatalf("no %s event in %v", k, kinds(evs))
	return Event{}
}

func hasEvent(evs []Event, k Kind) bool {
	return slices.ContainsFunc(evs, func(e Event) bool { return e.Kind == k })
}

// act makes a decision as the watch loop does when every call succeeds:
// it creates dec's creates (named prefix0, prefix1, ...), destroys its
// destroys, reports both to Issued and returns the members created.
func act(tr *Tracker, now time.Time, dec group.Decision, prefix string) []group.Member {
	made := created(dec, prefix)
	var gone []instance.ID
	for _, x := range dec.Destroy {
		gone = append(gone, x.ID)
	}
	tr.Issued(now, made, gone)
	return made
}

// created turns a decision's creates into members as a provider would
// return them, named prefix0, prefix1, ...
func created(dec group.Decision, prefix string) []group.Member {
	out := make([]group.Member, len(dec.Create))
	for i, c := range dec.Create {
		out[i] = group.Member{ID: instance.ID(fmt.Sprintf("%s%d", prefix, i)), LogicalID: c.LogicalID, State: pending, Health: unknown}
	}
	return out
}

// asListed returns created members as the provider lists them once running.
func asListed(ms []group.Member, h flavor.Health) []group.Member {
	out := slices.Clone(ms)
	for i := range out {
		out[i].State, out[i].Health = running, h
	}
	return out
}

func configHealth(grace time.Duration, perHour int) config.HealthPolicy {
	return config.HealthPolicy{Grace: config.Duration(grace), ReplaceUnhealthy: true, MaxReplacementsPerHour: perHour}
}
