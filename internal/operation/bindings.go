package operation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
)

// bindings resolve the executor's steps through the runner's plugin host.
// A group's configuration comes from the first of stacks that has it (a
// plan's desired stack, then the stored one: a group leaving the stack is
// still destroyed through its providers).
//
// A group's Instances are resolved once per bindings (one plan's run):
// resolving them asks the plugin host for each of the group's provider
// processes, which every one of thousands of steps would otherwise do.
type bindings struct {
	r      *Runner
	stacks []*config.Stack

	mu     sync.Mutex
	groups map[string]execute.Group
}

var _ execute.Bindings = (*bindings)(nil)

func (r *Runner) bindings(stacks ...*config.Stack) *bindings {
	return &bindings{r: r, stacks: slices.DeleteFunc(stacks, func(s *config.Stack) bool { return s == nil })}
}

// Group is the group named, as its members are acted on.
func (b *bindings) Group(ctx context.Context, name string) (execute.Group, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g, ok := b.groups[name]; ok {
		return g, nil
	}
	for _, st := range b.stacks {
		if g := st.Group(name); g != nil {
			inst, err := b.r.instances(ctx, st.Name, g)
			if err != nil {
				return nil, err
			}
			if b.groups == nil {
				b.groups = map[string]execute.Group{}
			}
			b.groups[name] = inst
			return inst, nil
		}
	}
	return nil, fmt.Errorf("group %q: its configuration is in neither the plan nor the state, so its provider is unknown", name)
}

// LoadBalancer is the load balancer named at provider.
func (b *bindings) LoadBalancer(ctx context.Context, provider, name string) (loadbalancer.L4, error) {
	c, err := b.r.client(ctx, provider)
	if err != nil {
		return nil, fmt.Errorf("load balancer %q: %w", name, err)
	}
	return c.LoadBalancer(name), nil
}

// Authorizer is the enrollment target typ at provider.
func (b *bindings) Authorizer(ctx context.Context, provider, typ string) (nfs.Authorizer, error) {
	c, err := b.r.client(ctx, provider)
	if err != nil {
		return nil, fmt.Errorf("enrollment target %s %q: %w", provider, typ, err)
	}
	return c.Authorizer(typ), nil
}

func (r *Runner) client(ctx context.Context, key string) (*plugin.Client, error) {
	h, err := r.hostFor()
	if err != nil {
		return nil, err
	}
	return h.Client(ctx, key)
}

// instancesKey identifies the Instances of one group configuration.
type instancesKey struct{ stack, group, config string }

// cachedInstances are a group's Instances and the provider processes they
// act through: a process relaunched since makes them stale.
type cachedInstances struct {
	inst    *group.Instances
	clients []*plugin.Client
}

// instances returns the Instances of group g (members tagged with stack),
// with its providers launched. They are kept for the runner's life, so an
// observation and the steps acting after it share one (its drains use the
// descriptions it listed), and made anew when a provider was relaunched.
func (r *Runner) instances(ctx context.Context, stack string, g *config.Group) (*group.Instances, error) {
	cfg, err := json.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("group %q: %w", g.Name, err)
	}
	keys := []string{g.Instance.Provider}
	for _, f := range g.Flavors {
		keys = append(keys, f.Provider)
	}
	clients := make([]*plugin.Client, len(keys))
	for i, key := range keys {
		if clients[i], err = r.client(ctx, key); err != nil {
			return nil, fmt.Errorf("group %q: %w", g.Name, err)
		}
	}
	k := instancesKey{stack, g.Name, string(cfg)}
	if inst := r.cached(k, clients); inst != nil {
		return inst, nil
	}
	// Built unlocked: asking the flavors' metadata is a call to each.
	plugins := group.Plugins{Instance: clients[0].Instance(g.Instance.Type)}
	for i, f := range g.Flavors {
		o := flavorObject(ctx, clients[i+1], f.Type)
		plugins.Flavors = append(plugins.Flavors, group.Flavor{Plugin: clients[i+1].Flavor(f.Type), Properties: f.Properties,
			HealthFromState: o.HealthFromState, PrepareAhead: o.PrepareAhead})
	}
	inst, err := group.NewInstances(g, plugins, group.Options{
		Stack:       stack,
		Parallelism: r.opts.Parallelism,
		CallTimeout: r.opts.CallTimeout,
		Logger:      r.log.Named("group").With("group", g.Name),
	})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cache[k]; ok && slices.Equal(c.clients, clients) {
		return c.inst, nil // made meanwhile by another caller: one is kept
	}
	if r.cache == nil {
		r.cache = map[instancesKey]cachedInstances{}
	}
	r.cache[k] = cachedInstances{inst: inst, clients: clients}
	return inst, nil
}

// cached is the Instances kept for k, if they were made with clients.
func (r *Runner) cached(k instancesKey, clients []*plugin.Client) *group.Instances {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cache[k]; ok && slices.Equal(c.clients, clients) {
		return c.inst
	}
	return nil
}

// flavorObject is what c's metadata says of flavor typ (whether it judges
// health by the instance's state alone, whether it may prepare ahead);
// when the metadata cannot be had, the zero Object: the flavor is asked
// about health, and prepares each member right before it is provisioned.
func flavorObject(ctx context.Context, c *plugin.Client, typ string) provider.Object {
	md, err := c.Metadata(ctx)
	if err != nil {
		return provider.Object{}
	}
	o, _ := md.Find(provider.KindFlavor, typ)
	return o
}
