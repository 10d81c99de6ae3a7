package operation

import (
	"context"
	"errors"
	"fmt"
	"github.com/infrakit/infrakit/internal/autoscale"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

func (r *Runner) plan(ctx context.Context, st *config.Stack, mode PlanMode) (*plan.Plan, error) {
	// The lock gives a consistent picture: no apply or watch pass changes
	// the world while it is observed.
	unlock, err := r.lock(ctx, "plan")
	if err != nil {
		return nil, err
	}
	defer unlock()
	doc, err := r.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	desired := st
	var owned []autoscale.Ownership
	if mode.Destroy {
		desired = destroyStack(st, doc)
	} else {
		// What the autoscaler decided stands until the stack's start size
		// or bounds change.
		desired, owned = autoscale.Keep(st, doc.Stack)
	}
	if desired == nil {
		return nil, errors.New("plan: no stack: load the stack files first")
	}
	if !mode.Destroy {
		if d := checkStackName(st, doc); d != nil {
			return nil, hcl.Diagnostics{d}
		}
	}
	p, err := r.computeLocked(ctx, desired, doc, plan.Scope{}, mode.Health, nil)
	if p != nil {
		p.Autoscale = owned
	}
	return p, err
}

// computeLocked observes what the plan of desired over doc for scope needs
// and computes it; the caller holds the state lock. work, when set, gives
// the scope's group work from the world observed (a verb's decision).
func (r *Runner) computeLocked(ctx context.Context, desired *config.Stack, doc *state.Document, scope plan.Scope, health bool,
	work func(plan.World) (map[string]plan.GroupWork, error)) (*plan.Plan, error) {
	r.useProviders(doc.Stack, desired)
	needs := plan.NeedsOf(desired, doc, scope)
	start := time.Now()
	world := r.observe(ctx, needs, func(need plan.GroupNeed, members []group.Member) bool {
		return health || needsHealth(need, doc, members)
	}, nil)
	r.log.Debug("observed", "groups", len(needs.Groups), "loadbalancers", len(needs.LoadBalancers),
		"targets", len(needs.Targets), "failed", len(world.Failed), "took", time.Since(start))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if work != nil {
		w, err := work(world)
		if err != nil {
			return nil, err
		}
		scope.Work = w
	}
	return plan.Compute(desired, doc, world, scope)
}

// checkStackName is the diagnostic of stack files that name another stack
// than the one the state holds (nil when they agree, or the state holds
// nothing yet), at the stack block. infrakit finds what it made by the
// infrakit.stack tag: under a new name a plan would create every group
// anew and leave the old instances running, unmanaged by anything.
func checkStackName(st *config.Stack, doc *state.Document) *hcl.Diagnostic {
	if doc == nil || doc.Stack == nil || doc.Stack.Name == st.Name ||
		len(doc.Groups)+len(doc.Ingresses)+len(doc.Enrollments) == 0 {
		return nil
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Stack renamed",
		Detail: fmt.Sprintf("The state in this directory is stack %q, and what it made is tagged %s = %q; "+
			"these files declare stack %q. infrakit finds its instances by that tag, so under the new name "+
			"it would create every group anew and leave the old instances running, managed by nothing. "+
			"Set the name back to %q, or run \"infrakit destroy\" first to start the new stack from nothing.",
			doc.Stack.Name, tags.Stack, doc.Stack.Name, st.Name, doc.Stack.Name),
		Subject: st.DeclRange.Ptr(),
	}
}

// destroyStack is the desired stack of `infrakit destroy`: the stack as
// stored (or as loaded, when nothing is stored) without any group, ingress
// or enrollment.
func destroyStack(loaded *config.Stack, doc *state.Document) *config.Stack {
	var base *config.Stack
	switch {
	case doc != nil && doc.Stack != nil:
		base = doc.Stack
	case loaded != nil:
		base = loaded
	default:
		return &config.Stack{}
	}
	out := *base
	out.Groups, out.Ingresses, out.Enrollments = nil, nil, nil
	// Nothing is left for outputs to show: a destroy clears them, as Terraform's does.
	out.Outputs = nil
	return &out
}

// needsHealth reports whether a group's plan depends on its members'
// health: a scale-down picks unhealthy members first, and a roll is paced
// by health. Groups not in the desired stack are destroyed whole, and
// freed ones resumed as they are.
func needsHealth(need plan.GroupNeed, doc *state.Document, members []group.Member) bool {
	if !need.Desired || !need.Planned {
		return false
	}
	if st := doc.Groups[need.Config.Name]; st != nil && st.Freed {
		return false
	}
	dec := group.Decide(group.DesiredFromConfig(need.Config), members)
	if len(dec.Roll) > 0 {
		return true
	}
	for _, x := range dec.Destroy {
		if x.Reason == group.ReasonScaleDown {
			return true
		}
	}
	return false
}

func (r *Runner) apply(ctx context.Context, p *plan.Plan) (*controller.Result, error) {
	if p == nil || p.Desired == nil {
		return nil, errors.New("apply: no plan")
	}
	if unknown := p.Unknown(); len(unknown) > 0 {
		return nil, fmt.Errorf("apply: the plan has objects that could not be observed; fix that and plan again:\n  %s",
			joinLines(unknown))
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
	if err := r.checkWorld(ctx, p, doc); err != nil {
		return nil, err
	}
	return r.execute(ctx, p, doc)
}

// checkWorld lists the groups the plan acts on again and refuses it when
// their members are not those it was made with.
func (r *Runner) checkWorld(ctx context.Context, p *plan.Plan, doc *state.Document) error {
	if len(p.Observed) == 0 {
		return nil
	}
	needs := plan.Needs{Groups: map[string]plan.GroupNeed{}}
	for name := range p.Observed {
		switch {
		case p.Desired.Group(name) != nil:
			needs.Groups[name] = plan.GroupNeed{Stack: p.Desired.Name, Config: p.Desired.Group(name)}
		case doc.Stack != nil && doc.Stack.Group(name) != nil:
			needs.Groups[name] = plan.GroupNeed{Stack: doc.Stack.Name, Config: doc.Stack.Group(name)}
		}
	}
	world := plan.World{Members: map[string][]group.Member{}, Instances: map[string][]instance.Description{}, Failed: map[string]error{}}
	r.observeGroups(ctx, needs, nil, nil, &world)
	if err := ctx.Err(); err != nil {
		return err
	}
	now := map[string]string{}
	for name := range needs.Groups {
		if err := world.Failed[name]; err != nil {
			return fmt.Errorf("apply: group %q could not be listed to check the plan against it: %w", name, err)
		}
		now[name] = plan.Fingerprint(world.Members[name])
	}
	return p.CheckWorld(now)
}

// execute runs the plan's steps under the state lock the caller holds,
// recording into doc (as read under that lock).
func (r *Runner) execute(ctx context.Context, p *plan.Plan, doc *state.Document) (*controller.Result, error) {
	r.useProviders(doc.Stack, p.Desired) // a saved plan's providers are configured as it was planned
	rec := execute.NewStateRecorder(r.store, doc, p.Desired, r.opts.StateWriteInterval, r.log.Named("state"))
	res := execute.Run(ctx, p, r.bindings(p.Desired, doc.Stack), rec, r.executeOptions(p.Desired, doc.Stack))
	out := &controller.Result{Plan: p, Done: res.Done, Failed: res.Failed,
		Skipped: res.Count(execute.StatusSkipped), NotRun: res.Count(execute.StatusNotRun)}
	// Outputs follow the members the state now records, also after a
	// partial apply (as Terraform's do); a context already cancelled
	// leaves them as they were.
	if ctx.Err() == nil {
		if err := r.recordOutputs(ctx, p.Desired); err != nil {
			r.log.Warn("outputs not recorded", "error", err)
		}
	}
	switch {
	case res.Err != nil && ctx.Err() != nil && errors.Is(res.Err, ctx.Err()):
		return out, &InterruptedError{NotRun: out.NotRun, Cause: ctx.Err()}
	case res.Err != nil:
		return out, res.Err
	}
	return out, nil
}

// executeOptions are the executor's options for stacks (per-provider
// limits from their provider blocks).
func (r *Runner) executeOptions(stacks ...*config.Stack) execute.Options {
	limits := map[string]int{}
	for _, st := range stacks {
		if st == nil {
			continue
		}
		for _, p := range st.Providers {
			if _, set := limits[p.Key()]; !set && p.Parallelism > 0 {
				limits[p.Key()] = p.Parallelism
			}
		}
	}
	return execute.Options{
		Parallelism:    r.opts.Parallelism,
		ProviderLimits: limits,
		CallTimeout:    r.opts.CallTimeout,
		AwaitTimeout:   r.opts.AwaitTimeout,
		Progress:       r.opts.Progress,
		Logger:         r.log.Named("execute"),
	}
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

// InterruptedError is an execution stopped by its context (Ctrl-C, SIGTERM,
// a lost lease): the steps in flight finished and are recorded, the rest
// did not start. Its message is the user's; Cause (context.Canceled or
// DeadlineExceeded) is for errors.Is.
type InterruptedError struct {
	NotRun int
	Cause  error
}

func (e *InterruptedError) Error() string {
	steps := fmt.Sprintf("%d steps were", e.NotRun)
	if e.NotRun == 1 {
		steps = "1 step was"
	}
	return "interrupted: " + steps + " not started; the state records everything done, and `infrakit plan` shows what remains"
}

func (e *InterruptedError) Unwrap() error { return e.Cause }
