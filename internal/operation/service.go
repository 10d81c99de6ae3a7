package operation

import (
	"context"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// The methods below are what a long-running service (`infrakit watch`)
// builds on: it keeps one Runner, and with it one plugin host, for its whole
// life; each of its passes observes, plans and executes through these, so
// that a pass acts exactly as apply does.

// StateStore is the runner's state backend: a *state.Local (StateFile in the
// working directory) or a *stateetcd.Backend, as `infrakit init` recorded.
// It is not checked against the lineage the working directory last used:
// a service checks the state it starts from with CheckLineage.
func (r *Runner) StateStore() state.Store { return r.raw }

// CheckLineage refuses doc (read from StateStore) when it is of another
// lineage than the one the working directory last used, unless
// Options.ForceLineage; a *LineageError matching ErrOtherLineage.
func (r *Runner) CheckLineage(doc *state.Document) error {
	if doc == nil || doc.IsNew() {
		return nil
	}
	return r.store.check(doc.Lineage)
}

// Backend is the state backend `infrakit init` recorded in the working
// directory (type "local" when it recorded none).
func (r *Runner) Backend() *config.Backend { return r.backend }

// PluginHost returns the plugin host, created from the working directory's
// lock file on first use. It fails with ErrNotInitialized when there is no
// lock file.
func (r *Runner) PluginHost() (*pluginhost.Host, error) { return r.hostFor() }

// Instances returns the Instances of group g, whose members are tagged with
// the stack name stack, through the providers of the plugin host (launching
// them when needed; made anew when one was relaunched).
func (r *Runner) Instances(ctx context.Context, stack string, g *config.Group) (*group.Instances, error) {
	return r.instances(ctx, stack, g)
}

// Observe reads what needs says of the world (see observe): the load
// balancers and authorizers, then the groups, with health where withHealth
// says.
func (r *Runner) Observe(ctx context.Context, needs plan.Needs, withHealth func(plan.GroupNeed, []group.Member) bool) plan.World {
	return r.observe(ctx, needs, withHealth, nil)
}

// ObserveKnown is Observe taking the members of the groups in known from
// those descriptions (all of the group's members, listed without their
// properties, by a caller that knows them current) instead of listing
// them. A group whose plan needs the properties is listed anyway.
func (r *Runner) ObserveKnown(ctx context.Context, needs plan.Needs, withHealth func(plan.GroupNeed, []group.Member) bool,
	known map[string][]instance.Description) plan.World {
	return r.observe(ctx, needs, withHealth, known)
}

// Execute runs p's steps through the plugin host, recording through rec,
// with the runner's options changed by opts (Defer, for a pass that must
// not wait). stored is the stack as stored (its groups' configurations
// serve the steps of groups the plan's stack lacks).
func (r *Runner) Execute(ctx context.Context, p *plan.Plan, stored *config.Stack, rec execute.Recorder, change func(*execute.Options)) *execute.Result {
	o := r.executeOptions(p.Desired, stored)
	if change != nil {
		change(&o)
	}
	return execute.Run(ctx, p, r.bindings(p.Desired, stored), rec, o)
}

// ResetHost stops every provider and forgets the plugin host, so that the
// next use creates a new one from the lock file as it is then (after
// `infrakit init -upgrade`, say).
func (r *Runner) ResetHost() error {
	r.mu.Lock()
	h := r.host
	r.host, r.cache = nil, nil
	r.mu.Unlock()
	if h != nil {
		return h.Close()
	}
	return nil
}
