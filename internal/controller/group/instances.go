package group

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Defaults of Options.
const (
	DefaultParallelism = 10
	DefaultCallTimeout = 5 * time.Minute
)

// Flavor is one flavor block of a group as it is acted through.
type Flavor struct {
	Plugin     flavor.Plugin
	Properties json.RawMessage
	// HealthFromState: the flavor judges nothing but the instance's state
	// (its provider's metadata says so), so it is not asked: every member
	// that is not terminating is healthy by it.
	HealthFromState bool
	// PrepareAhead: the flavor's Prepare does nothing but compute the spec
	// (its provider's metadata says so), so several members may be
	// prepared in one call before any is provisioned.
	PrepareAhead bool
}

// Plugins are the SPI plugins one group acts through: its instance plugin and
// its flavors in the order they combine.
type Plugins struct {
	Instance instance.Plugin
	Flavors  []Flavor
}

// Options configure Instances. Zero values take the defaults.
type Options struct {
	// Stack is the stack's name: members are tagged and listed by it.
	Stack string
	// Parallelism bounds the health checks in flight, for flavors that
	// cannot judge a batch at once (DefaultParallelism).
	Parallelism int
	// CallTimeout bounds each provider call (DefaultCallTimeout).
	CallTimeout time.Duration
	Logger      hclog.Logger
}

func (o Options) withDefaults() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// Instances is one group's members as infrakit acts on them, through the
// group's instance plugin and flavors: it lists them (one
// DescribeInstances by the group's tags), asks their health, provisions,
// drains and destroys them, one member per call. It decides nothing: what
// to do is a plan's (package plan), and the executor calls these, each
// bounded by the call timeout. It is safe for concurrent use.
type Instances struct {
	plugins Plugins
	opts    Options
	group   *config.Group

	mu sync.Mutex
	// last is the latest listing: the descriptions drains are made with.
	last map[instance.ID]instance.Description
	// spec is what every provision of the group shares, made once.
	spec *prepared
	// seq numbers the members provisioned (flavor.Index).
	seq atomic.Uint64
}

// NewInstances returns the Instances of group g, acting through plugins. g
// is copied.
func NewInstances(g *config.Group, plugins Plugins, opts Options) (*Instances, error) {
	if g == nil {
		return nil, errors.New("group: nil group")
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
	return &Instances{plugins: plugins, opts: opts.withDefaults(), group: copyGroup(g)}, nil
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
func (c *Instances) Name() string { return c.group.Name }

// Group returns a copy of the group's configuration.
func (c *Instances) Group() *config.Group { return copyGroup(c.group) }

// Desired is the group's desired state, as Decide takes it.
func (c *Instances) Desired() Desired { return DesiredFromConfig(c.group) }

// AsksHealth reports whether some flavor of the group is asked for its
// members' health: one that judges only the instance's state is not, so
// without such a flavor a member's health changes only with what its
// provider lists.
func (c *Instances) AsksHealth() bool {
	for _, f := range c.plugins.Flavors {
		if !f.HealthFromState {
			return true
		}
	}
	return false
}

// Observe lists the group's members: one DescribeInstances by the group's
// tags and, when withHealth, each member's health from every flavor
// (healthy only when all say healthy; unhealthy when any does). Without
// health every member's health is unknown.
func (c *Instances) Observe(ctx context.Context, withHealth bool) ([]Member, error) {
	_, members, err := c.ObserveDescriptions(ctx, withHealth)
	return members, err
}

// ObserveDescriptions is Observe that also returns what the provider listed:
// descs[i] is the description of members[i] (its tags, for instance).
func (c *Instances) ObserveDescriptions(ctx context.Context, withHealth bool) ([]instance.Description, []Member, error) {
	descs, err := c.Describe(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	var health map[instance.ID]flavor.Health
	if withHealth {
		health = c.health(ctx, descs, nil)
	}
	return descs, MembersFromDescriptions(descs, health), nil
}

// ObserveFrom is Observe over descriptions the caller listed itself: all of
// this group's members, and only them. It lets several groups served by one
// instance plugin share a single DescribeInstances (by stack); drains are
// made with these descriptions later.
func (c *Instances) ObserveFrom(ctx context.Context, descs []instance.Description, withHealth bool) []Member {
	c.remember(descs)
	var health map[instance.ID]flavor.Health
	if withHealth {
		health = c.health(ctx, descs, nil)
	}
	return MembersFromDescriptions(descs, health)
}

// Describe lists the group's instances by its tags (with their properties
// when asked), and remembers them for the drains.
func (c *Instances) Describe(ctx context.Context, withProperties bool) ([]instance.Description, error) {
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	descs, err := c.plugins.Instance.DescribeInstances(cctx, tags.GroupSelector(c.opts.Stack, c.group.Name), withProperties)
	if err != nil {
		return nil, fmt.Errorf("group %q: describe instances: %w", c.group.Name, err)
	}
	c.remember(descs)
	return descs, nil
}

func (c *Instances) remember(descs []instance.Description) {
	last := make(map[instance.ID]instance.Description, len(descs))
	for _, d := range descs {
		last[d.ID] = d
	}
	c.mu.Lock()
	c.last = last
	c.mu.Unlock()
}

// Health judges the described members through every flavor (see Observe):
// healthy, unhealthy or unknown, by ID. Members left unasked because ctx
// ended have no entry.
func (c *Instances) Health(ctx context.Context, descs []instance.Description) map[instance.ID]flavor.Health {
	return c.health(ctx, descs, nil)
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
func (c *Instances) health(ctx context.Context, descs []instance.Description, want func(instance.Description) bool) map[instance.ID]flavor.Health {
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
		if f.HealthFromState {
			continue // healthy, as it would have answered for each
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
func (c *Instances) flavorHealth(ctx context.Context, i int, f Flavor, descs []instance.Description) []flavor.Health {
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

// prepared is what every provision of a group shares, made once: a
// create then costs its provider calls and little else.
type prepared struct {
	name  string
	hash  string
	alloc flavor.Allocation
	base  instance.Spec // shared, read-only: cattle creates use it as is
	// memberTags are infrakit's tags of a new member (for a pet, without
	// its logical ID); shared, read-only.
	memberTags map[string]string
	// cattleTags are the last cattle member's final tags, shared with the
	// next whose are the same: the provider may describe a new member with
	// the spec's tags, and a run keeps those descriptions, so 100,000
	// cattle would otherwise hold 100,000 equal maps. Read-only.
	cattleTags atomic.Pointer[map[string]string]
}

func (c *Instances) prepared() *prepared {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spec != nil {
		return c.spec
	}
	g := c.group
	s := &prepared{name: g.Name, hash: g.ConfigHash(), alloc: g.Allocation()}
	s.memberTags = tags.Member(c.opts.Stack, g.Name, s.hash, "")
	baseTags := make(map[string]string, len(g.Tags)+3)
	maps.Copy(baseTags, g.Tags)
	maps.Copy(baseTags, s.memberTags)
	s.base = instance.Spec{Properties: g.Instance.Properties, Tags: baseTags}
	c.spec = s
	return s
}

// Drain drains member id through every flavor, with its last listed
// description. A failed drain is returned: destroying the member anyway
// could drop the work the flavor failed to move away.
func (c *Instances) Drain(ctx context.Context, id instance.ID) error {
	c.mu.Lock()
	d, ok := c.last[id]
	c.mu.Unlock()
	if !ok {
		d = instance.Description{ID: id}
	}
	for i, f := range c.plugins.Flavors {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		err := f.Plugin.Drain(cctx, f.Properties, d)
		cancel()
		if err != nil {
			return fmt.Errorf("group %q: drain %s: flavor %d: %w", c.group.Name, id, i+1, err)
		}
	}
	return nil
}

// Destroy destroys member id for reason.
func (c *Instances) Destroy(ctx context.Context, id instance.ID, reason instance.DestroyReason) error {
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	if err := c.plugins.Instance.Destroy(cctx, id, reason); err != nil {
		return fmt.Errorf("group %q: destroy %s: %w", c.group.Name, id, err)
	}
	return nil
}
