package execute

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// onDisk reads the fixture's state file as another process would.
func (f *fixture) onDisk() *state.Document {
	doc, err := state.NewLocal(f.store.Path()).Read(context.Background())
	if err != nil {
		f.t.Error(err)
		return state.NewDocument()
	}
	return doc
}

// due makes the recorder's next member note write (its spacing, at least
// ten times the last write's duration, is otherwise up to the clock).
func due(rec *StateRecorder) {
	rec.mu.Lock()
	rec.nextWrite = time.Time{}
	rec.mu.Unlock()
}

// The intent is written before the first provider call; members made are
// written in batches: before their interval is up only by the final
// flush, once it is up by the next note. Writes are counted by the
// state's serial.
func TestStateRecorderWritesIntentAtOnceAndMembersInBatches(t *testing.T) {
	const size = 6
	for _, tc := range []struct {
		name   string
		due    bool // every note is due to write
		writes uint64
	}{
		{name: "batched", writes: 2}, // the intent, the flush
		{name: "due", due: true, writes: 1 + size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, stackOf(size, "v1", "", ""), nil)
			p := f.plan(plan.Scope{})
			seen := make(chan *state.Document, 100)
			var rec *StateRecorder
			f.probe.setHooks(func(pr *probe) {
				pr.onCall = func(_, op string, _ []instance.ID) {
					if op == "provision" {
						seen <- f.onDisk()
						if tc.due {
							due(rec)
						}
					}
				}
			})
			res := f.runRecorded(ctxT(t), p, Options{Parallelism: 1}, func(r *StateRecorder) { rec = r })
			if res.Err != nil || len(res.Failed) > 0 {
				t.Fatalf("run: %v %v", res.Err, res.Errors())
			}
			checkCounts(t, p, res)
			close(seen)
			calls := 0
			for doc := range seen {
				if doc.Serial < 1 || doc.Stack == nil || doc.Stack.Group("web") == nil {
					t.Errorf("a provision began before the intent was on disk (serial %d)", doc.Serial)
				}
				if !tc.due && doc.Groups["web"] != nil && len(doc.Groups["web"].Instances) > 0 {
					t.Errorf("members written before the flush: %v", doc.Groups["web"].Instances)
				}
				if tc.due && doc.Serial != uint64(1+calls) {
					t.Errorf("provision %d began at serial %d, want each member written at once", calls+1, doc.Serial)
				}
				calls++
			}
			if calls != size {
				t.Errorf("%d provisions", calls)
			}
			if f.doc.Serial != tc.writes {
				t.Errorf("%d writes, want %d", f.doc.Serial, tc.writes)
			}
			var recorded []instance.ID
			for _, in := range f.doc.Groups["web"].Instances {
				recorded = append(recorded, instance.ID(in.ID))
			}
			var live []instance.ID
			for id := range f.live("simulator") {
				live = append(live, id)
			}
			slices.Sort(live)
			if !slices.Equal(recorded, live) {
				t.Errorf("state records %v, live %v", recorded, live)
			}
		})
	}
}

// A record step after member notes (a group removed: marked, its members
// destroyed, then forgotten) writes at once, and the destroys noted before
// it go in the same write.
func TestStateRecorderRecordStepAfterDestroys(t *testing.T) {
	f := newFixture(t, stackOf(3, "v1", "", ""), nil)
	f.apply()
	before := f.doc.Serial
	f.setStack(stackWith("provider \"simulator\" {}\nprovider \"vanilla\" {}\n", ""))
	p := f.plan(plan.Scope{})
	records := stepsOf(p, plan.StepRecord)
	if len(records) != 2 || len(stepsOf(p, plan.StepDestroy)) != 3 {
		t.Fatalf("plan:\n%v", p.Steps)
	}
	res := f.run(ctxT(t), p, Options{})
	if res.Err != nil || len(res.Failed) > 0 {
		t.Fatalf("run: %v %v", res.Err, res.Errors())
	}
	checkCounts(t, p, res)
	if got := f.doc.Serial - before; got != 2 {
		t.Errorf("%d writes, want 2 (the intent, the forget)", got)
	}
	if _, kept := f.doc.Groups["web"]; kept || f.doc.Stack.Group("web") != nil {
		t.Errorf("group web still recorded: %+v", f.doc.Groups)
	}
	if len(f.live("simulator")) != 0 {
		t.Errorf("left %v", f.live("simulator"))
	}
}

// A member write that fails stops the run: the provision whose note failed
// is done (its instance exists), nothing starts after it, and the run's
// error is the write's. The state's directory is replaced by a regular
// file once the intent is written, which fails the write even as root.
func TestMemberWriteFailureStopsTheRun(t *testing.T) {
	f := newFixture(t, stackOf(4, "v1", "", ""), nil)
	p := f.plan(plan.Scope{})
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	store := state.NewLocal(filepath.Join(dir, "infrakit.state.json"))
	rec := NewStateRecorder(store, state.NewDocument(), p.Desired, time.Hour, nil)
	f.probe.setHooks(func(pr *probe) {
		pr.onCall = func(_, op string, _ []instance.ID) {
			if op != "provision" {
				return
			}
			if err := os.Rename(dir, dir+".moved"); err != nil {
				return // the second provision: nothing to break (it must not happen)
			}
			if err := os.WriteFile(dir, []byte("x"), 0o644); err != nil {
				t.Error(err)
			}
			due(rec)
		}
	})
	res := Run(ctxT(t), p, f, rec, Options{Parallelism: 1, Progress: f.probe.event})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "record state") {
		t.Fatalf("run error %v, want the state write's", res.Err)
	}
	checkCounts(t, p, res)
	if n := len(calls(f.probe.entries(), "provision")); n != 1 {
		t.Errorf("%d provisions began, want 1", n)
	}
	if len(res.Made) != 1 || len(f.live("simulator")) != 1 {
		t.Errorf("made %v, live %v", res.Made, f.live("simulator"))
	}
	if res.Count(StatusDone) != 2 || res.Count(StatusNotRun) != len(p.Steps)-2 {
		t.Errorf("statuses %v", res.Status)
	}
}

// Correcting the recorded members to what was observed is no intent: it
// is not written at once, but with the next write (here the Flush), so a
// heal that finds the record behind costs one write, not two. Any other
// change is written at once.
func TestStateRecorderObservationWaitsForTheNextWrite(t *testing.T) {
	ctx := ctxT(t)
	store := state.NewLocal(filepath.Join(t.TempDir(), "infrakit.state.json"))
	doc := state.NewDocument()
	rec := NewStateRecorder(store, doc, nil, time.Hour, nil)
	members := []state.Instance{{ID: "i-1", State: "running"}}
	if err := rec.Record(ctx, []plan.StateChange{{Kind: plan.SetMembers, Object: "group.web", Members: members}}); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Read(ctx); err != nil {
		t.Fatal(err)
	} else if got.Serial != 0 {
		t.Fatalf("the observed members were written at once (serial %d)", got.Serial)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := store.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Groups["web"]; g == nil || !slices.Equal(g.Instances, members) {
		t.Fatalf("after the flush the state records %+v, want %+v", got.Groups, members)
	}
	serial := got.Serial
	if err := rec.Record(ctx, []plan.StateChange{{Kind: plan.MarkFreed, Object: "group.web"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Read(ctx); err != nil || got.Serial != serial+1 || !got.Groups["web"].Freed {
		t.Fatalf("a mark was not written at once: %+v, %v", got, err)
	}
}
