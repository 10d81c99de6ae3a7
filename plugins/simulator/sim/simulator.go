// Package sim implements the simulator provider: instances, load balancers
// and NFS authorizations kept as JSON files in a local store
// (plugins/simulator/store), plus the "simulator" flavor that reads health
// from those files. Because state is plain files shared by every simulator
// process, a person (or a test) injects faults by editing them:
//
//	rm .infrakit/simulator/instances/compute/compute-1a2b3c4d.json   # the instance vanishes
//	edit it to contain "health": "unhealthy"                          # the simulator flavor reports it unhealthy
//	edit it to contain "state": "terminating"                         # DescribeInstances reports that state
//
// Store layout under the directory (see Config.Dir, INFRAKIT_SIMULATOR_DIR):
//
//	instances/<type>/<id>.json         one instance; types compute, net, disk
//	loadbalancers/<name>.json          routes, backends and health check of one LB
//	authorizations/<type>/<id>.json    one NFS authorization; type disk
//	.locks/                            lock files (flock), never objects
//
// Instance IDs are "<type>-" followed by 8 random hex digits. An instance's
// Address is its logical ID when that is an IP address (pets such as
// "10.0.0.1"); otherwise "10.A.B.C" where A.B.C are the low 24 bits of the
// FNV-1a hash of the ID, so the same ID always has the same address. A
// hand-edited "address" field in the file wins.
//
// Knobs (Config, read from the environment by ConfigFromEnv):
// INFRAKIT_SIMULATOR_PROVISION_DELAY, INFRAKIT_SIMULATOR_DESCRIBE_DELAY,
// INFRAKIT_SIMULATOR_CAPACITY, INFRAKIT_SIMULATOR_FAILURE_RATE.
package sim

import (
	"fmt"
	"sync"

	"github.com/infrakit/infrakit/plugins/simulator/store"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Name is the provider's name.
const Name = "simulator"

// Served types besides the instance types.
const (
	// AuthorizerType is the NFS authorizer type.
	AuthorizerType = "disk"
	// FlavorType is the simulator's own flavor.
	FlavorType = "simulator"
)

// InstanceTypes are the served instance types. They all behave the same;
// they exist so stacks can model machines, networks and disks separately.
func InstanceTypes() []string { return []string{"compute", "net", "disk"} }

// Simulator owns the store and hands out the SPI implementations.
type Simulator struct {
	cfg   Config
	store *store.Store
	// caches holds a *store.Cache[instanceRecord] per instance collection,
	// shared by every DescribeInstances and Watch of that type.
	caches sync.Map
	// authCaches holds a *store.Cache[authRecord] per authorization
	// collection: an enrollment's sync lists every authorization, and
	// re-reading 10,000 files for it cost the simulator more than the
	// rest of an idle watch.
	authCaches sync.Map
	// lbCache holds the load balancers' records (see LoadBalancer.read).
	lbCache *store.Cache[lbRecord]
	// lbMemos holds a *store.Memo[lbRecord] per load balancer name (see
	// LoadBalancer.update).
	lbMemos sync.Map
}

// New opens the store (creating nothing until the first write).
func New(cfg Config) (*Simulator, error) {
	cfg = cfg.withDefaults()
	st, err := store.Open(cfg.Dir, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	return &Simulator{cfg: cfg, store: st, lbCache: new(store.Cache[lbRecord])}, nil
}

// Close releases the store's lock files and the listing caches' inotify
// descriptors.
func (s *Simulator) Close() error {
	s.caches.Range(func(_, c any) bool {
		c.(*store.Cache[instanceRecord]).Close()
		return true
	})
	s.authCaches.Range(func(_, c any) bool {
		c.(*store.Cache[authRecord]).Close()
		return true
	})
	s.lbCache.Close()
	return s.store.Close()
}

// Dir is the absolute store directory.
func (s *Simulator) Dir() string { return s.store.Root() }

// Instances returns the instance plugin of one type. It implements
// instance.Plugin and instance.Watcher.
func (s *Simulator) Instances(typ string) *Instances {
	c := instanceCollection(typ)
	return &Instances{sim: s, typ: typ, collection: c, cache: s.cache(c)}
}

// cache is the listing cache of an instance collection.
func (s *Simulator) cache(collection string) *store.Cache[instanceRecord] {
	c, _ := s.caches.LoadOrStore(collection, new(store.Cache[instanceRecord]))
	return c.(*store.Cache[instanceRecord])
}

// Flavor returns the "simulator" flavor.
func (s *Simulator) Flavor() *Flavor { return &Flavor{sim: s} }

// Authorizer returns the NFS authorizer of one type.
func (s *Simulator) Authorizer(typ string) *Authorizer {
	c := "authorizations/" + typ
	cache, _ := s.authCaches.LoadOrStore(c, new(store.Cache[authRecord]))
	return &Authorizer{sim: s, collection: c, cache: cache.(*store.Cache[authRecord])}
}

// Metadata describes what the simulator serves.
func Metadata(version string) provider.Metadata {
	md := provider.Metadata{Name: Name, Version: version}
	for _, t := range InstanceTypes() {
		md.Objects = append(md.Objects, provider.Object{
			Kind: provider.KindInstance, Type: t,
			Schema: provider.Schema{Open: true}, // free-form: stored and returned as given
		})
	}
	md.Objects = append(md.Objects,
		provider.Object{Kind: provider.KindFlavor, Type: FlavorType, Schema: flavorSchema(), PrepareAhead: true},
		provider.Object{Kind: provider.KindLoadBalancer, Type: provider.AnyName, Schema: provider.Schema{}},
		provider.Object{Kind: provider.KindAuthorizer, Type: AuthorizerType, Schema: provider.Schema{Open: true}},
		provider.Object{Kind: provider.KindMetrics, Type: MetricsType, Schema: provider.Schema{}},
	)
	return md
}

// InstancePlugins is the instance plugin of every served type, by type.
func (s *Simulator) InstancePlugins() map[string]instance.Plugin {
	out := map[string]instance.Plugin{}
	for _, t := range InstanceTypes() {
		out[t] = s.Instances(t)
	}
	return out
}

// L4 returns the named load balancer as the SPI interface (never a typed nil),
// for plugin.ServeConfig.LoadBalancer.
func (s *Simulator) L4(name string) (loadbalancer.L4, error) {
	lb, err := s.LoadBalancer(name)
	if err != nil {
		return nil, err
	}
	return lb, nil
}
