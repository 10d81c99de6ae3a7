// Package ingress keeps load balancers in step with an ingress block: each
// load balancer a rule names publishes exactly the rules' routes and has
// exactly the members of the rules' groups as its backends.
//
// The package decides and acts on nothing. Diff is a pure function of one
// load balancer's desired state (DesiredLB), what the load balancer lists
// (its routes and backends) and the groups' members; it returns Changes, a
// value that can be printed and tested without a provider. Package plan
// turns decisions into steps, and package execute carries them out through
// the load balancer SPI.
//
// Decisions this package makes, which users see:
//
//   - A load balancer named by an ingress is owned by it. Routes on it that no
//     rule declares are unpublished, and backends that are not members of the
//     rules' groups are deregistered, whoever added them. (Two ingresses must
//     therefore not share a load balancer.)
//   - Several rules may name the same load balancer: its routes and its groups
//     are the union of theirs. When two declare the same lb_port the first
//     declared wins (the stack loader rejects that anyway).
//   - A route is identified by its lb_port. One whose lb_protocol, backend
//     port, backend protocol or certificate differs is republished: unpublished
//     and published again. Protocols compare case-insensitively, as load
//     balancers tend to normalise them.
//   - Backends are the group members that run (Serves): a pending member is
//     registered once it runs, when its address is known, and a backend it
//     has meanwhile is kept (Keeps: only a terminating or gone member loses
//     its backend). Each backend carries the member's address; it may be
//     empty, for load balancers that take instance IDs. A member whose
//     address changed is deregistered and registered again with the new
//     one. Plans take these decisions from Diff for the members that stay
//     and add the members they make, and the order (package plan).
//   - What an ingress lets go of is torn down (Teardown): a load
//     balancer it no longer names (Released), or every one when it leaves
//     the stack, has its routes unpublished and its backends deregistered,
//     except what the rules still naming it (another ingress's: Wanted)
//     want, which that ingress's own sync keeps.
//   - If the membership of any group could not be read, no backend is
//     registered or deregistered on that pass (an unknown membership must never
//     empty a load balancer); routes are still synced.
//   - Registered picks, of what a load balancer lists, the backends of
//     given members: what deregistering members that leave takes off it,
//     with the addresses it holds for them.
//   - The health check probes the first declared route's backend port with
//     DefaultHealthCheck's thresholds (every 2 s, 1 s timeout, 2 to rise, 2
//     to fall). The SPI cannot read a health check back, so Diff asks for it
//     whenever routes change (a plan may also configure it on a load
//     balancer whose routes did not change: see plan.Scope.Configure).
package ingress

import (
	"slices"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// DefaultHealthCheck is the health check configured on every load balancer of
// an ingress, with BackendPort set to the first route's backend port.
//
// The check is what takes out a backend that stops answering while its
// instance lives on (a hung process, a wedged container), which no
// membership change reports; it does so within about an interval (load
// balancers re-check a failing backend sooner: HAProxy's fastinter). Every
// 2 s, HAProxy's own default, costs each backend one connection (or GET)
// per interval. The timeout is below the interval, as cloud load balancers
// require, and ample for a backend on the same network.
var DefaultHealthCheck = loadbalancer.HealthCheck{
	Healthy:   2,
	Unhealthy: 2,
	Interval:  2 * time.Second,
	Timeout:   time.Second,
}

// DesiredLB is what one load balancer should be: the routes it publishes and
// the groups whose members are its backends.
type DesiredLB struct {
	// LoadBalancer is the loadbalancer block's name.
	LoadBalancer string `json:"loadbalancer"`
	// Routes in declaration order; lb ports are unique.
	Routes []loadbalancer.Route `json:"routes"`
	// Groups are group names, without duplicates, in declaration order.
	Groups []string `json:"groups"`
}

// HealthCheck is the health check the load balancer should have: the
// DefaultHealthCheck on the first route's backend port; nil without routes.
func (d DesiredLB) HealthCheck() *loadbalancer.HealthCheck {
	if len(d.Routes) == 0 {
		return nil
	}
	hc := DefaultHealthCheck
	hc.BackendPort = d.Routes[0].Port
	return &hc
}

// DesiredLBs merges the rules of an ingress by load balancer, in the order
// the load balancers are first named. Routes keep their declaration order
// (the first one declared on an lb port wins); groups are deduplicated.
func DesiredLBs(in *config.Ingress) []DesiredLB {
	if in == nil {
		return nil
	}
	var out []DesiredLB
	index := map[string]int{}
	for _, r := range in.Rules {
		i, ok := index[r.LoadBalancer]
		if !ok {
			i = len(out)
			index[r.LoadBalancer] = i
			out = append(out, DesiredLB{LoadBalancer: r.LoadBalancer})
		}
		d := &out[i]
		for _, rt := range r.Routes {
			if !slices.ContainsFunc(d.Routes, func(x loadbalancer.Route) bool { return x.LoadBalancerPort == rt.LBPort }) {
				d.Routes = append(d.Routes, rt.SPI())
			}
		}
		for _, g := range r.Groups {
			if !slices.Contains(d.Groups, g) {
				d.Groups = append(d.Groups, g)
			}
		}
	}
	return out
}

// Wanted is what the rules of ins that name load balancer lb want of it:
// their routes and groups merged as DesiredLBs merges them (empty when no
// rule names it).
func Wanted(lb string, ins []*config.Ingress) DesiredLB {
	merged := &config.Ingress{}
	for _, in := range ins {
		if in == nil {
			continue
		}
		for _, r := range in.Rules {
			if r.LoadBalancer == lb {
				merged.Rules = append(merged.Rules, r)
			}
		}
	}
	if ds := DesiredLBs(merged); len(ds) > 0 {
		return ds[0]
	}
	return DesiredLB{LoadBalancer: lb}
}

// Released are the load balancers the ingress as applied (stored) named
// that it no longer does as desired (nil: the ingress left the stack: all
// of them), or that moved (moved reports it: the loadbalancer block now
// names another provider, so the stored one is another load balancer), in
// the order stored names them. Their routes and backends are the stored
// ingress's to take down (see Teardown).
func Released(stored, desired *config.Ingress, moved func(lb string) bool) []string {
	keep := map[string]bool{}
	for _, d := range DesiredLBs(desired) {
		keep[d.LoadBalancer] = true
	}
	var out []string
	for _, d := range DesiredLBs(stored) {
		if !keep[d.LoadBalancer] || moved != nil && moved(d.LoadBalancer) {
			out = append(out, d.LoadBalancer)
		}
	}
	return out
}

// Changes is what one load balancer needs (from Diff or Teardown). Lists
// are sorted: routes by lb port, backends by ID.
type Changes struct {
	LoadBalancer string
	// Publish are routes to add.
	Publish []loadbalancer.Route
	// Republish are routes whose settings changed: Old is unpublished, then
	// New published on the same lb port.
	Republish []RouteChange
	// Unpublish are routes to remove (as observed).
	Unpublish []loadbalancer.Route
	// HealthCheck, when set, is configured after the routes change.
	HealthCheck *loadbalancer.HealthCheck
	// Register are members to add as backends.
	Register []loadbalancer.Backend
	// Readdress are backends whose member's address changed: Old is
	// deregistered, then New registered.
	Readdress []BackendChange
	// Deregister are backends that are no members (as observed).
	Deregister []loadbalancer.Backend
	// BackendsHeld is set when the membership was unknown, so backends were
	// left as they are.
	BackendsHeld bool
}

// RouteChange is a route republished with new settings on the same lb port.
type RouteChange struct {
	Old loadbalancer.Route `json:"old"`
	New loadbalancer.Route `json:"new"`
}

// BackendChange is a backend re-registered with its member's new address.
type BackendChange struct {
	Old loadbalancer.Backend `json:"old"`
	New loadbalancer.Backend `json:"new"`
}

// Empty reports whether there is nothing to do.
func (c Changes) Empty() bool {
	return len(c.Publish) == 0 && len(c.Republish) == 0 && len(c.Unpublish) == 0 &&
		c.HealthCheck == nil && len(c.Register) == 0 && len(c.Readdress) == 0 && len(c.Deregister) == 0
}

// RoutesChanged reports whether any route is published, republished or unpublished.
func (c Changes) RoutesChanged() bool {
	return len(c.Publish) > 0 || len(c.Republish) > 0 || len(c.Unpublish) > 0
}
