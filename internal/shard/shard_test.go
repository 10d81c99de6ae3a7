package shard

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// loads counts the objects of each member (members holding none included).
func loads(a map[string]string, members []string) map[string]int {
	l := map[string]int{}
	for _, m := range members {
		l[m] = 0
	}
	for _, m := range a {
		l[m]++
	}
	return l
}

func spread(a map[string]string, members []string) int {
	l := slices.Collect(maps.Values(loads(a, members)))
	if len(l) == 0 {
		return 0
	}
	return slices.Max(l) - slices.Min(l)
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestAssignTable(t *testing.T) {
	objs := names("g", 9)
	tests := []struct {
		name     string
		objects  []string
		members  []string
		current  map[string]string
		check    func(t *testing.T, got map[string]string)
		wantLens map[string]int // exact loads, when known
	}{
		{name: "no members", objects: objs, members: nil, wantLens: map[string]int{}},
		{name: "no objects", objects: nil, members: []string{"a", "b"}, wantLens: map[string]int{"a": 0, "b": 0}},
		{name: "one member takes all", objects: objs, members: []string{"a"}, wantLens: map[string]int{"a": 9}},
		{name: "three share nine", objects: objs, members: []string{"a", "b", "c"}, wantLens: map[string]int{"a": 3, "b": 3, "c": 3}},
		{
			name: "sticky when balanced", objects: objs, members: []string{"a", "b", "c"},
			current: map[string]string{"g0": "c", "g1": "c", "g2": "c", "g3": "a", "g4": "a", "g5": "a", "g6": "b", "g7": "b", "g8": "b"},
			check: func(t *testing.T, got map[string]string) {
				want := map[string]string{"g0": "c", "g1": "c", "g2": "c", "g3": "a", "g4": "a", "g5": "a", "g6": "b", "g7": "b", "g8": "b"}
				if !maps.Equal(got, want) {
					t.Errorf("moved a balanced assignment: %v", got)
				}
			},
		},
		{
			name: "one owner of all sheds to quota", objects: objs, members: []string{"a", "b", "c"},
			current:  map[string]string{"g0": "a", "g1": "a", "g2": "a", "g3": "a", "g4": "a", "g5": "a", "g6": "a", "g7": "a", "g8": "a"},
			wantLens: map[string]int{"a": 3, "b": 3, "c": 3},
		},
		{
			name: "ignores non-members and unknown objects", objects: []string{"x", "y"}, members: []string{"a", "b"},
			current:  map[string]string{"x": "gone", "y": "a", "z": "b"},
			wantLens: map[string]int{"a": 1, "b": 1},
			check: func(t *testing.T, got map[string]string) {
				if got["y"] != "a" {
					t.Errorf("y moved off its live owner: %v", got)
				}
				if _, ok := got["z"]; ok {
					t.Errorf("unknown object assigned: %v", got)
				}
			},
		},
		{
			name: "ceil quota goes to who holds most", objects: names("g", 4), members: []string{"a", "b", "c"},
			current:  map[string]string{"g0": "c", "g1": "c", "g2": "b"},
			wantLens: map[string]int{"a": 1, "b": 1, "c": 2},
		},
		{name: "duplicates count once", objects: []string{"x", "x", "y"}, members: []string{"a", "a"}, wantLens: map[string]int{"a": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Assign(tt.objects, tt.members, tt.current)
			if tt.wantLens != nil {
				if l := loads(got, slices.Collect(maps.Keys(tt.wantLens))); !maps.Equal(l, tt.wantLens) {
					t.Errorf("loads %v, want %v (%v)", l, tt.wantLens, got)
				}
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func TestMoves(t *testing.T) {
	before := map[string]string{"x": "a", "y": "b", "z": "a"}
	after := map[string]string{"x": "b", "y": "b", "w": "a"}
	if got := Moves(before, after); got != 1 {
		t.Errorf("Moves = %d, want 1 (x; z removed and w added are not moves)", got)
	}
	if got := Moves(nil, after); got != 0 {
		t.Errorf("Moves from nothing = %d", got)
	}
}

// TestScoreSpreads: without a current owner, rendezvous spreads objects
// evenly and each object's first choice is balanced enough that pure
// rendezvous would already be near the quotas (a poor hash would skew).
func TestScoreSpreads(t *testing.T) {
	members := names("w", 4)
	first := map[string]int{}
	for _, o := range names("group-", 4000) {
		best, bs := "", uint64(0)
		for _, m := range members {
			if s := score(o, m); best == "" || s > bs {
				best, bs = m, s
			}
		}
		first[best]++
	}
	for m, n := range first {
		if n < 850 || n > 1150 {
			t.Errorf("member %s is the first choice of %d of 4000 objects; want about 1000", m, n)
		}
	}
}

// gen draws objects, members, and a current assignment that may name
// non-members and unknown objects.
type input struct {
	objects, members []string
	current          map[string]string
}

func drawInput(t *rapid.T) input {
	objects := rapid.SliceOfNDistinct(rapid.StringMatching(`o[0-9]{1,3}`), 0, 40, rapid.ID[string]).Draw(t, "objects")
	members := rapid.SliceOfNDistinct(rapid.StringMatching(`m[0-9]{1,2}`), 0, 8, rapid.ID[string]).Draw(t, "members")
	owners := append(slices.Clone(members), "gone")
	current := map[string]string{}
	for _, o := range append(slices.Clone(objects), "unknown") {
		if rapid.Bool().Draw(t, "owned "+o) {
			current[o] = rapid.SampledFrom(owners).Draw(t, "owner "+o)
		}
	}
	return input{objects, members, current}
}

func shuffled[T any](t *rapid.T, s []T, label string) []T {
	out := slices.Clone(s)
	for i := len(out) - 1; i > 0; i-- {
		j := rapid.IntRange(0, i).Draw(t, label)
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func TestAssignProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := drawInput(t)
		got := Assign(in.objects, in.members, in.current)

		// Deterministic, whatever the order of the inputs.
		again := Assign(shuffled(t, in.objects, "perm objects"), shuffled(t, in.members, "perm members"), maps.Clone(in.current))
		if !maps.Equal(got, again) {
			t.Fatalf("order of inputs changed the result:\n%v\n%v", got, again)
		}
		if len(in.members) == 0 {
			if len(got) != 0 {
				t.Fatalf("no members but %v", got)
			}
			return
		}
		// Every object assigned, to a member; nothing else assigned.
		if len(got) != len(in.objects) {
			t.Fatalf("%d objects assigned of %d", len(got), len(in.objects))
		}
		for _, o := range in.objects {
			if !slices.Contains(in.members, got[o]) {
				t.Fatalf("%s assigned to %q, not a member", o, got[o])
			}
		}
		if s := spread(got, in.members); s > 1 {
			t.Fatalf("loads %v differ by %d", loads(got, in.members), s)
		}
		// An object stays with its live owner unless that owner holds
		// more than its quota (at least floor(n/m)): only that excess moves.
		live := filter(in.current, in.objects, in.members)
		excess := 0
		for _, l := range loads(live, in.members) {
			excess += max(0, l-len(in.objects)/len(in.members))
		}
		if mv := Moves(live, got); mv > excess {
			t.Fatalf("%d moves; the owners held %d above floor(n/m)", mv, excess)
		}
		// Idempotent.
		if again := Assign(in.objects, in.members, got); !maps.Equal(got, again) {
			t.Fatalf("not idempotent:\n%v\n%v", got, again)
		}
	})
}

// filter is current restricted to known objects and live members.
func filter(current map[string]string, objects, members []string) map[string]string {
	out := map[string]string{}
	for o, m := range current {
		if slices.Contains(objects, o) && slices.Contains(members, m) {
			out[o] = m
		}
	}
	return out
}

// balanced draws objects, members and an arbitrary balanced assignment
// (loads within one; any member may hold the extra ones), as a history of
// joins and leaves may leave it.
func balanced(t *rapid.T) input {
	in := drawInput(t)
	if len(in.members) == 0 {
		in.members = []string{"m0"}
	}
	objects := shuffled(t, in.objects, "deal objects")
	members := shuffled(t, in.members, "deal members")
	current := map[string]string{}
	for i, o := range objects {
		current[o] = members[i%len(members)]
	}
	return input{in.objects, in.members, current}
}

func TestLeaveMovesExactlyItsShare(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := balanced(t)
		leaving := rapid.SampledFrom(in.members).Draw(t, "leaving")
		rest := slices.DeleteFunc(slices.Clone(in.members), func(m string) bool { return m == leaving })
		after := Assign(in.objects, rest, in.current)
		for _, o := range in.objects {
			was, now := in.current[o], after[o]
			if was != leaving && was != now && len(rest) > 0 {
				t.Fatalf("%s moved %s -> %s though %s left", o, was, now, leaving)
			}
		}
		if len(rest) > 0 && Moves(in.current, after) != loads(in.current, in.members)[leaving] {
			t.Fatalf("%d moves, the leaver held %d", Moves(in.current, after), loads(in.current, in.members)[leaving])
		}
	})
}

func TestJoinMovesBoundedShare(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := balanced(t)
		joining := "new" + rapid.StringMatching(`[a-z]{1,3}`).Draw(t, "joining")
		after := Assign(in.objects, append(slices.Clone(in.members), joining), in.current)
		n, m := len(in.objects), len(in.members)
		bound := (n + m) / (m + 1) // ceil(n/(m+1))
		if mv := Moves(in.current, after); mv > bound {
			t.Fatalf("%d moves when one joined %d members with %d objects; bound %d", mv, m, n, bound)
		}
		for _, o := range in.objects {
			if was, now := in.current[o], after[o]; was != now && now != joining {
				t.Fatalf("%s moved %s -> %s, not to the joining member", o, was, now)
			}
		}
	})
}

func TestObjectChangeMovesAtMostOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := balanced(t)
		objects := slices.Clone(in.objects)
		if len(objects) > 0 && rapid.Bool().Draw(t, "remove") {
			i := rapid.IntRange(0, len(objects)-1).Draw(t, "which")
			objects = slices.Delete(objects, i, i+1)
		} else {
			objects = append(objects, "added")
		}
		after := Assign(objects, in.members, in.current)
		if mv := Moves(in.current, after); mv > 1 {
			t.Fatalf("%d moves after one object was added or removed", mv)
		}
	})
}
