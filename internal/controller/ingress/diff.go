package ingress

import (
	"cmp"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Diff decides what one load balancer needs so that its routes are desired's
// and its backends are the live members of desired's groups (see the package
// doc for the rules). members holds each group's members by group name; a
// group that is absent has none. When membershipKnown is false no backend
// change is decided and BackendsHeld is set. Its cost is linear in the
// number of routes, backends and members, plus sorting the changes.
func Diff(desired DesiredLB, observedRoutes []loadbalancer.Route, observedBackends []loadbalancer.Backend,
	members map[string][]group.Member, membershipKnown bool) Changes {
	ch := Changes{LoadBalancer: desired.LoadBalancer}
	diffRoutes(&ch, desired.Routes, observedRoutes)
	if ch.RoutesChanged() {
		ch.HealthCheck = desired.HealthCheck()
	}
	if !membershipKnown {
		ch.BackendsHeld = true
		return ch
	}
	diffBackends(&ch, Backends(desired.Groups, members), Kept(desired.Groups, members), observedBackends)
	return ch
}

func diffRoutes(ch *Changes, desired, observed []loadbalancer.Route) {
	seen := make(map[int]loadbalancer.Route, len(observed))
	for _, r := range observed {
		if _, dup := seen[r.LoadBalancerPort]; !dup {
			seen[r.LoadBalancerPort] = r
		}
	}
	wanted := make(map[int]bool, len(desired))
	for _, r := range desired {
		if wanted[r.LoadBalancerPort] {
			continue // the first declared wins
		}
		wanted[r.LoadBalancerPort] = true
		old, ok := seen[r.LoadBalancerPort]
		switch {
		case !ok:
			ch.Publish = append(ch.Publish, r)
		case !SameRoute(old, r):
			ch.Republish = append(ch.Republish, RouteChange{Old: old, New: r})
		}
	}
	for port, r := range seen {
		if !wanted[port] {
			ch.Unpublish = append(ch.Unpublish, r)
		}
	}
	byPort := func(a, b loadbalancer.Route) int { return cmp.Compare(a.LoadBalancerPort, b.LoadBalancerPort) }
	slices.SortFunc(ch.Publish, byPort)
	slices.SortFunc(ch.Unpublish, byPort)
	slices.SortFunc(ch.Republish, func(a, b RouteChange) int { return byPort(a.New, b.New) })
}

// SameRoute reports whether two routes on a load balancer are the same:
// same ports, protocols (ignoring case) and certificate.
func SameRoute(a, b loadbalancer.Route) bool {
	return a.LoadBalancerPort == b.LoadBalancerPort && a.Port == b.Port &&
		strings.EqualFold(string(a.LoadBalancerProtocol), string(b.LoadBalancerProtocol)) &&
		strings.EqualFold(string(a.Protocol), string(b.Protocol)) &&
		a.Certificate == b.Certificate
}

// Backends are the backends the members of groups should have: one per
// running member with an ID, carrying its address, in the order of groups
// and members; the first of two entries with the same ID wins. A pending
// member gets its backend once it runs (its address may not be known
// before), and keeps one it has meanwhile (Kept).
func Backends(groups []string, members map[string][]group.Member) []loadbalancer.Backend {
	n := 0
	for _, g := range groups {
		n += len(members[g])
	}
	out := make([]loadbalancer.Backend, 0, n)
	seen := make(map[instance.ID]bool, n)
	for _, g := range groups {
		for _, m := range members[g] {
			if m.ID == "" || !Serves(m) || seen[m.ID] {
				continue
			}
			seen[m.ID] = true
			out = append(out, loadbalancer.Backend{ID: m.ID, Address: m.Address})
		}
	}
	return out
}

// Serves reports whether member m is to be a backend now: it runs (a
// provider that reports no state is taken as running).
func Serves(m group.Member) bool {
	return m.State == instance.StateRunning || m.State == ""
}

// Keeps reports whether a backend of member m stays registered: m is live
// (pending or running), not terminating.
func Keeps(m group.Member) bool { return m.State != instance.StateTerminating }

// Kept are the IDs of the members of groups whose backends stay (Keeps).
func Kept(groups []string, members map[string][]group.Member) map[instance.ID]bool {
	out := map[instance.ID]bool{}
	for _, g := range groups {
		for _, m := range members[g] {
			if m.ID != "" && Keeps(m) {
				out[m.ID] = true
			}
		}
	}
	return out
}

func diffBackends(ch *Changes, desired []loadbalancer.Backend, keep map[instance.ID]bool, observed []loadbalancer.Backend) {
	seen := make(map[instance.ID]loadbalancer.Backend, len(observed))
	for _, b := range observed {
		if _, dup := seen[b.ID]; !dup {
			seen[b.ID] = b
		}
	}
	for _, b := range desired {
		old, ok := seen[b.ID]
		switch {
		case !ok:
			ch.Register = append(ch.Register, b)
		case old.Address != b.Address:
			ch.Readdress = append(ch.Readdress, BackendChange{Old: old, New: b})
		}
	}
	for id, b := range seen {
		if !keep[id] {
			ch.Deregister = append(ch.Deregister, b)
		}
	}
	byID := func(a, b loadbalancer.Backend) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(ch.Register, byID)
	slices.SortFunc(ch.Deregister, byID)
	slices.SortFunc(ch.Readdress, func(a, b BackendChange) int { return byID(a.New, b.New) })
}

// Registered are the observed backends whose IDs are among ids, sorted by
// ID, each once: what deregistering ids from a load balancer removes.
func Registered(observed []loadbalancer.Backend, ids []instance.ID) []loadbalancer.Backend {
	want := make(map[instance.ID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var out []loadbalancer.Backend
	for _, b := range observed {
		if want[b.ID] {
			want[b.ID] = false
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b loadbalancer.Backend) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Teardown decides what an ingress that lets go of a load balancer takes
// off it: every route and backend on it, except what remain wants, remain
// being the rules of the stack that still name the load balancer (other
// ingresses'; empty when none does): routes on its lb ports and backends
// that are live members of its groups stay. Nothing is published,
// republished or registered: that is the sync of the ingress that keeps the
// load balancer. When remain has groups and their membership is unknown
// (membershipKnown false), no backend goes and BackendsHeld is set; without
// groups the membership is not needed. It is what `ingress destroy` does
// (remain empty) and what apply does to a load balancer an ingress no
// longer names.
func Teardown(remain DesiredLB, observedRoutes []loadbalancer.Route, observedBackends []loadbalancer.Backend,
	members map[string][]group.Member, membershipKnown bool) Changes {
	if len(remain.Groups) == 0 {
		members, membershipKnown = nil, true
	}
	d := Diff(remain, observedRoutes, observedBackends, members, membershipKnown)
	return Changes{LoadBalancer: remain.LoadBalancer, Unpublish: d.Unpublish, Deregister: d.Deregister, BackendsHeld: d.BackendsHeld}
}
