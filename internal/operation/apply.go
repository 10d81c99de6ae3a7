package operation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

func (r *Runner) apply(ctx context.Context, p *plan.Plan) (*ApplyResult, error) {
	if p == nil || p.Desired == nil {
		return nil, errors.New("apply: no plan")
	}
	var unknown []string
	for _, gc := range p.Groups {
		if gc.Action == plan.ActionUnknown {
			unknown = append(unknown, fmt.Sprintf("group %q: %s", gc.Group, gc.Error))
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("apply: the plan has groups that could not be observed; fix that and plan again:\n  %s",
			strings.Join(unknown, "\n  "))
	}
	unlock, err := r.lock(ctx, "apply")
	if err != nil {
		return nil, err
	}
	defer unlock()
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.CheckState(doc); err != nil {
		return nil, err
	}
	previous := doc.Stack
	doc.Stack = storedStack(p.Desired, previous, doc)

	// A failed state write stops the work: acting on without recording
	// would lose track of what is created.
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := newRecorder(r.store, doc, r.opts.StateWriteInterval, cancel, r.log)
	if !sameStack(previous, doc.Stack) {
		w.markDirty() // store the stack even when no instance changes (tags, policies)
	}
	res := &ApplyResult{}
	var errs []error
	errs = append(errs, r.teardownControllers(actx, w, p, previous, res)...)
	for _, gc := range applyOrder(p) {
		if actx.Err() != nil {
			break
		}
		cfg, stack := p.Desired.Group(gc.Group), p.Desired.Name
		if cfg == nil && previous != nil {
			cfg, stack = previous.Group(gc.Group), previous.Name
		}
		if err := r.applyGroup(actx, w, gc, cfg, stack, res); err != nil && actx.Err() == nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.syncControllers(actx, w, p, res)...)
	// Record everything, even after an interrupt (the lock is still held,
	// so the write need not wait for anything).
	if err := w.flush(context.WithoutCancel(ctx)); err != nil {
		return res, err
	}
	if err := context.Cause(actx); err != nil && ctx.Err() == nil {
		return res, err // the recorder's write error
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("apply interrupted; the state records everything done: %w", err)
	}
	return res, errors.Join(errs...)
}

// storedStack is the stack apply stores: the desired one, plus the
// configuration of freed groups that left it, so they can still be observed
// (and destroyed) later.
func storedStack(desired, previous *config.Stack, doc *state.Document) *config.Stack {
	if previous == nil {
		return desired
	}
	var keep []*config.Group
	for _, g := range previous.Groups {
		if st := doc.Groups[g.Name]; st != nil && st.Freed && desired.Group(g.Name) == nil {
			keep = append(keep, g)
		}
	}
	if len(keep) == 0 {
		return desired
	}
	out := *desired
	out.Groups = append(append([]*config.Group(nil), desired.Groups...), keep...)
	return &out
}

// sameStack reports whether two stacks store the same.
func sameStack(a, b *config.Stack) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// applyOrder is the order groups are applied in: the desired stack's groups
// in dependency order, then those leaving it.
func applyOrder(p *plan.Plan) []plan.GroupChange {
	byName := make(map[string]plan.GroupChange, len(p.Groups))
	for _, gc := range p.Groups {
		byName[gc.Group] = gc
	}
	nodes, err := p.Desired.Graph().TopologicalOrder()
	if err != nil {
		return p.Groups // a cycle was refused when the stack was loaded
	}
	out := make([]plan.GroupChange, 0, len(p.Groups))
	done := map[string]bool{}
	for _, n := range nodes {
		if gc, ok := byName[n.Name]; ok && n.Kind == config.NodeGroup && !done[n.Name] {
			out = append(out, gc)
			done[n.Name] = true
		}
	}
	for _, gc := range p.Groups {
		if !done[gc.Group] {
			out = append(out, gc)
		}
	}
	return out
}

// applyGroup carries out one group's change. Per-instance failures go to
// res; the error is for what stops the group as a whole.
func (r *Runner) applyGroup(ctx context.Context, w *recorder, gc plan.GroupChange, cfg *config.Group, stack string, res *ApplyResult) error {
	if gc.UpdateStopped && gc.Action != plan.ActionDestroy {
		// This is the "next apply" a `group stop-update` holds the roll
		// until: the roll resumes, here and in `watch`.
		w.resumeUpdate(gc.Group)
	}
	if !gc.Action.IsChange() {
		if gc.Action == plan.ActionNoOp && cfg != nil {
			return r.recordUnchanged(ctx, w, gc, cfg, stack)
		}
		return nil
	}
	if cfg == nil {
		return fmt.Errorf("group %q: its configuration is in neither the stack nor the state, so its provider is unknown", gc.Group)
	}
	ctrl, err := r.controllerFor(ctx, stack, cfg, w.record(gc.Group))
	if err != nil {
		return err
	}
	if gc.Action == plan.ActionResume {
		w.resume(gc.Group)
	}
	// Observe once: the state then lists the members as they are, and the
	// destroys have descriptions to drain with.
	members, err := ctrl.Observe(ctx, false)
	if err != nil {
		return err
	}
	w.seed(gc.Group, members)

	if gc.Action == plan.ActionDestroy {
		gr, err := ctrl.Execute(ctx, group.Decision{Destroy: gc.Destroy})
		addResult(res, gc.Group, gr)
		if err == nil && len(gr.Failed) == 0 {
			w.removeGroup(gc.Group)
		}
		return err
	}

	gr, err := ctrl.Execute(ctx, group.Decision{Create: gc.Create, Destroy: gc.Destroy})
	addResult(res, gc.Group, gr)
	if err != nil || len(gc.Roll) == 0 {
		return err
	}
	members, err = ctrl.Observe(ctx, true)
	if err != nil {
		return err
	}
	if dec := group.Decide(ctrl.Desired(), members); !dec.Settled() {
		return fmt.Errorf("group %q: its %d out-of-date members were not replaced: %d members still to create and %d to destroy first",
			gc.Group, len(dec.Roll), len(dec.Create), len(dec.Destroy))
	}
	gr, err = ctrl.Roll(ctx, members)
	addResult(res, gc.Group, gr)
	return err
}

// recordUnchanged brings the record of a group that needs no change in step
// with its members, when the two differ: after the state was removed (and is
// being rebuilt from the providers' tags) or restored from an old copy. A
// record that agrees with the plan costs nothing; one that does not costs one
// observation of the group.
func (r *Runner) recordUnchanged(ctx context.Context, w *recorder, gc plan.GroupChange, cfg *config.Group, stack string) error {
	w.mu.Lock()
	matches := recordMatches(w.doc.Groups[gc.Group], gc, group.DesiredFromConfig(cfg))
	w.mu.Unlock()
	if matches {
		return nil
	}
	ctrl, err := r.controllerFor(ctx, stack, cfg, nil)
	if err != nil {
		return err
	}
	members, err := ctrl.Observe(ctx, false)
	if err != nil {
		return fmt.Errorf("group %q: observe to record its members: %w", gc.Group, err)
	}
	w.seed(gc.Group, members)
	return nil
}

// recordMatches reports whether the record st of a group the plan leaves
// unchanged agrees with what the plan observed: as many live members, each
// with the desired configuration hash (else the plan would roll them) and,
// for pets, one per logical ID. The plan keeps counts, not member IDs, so a
// record that differs only in which IDs fill the same places is not caught.
func recordMatches(st *state.GroupStatus, gc plan.GroupChange, d group.Desired) bool {
	var live []state.Instance
	if st != nil {
		for _, in := range st.Instances {
			if in.State != string(instance.StateTerminating) {
				live = append(live, in)
			}
		}
	}
	if len(live) != gc.Before {
		return false
	}
	pets := map[string]bool{}
	if d.IsPets() {
		for _, id := range d.LogicalIDs {
			pets[id] = true
		}
	}
	seen := make(map[string]bool, len(live))
	for _, in := range live {
		if d.ConfigHash != "" && in.ConfigHash != d.ConfigHash {
			return false
		}
		if d.IsPets() {
			if !pets[in.LogicalID] || seen[in.LogicalID] {
				return false
			}
			seen[in.LogicalID] = true
		}
	}
	return true
}

func addResult(res *ApplyResult, name string, gr group.Result) {
	res.Created += gr.Created - gr.Rolled // a replacement is counted as rolled, not added
	res.Destroyed += gr.Destroyed - gr.Rolled
	res.Rolled += gr.Rolled
	for _, f := range gr.Failed {
		// A failed create has no ID; its error names the group (and the
		// logical ID of a pet).
		res.Failed = append(res.Failed, Failure{Group: name, ID: f.ID, Err: f.Err})
	}
}
