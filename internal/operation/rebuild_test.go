package operation

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// removeState deletes the state file, its backup and its lock file, as a
// user rebuilding the state from the providers' tags does.
func removeState(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, StateFile+"*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApplyRebuildsTheStateOfUnchangedGroups: with the state removed, the
// groups match their configuration (the providers hold every member), so
// the plan changes nothing, and apply must still record the members it
// observed, cattle and pets alike.
func TestApplyRebuildsTheStateOfUnchangedGroups(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 5, "v1"))
	ctx := ctxT(t)
	r := w.runner(Options{})
	planAndApply(t, ctx, r, PlanMode{})
	want := w.simulated()
	slices.Sort(want)
	if len(want) != 7 {
		t.Fatalf("simulator holds %d instances, want 7", len(want))
	}
	r.Close()

	removeState(t, w.dir)
	r = w.runner(Options{})
	p, res := planAndApply(t, ctx, r, PlanMode{})
	for _, gc := range p.Groups {
		if gc.Action != plan.ActionNoOp {
			t.Errorf("group %q: plan action %q, want %q (the providers hold every member)", gc.Group, gc.Action, plan.ActionNoOp)
		}
	}
	if res.Created != 0 || res.Destroyed != 0 || len(res.Failed) != 0 {
		t.Fatalf("apply with the state removed: %+v; want nothing done", res)
	}
	checkRecorded := func(when string) {
		t.Helper()
		var got []string
		for name, n := range map[string]int{"miners": 5, "db": 2} {
			ids := recordedIDs(groupRecord(t, ctx, r, name))
			if len(ids) != n {
				t.Errorf("%s: the state records %d members of %q, want %d", when, len(ids), name, n)
			}
			got = append(got, ids...)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the state records %v, want the simulator's %v", when, got, want)
		}
		var lids []string
		if pets := groupRecord(t, ctx, r, "db"); pets != nil {
			for _, in := range pets.Instances {
				lids = append(lids, in.LogicalID)
			}
		}
		slices.Sort(lids)
		if !slices.Equal(lids, []string{"10.0.0.1", "10.0.0.2"}) {
			t.Errorf("%s: the pets are recorded with logical IDs %v", when, lids)
		}
	}
	checkRecorded("after apply")

	// A further apply finds the record in step and writes nothing.
	doc, err := r.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serial := doc.Serial
	p, _ = planAndApply(t, ctx, r, PlanMode{})
	if p.HasChanges() {
		t.Fatalf("plan after the rebuild: %+v; want no changes", p.Groups)
	}
	checkRecorded("after a second apply")
	if doc, err = r.State(ctx); err != nil || doc.Serial != serial {
		t.Errorf("a second no-op apply wrote the state (serial %d → %d, %v)", serial, doc.Serial, err)
	}
}

func TestRecordMatches(t *testing.T) {
	cattle := group.Desired{Size: ptr(2), ConfigHash: "h1"}
	pets := group.Desired{LogicalIDs: []string{"a", "b"}, ConfigHash: "h1"}
	in := func(id, lid, hash, st string) state.Instance {
		return state.Instance{ID: id, LogicalID: lid, ConfigHash: hash, State: st}
	}
	running := string(instance.StateRunning)
	tests := []struct {
		name   string
		d      group.Desired
		before int
		rec    *state.GroupStatus
		want   bool
	}{
		{"no record, nothing observed", cattle, 0, nil, true},
		{"no record, members observed", cattle, 2, nil, false},
		{"in step", cattle, 2, &state.GroupStatus{Instances: []state.Instance{in("i1", "", "h1", running), in("i2", "", "h1", running)}}, true},
		{"one missing", cattle, 2, &state.GroupStatus{Instances: []state.Instance{in("i1", "", "h1", running)}}, false},
		{"terminating is not live", cattle, 2, &state.GroupStatus{Instances: []state.Instance{in("i1", "", "h1", running), in("i2", "", "h1", string(instance.StateTerminating))}}, false},
		{"old hash", cattle, 2, &state.GroupStatus{Instances: []state.Instance{in("i1", "", "h0", running), in("i2", "", "h1", running)}}, false},
		{"unknown desired hash", group.Desired{Size: ptr(1)}, 1, &state.GroupStatus{Instances: []state.Instance{in("i1", "", "h0", running)}}, true},
		{"pets in step", pets, 2, &state.GroupStatus{Instances: []state.Instance{in("i1", "a", "h1", running), in("i2", "b", "h1", running)}}, true},
		{"pet twice", pets, 2, &state.GroupStatus{Instances: []state.Instance{in("i1", "a", "h1", running), in("i2", "a", "h1", running)}}, false},
		{"unknown pet", pets, 2, &state.GroupStatus{Instances: []state.Instance{in("i1", "a", "h1", running), in("i2", "c", "h1", running)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gc := plan.GroupChange{Group: "g", Action: plan.ActionNoOp, Before: tt.before, After: tt.before, ConfigHash: tt.d.ConfigHash}
			if got := recordMatches(tt.rec, gc, tt.d); got != tt.want {
				t.Errorf("recordMatches = %v, want %v", got, tt.want)
			}
		})
	}
}

func ptr(n int) *int { return &n }
