package group

import (
	"reflect"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/sdk/instance"
)

func policy(d Desired, maxParallel, maxUnavailable int) Desired {
	d.MaxParallel, d.MaxUnavailable = maxParallel, maxUnavailable
	return d
}

func TestNextRollBatch(t *testing.T) {
	fourOld := []Member{mem("a", hash(old)), mem("b", hash(old)), mem("c", hash(old)), mem("d", hash(old))}
	for _, tc := range []struct {
		name     string
		desired  Desired
		members  []Member
		want     []instance.ID
		status   RollStatus
		waitHint string // a substring of status.Wait
	}{
		{name: "nothing out of date", desired: cattle(2), members: []Member{mem("a"), mem("b")},
			want: nil, status: RollStatus{}},
		{name: "defaults replace one at a time", desired: policy(cattle(4), 0, 0), members: fourOld,
			want: ids("a"), status: RollStatus{Outdated: 4}},
		{name: "max_parallel is capped by max_unavailable", desired: policy(cattle(4), 2, 1), members: fourOld,
			want: ids("a"), status: RollStatus{Outdated: 4}},
		{name: "max_unavailable is capped by max_parallel", desired: policy(cattle(4), 2, 3), members: fourOld,
			want: ids("a", "b"), status: RollStatus{Outdated: 4}},
		{name: "unavailable current members use the budget", desired: policy(cattle(4), 3, 3),
			members: []Member{mem("a", hash(old)), mem("b", hash(old)), mem("c", hash(old)), mem("d", health(unhealthyH))},
			want:    ids("a", "b"), status: RollStatus{Outdated: 3, Unavailable: 1}},
		{name: "waits while the group is unavailable", desired: policy(cattle(3), 3, 1),
			members: []Member{mem("a", hash(old)), mem("b", hash(old)), mem("d", health(unhealthyH))},
			want:    nil, status: RollStatus{Outdated: 2, Unavailable: 1}, waitHint: "max_unavailable 1"},
		{name: "waits for replacements still starting", desired: policy(cattle(3), 1, 3),
			members: []Member{mem("a", hash(old)), mem("b", hash(old)), mem("n", state(pending), health(unknownH))},
			want:    nil, status: RollStatus{Outdated: 2, Unavailable: 1}, waitHint: "max_parallel 1"},
		{name: "a replacement of unknown health is still in flight", desired: policy(cattle(3), 1, 3),
			members: []Member{mem("a", hash(old)), mem("b", hash(old)), mem("n", health(unknownH))},
			want:    nil, status: RollStatus{Outdated: 2, Unavailable: 1}, waitHint: "still starting"},
		{name: "out of date members that are down go first and cost no budget", desired: policy(cattle(3), 2, 1),
			members: []Member{mem("a", hash(old)), mem("b", hash(old), health(unhealthyH)), mem("c")},
			want:    ids("b"), status: RollStatus{Outdated: 2, Unavailable: 1}},
		{name: "waits until the group is settled", desired: policy(cattle(3), 5, 5), members: fourOld,
			want: nil, status: RollStatus{Outdated: 3}, waitHint: "not settled"},
		{name: "pets roll too", desired: policy(pets("x", "y"), 1, 1),
			members: []Member{mem("a", lid("x"), hash(old)), mem("b", lid("y"), hash(old))},
			want:    ids("a"), status: RollStatus{Outdated: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := NextRollBatch(tc.desired, tc.members)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("batch = %v, want %v", got, tc.want)
			}
			wait := st.Wait
			st.Wait = ""
			if st != tc.status {
				t.Errorf("status = %+v, want %+v", st, tc.status)
			}
			if (tc.waitHint == "") != (wait == "") || !strings.Contains(wait, tc.waitHint) {
				t.Errorf("status.Wait = %q, want it to mention %q", wait, tc.waitHint)
			}
		})
	}
}

func TestRollSchedule(t *testing.T) {
	fourOld := []Member{mem("a", hash(old)), mem("b", hash(old)), mem("c", hash(old)), mem("d", hash(old))}
	for _, tc := range []struct {
		name    string
		desired Desired
		members []Member
		want    [][]instance.ID
		wait    string
	}{
		{name: "nothing out of date", desired: cattle(2), members: []Member{mem("a"), mem("b")}},
		{name: "no desired hash: nothing out of date", desired: Desired{Size: new(1)}, members: []Member{mem("a", hash(old))}},
		{name: "defaults replace one at a time", desired: policy(cattle(4), 0, 0), members: fourOld,
			want: [][]instance.ID{ids("a"), ids("b"), ids("c"), ids("d")}},
		{name: "two by two", desired: policy(cattle(4), 2, 2), members: fourOld,
			want: [][]instance.ID{ids("a", "b"), ids("c", "d")}},
		{name: "max_unavailable caps max_parallel", desired: policy(cattle(4), 2, 1), members: fourOld,
			want: [][]instance.ID{ids("a"), ids("b"), ids("c"), ids("d")}},
		{name: "an unhealthy current member uses the budget all along", desired: policy(cattle(4), 3, 3),
			members: []Member{mem("a", hash(old)), mem("b", hash(old)), mem("c", hash(old)), mem("d", health(unhealthyH))},
			want:    [][]instance.ID{ids("a", "b"), ids("c")}},
		{name: "out of date members that are down go first and free the budget", desired: policy(cattle(3), 2, 1),
			members: []Member{mem("a", hash(old)), mem("b", hash(old), health(unhealthyH)), mem("c")},
			want:    [][]instance.ID{ids("b"), ids("a")}},
		{name: "stops when the current members that are down exhaust the budget", desired: policy(cattle(4), 2, 1),
			members: []Member{mem("a", hash(old)), mem("b", hash(old), health(unhealthyH)), mem("c", health(unhealthyH)), mem("d", health(unhealthyH))},
			want:    [][]instance.ID{ids("b")}, wait: "members unavailable: 2 (max_unavailable 1)"},
		{name: "waits while the group is unavailable", desired: policy(cattle(3), 3, 1),
			members: []Member{mem("a", hash(old)), mem("b", hash(old)), mem("d", health(unhealthyH))},
			wait:    "members unavailable: 1 (max_unavailable 1)"},
		{name: "waits for replacements still starting", desired: policy(cattle(3), 1, 3),
			members: []Member{mem("a", hash(old)), mem("b", hash(old)), mem("n", state(pending), health(unknownH))},
			wait:    "replacements still starting: 1 (max_parallel 1)"},
		{name: "terminating members and repeated entries do not count", desired: policy(cattle(2), 2, 2),
			members: []Member{mem("b", hash(old)), mem("a", hash(old)), mem("b", hash(old)), mem("z", hash(old), state(terminating), health(unhealthyH))},
			want:    [][]instance.ID{ids("a", "b")}},
		{name: "pets roll in the order of their logical IDs", desired: policy(pets("y", "x"), 1, 1),
			members: []Member{mem("a", lid("x"), hash(old)), mem("b", lid("y"), hash(old))},
			want:    [][]instance.ID{ids("b"), ids("a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, wait := RollSchedule(tc.desired, tc.members)
			if !reflect.DeepEqual(got, tc.want) || wait != tc.wait {
				t.Errorf("RollSchedule = %v, %q; want %v, %q", got, wait, tc.want, tc.wait)
			}
		})
	}
}
