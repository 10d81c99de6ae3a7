// Package execute runs a plan's steps: every step whose dependencies are
// done, at most Parallelism at once (and at most a provider's own limit on
// it), each provider call bounded by a deadline, and records what was made
// and destroyed in the state as it goes, in batches. `apply`, `destroy`,
// the group and object verbs and every `watch` pass hand their plan here;
// nothing else acts on providers.
//
// What a step needs that the plan could not know (the ID of an instance a
// provision made, the address it is listed at once it runs) is carried from
// the step that learns it to the steps that act on it. A step that fails is
// reported with its error, and every step that depends on it is skipped;
// independent steps go on. When the context ends no step starts, the calls
// in flight finish (they are detached from the cancellation, each bounded
// by its deadline, so an interrupt never loses an instance a provider was
// creating) and what they did is recorded.
//
// Registrations and deregistrations that are ready together on one load
// balancer go in one call, and one such call per load balancer and kind is
// in flight at a time (what becomes ready meanwhile goes in the next).
// Provisions of one group ready together are shared out over the free call
// slots, each job making its share one after another (so no more are in
// flight than without batches), all its members prepared in one call per
// flavor first where the flavors prepare ahead (group.Flavor.PrepareAhead).
// Awaits cost no call slot: one poller per group lists it (one
// DescribeInstances for all its awaits) until each awaited instance runs,
// and is healthy when the step says so; an instance its provider described
// running as it made it needs no listing. Nor does a drain
// waiting for its group's drain delay (drain.go).
package execute

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// Bindings resolve what steps act through.
type Bindings interface {
	// Group is the group named, as its members are acted on.
	Group(ctx context.Context, name string) (Group, error)
	// LoadBalancer is loadbalancer block name at provider.
	LoadBalancer(ctx context.Context, provider, name string) (loadbalancer.L4, error)
	// Authorizer is the enrollment target typ at provider.
	Authorizer(ctx context.Context, provider, typ string) (nfs.Authorizer, error)
}

// Group is one group's members as steps act on them (*group.Instances).
// Each method bounds its provider calls by a deadline of its own.
type Group interface {
	// PreparesAhead says whether PrepareBatch may prepare several members
	// before any is provisioned; PrepareBatch prepares a member per
	// logical ID; ProvisionPrepared provisions one, described as the
	// provider made it when it said (no State when it did not).
	PreparesAhead() bool
	PrepareBatch(ctx context.Context, logicalIDs []string) []group.Prepared
	ProvisionPrepared(ctx context.Context, p group.Prepared) (group.Member, instance.Description, error)
	Drain(ctx context.Context, id instance.ID) error
	Destroy(ctx context.Context, id instance.ID, reason instance.DestroyReason) error
	Describe(ctx context.Context, withProperties bool) ([]instance.Description, error)
	Health(ctx context.Context, descs []instance.Description) map[instance.ID]flavor.Health
}

var _ Group = (*group.Instances)(nil)

// Recorder keeps the state in step with what is done. A method that
// returns an error stops the run: acting on without recording would lose
// track of what exists. It is called from several goroutines.
type Recorder interface {
	// Record applies a record step's changes and makes them durable
	// before it returns.
	Record(ctx context.Context, changes []plan.StateChange) error
	// Created and Destroyed note a member provisioned or destroyed; they
	// may write in batches (Flush writes the rest).
	Created(ctx context.Context, group string, m group.Member) error
	Destroyed(ctx context.Context, group string, id instance.ID) error
	Flush(ctx context.Context) error
}

// Defaults of Options.
const (
	DefaultParallelism  = 10
	DefaultCallTimeout  = 5 * time.Minute
	DefaultAwaitTimeout = 10 * time.Minute
	DefaultPollMin      = 100 * time.Millisecond
	DefaultPollMax      = time.Second
	// maxBatch bounds the backends one register or deregister call takes.
	maxBatch = 1000
	// maxProvisionBatch bounds the provisions of one job: one PrepareBatch
	// per flavor for all of them, then one Provision each.
	maxProvisionBatch = 50
)

// Options configure Run. Zero values take the defaults.
type Options struct {
	// Parallelism bounds the provider calls in flight (DefaultParallelism).
	Parallelism int
	// ProviderLimits bound the calls in flight to each provider key, below
	// Parallelism.
	ProviderLimits map[string]int
	// CallTimeout bounds each load balancer and authorizer call
	// (DefaultCallTimeout); a Group bounds its own calls.
	CallTimeout time.Duration
	// AwaitTimeout bounds an await without a timeout of its own
	// (DefaultAwaitTimeout).
	AwaitTimeout time.Duration
	// PollMin and PollMax bound the pause between two listings while
	// awaiting: short first (a process starts in milliseconds), growing
	// while nothing changes.
	PollMin, PollMax time.Duration
	// Defer leaves awaits for later instead of waiting: they, and every
	// step that depends on them, end Deferred. A watch pass must not
	// wait; a later pass finds the new members running.
	Defer bool
	// Look, with Defer, gives a group's awaits one listing once all of
	// them are handed over: those it answers are done (a member running
	// as soon as it is made is registered by the run that made it), and
	// only the rest end Deferred.
	Look bool
	// Progress, when set, receives an event per step finished, from one
	// goroutine at a time.
	Progress func(Event)
	Logger   hclog.Logger
	// Before, when set, is asked right before each provider call (on the
	// worker that makes it, after its call slot is taken) and may refuse
	// it: the step then fails with Before's error, and no call is made. A
	// watch refuses once its leadership is lost or in doubt, so that a
	// step queued before a pause (SIGSTOP) is not made after it.
	Before func(ctx context.Context, s plan.Step) error
	// Abort, when set, cancels the provider calls in flight once it is
	// done. The calls are otherwise detached from Run's ctx (an interrupt
	// lets them finish); a call acting for a leadership that ended must
	// not. Give Run a ctx that ends with Abort, so that nothing starts
	// after it either.
	Abort context.Context
}

func (o Options) withDefaults() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.AwaitTimeout <= 0 {
		o.AwaitTimeout = DefaultAwaitTimeout
	}
	if o.PollMin <= 0 {
		o.PollMin = DefaultPollMin
	}
	if o.PollMax < o.PollMin {
		o.PollMax = max(DefaultPollMax, o.PollMin)
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// Status is how a step ended.
type Status string

// Statuses.
const (
	// StatusDone: the step did what it says.
	StatusDone Status = "done"
	// StatusFailed: its call failed (Result.Failed has the error).
	StatusFailed Status = "failed"
	// StatusSkipped: a step it depends on failed or was skipped.
	StatusSkipped Status = "skipped"
	// StatusDeferred: an await left for later (Options.Defer), or a step
	// that depends on one.
	StatusDeferred Status = "deferred"
	// StatusNotRun: the run was interrupted before the step started.
	StatusNotRun Status = "not-run"
)

// Event is one step finished.
type Event struct {
	Step   plan.Step
	Status Status
	// Instance is the member the step acted on (for a provision, the one
	// it made).
	Instance instance.ID
	Err      error
	// Done and Total count the steps of the same object and kind.
	Done, Total int
}

// Result is what Run did.
type Result struct {
	// Done counts the steps done, with the fields the plan's Summary has.
	Done plan.Counts
	// Status of each step, by ID-1.
	Status []Status
	// Made are the members the provisions made, by provision step.
	Made map[plan.StepID]group.Member
	// Failed are the steps whose calls failed.
	Failed []Failure
	// Err is what stopped the run: a state write that failed, or the
	// context's error. Failed steps alone leave it nil.
	Err error
}

// Failure is a step that failed, and why.
type Failure struct {
	Step plan.Step
	// Instance is the member it acted on, when known.
	Instance instance.ID
	Err      error
}

// Unwrap is the step's error, for errors.Is and errors.As.
func (f Failure) Unwrap() error { return f.Err }

func (f Failure) Error() string {
	return fmt.Sprintf("%s: %s %s: %v", f.Step.Object, f.Step.Kind, subject(f.Step, f.Instance), f.Err)
}

func subject(s plan.Step, id instance.ID) string {
	if id != "" {
		return string(id)
	}
	return s.Subject()
}

// Errors joins the failures into one error (nil without any).
func (r *Result) Errors() error {
	errs := make([]error, 0, len(r.Failed))
	for _, f := range r.Failed {
		errs = append(errs, f)
	}
	return errors.Join(errs...)
}

// Count is how many steps ended with status st.
func (r *Result) Count(st Status) int {
	n := 0
	for _, s := range r.Status {
		if s == st {
			n++
		}
	}
	return n
}

// Run executes p's steps through b, recording through rec, and returns when
// every step has ended (or, once ctx ends, when the calls in flight have).
func Run(ctx context.Context, p *plan.Plan, b Bindings, rec Recorder, o Options) *Result {
	r := newRun(p, b, rec, o.withDefaults())
	return r.run(ctx)
}
