package plan

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

func TestComputeActions(t *testing.T) {
	miners := cattleGroup("miners", 5, "v1")
	cattle12 := cattleGroup("cattle", 12, "v1")
	cattle8 := cattleGroup("cattle", 8, "v1")
	cattle10v2 := cattleGroup("cattle", 10, "v2")
	cattle12v2 := cattleGroup("cattle", 12, "v2")
	zero := cattleGroup("empty", 0, "v1")
	db := petGroup("db", "10.0.0.1", "10.0.0.2")
	h1 := hashOf(t, miners) // every "v1" group has this hash

	for _, tc := range []struct {
		name    string
		desired *config.Stack
		doc     *state.Document
		world   World
		want    []GroupChange
		summary Counts
		changes bool
	}{
		{name: "a new group is created",
			desired: stackOf(miners), doc: state.NewDocument(),
			want:    []GroupChange{{Group: "miners", Action: ActionCreate, After: 5, ConfigHash: h1, Create: make([]group.Create, 5)}},
			summary: Counts{Add: 5}, changes: true},
		{name: "a new group of size zero is created too",
			desired: stackOf(zero), doc: nil,
			want:    []GroupChange{{Group: "empty", Action: ActionCreate, ConfigHash: h1}},
			changes: true},
		{name: "new pets are created by logical ID",
			desired: stackOf(db), doc: nil,
			want: []GroupChange{{Group: "db", Action: ActionCreate, After: 2, ConfigHash: hashOf(t, db),
				Create: []group.Create{{LogicalID: "10.0.0.1"}, {LogicalID: "10.0.0.2"}}}},
			summary: Counts{Add: 2}, changes: true},
		{name: "a group at its size is a no-op",
			desired: stackOf(miners), doc: stored(3, "miners"),
			world: World{Members: map[string][]group.Member{"miners": running("m", 5, h1)}},
			want:  []GroupChange{{Group: "miners", Action: ActionNoOp, Before: 5, After: 5, ConfigHash: h1}}},
		{name: "orphans of a group unknown to the state are adopted, not created",
			desired: stackOf(miners), doc: nil,
			world: World{Members: map[string][]group.Member{"miners": running("m", 5, h1)}},
			want:  []GroupChange{{Group: "miners", Action: ActionNoOp, Before: 5, After: 5, ConfigHash: h1}}},
		{name: "growing is an update",
			desired: stackOf(cattle12), doc: stored(3, "cattle"),
			world:   World{Members: map[string][]group.Member{"cattle": running("c", 10, h1)}},
			want:    []GroupChange{{Group: "cattle", Action: ActionUpdate, Before: 10, After: 12, ConfigHash: h1, Create: make([]group.Create, 2)}},
			summary: Counts{Add: 2}, changes: true},
		{name: "shrinking is an update",
			desired: stackOf(cattle8), doc: stored(3, "cattle"),
			world: World{Members: map[string][]group.Member{"cattle": running("c", 10, h1)}},
			want: []GroupChange{{Group: "cattle", Action: ActionUpdate, Before: 10, After: 8, ConfigHash: h1,
				Destroy: []group.Destroy{{ID: "c-0", Reason: group.ReasonScaleDown}, {ID: "c-1", Reason: group.ReasonScaleDown}}}},
			summary: Counts{Destroy: 2}, changes: true},
		{name: "a config change rolls every member",
			desired: stackOf(cattle10v2), doc: stored(3, "cattle"),
			world: World{Members: map[string][]group.Member{"cattle": running("c", 2, h1)}},
			want: []GroupChange{{Group: "cattle", Action: ActionRoll, Before: 2, After: 10, ConfigHash: hashOf(t, cattle10v2),
				Create: make([]group.Create, 8), Roll: [][]Replacement{{rolled("c-0")}, {rolled("c-1")}}}},
			summary: Counts{Add: 8, Roll: 2}, changes: true},
		{name: "a stopped roll is still shown, marked",
			desired: stackOf(cattle12v2), doc: withStatus(stored(3, "cattle"), "cattle", state.GroupStatus{UpdateStopped: true}),
			world: World{Members: map[string][]group.Member{"cattle": running("c", 12, h1)[:1]}},
			want: []GroupChange{{Group: "cattle", Action: ActionRoll, Before: 1, After: 12, ConfigHash: hashOf(t, cattle12v2),
				Create: make([]group.Create, 11), Roll: [][]Replacement{{rolled("c-0")}}, UpdateStopped: true}},
			summary: Counts{Add: 11, Roll: 1}, changes: true},
		{name: "a group that left the stack is destroyed, terminating members aside",
			desired: stackOf(), doc: stored(3, "old"),
			world: World{Members: map[string][]group.Member{"old": append(running("o", 2, h1),
				group.Member{ID: "o-9", State: instance.StateTerminating})}},
			want: []GroupChange{{Group: "old", Action: ActionDestroy, Before: 2,
				Destroy: []group.Destroy{{ID: "o-0", Reason: instance.ReasonTerminate}, {ID: "o-1", Reason: instance.ReasonTerminate}}}},
			summary: Counts{Destroy: 2}, changes: true},
		{name: "a group that left the stack with no members still leaves the state",
			desired: stackOf(), doc: stored(3, "old"),
			want:    []GroupChange{{Group: "old", Action: ActionDestroy}},
			changes: true},
		{name: "tagged members of a group nobody declares are unknown: no provider to destroy them with",
			desired: stackOf(), doc: nil,
			world: World{Members: map[string][]group.Member{"stray": running("s", 1, "")}},
			want: []GroupChange{{Group: "stray", Action: ActionUnknown,
				Error: `group "stray" has live members but its configuration is not in the state, so its provider is unknown`}}},
		{name: "an observed group with nothing live is not mentioned",
			desired: stackOf(), doc: nil,
			world: World{Members: map[string][]group.Member{"stray": {{ID: "s-0", State: instance.StateTerminating}}}},
			want:  nil},
		{name: "a freed group in the stack is resumed with its decision",
			desired: stackOf(miners), doc: withStatus(stored(3, "miners"), "miners", state.GroupStatus{Freed: true}),
			world:   World{Members: map[string][]group.Member{"miners": running("m", 4, h1)}},
			want:    []GroupChange{{Group: "miners", Action: ActionResume, Before: 4, After: 5, ConfigHash: h1, Create: make([]group.Create, 1)}},
			summary: Counts{Add: 1}, changes: true},
		{name: "a freed group in the stack at its size is still a change (management resumes)",
			desired: stackOf(miners), doc: withStatus(stored(3, "miners"), "miners", state.GroupStatus{Freed: true}),
			world:   World{Members: map[string][]group.Member{"miners": running("m", 5, h1)}},
			want:    []GroupChange{{Group: "miners", Action: ActionResume, Before: 5, After: 5, ConfigHash: h1}},
			changes: true},
		{name: "a freed group out of the stack is left alone",
			desired: stackOf(), doc: withStatus(stored(3), "miners", state.GroupStatus{Freed: true}),
			world: World{Members: map[string][]group.Member{"miners": running("m", 3, h1)}},
			want:  []GroupChange{{Group: "miners", Action: ActionFree, Before: 3, After: 3}}},
		{name: "a group that could not be observed is unknown",
			desired: stackOf(miners), doc: stored(3, "miners", "old"),
			world: World{Failed: map[string]error{"miners": errors.New("provider down"), "old": nil}},
			want: []GroupChange{
				{Group: "miners", Action: ActionUnknown, ConfigHash: h1, Error: "provider down"},
				{Group: "old", Action: ActionUnknown, Error: "observation failed"},
			}},
		{name: "stack groups in stack order, then the others by name",
			desired: stackOf(miners, zero), doc: stored(3, "zz", "aa", "miners", "empty"),
			world: World{Members: map[string][]group.Member{"miners": running("m", 5, h1)}},
			want: []GroupChange{
				{Group: "miners", Action: ActionNoOp, Before: 5, After: 5, ConfigHash: h1},
				{Group: "empty", Action: ActionNoOp, ConfigHash: h1},
				{Group: "aa", Action: ActionDestroy},
				{Group: "zz", Action: ActionDestroy},
			}, changes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compute(tc.desired, tc.doc, tc.world, Scope{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Groups, tc.want) {
				t.Errorf("groups =\n  %+v\nwant\n  %+v", p.Groups, tc.want)
			}
			if p.Summary != tc.summary {
				t.Errorf("summary = %+v, want %+v", p.Summary, tc.summary)
			}
			if p.HasChanges() != tc.changes {
				t.Errorf("HasChanges = %v, want %v", p.HasChanges(), tc.changes)
			}
			if p.FormatVersion != FormatVersion || p.Stack != tc.desired.Name || p.Desired != tc.desired {
				t.Errorf("plan header = %d %q %p", p.FormatVersion, p.Stack, p.Desired)
			}
			if tc.doc != nil && (p.StateLineage != tc.doc.Lineage || p.StateSerial != tc.doc.Serial) {
				t.Errorf("plan state = %s/%d, want %s/%d", p.StateLineage, p.StateSerial, tc.doc.Lineage, tc.doc.Serial)
			}
		})
	}
}

func TestComputeRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		desired *config.Stack
		want    string
	}{
		{"no stack", nil, "no desired stack"},
		{"duplicate group", stackOf(cattleGroup("a", 1, "x"), cattleGroup("a", 2, "x")), `group "a" is declared twice`},
		{"nil group", stackOf(nil), "is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compute(tc.desired, nil, World{}, Scope{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compute error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// Compute does not change its inputs (the caller stores doc afterwards).
func TestComputeLeavesInputsAlone(t *testing.T) {
	doc := withStatus(stored(4, "miners", "old"), "miners", state.GroupStatus{Freed: true})
	before, _ := json.Marshal(doc)
	world := World{Members: map[string][]group.Member{"miners": running("m", 2, "x")}}
	if _, err := Compute(stackOf(cattleGroup("miners", 3, "v")), doc, world, Scope{}); err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(doc)
	if string(before) != string(after) {
		t.Errorf("Compute changed the state document:\n%s\n%s", before, after)
	}
	if len(world.Members["miners"]) != 2 || world.Members["miners"][0].ID != "m-0" {
		t.Error("Compute changed the world")
	}
}

func rolled(id instance.ID) Replacement {
	return Replacement{Old: id, Reason: instance.ReasonRollingUpdate}
}
