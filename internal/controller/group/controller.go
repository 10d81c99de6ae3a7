package group

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Defaults of Options.
const (
	DefaultParallelism    = 10
	DefaultCallTimeout    = 5 * time.Minute
	DefaultRecordBatch    = 200
	DefaultRecordInterval = 500 * time.Millisecond
	DefaultPollInterval   = time.Second
)

// Flavor is one flavor block of a group as the controller acts through it.
type Flavor struct {
	Plugin     flavor.Plugin
	Properties json.RawMessage
}

// Plugins are the SPI plugins one group acts through: its instance plugin and
// its flavors in the order they combine.
type Plugins struct {
	Instance instance.Plugin
	Flavors  []Flavor
}

// Options configure a Controller. Zero values take the defaults.
type Options struct {
	// Stack is the stack's name: members are tagged and listed by it.
	Stack string
	// Parallelism bounds the provider calls in flight (DefaultParallelism).
	Parallelism int
	// CallTimeout bounds each provider call (DefaultCallTimeout). Calls in
	// flight are not cancelled with the context passed to the acting
	// methods: they run to completion or to this timeout, so an interrupt
	// never loses an instance a provider was already creating.
	CallTimeout time.Duration
	// Record, when set, receives what was created and destroyed, in batches
	// of up to RecordBatch items or every RecordInterval, and once more when
	// each step ends, so the caller can write state in batches. It is called
	// from one goroutine at a time, and owns the slices it is given.
	Record         func(Record)
	RecordBatch    int
	RecordInterval time.Duration
	// Progress, when set, receives one event per finished work item. It is
	// called from one goroutine at a time.
	Progress func(Event)
	// PollInterval is how often a rolling update looks at replacements that
	// are not healthy yet (DefaultPollInterval).
	PollInterval time.Duration
	Logger       hclog.Logger
}

func (o Options) withDefaults() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.RecordBatch <= 0 {
		o.RecordBatch = DefaultRecordBatch
	}
	if o.RecordInterval <= 0 {
		o.RecordInterval = DefaultRecordInterval
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// Record is a batch of changes to a group's membership.
type Record struct {
	// Created are new members, as just provisioned: pending, health unknown.
	Created []Member
	// Destroyed are members destroyed.
	Destroyed []instance.ID
}

// Progress actions of an Event.
const (
	ActionCreate  = "create"
	ActionDestroy = "destroy"
	ActionError   = "error"
)

// Event is one finished work item: a member created or destroyed, or a
// provider call that failed (Action ActionError, Err set).
type Event struct {
	Group     string
	Action    string
	ID        instance.ID
	LogicalID string
	Err       error
	// Drained is set on the event of a destroy (ActionDestroy, or
	// ActionError when the destroy itself failed) once every flavor drained
	// the member: the drain happened, whatever became of the destroy. A
	// failed drain leaves the member alone, so ActionError without Drained.
	Drained bool
	// Done and Total count the work items of the current step.
	Done, Total int
}

// Failure is one member that could not be created or destroyed.
type Failure struct {
	// Action is ActionCreate or ActionDestroy.
	Action    string
	ID        instance.ID
	LogicalID string
	Err       error
}

// Result is what an acting call did.
type Result struct {
	Created, Destroyed int
	// Rolled counts out-of-date members replaced by a rolling update.
	Rolled int
	Failed []Failure
}

func (r *Result) add(o Result) {
	r.Created += o.Created
	r.Destroyed += o.Destroyed
	r.Rolled += o.Rolled
	r.Failed = append(r.Failed, o.Failed...)
}

// Controller acts for one group: it observes the group's members through its
// instance provider (one DescribeInstances per observation, by the group's
// tags) and its flavors (health), and creates, destroys and replaces members
// as the pure decision functions (Decide, NextRollBatch) say, with bounded
// parallelism. It implements controller.Controller for its one group, plus
// the group verbs Size, SetSize and DestroyInstances.
//
// Acting methods (Converge, Execute, Roll, DestroyInstances, Commit, Destroy)
// must not run concurrently with each other for the same group; Observe,
// Size, SetSize, Spec and Freed are safe at any time.
type Controller struct {
	plugins Plugins
	opts    Options

	mu    sync.Mutex
	group *config.Group
	freed bool
	// last is the latest observation: the descriptions destroys drain with.
	last []instance.Description
	// seq numbers the members this controller creates (flavor.Index).
	seq atomic.Uint64
}

var _ controller.Controller = (*Controller)(nil)

// New returns the controller of group g, acting through plugins. g is copied.
func New(g *config.Group, plugins Plugins, opts Options) (*Controller, error) {
	if g == nil {
		return nil, errors.New("group controller: nil group")
	}
	if plugins.Instance == nil {
		return nil, fmt.Errorf("group %q: no instance plugin", g.Name)
	}
	if len(plugins.Flavors) != len(g.Flavors) {
		return nil, fmt.Errorf("group %q: %d flavor plugins for %d flavor blocks", g.Name, len(plugins.Flavors), len(g.Flavors))
	}
	for i, f := range plugins.Flavors {
		if f.Plugin == nil {
			return nil, fmt.Errorf("group %q: flavor %d has no plugin", g.Name, i+1)
		}
	}
	return &Controller{plugins: plugins, opts: opts.withDefaults(), group: copyGroup(g)}, nil
}

func copyGroup(g *config.Group) *config.Group {
	c := *g
	if g.Size != nil {
		n := *g.Size
		c.Size = &n
	}
	c.LogicalIDs = slices.Clone(g.LogicalIDs)
	c.Flavors = slices.Clone(g.Flavors)
	return &c
}

// Name is the group's name.
func (c *Controller) Name() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.group.Name
}

// Group returns a copy of the group configuration the controller enforces.
func (c *Controller) Group() *config.Group {
	c.mu.Lock()
	defer c.mu.Unlock()
	return copyGroup(c.group)
}

// Desired is the group's desired state, as Decide takes it.
func (c *Controller) Desired() Desired {
	c.mu.Lock()
	defer c.mu.Unlock()
	return DesiredFromConfig(c.group)
}

// Size is the number of members the group should have: its size for cattle,
// the number of logical IDs for pets.
func (c *Controller) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.group.Size != nil {
		return *c.group.Size
	}
	return len(c.group.LogicalIDs)
}

// SetSize changes the desired size of cattle; the next Converge acts on it.
// Pets are sized by their logical IDs, so it refuses them.
func (c *Controller) SetSize(n int) error {
	if n < 0 {
		return fmt.Errorf("group %q: size %d: must not be negative", c.Name(), n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.group.Size == nil {
		return fmt.Errorf("group %q has logical_ids (pets): its size is the number of logical IDs and cannot be set", c.group.Name)
	}
	c.group.Size = &n
	return nil
}

// Freed reports whether Free was called and no Commit has resumed management since.
func (c *Controller) Freed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.freed
}

// Observe lists the group's members: one DescribeInstances by the group's
// tags and, when withHealth, each member's health from every flavor
// (healthy only when all say healthy; unhealthy when any does), asked with
// bounded parallelism. Without health every member's health is unknown.
func (c *Controller) Observe(ctx context.Context, withHealth bool) ([]Member, error) {
	_, members, err := c.ObserveDescriptions(ctx, withHealth)
	return members, err
}

// ObserveFrom is Observe over descriptions the caller listed itself: all of
// this group's members, and only them. It lets several groups served by one
// instance plugin share a single DescribeInstances (by stack), which is what
// `plan` does; the controller drains with these descriptions later.
func (c *Controller) ObserveFrom(ctx context.Context, descs []instance.Description, withHealth bool) []Member {
	c.mu.Lock()
	c.last = descs
	c.mu.Unlock()
	var health map[instance.ID]flavor.Health
	if withHealth {
		health = c.health(ctx, descs, nil)
	}
	return MembersFromDescriptions(descs, health)
}

// ObserveDescriptions is Observe that also returns what the provider listed:
// descs[i] is the description of members[i] (its tags, for instance).
func (c *Controller) ObserveDescriptions(ctx context.Context, withHealth bool) ([]instance.Description, []Member, error) {
	descs, err := c.describe(ctx)
	if err != nil {
		return nil, nil, err
	}
	var health map[instance.ID]flavor.Health
	if withHealth {
		health = c.health(ctx, descs, nil)
	}
	return descs, MembersFromDescriptions(descs, health), nil
}

func (c *Controller) describe(ctx context.Context) ([]instance.Description, error) {
	c.mu.Lock()
	name := c.group.Name
	c.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	descs, err := c.plugins.Instance.DescribeInstances(cctx, tags.GroupSelector(c.opts.Stack, name), false)
	if err != nil {
		return nil, fmt.Errorf("group %q: describe instances: %w", name, err)
	}
	c.mu.Lock()
	c.last = descs
	c.mu.Unlock()
	return descs, nil
}

// health asks the flavors about the live descriptions for which want
// returns true (all when want is nil): healthy only when every flavor says
// healthy, unhealthy as soon as one does (later flavors are not asked about
// it), unknown otherwise. Each flavor is asked once for all of those
// members (flavorHealth), so a pass costs one batch per flavor, not one
// call per member. A flavor that fails to answer makes the members it was
// asked about unknown; the error is logged, not returned, because health is
// advice and one failing call must not stop a pass. Members left unasked
// because ctx ended have no entry.
func (c *Controller) health(ctx context.Context, descs []instance.Description, want func(instance.Description) bool) map[instance.ID]flavor.Health {
	asked := make([]instance.Description, 0, len(descs))
	for _, d := range descs {
		if d.State != instance.StateTerminating && (want == nil || want(d)) {
			asked = append(asked, d)
		}
	}
	combined := make([]flavor.Health, len(asked))
	for k := range combined {
		combined[k] = flavor.HealthHealthy
	}
	// open are the indexes into asked that later flavors still judge.
	open := make([]int, len(asked))
	for k := range open {
		open[k] = k
	}
	sub := asked
	for i, f := range c.plugins.Flavors {
		if len(open) == 0 {
			break
		}
		if len(open) < len(asked) {
			sub = make([]instance.Description, len(open))
			for j, k := range open {
				sub[j] = asked[k]
			}
		}
		hs := c.flavorHealth(ctx, i, f, sub)
		still := open[:0]
		for j, k := range open {
			switch hs[j] {
			case "": // not asked: ctx ended
				combined[k] = ""
			case flavor.HealthUnhealthy:
				combined[k] = flavor.HealthUnhealthy
			case flavor.HealthHealthy:
				still = append(still, k)
			default:
				combined[k] = flavor.HealthUnknown
				still = append(still, k)
			}
		}
		open = still
	}
	out := make(map[instance.ID]flavor.Health, len(asked))
	for k, d := range asked {
		if combined[k] != "" {
			out[d.ID] = combined[k]
		}
	}
	return out
}

// flavorHealth asks flavor number i about descs: in one HealthyAll when
// the flavor is a flavor.BatchHealthChecker (every provider served through
// sdk/plugin is; it batches the calls on the wire), bounded by one call
// timeout, else one Healthy per member with bounded parallelism, each
// bounded by the call timeout. hs[j] is the health of descs[j]: unknown
// when the call failed, "" when ctx ended before it was asked.
func (c *Controller) flavorHealth(ctx context.Context, i int, f Flavor, descs []instance.Description) []flavor.Health {
	hs := make([]flavor.Health, len(descs))
	if b, ok := f.Plugin.(flavor.BatchHealthChecker); ok {
		if ctx.Err() != nil {
			return hs
		}
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		got, err := b.HealthyAll(cctx, f.Properties, descs)
		cancel()
		switch {
		case err == nil && len(got) == len(descs):
			for j, h := range got {
				hs[j] = cmp.Or(h, flavor.HealthUnknown)
			}
			return hs
		case err == nil:
			err = fmt.Errorf("flavor returned %d healths for %d instances", len(got), len(descs))
		case errors.Is(err, errors.ErrUnsupported):
			err = nil // asked one by one below
		}
		if err != nil {
			if ctx.Err() != nil {
				return hs
			}
			c.opts.Logger.Warn("health check failed", "group", c.Name(), "flavor", i+1, "instances", len(descs), "error", err)
			for j := range hs {
				hs[j] = flavor.HealthUnknown
			}
			return hs
		}
	}
	parallel(ctx, c.opts.Parallelism, len(descs), func(j int) {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		h, err := f.Plugin.Healthy(cctx, f.Properties, descs[j])
		cancel()
		if err != nil {
			c.opts.Logger.Warn("health check failed", "group", c.Name(), "id", descs[j].ID, "flavor", i+1, "error", err)
			h = flavor.HealthUnknown
		}
		hs[j] = cmp.Or(h, flavor.HealthUnknown)
	})
	return hs
}

// parallel runs do(0..n-1) on at most p goroutines and returns when all
// started calls have returned. Once ctx is done no further call starts.
func parallel(ctx context.Context, p, n int, do func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(p, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				do(i)
			}
		}()
	}
	wg.Wait()
}

// Converge is one full pass: observe, Decide, Execute, and once the group is
// settled, the rolling update of out-of-date members. Health is asked only
// when it changes the decision: when members are out of date, may be
// scaled down, or replace_unhealthy is set.
func (c *Controller) Converge(ctx context.Context) (Result, error) {
	d := c.Desired()
	withHealth := d.ReplaceUnhealthy
	descs, members, err := c.ObserveDescriptions(ctx, withHealth)
	if err != nil {
		return Result{}, err
	}
	dec := Decide(d, members)
	if !withHealth && (len(dec.Roll) > 0 || hasScaleDown(dec)) {
		// Which members to take down depends on their health.
		members = c.ObserveFrom(ctx, descs, true)
		dec = Decide(d, members)
	}
	res, err := c.Execute(ctx, dec)
	if err != nil || len(dec.Roll) == 0 || !dec.Settled() {
		// An unsettled group rolls on a later pass, once it is settled.
		return res, err
	}
	rolled, err := c.Roll(ctx, members)
	res.add(rolled)
	return res, err
}

func hasScaleDown(dec Decision) bool {
	for _, x := range dec.Destroy {
		if x.Reason == ReasonScaleDown {
			return true
		}
	}
	return false
}

// job is one work item of a step.
type job struct {
	destroy   bool
	id        instance.ID // destroy
	reason    instance.DestroyReason
	logicalID string // create
}

// errSkipped is the outcome of a job that was interrupted before it
// changed anything: it is neither done nor failed.
var errSkipped = errors.New("skipped: interrupted")

// outcome is a job's result.
type outcome struct {
	job     job
	member  Member // created
	drained bool   // destroy: every flavor drained the member
	err     error
}

// Execute carries out a decision's creates and destroys (not its rolls; see
// Roll) with bounded parallelism. Cattle creates and destroys run side by
// side; for pets every destroy finishes before any create starts, so a pet
// being replaced never has two live copies. A failed call is reported in
// Result.Failed (and as an event) while the rest proceed. When ctx is done,
// no new call starts, the calls in flight finish, what they did is recorded,
// and the context's error is returned.
func (c *Controller) Execute(ctx context.Context, dec Decision) (Result, error) {
	jobs := make([]job, 0, len(dec.Create)+len(dec.Destroy))
	for _, x := range dec.Destroy {
		jobs = append(jobs, job{destroy: true, id: x.ID, reason: x.Reason})
	}
	for _, x := range dec.Create {
		jobs = append(jobs, job{logicalID: x.LogicalID})
	}
	if c.Desired().IsPets() && len(dec.Destroy) > 0 && len(dec.Create) > 0 {
		res := c.run(ctx, jobs[:len(dec.Destroy)], nil)
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.add(c.run(ctx, jobs[len(dec.Destroy):], nil))
		return res, ctx.Err()
	}
	res := c.run(ctx, jobs, nil)
	return res, ctx.Err()
}

// step holds what every job of one run shares, prepared once so that a
// create costs its provider calls and little else.
type step struct {
	name  string
	hash  string
	alloc flavor.Allocation
	base  instance.Spec // shared, read-only: cattle creates use it as is
	// memberTags are infrakit's tags of a new member (for a pet, without
	// its logical ID); shared, read-only.
	memberTags map[string]string
	descByID   map[instance.ID]instance.Description
	callCtx    func() (context.Context, context.CancelFunc)
	parentCtx  context.Context
}

func (c *Controller) newStep(ctx context.Context, jobs []job) *step {
	c.mu.Lock()
	g := c.group
	last := c.last
	c.mu.Unlock()
	s := &step{
		name:      g.Name,
		hash:      g.ConfigHash(),
		alloc:     g.Allocation(),
		parentCtx: ctx,
	}
	s.memberTags = tags.Member(c.opts.Stack, g.Name, s.hash, "")
	// Calls in flight outlive an interrupt (see Options.CallTimeout).
	detached := context.WithoutCancel(ctx)
	s.callCtx = func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(detached, c.opts.CallTimeout)
	}
	baseTags := make(map[string]string, len(g.Tags)+3)
	maps.Copy(baseTags, g.Tags)
	maps.Copy(baseTags, s.memberTags)
	s.base = instance.Spec{Properties: g.Instance.Properties, Tags: baseTags}
	for _, j := range jobs {
		if j.destroy {
			// Only steps that destroy need the lookup; building it for a
			// pure create step would cost a map of every member.
			s.descByID = make(map[instance.ID]instance.Description, len(last))
			for _, d := range last {
				s.descByID[d.ID] = d
			}
			break
		}
	}
	return s
}

// run executes jobs with at most Parallelism at once, reporting progress and
// records from this goroutine as outcomes arrive. When created is not nil the
// members created are appended to it too.
func (c *Controller) run(ctx context.Context, jobs []job, created *[]Member) Result {
	var res Result
	n := len(jobs)
	if n == 0 {
		return res
	}
	s := c.newStep(ctx, jobs)
	workers := min(c.opts.Parallelism, n)
	// A roomy buffer lets the workers go on while this goroutine is busy in
	// a callback (the caller writing state, say).
	out := make(chan outcome, min(n, 1024))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				out <- c.do(s, jobs[i])
			}
		}()
	}
	// The closer ends when the workers do, which run() waits for below by
	// draining out until it is closed.
	go func() {
		wg.Wait()
		close(out)
	}()

	var pending Record
	flush := func() {
		if c.opts.Record != nil && (len(pending.Created) > 0 || len(pending.Destroyed) > 0) {
			c.opts.Record(pending)
		}
		pending = Record{}
	}
	ticker := time.NewTicker(c.opts.RecordInterval)
	defer ticker.Stop()
	done := 0
	for {
		select {
		case o, ok := <-out:
			if !ok {
				flush()
				return res
			}
			if errors.Is(o.err, errSkipped) {
				continue
			}
			done++
			ev := Event{Group: s.name, ID: o.job.id, LogicalID: o.job.logicalID, Drained: o.drained, Done: done, Total: n}
			switch {
			case o.err != nil:
				f := Failure{Action: ActionCreate, ID: o.job.id, LogicalID: o.job.logicalID, Err: o.err}
				if o.job.destroy {
					f.Action = ActionDestroy
				}
				res.Failed = append(res.Failed, f)
				ev.Action, ev.Err = ActionError, o.err
			case o.job.destroy:
				res.Destroyed++
				pending.Destroyed = append(pending.Destroyed, o.job.id)
				ev.Action = ActionDestroy
			default:
				res.Created++
				pending.Created = append(pending.Created, o.member)
				if created != nil {
					*created = append(*created, o.member)
				}
				ev.Action, ev.ID = ActionCreate, o.member.ID
			}
			if c.opts.Progress != nil {
				c.opts.Progress(ev)
			}
			if len(pending.Created)+len(pending.Destroyed) >= c.opts.RecordBatch {
				flush()
			}
		case <-ticker.C:
			flush()
		}
	}
}

func (c *Controller) do(s *step, j job) outcome {
	if j.destroy {
		drained, err := c.destroyMember(s, j.id, j.reason)
		return outcome{job: j, drained: drained, err: err}
	}
	m, err := c.createMember(s, j.logicalID)
	return outcome{job: j, member: m, err: err}
}

// createMember prepares a spec through every flavor and provisions it.
//
// The flavors combine in order: each gets the spec as the previous ones left
// it, with Init cleared; tags are merged (later wins) and the init scripts
// are concatenated here, so a flavor that sets rather than appends Init
// cannot drop another's lines. infrakit's own tags are put last, so no
// flavor can change what group a member belongs to.
func (c *Controller) createMember(s *step, logicalID string) (Member, error) {
	fail := func(what string, err error) (Member, error) {
		if logicalID != "" {
			return Member{}, fmt.Errorf("group %q: create instance for %q: %s: %w", s.name, logicalID, what, err)
		}
		return Member{}, fmt.Errorf("group %q: create instance: %s: %w", s.name, what, err)
	}
	spec := s.base
	if logicalID != "" {
		lid := instance.LogicalID(logicalID)
		spec.LogicalID = &lid
		spec.Tags = maps.Clone(s.base.Tags)
		spec.Tags[tags.LogicalID] = logicalID
	}
	index := flavor.Index{Group: s.name, Sequence: c.seq.Add(1) - 1}
	var inits []string
	for i, f := range c.plugins.Flavors {
		cctx, cancel := s.callCtx()
		out, err := f.Plugin.Prepare(cctx, f.Properties, spec, s.alloc, index)
		cancel()
		if err != nil {
			return fail(fmt.Sprintf("flavor %d: prepare", i+1), err)
		}
		if out.Init != "" {
			inits = append(inits, out.Init)
		}
		out.Init = ""
		if len(c.plugins.Flavors) > 1 {
			merged := make(map[string]string, len(spec.Tags)+len(out.Tags))
			maps.Copy(merged, spec.Tags)
			maps.Copy(merged, out.Tags)
			out.Tags = merged
		}
		spec = out
	}
	spec.Init = strings.Join(inits, "\n")
	// The prepared tags may be the shared base map (a flavor served in
	// process returns what it was given); never write into that.
	final := make(map[string]string, len(spec.Tags)+4)
	maps.Copy(final, spec.Tags)
	maps.Copy(final, s.memberTags)
	if logicalID != "" {
		final[tags.LogicalID] = logicalID
	}
	spec.Tags = final
	if logicalID == "" {
		spec.LogicalID = nil
	} else {
		lid := instance.LogicalID(logicalID)
		spec.LogicalID = &lid
	}
	if s.parentCtx.Err() != nil {
		// Interrupted after preparing: nothing exists yet, so stop here.
		return Member{}, errSkipped
	}
	cctx, cancel := s.callCtx()
	id, err := c.plugins.Instance.Provision(cctx, spec)
	cancel()
	if err != nil {
		return fail("provision", err)
	}
	return Member{
		ID:         id,
		LogicalID:  logicalID,
		ConfigHash: s.hash,
		State:      instance.StatePending,
		Health:     flavor.HealthUnknown,
	}, nil
}

// destroyMember drains the member through every flavor, then destroys it,
// and reports whether the drain happened. A failed drain leaves the member
// alone: destroying it anyway could drop the work the flavor failed to
// move away.
func (c *Controller) destroyMember(s *step, id instance.ID, reason instance.DestroyReason) (drained bool, err error) {
	d, ok := s.descByID[id]
	if !ok {
		d = instance.Description{ID: id}
	}
	for i, f := range c.plugins.Flavors {
		cctx, cancel := s.callCtx()
		err := f.Plugin.Drain(cctx, f.Properties, d)
		cancel()
		if err != nil {
			return false, fmt.Errorf("group %q: destroy %s: flavor %d: drain: %w", s.name, id, i+1, err)
		}
	}
	cctx, cancel := s.callCtx()
	err = c.plugins.Instance.Destroy(cctx, id, reason)
	cancel()
	if err != nil {
		return true, fmt.Errorf("group %q: destroy %s: %w", s.name, id, err)
	}
	return true, nil
}

// Roll replaces the out-of-date members among members (as last observed,
// with health) batch by batch as NextRollBatch paces it. Cattle get their
// replacement first, and the old member is destroyed once the replacement is
// running and healthy; a pet is destroyed first and then re-created with the
// same logical ID. Between batches it waits, polling every PollInterval,
// until members are healthy enough for the next batch. It gives up with an
// error when no batch could start for the update policy's health_timeout, or
// when a cattle replacement is not healthy within it (the old member is then
// kept; the group is over its size and the next pass scales down).
//
// Each wait observes the whole group, so a roll of n members in batches of k
// costs about n/k observations; rolls are paced by health, not by this cost.
func (c *Controller) Roll(ctx context.Context, members []Member) (Result, error) {
	var res Result
	g := c.Group()
	d := DesiredFromConfig(g)
	timeout := time.Duration(g.Update.HealthTimeout)
	if timeout <= 0 {
		timeout = time.Duration(config.DefaultUpdatePolicy().HealthTimeout)
	}
	members = Live(members)
	lastProgress := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		batch, st := NextRollBatch(d, members)
		if st.Outdated == 0 {
			return res, nil
		}
		if len(batch) == 0 {
			if !Decide(d, members).Settled() {
				// Members vanished or appeared meanwhile: that is for the
				// next pass to repair before the roll goes on.
				return res, fmt.Errorf("group %q: rolling update stopped: %s", g.Name, st.Wait)
			}
			if time.Since(lastProgress) > timeout {
				return res, fmt.Errorf("group %q: rolling update stalled for %s (health_timeout): %s", g.Name, timeout, st.Wait)
			}
			if err := sleep(ctx, c.opts.PollInterval); err != nil {
				return res, err
			}
			var err error
			if members, err = c.refresh(ctx, members); err != nil {
				return res, err
			}
			continue
		}
		var err error
		var r Result
		if d.IsPets() {
			r, members, err = c.rollPets(ctx, members, batch)
		} else {
			r, members, err = c.rollCattle(ctx, members, batch, timeout)
		}
		res.add(r)
		if err != nil {
			return res, err
		}
		if len(r.Failed) > 0 {
			return res, fmt.Errorf("group %q: rolling update stopped: %d replacement(s) failed", g.Name, len(r.Failed))
		}
		lastProgress = time.Now()
	}
}

// rollCattle creates one replacement per member of batch, waits until they
// run healthy, then destroys the old members.
func (c *Controller) rollCattle(ctx context.Context, members []Member, batch []instance.ID, timeout time.Duration) (Result, []Member, error) {
	var res Result
	byID := make(map[instance.ID]Member, len(members))
	for _, m := range members {
		byID[m.ID] = m
	}
	created, r := c.runCollect(ctx, createJobs(batch, byID))
	res.add(r)
	if err := ctx.Err(); err != nil {
		return res, members, err
	}
	if len(created) == 0 {
		return res, members, nil
	}
	ready, err := c.waitHealthy(ctx, created, timeout)
	if err != nil {
		return res, members, err
	}
	// Replace as many olds as there are healthy replacements.
	olds := batch[:min(len(batch), len(ready))]
	destroy := make([]job, 0, len(olds))
	for _, id := range olds {
		destroy = append(destroy, job{destroy: true, id: id, reason: ReasonRollingUpdate})
	}
	r = c.run(ctx, destroy, nil)
	res.add(r)
	res.Rolled += r.Destroyed
	failed := failedIDs(r)
	gone := make(map[instance.ID]bool, len(olds))
	for _, id := range olds {
		if !failed[id] {
			gone[id] = true
		}
	}
	next := make([]Member, 0, len(members)+len(ready))
	for _, m := range members {
		if !gone[m.ID] {
			next = append(next, m)
		}
	}
	return res, append(next, ready...), ctx.Err()
}

// rollPets destroys each pet of batch, then re-creates it.
func (c *Controller) rollPets(ctx context.Context, members []Member, batch []instance.ID) (Result, []Member, error) {
	var res Result
	byID := make(map[instance.ID]Member, len(members))
	for _, m := range members {
		byID[m.ID] = m
	}
	destroy := make([]job, 0, len(batch))
	for _, id := range batch {
		destroy = append(destroy, job{destroy: true, id: id, reason: ReasonRollingUpdate})
	}
	r := c.run(ctx, destroy, nil)
	res.add(r)
	res.Rolled += r.Destroyed
	if err := ctx.Err(); err != nil {
		return res, members, err
	}
	failed := failedIDs(r)
	var recreate []instance.ID
	for _, id := range batch {
		if !failed[id] {
			recreate = append(recreate, id)
		}
	}
	created, r := c.runCollect(ctx, createJobs(recreate, byID))
	res.add(r)
	gone := make(map[instance.ID]bool, len(recreate))
	for _, id := range recreate {
		gone[id] = true
	}
	next := make([]Member, 0, len(members)+len(created))
	for _, m := range members {
		if !gone[m.ID] {
			next = append(next, m)
		}
	}
	return res, append(next, created...), ctx.Err()
}

func createJobs(olds []instance.ID, byID map[instance.ID]Member) []job {
	jobs := make([]job, 0, len(olds))
	for _, id := range olds {
		jobs = append(jobs, job{logicalID: byID[id].LogicalID})
	}
	return jobs
}

func failedIDs(r Result) map[instance.ID]bool {
	out := make(map[instance.ID]bool, len(r.Failed))
	for _, f := range r.Failed {
		out[f.ID] = true
	}
	return out
}

// runCollect is run that also returns the members it created.
func (c *Controller) runCollect(ctx context.Context, jobs []job) ([]Member, Result) {
	var created []Member
	res := c.run(ctx, jobs, &created)
	return created, res
}

// waitHealthy polls until every member of created runs healthy, or timeout.
// It returns those members with their observed state and health.
func (c *Controller) waitHealthy(ctx context.Context, created []Member, timeout time.Duration) ([]Member, error) {
	want := make(map[instance.ID]bool, len(created))
	for _, m := range created {
		want[m.ID] = true
	}
	deadline := time.Now().Add(timeout)
	for {
		descs, err := c.describe(ctx)
		if err != nil {
			return nil, err
		}
		health := c.health(ctx, descs, func(d instance.Description) bool { return want[d.ID] })
		var ready []Member
		var waiting []string
		seen := 0
		for _, m := range MembersFromDescriptions(descs, health) {
			if !want[m.ID] {
				continue
			}
			seen++
			if healthy(m) {
				ready = append(ready, m)
			} else {
				waiting = append(waiting, fmt.Sprintf("%s (%s, %s)", m.ID, m.State, m.Health))
			}
		}
		if seen < len(want) {
			waiting = append(waiting, fmt.Sprintf("%d not listed by the provider yet", len(want)-seen))
		}
		if len(waiting) == 0 {
			return ready, nil
		}
		if time.Now().After(deadline) {
			return ready, fmt.Errorf("group %q: rolling update stopped: replacements not healthy after %s (health_timeout): %s",
				c.Name(), timeout, strings.Join(waiting, ", "))
		}
		if err := sleep(ctx, c.opts.PollInterval); err != nil {
			return ready, err
		}
	}
}

// refresh observes the group again, asking the flavors only about members
// that were not known to be running healthy: health is what a roll waits for,
// and asking every member each poll would make a large roll quadratic.
func (c *Controller) refresh(ctx context.Context, known []Member) ([]Member, error) {
	ok := make(map[instance.ID]bool, len(known))
	for _, m := range known {
		if healthy(m) {
			ok[m.ID] = true
		}
	}
	descs, err := c.describe(ctx)
	if err != nil {
		return nil, err
	}
	health := c.health(ctx, descs, func(d instance.Description) bool { return !ok[d.ID] })
	for id := range ok {
		if _, asked := health[id]; !asked {
			health[id] = flavor.HealthHealthy
		}
	}
	return Live(MembersFromDescriptions(descs, health)), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DestroyInstances destroys the given members (they must be live members of
// the group: an unknown ID is an error naming it, and nothing is destroyed).
// For cattle the desired size is lowered by the number destroyed, so the
// group does not grow them back; pets keep their logical IDs, so a destroyed
// pet is re-created by the next Converge (that is how a pet is rebuilt).
func (c *Controller) DestroyInstances(ctx context.Context, ids []instance.ID) (Result, error) {
	members, err := c.Observe(ctx, false)
	if err != nil {
		return Result{}, err
	}
	live := make(map[instance.ID]bool, len(members))
	for _, m := range Live(members) {
		live[m.ID] = true
	}
	var unknown []string
	var dec Decision
	seen := map[instance.ID]bool{}
	for _, id := range ids {
		switch {
		case !live[id]:
			unknown = append(unknown, string(id))
		case !seen[id]:
			seen[id] = true
			dec.Destroy = append(dec.Destroy, Destroy{ID: id, Reason: instance.ReasonTerminate})
		}
	}
	if len(unknown) > 0 {
		return Result{}, fmt.Errorf("group %q has no instance %s; nothing was destroyed", c.Name(), strings.Join(quoteAll(unknown), ", "))
	}
	res, err := c.Execute(ctx, dec)
	c.mu.Lock()
	if c.group.Size != nil {
		n := max(*c.group.Size-res.Destroyed, 0)
		c.group.Size = &n
	}
	c.mu.Unlock()
	return res, err
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// DestroyAll destroys every live member of the group.
func (c *Controller) DestroyAll(ctx context.Context) (Result, error) {
	members, err := c.Observe(ctx, false)
	if err != nil {
		return Result{}, err
	}
	var dec Decision
	for _, m := range Live(members) {
		dec.Destroy = append(dec.Destroy, Destroy{ID: m.ID, Reason: instance.ReasonTerminate})
	}
	return c.Execute(ctx, dec)
}

// The controller.Controller verbs, for the one group this controller is bound
// to. Specs carry the group's configuration (a config.Group) as Properties.

// Spec returns the spec of the group.
func (c *Controller) Spec(ctx context.Context) ([]controller.Spec, error) {
	s, err := c.spec()
	if err != nil {
		return nil, err
	}
	return []controller.Spec{s}, nil
}

func (c *Controller) spec() (controller.Spec, error) {
	g := c.Group()
	props, err := json.Marshal(g)
	if err != nil {
		return controller.Spec{}, fmt.Errorf("group %q: encode spec: %w", g.Name, err)
	}
	return controller.Spec{
		Kind:       controller.KindGroup,
		Metadata:   controller.Metadata{Name: g.Name, Tags: g.Tags},
		Properties: props,
	}, nil
}

// groupOf decodes a group spec and checks it is this controller's group.
func (c *Controller) groupOf(spec controller.Spec) (*config.Group, error) {
	name := c.Name()
	if spec.Kind != controller.KindGroup {
		return nil, fmt.Errorf("group %q: spec %s is not a group", name, spec)
	}
	var g config.Group
	if err := json.Unmarshal(spec.Properties, &g); err != nil {
		return nil, fmt.Errorf("group %q: decode spec: %w", name, err)
	}
	if g.Name == "" {
		g.Name = spec.Metadata.Name
	}
	if g.Name != name {
		return nil, fmt.Errorf("group %q: spec is for group %q", name, g.Name)
	}
	if len(g.Flavors) != len(c.plugins.Flavors) {
		return nil, fmt.Errorf("group %q: spec has %d flavors, the controller acts through %d", name, len(g.Flavors), len(c.plugins.Flavors))
	}
	return &g, nil
}

// Plan returns what Commit would do now: for Enforce, the decision on the
// members observed (with health) and the first roll batch; for Destroy, the
// destruction of every live member.
func (c *Controller) Plan(ctx context.Context, op controller.Operation, spec controller.Spec) (controller.Change, error) {
	ch := controller.Change{Kind: controller.KindGroup, Name: c.Name(), Operation: op}
	g, err := c.groupOf(spec)
	if err != nil {
		return ch, err
	}
	members, err := c.Observe(ctx, op == controller.Enforce)
	if err != nil {
		return ch, err
	}
	switch op {
	case controller.Enforce:
		dec := Decide(DesiredFromConfig(g), members)
		for _, x := range dec.Destroy {
			ch.Steps = append(ch.Steps, controller.Step{Action: "destroy", Target: string(x.ID), Reason: string(x.Reason)})
		}
		for _, x := range dec.Create {
			ch.Steps = append(ch.Steps, controller.Step{Action: "create", Target: x.LogicalID})
		}
		for _, id := range dec.Roll {
			ch.Steps = append(ch.Steps, controller.Step{Action: "replace", Target: string(id), Reason: string(ReasonRollingUpdate)})
		}
	case controller.Destroy:
		for _, m := range Live(members) {
			ch.Steps = append(ch.Steps, controller.Step{Action: "destroy", Target: string(m.ID), Reason: string(instance.ReasonTerminate)})
		}
	default:
		return ch, fmt.Errorf("group %q: unknown operation %q", ch.Name, op)
	}
	return ch, nil
}

// Commit enforces spec (which becomes the group's configuration, and resumes
// a freed group) or destroys every member, and returns the group as observed
// afterwards. Failed calls make it return an error after the rest is done.
func (c *Controller) Commit(ctx context.Context, op controller.Operation, spec controller.Spec) (controller.Object, error) {
	g, err := c.groupOf(spec)
	if err != nil {
		return controller.Object{}, err
	}
	var res Result
	switch op {
	case controller.Enforce:
		c.mu.Lock()
		c.group, c.freed = copyGroup(g), false
		c.mu.Unlock()
		res, err = c.Converge(ctx)
	case controller.Destroy:
		res, err = c.DestroyAll(ctx)
	default:
		return controller.Object{}, fmt.Errorf("group %q: unknown operation %q", g.Name, op)
	}
	if err == nil {
		err = res.Err(g.Name)
	}
	obj, oerr := c.object(ctx)
	return obj, errors.Join(err, oerr)
}

// Err joins the failures of r into one error naming the group (nil if none).
func (r Result) Err(group string) error {
	if len(r.Failed) == 0 {
		return nil
	}
	errs := make([]error, 0, len(r.Failed))
	for _, f := range r.Failed {
		errs = append(errs, f.Err)
	}
	return fmt.Errorf("group %q: %d of its instance operations failed: %w", group, len(r.Failed), errors.Join(errs...))
}

func (c *Controller) object(ctx context.Context) (controller.Object, error) {
	spec, err := c.spec()
	if err != nil {
		return controller.Object{}, err
	}
	members, err := c.Observe(ctx, true)
	if err != nil {
		return controller.Object{Spec: spec}, err
	}
	state, err := json.Marshal(members)
	if err != nil {
		return controller.Object{Spec: spec}, fmt.Errorf("group %q: encode members: %w", spec.Metadata.Name, err)
	}
	return controller.Object{Spec: spec, State: state}, nil
}

// selects reports whether meta (nil: everything) selects this group.
func (c *Controller) selects(meta *controller.Metadata) bool {
	return meta == nil || meta.Name == c.Name()
}

// Describe observes the group (members with health) if meta selects it.
func (c *Controller) Describe(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	obj, err := c.object(ctx)
	if err != nil {
		return nil, err
	}
	return []controller.Object{obj}, nil
}

// Free stops managing the group, touching nothing; the next Commit of
// Enforce resumes. Callers keep the mark (in state) and skip freed groups.
func (c *Controller) Free(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	c.mu.Lock()
	c.freed = true
	c.mu.Unlock()
	spec, err := c.spec()
	if err != nil {
		return nil, err
	}
	return []controller.Object{{Spec: spec}}, nil
}

// Destroy destroys every member of the group if meta selects it.
func (c *Controller) Destroy(ctx context.Context, meta *controller.Metadata) ([]controller.Object, error) {
	if !c.selects(meta) {
		return nil, nil
	}
	res, err := c.DestroyAll(ctx)
	if err == nil {
		err = res.Err(c.Name())
	}
	obj, oerr := c.object(ctx)
	return []controller.Object{obj}, errors.Join(err, oerr)
}
