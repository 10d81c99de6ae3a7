package operation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// ErrNoGroup is matched (errors.Is) by the error for a group the state does not know.
var ErrNoGroup = errors.New("no such group")

func noGroup(name string) error {
	return fmt.Errorf("group %q: %w in the state (apply the stack first, or see `infrakit group ls`)", name, ErrNoGroup)
}

// groupNames lists the groups of doc: the stored stack's in order, then the
// others the state records, by name.
func groupNames(doc *state.Document) []string {
	var names []string
	seen := map[string]bool{}
	if doc.Stack != nil {
		for _, g := range doc.Stack.Groups {
			names = append(names, g.Name)
			seen[g.Name] = true
		}
	}
	var rest []string
	for name := range doc.Groups {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// storedGroup returns a group's stored configuration and the stack name its
// members are tagged with.
func storedGroup(doc *state.Document, name string) (*config.Group, string) {
	if doc.Stack == nil {
		return nil, ""
	}
	return doc.Stack.Group(name), doc.Stack.Name
}

func (r *Runner) groups(ctx context.Context) ([]GroupView, error) {
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	names := groupNames(doc)
	views := make([]GroupView, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, r.opts.Parallelism)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			v, err := r.view(ctx, doc, name)
			if v != nil {
				views[i] = *v
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return views, errors.Join(errs...)
}

func (r *Runner) group(ctx context.Context, name string) (*GroupView, error) {
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	if cfg, _ := storedGroup(doc, name); cfg == nil && doc.Groups[name] == nil {
		return nil, noGroup(name)
	}
	return r.view(ctx, doc, name)
}

// view observes one group of doc, with health. A group recorded without its
// configuration cannot be observed; its recorded members are shown.
func (r *Runner) view(ctx context.Context, doc *state.Document, name string) (*GroupView, error) {
	v := &GroupView{Name: name, Tags: map[instance.ID]map[string]string{}}
	if st := doc.Groups[name]; st != nil {
		v.Freed, v.UpdateStopped = st.Freed, st.UpdateStopped
	}
	cfg, stack := storedGroup(doc, name)
	if cfg == nil {
		if st := doc.Groups[name]; st != nil {
			for _, in := range st.Instances {
				v.Instances = append(v.Instances, group.Member{ID: instance.ID(in.ID), LogicalID: in.LogicalID,
					ConfigHash: in.ConfigHash, State: instance.State(in.State), Health: "unknown", Address: in.Address})
			}
		}
		return v, fmt.Errorf("group %q: its configuration is not in the state, so its provider is unknown; showing the recorded members", name)
	}
	if cfg.Size != nil {
		n := *cfg.Size
		v.Size = &n
	}
	v.ConfigHash = cfg.ConfigHash()
	ctrl, err := r.controllerFor(ctx, stack, cfg, nil)
	if err != nil {
		return v, err
	}
	descs, members, err := ctrl.ObserveDescriptions(ctx, true)
	if err != nil {
		return v, err
	}
	for i, m := range members {
		if m.State == instance.StateTerminating {
			continue
		}
		v.Instances = append(v.Instances, m)
		v.Tags[m.ID] = descs[i].Tags
	}
	slices.SortFunc(v.Instances, func(a, b group.Member) int { return cmp.Compare(a.ID, b.ID) })
	return v, nil
}

// groupOp is the frame of the group verbs that act: take the lock, read the
// state, find the group's configuration, and record what its controller
// does (written in batches and once at the end).
type groupOp struct {
	r    *Runner
	doc  *state.Document
	cfg  *config.Group
	rec  *recorder
	ctrl *group.Controller

	mu sync.Mutex
	// created are the members the verb created.
	created []instance.ID
}

// startGroupOp locks and reads the state; unlock must be called.
func (r *Runner) startGroupOp(ctx context.Context, op, name string) (*groupOp, func() error, error) {
	unlock, err := r.lock(ctx, op)
	if err != nil {
		return nil, nil, err
	}
	doc, err := r.store.Read(ctx)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	cfg, _ := storedGroup(doc, name)
	if cfg == nil {
		unlock()
		if doc.Groups[name] != nil {
			return nil, nil, fmt.Errorf("group %q: its configuration is not in the state, so its provider is unknown", name)
		}
		return nil, nil, noGroup(name)
	}
	return &groupOp{r: r, doc: doc, cfg: cfg}, unlock, nil
}

// controller builds the group's controller, recording into the state.
// ctx is the one the work runs under; a failed state write cancels it.
func (o *groupOp) controller(ctx context.Context, cancel func(error)) error {
	o.rec = newRecorder(o.r.store, o.doc, o.r.opts.StateWriteInterval, cancel, o.r.log)
	record := o.rec.record(o.cfg.Name)
	ctrl, err := o.r.controllerFor(ctx, o.doc.Stack.Name, o.cfg, func(rec group.Record) {
		o.mu.Lock()
		for _, m := range rec.Created {
			o.created = append(o.created, m.ID)
		}
		o.mu.Unlock()
		record(rec)
	})
	o.ctrl = ctrl
	return err
}

// finish writes the state and turns the outcome into the verbs' result.
func (o *groupOp) finish(ctx, actx context.Context, gr group.Result, err error) (*ApplyResult, error) {
	res := &ApplyResult{}
	addResult(res, o.cfg.Name, gr)
	if werr := o.rec.flush(context.WithoutCancel(ctx)); werr != nil {
		return res, werr
	}
	if cause := context.Cause(actx); cause != nil && ctx.Err() == nil {
		return res, cause
	}
	return res, err
}

func (r *Runner) scale(ctx context.Context, name string, size int) (*ApplyResult, error) {
	if size < 0 {
		return nil, fmt.Errorf("group %q: size %d: must not be negative", name, size)
	}
	o, unlock, err := r.startGroupOp(ctx, "group scale", name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if o.cfg.Size == nil {
		return nil, fmt.Errorf("group %q has logical_ids (pets): its size is the number of logical IDs; change them in the stack and apply", name)
	}
	if st := o.doc.Groups[name]; st != nil && st.Freed {
		return nil, fmt.Errorf("group %q is free (not managed): apply the stack to resume managing it before scaling", name)
	}
	// Store the new size first: if the work is interrupted, the next pass
	// still knows what was asked.
	o.cfg.Size = &size
	if err := r.store.Write(ctx, o.doc); err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := o.controller(actx, cancel); err != nil {
		return nil, err
	}
	members, dec, err := decide(actx, o.ctrl)
	if err != nil {
		return nil, err
	}
	o.rec.seed(name, members)
	gr, err := o.ctrl.Execute(actx, group.Decision{Create: dec.Create, Destroy: dec.Destroy})
	return o.resync(ctx)(o.finish(ctx, actx, gr, err))
}

func (r *Runner) destroyInstances(ctx context.Context, name string, ids []instance.ID) (*ApplyResult, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("group %q: no instance IDs given", name)
	}
	o, unlock, err := r.startGroupOp(ctx, "group destroy-instances", name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := o.controller(actx, cancel); err != nil {
		return nil, err
	}
	members, err := o.ctrl.Observe(actx, false)
	if err != nil {
		return nil, err
	}
	o.rec.seed(name, members)
	gr, err := o.ctrl.DestroyInstances(actx, ids)
	if gr.Destroyed == 0 && err != nil {
		return nil, err // refused (an unknown ID): nothing was done
	}
	if o.cfg.Size != nil {
		// Lower the stored size by what was destroyed, so no later pass
		// grows the group back; pets keep their logical IDs.
		n := o.ctrl.Size()
		o.cfg.Size = &n
		o.rec.markDirty()
	}
	return o.resync(ctx)(o.finish(ctx, actx, gr, err))
}

func (r *Runner) freeGroup(ctx context.Context, name string) error {
	unlock, err := r.lock(ctx, "group free")
	if err != nil {
		return err
	}
	defer unlock()
	doc, err := r.store.Read(ctx)
	if err != nil {
		return err
	}
	if cfg, _ := storedGroup(doc, name); cfg == nil && doc.Groups[name] == nil {
		return noGroup(name)
	}
	doc.Group(name).Freed = true
	return r.store.Write(ctx, doc)
}

func (r *Runner) destroyGroup(ctx context.Context, name string) (*ApplyResult, error) {
	o, unlock, err := r.startGroupOp(ctx, "group destroy", name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := o.controller(actx, cancel); err != nil {
		return nil, err
	}
	members, err := o.ctrl.Observe(actx, false)
	if err != nil {
		return nil, err
	}
	o.rec.seed(name, members)
	var dec group.Decision
	for _, m := range group.Live(members) {
		dec.Destroy = append(dec.Destroy, group.Destroy{ID: m.ID, Reason: instance.ReasonTerminate})
	}
	gr, err := o.ctrl.Execute(actx, dec)
	if err == nil && len(gr.Failed) == 0 {
		o.rec.removeGroup(name)
	} else if err == nil {
		err = fmt.Errorf("group %q: %d of its instances could not be destroyed; it stays in the state", name, len(gr.Failed))
	}
	return o.resync(ctx)(o.finish(ctx, actx, gr, err))
}
