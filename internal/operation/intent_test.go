package operation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
)

// breakingStore is the runner's own state store (the local file). Once
// armed, the next Read, after reading the file, puts a directory where the
// file was: the store's next Write then fails for real (the local backend
// reads what it replaces, and a directory is no state file). That Read is
// apply's, under the lock, so the first write to fail is the plan's intent.
type breakingStore struct {
	state.Store
	path  string
	armed atomic.Bool
}

func (s *breakingStore) Read(ctx context.Context) (*state.Document, error) {
	doc, err := s.Store.Read(ctx)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		if err := os.Rename(s.path, s.path+".away"); err != nil {
			return nil, err
		}
		if err := os.Mkdir(s.path, 0o755); err != nil {
			return nil, err
		}
	}
	return doc, err
}

// repair puts the state file back.
func (s *breakingStore) repair(t *testing.T) {
	t.Helper()
	if err := os.Remove(s.path); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.path+".away", s.path); err != nil {
		t.Fatal(err)
	}
}

// Intent before action: when the intent cannot be written, apply stops
// before any provider call that acts: no instance is created, no backend
// registered, nothing authorized; the error says the state could not be
// recorded. Once the state can be written, the same plan converges.
func TestFailedIntentWriteStopsBeforeAnyProviderCall(t *testing.T) {
	w := newWorkdir(t, followerStack(2, "c1", false))
	var progress events
	r := w.runner(Options{Progress: progress.add})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	members := w.simulated()
	store := &breakingStore{Store: r.store.Store, path: filepath.Join(w.dir, StateFile)}
	r.store.Store = store // under the lineage check, as the backend is

	w.writeStack(followerStack(4, "c1", false))
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Summary != (plan.Counts{Add: 2, Register: 2, Authorize: 2}) || p.Steps[0].Kind != plan.StepRecord {
		t.Fatalf("plan %+v, first step %v; want 2 added, after the intent", p.Summary, p.Steps[0])
	}
	progress.reset()
	store.armed.Store(true)
	res, err := r.Apply(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "record state") || res == nil {
		t.Fatalf("Apply with the state unwritable: %+v, %v; want a result and an error saying the state could not be recorded", res, err)
	}
	if res.Done != (plan.Counts{}) || res.Skipped+res.NotRun != len(p.Steps)-1 || len(res.Failed) != 1 || res.Failed[0].Step.ID != 1 {
		t.Fatalf("done %+v, %d skipped and %d not run of %d steps, failed %v; want the intent failed and nothing after it",
			res.Done, res.Skipped, res.NotRun, len(p.Steps), res.Failed)
	}
	for _, ev := range progress.snapshot() {
		if ev.Step.Kind != plan.StepRecord && ev.Status != execute.StatusSkipped {
			t.Errorf("step %v ran (%s) after the intent failed", ev.Step, ev.Status)
		}
	}
	if got := w.simulated(); !slices.Equal(got, members) {
		t.Fatalf("instances %v, want %v: no instance may be made before the intent is durable", got, members)
	}
	w.checkFollowers("after the failed intent", members)

	store.repair(t)
	if _, err := r.Apply(ctx, p); err != nil {
		t.Fatalf("the same plan once the state can be written: %v", err)
	}
	if n := len(w.simulated()); n != 4 {
		t.Fatalf("%d instances after the repaired apply, want 4", n)
	}
	w.checkFollowers("after the repaired apply", w.simulated())
}

// savePlan saves and loads p as `plan -out` and `apply FILE` do.
func savePlan(t *testing.T, p *plan.Plan) *plan.Plan {
	t.Helper()
	var buf bytes.Buffer
	if err := p.Save(&buf); err != nil {
		t.Fatal(err)
	}
	saved, err := plan.Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return saved
}

func TestStalePlanIsRefused(t *testing.T) {
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 2, "v1"))
	r := w.runner(Options{})
	ctx := ctxT(t)
	p1, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	saved := savePlan(t, p1)
	planAndApply(t, ctx, r, PlanMode{})
	if res, err := r.Apply(ctx, saved); !errors.Is(err, plan.ErrStalePlan) || res != nil {
		t.Fatalf("Apply of a stale plan: %+v, %v; want ErrStalePlan and no result", res, err)
	}
	if n := len(w.simulated()); n != 4 {
		t.Fatalf("the stale plan acted: %d instances, want 4", n)
	}
}

// A saved plan names the members it acts on; when one vanished behind its
// back (the state unchanged), apply refuses it with ErrWorldMoved and does
// nothing: no instance made, no backend or authorization touched, no state
// written. A new plan then converges.
func TestSavedPlanRefusedWhenTheWorldMoved(t *testing.T) {
	w := newWorkdir(t, followerStack(3, "c1", false))
	r := w.runner(Options{})
	ctx := ctxT(t)
	planAndApply(t, ctx, r, PlanMode{})
	w.writeStack(followerStack(4, "c1", false))
	p, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	saved := savePlan(t, p)
	members := w.simulated()
	w.removeInstance(members[0])
	doc, _ := r.State(ctx)

	res, err := r.Apply(ctx, saved)
	if !errors.Is(err, plan.ErrWorldMoved) || res != nil || !strings.Contains(err.Error(), `group "cattle"`) {
		t.Fatalf("Apply after the world moved: %+v, %v; want ErrWorldMoved naming the group, and no result", res, err)
	}
	if got := w.simulated(); !slices.Equal(got, members[1:]) {
		t.Fatalf("instances %v, want %v: the refused plan acted", got, members[1:])
	}
	w.checkFollowers("after the refusal", members) // the vanished member's too: nothing was touched
	if after, _ := r.State(ctx); after.Serial != doc.Serial {
		t.Fatalf("the refused plan wrote the state (serial %d -> %d)", doc.Serial, after.Serial)
	}

	p, res = planAndApply(t, ctx, r, PlanMode{})
	if p.Summary != (plan.Counts{Add: 2, Register: 2, Deregister: 1, Authorize: 2, Revoke: 1}) || res.Done != p.Summary {
		t.Fatalf("the new plan %+v, done %+v", p.Summary, res.Done)
	}
	w.checkFollowers("after the new plan", w.simulated())
}
