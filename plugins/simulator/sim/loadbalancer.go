package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/infrakit/infrakit/plugins/simulator/store"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

const lbCollection = "loadbalancers"

// lbRecord is the file of one load balancer. Routes are keyed by lb_port and
// kept sorted by it; backends are keyed by id and kept sorted by it.
type lbRecord struct {
	Name        string           `json:"name"`
	Routes      []routeRecord    `json:"routes"`
	Backends    []backendRecord  `json:"backends"`
	HealthCheck *healthCheckJSON `json:"healthcheck,omitempty"`
}

// routeRecord uses the field names of `infrakit lb routes ls -json`.
type routeRecord struct {
	LoadBalancerPort     int    `json:"lb_port"`
	LoadBalancerProtocol string `json:"lb_protocol"`
	Port                 int    `json:"port"`
	Protocol             string `json:"protocol"`
	Certificate          string `json:"certificate,omitempty"`
}

type backendRecord struct {
	ID      string `json:"id"`
	Address string `json:"address,omitempty"`
}

// healthCheckJSON stores durations as Go duration strings ("10s") so the
// file reads well.
type healthCheckJSON struct {
	BackendPort int    `json:"backend_port"`
	Healthy     int    `json:"healthy"`
	Unhealthy   int    `json:"unhealthy"`
	Interval    string `json:"interval"`
	Timeout     string `json:"timeout"`
}

// LoadBalancer is one named simulated L4 load balancer. Any name is served;
// its file appears on the first change.
type LoadBalancer struct {
	sim  *Simulator
	name string
	key  store.Key
}

var _ loadbalancer.L4 = (*LoadBalancer)(nil)

// LoadBalancer returns the named load balancer; the name must be usable as a
// file name.
func (s *Simulator) LoadBalancer(name string) (*LoadBalancer, error) {
	if err := store.ValidName(name); err != nil {
		return nil, fmt.Errorf("load balancer name: %w", err)
	}
	return &LoadBalancer{sim: s, name: name, key: store.Key{Collection: lbCollection, Name: name}}, nil
}

// read is the load balancer's record, through the simulator's cache of
// them (a load balancer of 10,000 backends is a 1 MB file, which a sync
// read and decoded twice per listing): decoded again only when its file
// changed. The record is shared: callers copy what they sort or change.
func (lb *LoadBalancer) read(ctx context.Context) (lbRecord, error) {
	objs, _, err := lb.sim.lbCache.List(ctx, lb.sim.store, lbCollection)
	if err != nil {
		return lbRecord{}, fmt.Errorf("load balancer %q: %w", lb.name, err)
	}
	if i := slices.IndexFunc(objs, func(o store.Object[lbRecord]) bool { return o.Name == lb.name }); i >= 0 {
		return objs[i].Value, nil
	}
	// Not listed: missing, or corrupt (which the listing skips and Get
	// reports).
	rec, err := store.Get[lbRecord](lb.sim.store, lb.key)
	if errors.Is(err, store.ErrNotFound) {
		return lbRecord{Name: lb.name}, nil
	}
	if err != nil {
		return rec, fmt.Errorf("load balancer %q: %w", lb.name, err)
	}
	return rec, nil
}

// update changes the record under its lock, through the memo of what this
// process last wrote, so that the 1 MB record of 10,000 backends is not
// read and decoded again for every register batch. fn replaces what it
// changes (the edits below build new slices): the record it gets may be
// the memo's.
func (lb *LoadBalancer) update(ctx context.Context, op string, fn func(*lbRecord) error) error {
	m, _ := lb.sim.lbMemos.LoadOrStore(lb.name, new(store.Memo[lbRecord]))
	err := store.UpdateMemo(ctx, lb.sim.store, lb.key, m.(*store.Memo[lbRecord]), func(rec *lbRecord, _ bool) error {
		rec.Name = lb.name
		return fn(rec)
	})
	if err != nil {
		return fmt.Errorf("load balancer %q: %s: %w", lb.name, op, err)
	}
	return nil
}

// Routes lists the routes, sorted by load balancer port.
func (lb *LoadBalancer) Routes(ctx context.Context) ([]loadbalancer.Route, error) {
	rec, err := lb.read(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]loadbalancer.Route, 0, len(rec.Routes))
	for _, r := range sortedRoutes(rec.Routes) {
		out = append(out, loadbalancer.Route{
			Port:                 r.Port,
			Protocol:             loadbalancer.Protocol(r.Protocol),
			LoadBalancerPort:     r.LoadBalancerPort,
			LoadBalancerProtocol: loadbalancer.Protocol(r.LoadBalancerProtocol),
			Certificate:          r.Certificate,
		})
	}
	return out, nil
}

// Publish adds a route, replacing the one on the same load balancer port.
func (lb *LoadBalancer) Publish(ctx context.Context, route loadbalancer.Route) error {
	r, err := routeFrom(route)
	if err != nil {
		return fmt.Errorf("load balancer %q: publish: %w", lb.name, err)
	}
	return lb.update(ctx, "publish", func(rec *lbRecord) error {
		rec.Routes = publish(rec.Routes, r)
		return nil
	})
}

// Unpublish removes the route on a load balancer port; a missing one is fine.
func (lb *LoadBalancer) Unpublish(ctx context.Context, port int) error {
	return lb.update(ctx, "unpublish", func(rec *lbRecord) error {
		rec.Routes = unpublish(rec.Routes, port)
		return nil
	})
}

// ConfigureHealthCheck records the health check.
func (lb *LoadBalancer) ConfigureHealthCheck(ctx context.Context, hc loadbalancer.HealthCheck) error {
	if err := validPort("backend port", hc.BackendPort); err != nil {
		return fmt.Errorf("load balancer %q: configure health check: %w", lb.name, err)
	}
	if hc.Healthy < 0 || hc.Unhealthy < 0 || hc.Interval < 0 || hc.Timeout < 0 {
		return fmt.Errorf("load balancer %q: configure health check: thresholds and durations must not be negative", lb.name)
	}
	return lb.update(ctx, "configure health check", func(rec *lbRecord) error {
		rec.HealthCheck = &healthCheckJSON{
			BackendPort: hc.BackendPort,
			Healthy:     hc.Healthy,
			Unhealthy:   hc.Unhealthy,
			Interval:    hc.Interval.String(),
			Timeout:     hc.Timeout.String(),
		}
		return nil
	})
}

// HealthCheck returns the configured health check, if any. It is not part of
// the L4 SPI (which has no getter); tests and tools use it.
func (lb *LoadBalancer) HealthCheck(ctx context.Context) (*loadbalancer.HealthCheck, error) {
	rec, err := lb.read(ctx)
	if err != nil || rec.HealthCheck == nil {
		return nil, err
	}
	interval, err1 := time.ParseDuration(rec.HealthCheck.Interval)
	timeout, err2 := time.ParseDuration(rec.HealthCheck.Timeout)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("load balancer %q: health check: %w", lb.name, err)
	}
	return &loadbalancer.HealthCheck{
		BackendPort: rec.HealthCheck.BackendPort,
		Healthy:     rec.HealthCheck.Healthy,
		Unhealthy:   rec.HealthCheck.Unhealthy,
		Interval:    interval,
		Timeout:     timeout,
	}, nil
}

// Backends lists the backends, sorted by ID.
func (lb *LoadBalancer) Backends(ctx context.Context) ([]loadbalancer.Backend, error) {
	rec, err := lb.read(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]loadbalancer.Backend, 0, len(rec.Backends))
	for _, b := range sortedBackends(rec.Backends) {
		out = append(out, loadbalancer.Backend{ID: instance.ID(b.ID), Address: b.Address})
	}
	return out, nil
}

// RegisterBackends adds backends; registering a known ID updates its address.
func (lb *LoadBalancer) RegisterBackends(ctx context.Context, backends []loadbalancer.Backend) error {
	add := make([]backendRecord, 0, len(backends))
	for _, b := range backends {
		if b.ID == "" {
			return fmt.Errorf("load balancer %q: register backends: a backend has an empty ID", lb.name)
		}
		add = append(add, backendRecord{ID: string(b.ID), Address: b.Address})
	}
	return lb.update(ctx, "register backends", func(rec *lbRecord) error {
		rec.Backends = register(rec.Backends, add)
		return nil
	})
}

// DeregisterBackends removes backends by ID; unknown IDs are ignored.
func (lb *LoadBalancer) DeregisterBackends(ctx context.Context, ids []instance.ID) error {
	return lb.update(ctx, "deregister backends", func(rec *lbRecord) error {
		rec.Backends = deregister(rec.Backends, ids)
		return nil
	})
}

var knownProtocols = []loadbalancer.Protocol{
	loadbalancer.TCP, loadbalancer.HTTP, loadbalancer.HTTPS, loadbalancer.SSL, loadbalancer.UDP,
}

func validPort(what string, p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("%s %d is not in 1..65535", what, p)
	}
	return nil
}

// routeFrom checks a route and lower-cases its protocols.
func routeFrom(r loadbalancer.Route) (routeRecord, error) {
	rr := routeRecord{
		LoadBalancerPort:     r.LoadBalancerPort,
		LoadBalancerProtocol: strings.ToLower(string(r.LoadBalancerProtocol)),
		Port:                 r.Port,
		Protocol:             strings.ToLower(string(r.Protocol)),
		Certificate:          r.Certificate,
	}
	errs := []error{validPort("lb_port", rr.LoadBalancerPort), validPort("port", rr.Port)}
	for _, p := range []struct{ field, v string }{{"lb_protocol", rr.LoadBalancerProtocol}, {"protocol", rr.Protocol}} {
		if !slices.Contains(knownProtocols, loadbalancer.Protocol(p.v)) {
			errs = append(errs, fmt.Errorf("%s %q is not one of %v", p.field, p.v, knownProtocols))
		}
	}
	return rr, errors.Join(errs...)
}

// publish, unpublish, register and deregister are the pure edits behind the
// L4 methods; they return sorted, duplicate-free lists.

func publish(routes []routeRecord, r routeRecord) []routeRecord {
	return sortedRoutes(append(unpublish(routes, r.LoadBalancerPort), r))
}

func unpublish(routes []routeRecord, port int) []routeRecord {
	return slices.DeleteFunc(slices.Clone(routes), func(r routeRecord) bool { return r.LoadBalancerPort == port })
}

func sortedRoutes(routes []routeRecord) []routeRecord {
	routes = slices.Clone(routes)
	slices.SortStableFunc(routes, func(a, b routeRecord) int { return cmp.Compare(a.LoadBalancerPort, b.LoadBalancerPort) })
	return routes
}

// register merges add into backends, which are kept sorted by ID without
// duplicates: a merge of the two sorted lists, so a batch costs O(n + k log k)
// rather than rebuilding and sorting all n. A hand-edited list that is not
// strictly sorted is put in order first.
func register(backends, add []backendRecord) []backendRecord {
	if !strictlySorted(backends) {
		backends = dedupe(sortedBackends(backends))
	}
	// Sorted stably, so that of two backends with one ID the later wins.
	add = dedupe(sortedBackends(add))
	out := make([]backendRecord, 0, len(backends)+len(add))
	i, j := 0, 0
	for i < len(backends) && j < len(add) {
		switch c := byBackendID(backends[i], add[j]); {
		case c < 0:
			out = append(out, backends[i])
			i++
		case c > 0:
			out = append(out, add[j])
			j++
		default:
			out = append(out, add[j])
			i++
			j++
		}
	}
	out = append(out, backends[i:]...)
	return append(out, add[j:]...)
}

func strictlySorted(bs []backendRecord) bool {
	for i := 1; i < len(bs); i++ {
		if bs[i-1].ID >= bs[i].ID {
			return false
		}
	}
	return true
}

// dedupe keeps the last of each run of backends with one ID in a sorted list.
func dedupe(bs []backendRecord) []backendRecord {
	out := bs[:0:0]
	for i, b := range bs {
		if i+1 < len(bs) && bs[i+1].ID == b.ID {
			continue
		}
		out = append(out, b)
	}
	return out
}

func deregister(backends []backendRecord, ids []instance.ID) []backendRecord {
	drop := map[string]bool{}
	for _, id := range ids {
		drop[string(id)] = true
	}
	return slices.DeleteFunc(slices.Clone(backends), func(b backendRecord) bool { return drop[b.ID] })
}

// sortedBackends is a copy of bs sorted stably by ID.
func sortedBackends(bs []backendRecord) []backendRecord {
	bs = slices.Clone(bs)
	slices.SortStableFunc(bs, byBackendID)
	return bs
}

func byBackendID(a, b backendRecord) int { return cmp.Compare(a.ID, b.ID) }
