package operation

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A verb is planned and executed under one hold of the state lock: it
// reads the state, derives the stack it converges to (the stored one with
// its change: a size, a group gone), observes what the plan for its scope
// needs, computes the plan and hands it to the executor, which records its
// intent before any provider call.

// verb is what one verb plans, from the state as read under the lock.
type verb struct {
	desired *config.Stack
	scope   plan.Scope
	// work gives the scope's group work from the world observed (nil:
	// plan.ApplyWork).
	work func(plan.World) (map[string]plan.GroupWork, error)
}

// act runs a verb: plan, then (unless dry) execute.
func (r *Runner) act(ctx context.Context, op string, dry bool, derive func(*state.Document) (verb, error)) (*plan.Plan, *controller.Result, error) {
	unlock, err := r.lock(ctx, op)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	v, err := derive(doc)
	if err != nil {
		return nil, nil, err
	}
	p, err := r.computeLocked(ctx, v.desired, doc, v.scope, false, v.work)
	if err != nil {
		return nil, nil, err
	}
	if unknown := p.Unknown(); len(unknown) > 0 {
		return p, nil, fmt.Errorf("%s: objects could not be observed, so nothing was done:\n  %s", op, joinLines(unknown))
	}
	if dry {
		return p, nil, nil
	}
	res, err := r.execute(ctx, p, doc)
	return p, res, err
}

// SetSize stores the new size (the plan's intent, before any provider
// call) and converges the group to it.
func (g groups) SetSize(ctx context.Context, name string, n int, opts controller.ScaleOptions) (*controller.Result, error) {
	if n < 0 {
		return nil, fmt.Errorf("group %q: size %d: must not be negative", name, n)
	}
	_, res, err := g.r.act(ctx, "group scale", false, func(doc *state.Document) (verb, error) {
		cfg, err := acting(doc, name)
		if err != nil {
			return verb{}, err
		}
		if cfg.Size == nil {
			return verb{}, fmt.Errorf("group %q has logical_ids (pets): its size is the number of logical IDs; change them in the stack and apply", name)
		}
		// The limit the files obey holds here too (the stored stack's
		// max_group_size), so nothing is stored that the next read refuses.
		if err := config.CheckGroupSize(doc.Stack, name, n); err != nil {
			return verb{}, err
		}
		if err := checkAutoscaled(cfg, n, opts); err != nil {
			return verb{}, err
		}
		scaled := *cfg
		scaled.Size = &n
		return verb{desired: withGroup(doc.Stack, &scaled), scope: plan.Scope{Groups: []string{name}},
			work: scaleWork(name, group.DesiredFromConfig(&scaled))}, nil
	})
	return res, err
}

// DestroyInstances destroys the named live members, lowering the size of
// cattle by as many (stored first, as the intent), no lower than an
// autoscaled group's min; pets keep their logical IDs, so the next apply
// re-creates them.
func (g groups) DestroyInstances(ctx context.Context, name string, ids []instance.ID) (*controller.Result, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("group %q: no instance IDs given", name)
	}
	ids = unique(ids)
	_, res, err := g.r.act(ctx, "group destroy-instances", false, func(doc *state.Document) (verb, error) {
		cfg, err := acting(doc, name)
		if err != nil {
			return verb{}, err
		}
		desired := doc.Stack
		if cfg.Size != nil {
			smaller := *cfg
			n := max(*cfg.Size-len(ids), 0)
			if cfg.Autoscale != nil {
				// The bounds hold: below min, the destroyed are replaced.
				n = max(n, cfg.Autoscale.Min)
			}
			smaller.Size = &n
			desired = withGroup(doc.Stack, &smaller)
		}
		work := func(world plan.World) (map[string]plan.GroupWork, error) {
			if err := world.Failed[name]; err != nil {
				return nil, err
			}
			live := map[instance.ID]bool{}
			for _, m := range group.Live(world.Members[name]) {
				live[m.ID] = true
			}
			var strangers []instance.ID
			var w plan.GroupWork
			for _, id := range ids {
				if !live[id] {
					strangers = append(strangers, id)
				}
				w.Destroy = append(w.Destroy, group.Destroy{ID: id, Reason: instance.ReasonTerminate})
			}
			if len(strangers) > 0 {
				return nil, fmt.Errorf("group %q has no instance %s; nothing was destroyed", name, quoteAll(strangers))
			}
			return map[string]plan.GroupWork{name: w}, nil
		}
		return verb{desired: desired, scope: plan.Scope{Groups: []string{name}}, work: work}, nil
	})
	return res, err
}

// Free stops managing the selected group, touching nothing; a later apply
// resumes it.
func (g groups) Free(ctx context.Context, meta *controller.Metadata) ([]controller.Object, *controller.Result, error) {
	if meta == nil {
		return nil, nil, fmt.Errorf("group free: name the group")
	}
	res, err := g.r.free(ctx, "group free", controller.KindGroup, meta.Name, func(doc *state.Document) error {
		if storedGroup(doc, meta.Name) == nil && doc.Groups[meta.Name] == nil {
			return controller.NotFound(controller.KindGroup, meta.Name)
		}
		if st := doc.Groups[meta.Name]; st != nil && st.Destroying {
			return fmt.Errorf("group %q is being destroyed: run \"infrakit group destroy %s\" to finish", meta.Name, meta.Name)
		}
		return nil
	})
	if err != nil {
		return nil, res, err
	}
	return []controller.Object{{Spec: controller.Spec{Kind: controller.KindGroup, Metadata: *meta}, Freed: true}}, res, nil
}

// free plans and executes freeing an object (plan.ComputeFree).
func (r *Runner) free(ctx context.Context, op, kind, name string, check func(*state.Document) error) (*controller.Result, error) {
	unlock, err := r.lock(ctx, op)
	if err != nil {
		return nil, err
	}
	defer unlock()
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	if err := check(doc); err != nil {
		return nil, err
	}
	var world plan.World
	// A group recorded without a stored stack gets here too: ComputeFree
	// refuses it, so the stack must not be dereferenced before.
	if kind == controller.KindEnrollment && doc.Stack != nil {
		if e := doc.Stack.Enrollment(name); e != nil && e.DestroyOnFree {
			world = r.observe(ctx, plan.Needs{Targets: []config.EnrollmentTarget{e.Target}}, nil, nil)
		}
	}
	p, err := plan.ComputeFree(doc, world, kind, name)
	if err != nil {
		return nil, err
	}
	if unknown := p.Unknown(); len(unknown) > 0 {
		return nil, fmt.Errorf("%s: %s", op, joinLines(unknown))
	}
	return r.execute(ctx, p, doc)
}

// Destroy destroys every member of the selected group, after deregistering
// and revoking each, and then forgets the group.
func (g groups) Destroy(ctx context.Context, meta *controller.Metadata) (*controller.Result, error) {
	if meta == nil {
		return nil, fmt.Errorf("group destroy: name the group")
	}
	_, res, err := g.r.act(ctx, "group destroy", false, g.destroyVerb(meta.Name))
	return res, err
}

// destroyVerb plans group name's destruction: the stack without it. A freed
// group is destroyed too: asking for it is the explicit approval.
func (g groups) destroyVerb(name string) func(*state.Document) (verb, error) {
	return func(doc *state.Document) (verb, error) {
		if storedGroup(doc, name) == nil {
			if doc.Groups[name] != nil {
				return verb{}, fmt.Errorf("group %q: its configuration is not in the state, so its provider is unknown", name)
			}
			return verb{}, controller.NotFound(controller.KindGroup, name)
		}
		// Asking for the destroy of a freed group is the approval.
		return verb{desired: withoutGroup(doc.Stack, name),
			scope: plan.Scope{Groups: []string{name}, Resume: []string{plan.Address(plan.KindGroup, name)}}}, nil
	}
}

// StopUpdate halts the rolling update of a group: it marks the group
// UpdateStopped in the state, so neither `watch` nor a roll started later
// replaces its out-of-date members. The next `apply` clears the mark and
// rolls again.
func (g groups) StopUpdate(ctx context.Context, name string) error {
	unlock, err := g.r.lock(ctx, "group stop-update")
	if err != nil {
		return err
	}
	defer unlock()
	doc, err := g.r.store.Read(ctx)
	if err != nil {
		return err
	}
	if _, err := acting(doc, name); err != nil {
		return err
	}
	st := doc.Group(name)
	if st.UpdateStopped {
		return nil
	}
	st.UpdateStopped = true
	return g.r.store.Write(ctx, doc)
}

// Plan is what Commit would do.
func (g groups) Plan(ctx context.Context, op controller.Operation, spec controller.Spec) (*plan.Plan, error) {
	derive, err := g.commitVerb(op, spec)
	if err != nil {
		return nil, err
	}
	p, _, err := g.r.act(ctx, "group plan", true, derive)
	return p, err
}

// Commit enforces spec as the group's configuration (storing it and
// converging the group, rolling included; a freed group is resumed), or
// destroys the group.
func (g groups) Commit(ctx context.Context, op controller.Operation, spec controller.Spec) (*controller.Result, error) {
	derive, err := g.commitVerb(op, spec)
	if err != nil {
		return nil, err
	}
	_, res, err := g.r.act(ctx, "group commit", false, derive)
	return res, err
}

func (g groups) commitVerb(op controller.Operation, spec controller.Spec) (func(*state.Document) (verb, error), error) {
	if spec.Kind != controller.KindGroup {
		return nil, fmt.Errorf("spec %s is not a group", spec)
	}
	switch op {
	case controller.Destroy:
		return g.destroyVerb(spec.Metadata.Name), nil
	case controller.Enforce:
	default:
		return nil, fmt.Errorf("group %q: unknown operation %q", spec.Metadata.Name, op)
	}
	var cfg config.Group
	if err := json.Unmarshal(spec.Properties, &cfg); err != nil {
		return nil, fmt.Errorf("group %q: decode spec: %w", spec.Metadata.Name, err)
	}
	if cfg.Name == "" {
		cfg.Name = spec.Metadata.Name
	}
	return func(doc *state.Document) (verb, error) {
		if doc.Stack == nil {
			return verb{}, fmt.Errorf("group %q: no stack is stored: apply one first", cfg.Name)
		}
		keys := append([]string{cfg.Instance.Provider}, flavorProviders(&cfg)...)
		if cfg.Autoscale != nil {
			keys = append(keys, cfg.Autoscale.Sources()...)
		}
		for _, key := range keys {
			if doc.Stack.Provider(key) == nil {
				return verb{}, fmt.Errorf("group %q: provider %q is not declared in the stored stack", cfg.Name, key)
			}
		}
		// Committing a group resumes it, when it is freed.
		return verb{desired: withGroup(doc.Stack, &cfg),
			scope: plan.Scope{Groups: []string{cfg.Name}, Resume: []string{plan.Address(plan.KindGroup, cfg.Name)}}}, nil
	}, nil
}

func flavorProviders(g *config.Group) []string {
	out := make([]string, len(g.Flavors))
	for i, f := range g.Flavors {
		out[i] = f.Provider
	}
	return out
}

// checkAutoscaled refuses a size for an autoscaled group unless overridden,
// and outside its bounds in any case.
func checkAutoscaled(cfg *config.Group, n int, opts controller.ScaleOptions) error {
	a := cfg.Autoscale
	if a == nil {
		return nil
	}
	if !opts.Override {
		return fmt.Errorf("group %q is autoscaled (min %d, max %d): its autoscaler owns the size; "+
			"run \"infrakit group scale -override %s %d\" to set it anyway (the autoscaler resumes from it after its cooldown)",
			cfg.Name, a.Min, a.Max, cfg.Name, n)
	}
	if n < a.Min || n > a.Max {
		return fmt.Errorf("group %q: size %d is outside its autoscale bounds (min %d, max %d), which hold even with -override; "+
			"change min or max in the stack and apply", cfg.Name, n, a.Min, a.Max)
	}
	return nil
}
