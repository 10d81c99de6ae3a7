package group

import (
	"reflect"
	"testing"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

const (
	cur = "h-current"
	old = "h-old"

	pending     = instance.StatePending
	running     = instance.StateRunning
	terminating = instance.StateTerminating

	healthyH   = flavor.HealthHealthy
	unhealthyH = flavor.HealthUnhealthy
	unknownH   = flavor.HealthUnknown
)

// mem is a running, healthy, current cattle member unless changed by opts.
func mem(id string, opts ...func(*Member)) Member {
	m := Member{ID: instance.ID(id), ConfigHash: cur, State: running, Health: healthyH}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func lid(l string) func(*Member)           { return func(m *Member) { m.LogicalID = l } }
func state(s instance.State) func(*Member) { return func(m *Member) { m.State = s } }
func health(h flavor.Health) func(*Member) { return func(m *Member) { m.Health = h } }
func hash(h string) func(*Member)          { return func(m *Member) { m.ConfigHash = h } }
func cattle(n int) Desired                 { return Desired{Size: &n, ConfigHash: cur} }
func pets(ids ...string) Desired           { return Desired{LogicalIDs: ids, ConfigHash: cur} }
func creates(n int) []Create               { return make([]Create, n) }
func destroys(r instance.DestroyReason, ids ...string) []Destroy {
	out := make([]Destroy, len(ids))
	for i, id := range ids {
		out[i] = Destroy{ID: instance.ID(id), Reason: r}
	}
	return out
}
func ids(s ...string) []instance.ID {
	out := make([]instance.ID, len(s))
	for i, v := range s {
		out[i] = instance.ID(v)
	}
	return out
}

func replacing(d Desired) Desired { d.ReplaceUnhealthy = true; return d }

func TestDecideCattle(t *testing.T) {
	neg := -2
	for _, tc := range []struct {
		name    string
		desired Desired
		members []Member
		want    Decision
	}{
		{"empty group grows to size", cattle(3), nil,
			Decision{Create: creates(3)}},
		{"size zero with no members is converged", cattle(0), nil,
			Decision{}},
		{"size zero destroys every member", cattle(0), []Member{mem("b"), mem("a")},
			Decision{Destroy: destroys(ReasonScaleDown, "a", "b")}},
		{"negative size is zero", Desired{Size: &neg}, []Member{mem("a")},
			Decision{Destroy: destroys(ReasonScaleDown, "a")}},
		{"at size is converged", cattle(2), []Member{mem("a"), mem("b")},
			Decision{}},
		{"pending members count toward size", cattle(3), []Member{mem("a"), mem("b"), mem("c", state(pending), health(unknownH))},
			Decision{}},
		{"terminating members do not count", cattle(3), []Member{mem("a"), mem("b"), mem("c", state(terminating))},
			Decision{Create: creates(1)}},
		{"a member listed twice counts once", cattle(2), []Member{mem("a"), mem("a")},
			Decision{Create: creates(1)}},
		{"scale down takes pending, unhealthy, out of date, unknown health, then healthy current",
			cattle(1), []Member{
				mem("a"),
				mem("b", hash(old)),
				mem("c", health(unhealthyH)),
				mem("d", state(pending), health(unknownH)),
				mem("e", health(unknownH)),
			},
			Decision{Destroy: []Destroy{
				{ID: "d", Reason: ReasonScaleDown},
				{ID: "c", Reason: ReasonScaleDown},
				{ID: "b", Reason: ReasonScaleDown},
				{ID: "e", Reason: ReasonScaleDown},
			}}},
		{"partial scale down keeps the better members and rolls the out of date kept",
			cattle(3), []Member{
				mem("a"),
				mem("b", hash(old)),
				mem("c", health(unhealthyH)),
				mem("d", state(pending), health(unknownH)),
				mem("e", health(unknownH)),
			},
			Decision{Destroy: destroys(ReasonScaleDown, "d", "c"), Roll: ids("b")}},
		// A roll interrupted between the create and the destroy needs no
		// memory: the group is over its size, and the scale-down takes the
		// pending replacement, or once it runs the out-of-date member.
		{"an interrupted roll: the pending replacement goes first", cattle(1),
			[]Member{mem("a", hash(old)), mem("n", state(pending), health(unknownH))},
			Decision{Destroy: destroys(ReasonScaleDown, "n"), Roll: ids("a")}},
		{"an interrupted roll: once the replacement runs the out of date member goes", cattle(1),
			[]Member{mem("a", hash(old)), mem("n")},
			Decision{Destroy: destroys(ReasonScaleDown, "a")}},
		{"ties are broken by ID", cattle(1), []Member{mem("c"), mem("a"), mem("b")},
			Decision{Destroy: destroys(ReasonScaleDown, "a", "b")}},
		{"out of date members are rolled, not destroyed", cattle(3), []Member{mem("c", hash(old)), mem("a"), mem("b", hash(""))},
			Decision{Roll: ids("b", "c")}},
		{"no desired hash judges nothing out of date", Desired{Size: new(1)}, []Member{mem("a", hash(old))},
			Decision{}},
		{"unhealthy members stay without replace_unhealthy", cattle(2), []Member{mem("a"), mem("b", health(unhealthyH))},
			Decision{}},
		{"replace_unhealthy destroys and recreates", replacing(cattle(2)), []Member{mem("a"), mem("b", health(unhealthyH), hash(old))},
			Decision{Create: creates(1), Destroy: destroys(ReasonUnhealthy, "b")}},
		{"replace_unhealthy leaves pending members alone", replacing(cattle(2)), []Member{mem("a"), mem("b", state(pending), health(unhealthyH))},
			Decision{}},
		{"replace_unhealthy after scale down", replacing(cattle(2)), []Member{mem("a"), mem("b", health(unhealthyH)), mem("c", health(unhealthyH)), mem("d", state(pending))},
			Decision{Create: creates(1), Destroy: []Destroy{{ID: "d", Reason: ReasonScaleDown}, {ID: "b", Reason: ReasonScaleDown}, {ID: "c", Reason: ReasonUnhealthy}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.desired, tc.members)
			if !reflect.DeepEqual(normalize(got), normalize(tc.want)) {
				t.Errorf("Decide =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

func TestDecidePets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		desired Desired
		members []Member
		want    Decision
	}{
		{"every pet is created, in declared order", pets("10.0.0.2", "10.0.0.1"), nil,
			Decision{Create: []Create{{LogicalID: "10.0.0.2"}, {LogicalID: "10.0.0.1"}}}},
		{"one live member per pet is converged", pets("x", "y"), []Member{mem("a", lid("x")), mem("b", lid("y"))},
			Decision{}},
		{"a missing pet is created", pets("x", "y"), []Member{mem("a", lid("x"))},
			Decision{Create: []Create{{LogicalID: "y"}}}},
		{"a pending pet counts", pets("x"), []Member{mem("a", lid("x"), state(pending), health(unknownH))},
			Decision{}},
		{"a terminating pet is replaced", pets("x"), []Member{mem("a", lid("x"), state(terminating))},
			Decision{Create: []Create{{LogicalID: "x"}}}},
		{"duplicate keeps the healthy one", pets("x"), []Member{mem("a", lid("x"), health(unhealthyH)), mem("b", lid("x"))},
			Decision{Destroy: destroys(ReasonDuplicate, "a")}},
		{"duplicate keeps the current one", pets("x"), []Member{mem("a", lid("x"), hash(old)), mem("b", lid("x"))},
			Decision{Destroy: destroys(ReasonDuplicate, "a")}},
		{"duplicate keeps the running one", pets("x"), []Member{mem("a", lid("x"), state(pending), health(unknownH)), mem("b", lid("x"), health(unknownH))},
			Decision{Destroy: destroys(ReasonDuplicate, "a")}},
		{"duplicate of equal rank keeps the lowest ID", pets("x"), []Member{mem("c", lid("x")), mem("b", lid("x")), mem("d", lid("x"))},
			Decision{Destroy: destroys(ReasonDuplicate, "c", "d")}},
		{"unknown and empty logical IDs are destroyed", pets("x"), []Member{mem("a", lid("x")), mem("b", lid("zz")), mem("c")},
			Decision{Destroy: destroys(ReasonUnknownLogicalID, "b", "c")}},
		{"no logical IDs destroys every member", pets(), []Member{mem("a", lid("x"))},
			Decision{Destroy: destroys(ReasonUnknownLogicalID, "a")}},
		{"a logical ID declared twice is one pet", pets("x", "x", ""), nil,
			Decision{Create: []Create{{LogicalID: "x"}}}},
		{"an out of date pet is rolled", pets("x", "y"), []Member{mem("a", lid("x"), hash(old)), mem("b", lid("y"))},
			Decision{Roll: ids("a")}},
		{"replace_unhealthy recreates the pet", replacing(pets("x")), []Member{mem("a", lid("x"), health(unhealthyH))},
			Decision{Create: []Create{{LogicalID: "x"}}, Destroy: destroys(ReasonUnhealthy, "a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.desired, tc.members)
			if !reflect.DeepEqual(normalize(got), normalize(tc.want)) {
				t.Errorf("Decide =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

func TestDecisionPredicates(t *testing.T) {
	for _, tc := range []struct {
		d              Decision
		settled, empty bool
	}{
		{Decision{}, true, true},
		{Decision{Roll: ids("a")}, true, false},
		{Decision{Create: creates(1)}, false, false},
		{Decision{Destroy: destroys(ReasonScaleDown, "a")}, false, false},
	} {
		if tc.d.Settled() != tc.settled || tc.d.Empty() != tc.empty {
			t.Errorf("%+v: Settled=%v Empty=%v, want %v %v", tc.d, tc.d.Settled(), tc.d.Empty(), tc.settled, tc.empty)
		}
	}
}

// normalize makes empty and nil slices compare equal.
func normalize(d Decision) Decision {
	if len(d.Create) == 0 {
		d.Create = nil
	}
	if len(d.Destroy) == 0 {
		d.Destroy = nil
	}
	if len(d.Roll) == 0 {
		d.Roll = nil
	}
	return d
}

func TestLive(t *testing.T) {
	in := []Member{mem("c"), mem("a", state(terminating)), mem("b", state(pending)), mem("c")}
	got := Live(in)
	if want := []Member{mem("b", state(pending)), mem("c")}; !reflect.DeepEqual(got, want) {
		t.Errorf("Live = %+v, want %+v", got, want)
	}
	if in[0].ID != "c" || in[1].ID != "a" {
		t.Error("Live reordered its argument")
	}
}
