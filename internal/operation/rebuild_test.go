package operation

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/infrakit/infrakit/internal/plan"
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
	if res.Done != (plan.Counts{}) || p.Summary != (plan.Counts{}) || len(res.Failed) != 0 {
		t.Fatalf("apply with the state removed: planned %+v, done %+v; want nothing done", p.Summary, res.Done)
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
