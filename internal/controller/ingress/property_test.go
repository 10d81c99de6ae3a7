package ingress

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// The properties drive Diff with random load balancers and memberships, and
// apply its changes to a simulated load balancer that behaves as the SPI
// says (routes keyed by lb port, backends keyed by ID), in a plan's
// order.

// simLB is a simulated load balancer.
type simLB struct {
	routes   map[int]loadbalancer.Route
	backends map[instance.ID]loadbalancer.Backend
	hc       *loadbalancer.HealthCheck
}

func newSimLB(routes []loadbalancer.Route, backends []loadbalancer.Backend) *simLB {
	s := &simLB{routes: map[int]loadbalancer.Route{}, backends: map[instance.ID]loadbalancer.Backend{}}
	for _, r := range routes {
		s.routes[r.LoadBalancerPort] = r
	}
	for _, b := range backends {
		s.backends[b.ID] = b
	}
	return s
}

func (s *simLB) listRoutes() []loadbalancer.Route {
	return slices.SortedFunc(maps.Values(s.routes), func(a, b loadbalancer.Route) int {
		return cmp.Compare(a.LoadBalancerPort, b.LoadBalancerPort)
	})
}

func (s *simLB) listBackends() []loadbalancer.Backend {
	return slices.SortedFunc(maps.Values(s.backends), func(a, b loadbalancer.Backend) int { return cmp.Compare(a.ID, b.ID) })
}

// apply carries out ch as the steps of a plan do.
func (s *simLB) apply(ch Changes) {
	for _, b := range ch.Readdress {
		delete(s.backends, b.Old.ID)
	}
	for _, b := range ch.Register {
		s.backends[b.ID] = b
	}
	for _, b := range ch.Readdress {
		s.backends[b.New.ID] = b.New
	}
	for _, r := range ch.Unpublish {
		delete(s.routes, r.LoadBalancerPort)
	}
	for _, r := range ch.Republish {
		delete(s.routes, r.Old.LoadBalancerPort)
		s.routes[r.New.LoadBalancerPort] = r.New
	}
	for _, r := range ch.Publish {
		s.routes[r.LoadBalancerPort] = r
	}
	if ch.HealthCheck != nil {
		hc := *ch.HealthCheck
		s.hc = &hc
	}
	for _, b := range ch.Deregister {
		delete(s.backends, b.ID)
	}
}

var (
	protocolPool = []loadbalancer.Protocol{loadbalancer.HTTP, loadbalancer.HTTPS, loadbalancer.TCP, "HTTPS"}
	certPool     = []string{"", "c1", "c2"}
	addressPool  = []string{"", "10.0.0.1", "10.0.0.2", "10.0.0.3"}
	groupPool    = []string{"a", "b", "c"}
)

func genRoute(t *rapid.T, label string) loadbalancer.Route {
	return loadbalancer.Route{
		LoadBalancerPort:     rapid.IntRange(1, 6).Draw(t, label+".lb_port"),
		LoadBalancerProtocol: rapid.SampledFrom(protocolPool).Draw(t, label+".lb_protocol"),
		Port:                 rapid.IntRange(1, 3).Draw(t, label+".port"),
		Protocol:             rapid.SampledFrom(protocolPool).Draw(t, label+".protocol"),
		Certificate:          rapid.SampledFrom(certPool).Draw(t, label+".certificate"),
	}
}

func genRoutes(t *rapid.T, label string) []loadbalancer.Route {
	n := rapid.IntRange(0, 5).Draw(t, label+".n")
	out := make([]loadbalancer.Route, n)
	for i := range out {
		out[i] = genRoute(t, fmt.Sprintf("%s[%d]", label, i))
	}
	return out
}

func genID(t *rapid.T, label string) instance.ID {
	return instance.ID(fmt.Sprintf("i%d", rapid.IntRange(0, 12).Draw(t, label)))
}

// genObservedRoutes are what a keyed load balancer can list: one per lb port.
func genObservedRoutes(t *rapid.T) []loadbalancer.Route {
	return newSimLB(genRoutes(t, "observed"), nil).listRoutes()
}

func genObservedBackends(t *rapid.T) []loadbalancer.Backend {
	n := rapid.IntRange(0, 8).Draw(t, "backends.n")
	var bs []loadbalancer.Backend
	for i := range n {
		bs = append(bs, loadbalancer.Backend{
			ID:      genID(t, fmt.Sprintf("backend[%d].id", i)),
			Address: rapid.SampledFrom(addressPool).Draw(t, fmt.Sprintf("backend[%d].address", i)),
		})
	}
	return newSimLB(nil, bs).listBackends()
}

func genMembers(t *rapid.T) map[string][]group.Member {
	out := map[string][]group.Member{}
	for _, g := range groupPool {
		n := rapid.IntRange(0, 5).Draw(t, g+".n")
		for i := range n {
			label := fmt.Sprintf("%s[%d]", g, i)
			out[g] = append(out[g], group.Member{
				ID:      genID(t, label+".id"),
				Address: rapid.SampledFrom(addressPool).Draw(t, label+".address"),
				State:   rapid.SampledFrom([]instance.State{running, running, pending, terminating}).Draw(t, label+".state"),
			})
		}
	}
	return out
}

func genDesired(t *rapid.T) DesiredLB {
	return DesiredLB{
		LoadBalancer: "lb",
		Routes:       genRoutes(t, "desired"),
		Groups:       rapid.SliceOfDistinct(rapid.SampledFrom(groupPool), rapid.ID[string]).Draw(t, "groups"),
	}
}

// wantRoutes are the desired routes as a keyed load balancer holds them.
func wantRoutes(d DesiredLB) []loadbalancer.Route {
	s := newSimLB(nil, nil)
	for _, r := range d.Routes {
		if _, dup := s.routes[r.LoadBalancerPort]; !dup {
			s.routes[r.LoadBalancerPort] = r
		}
	}
	return s.listRoutes()
}

func sameRoutes(a, b []loadbalancer.Route) bool {
	return slices.EqualFunc(a, b, SameRoute)
}

// Applying the changes makes the load balancer what it should be, and a diff
// of the result is empty.
func TestPropertyConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genDesired(t), genMembers(t)
		lb := newSimLB(genObservedRoutes(t), genObservedBackends(t))
		before := lb.listBackends()
		ch := Diff(d, lb.listRoutes(), before, members, true)
		lb.apply(ch)
		if got, want := lb.listRoutes(), wantRoutes(d); !sameRoutes(got, want) {
			t.Fatalf("routes after apply %v, want %v", got, want)
		}
		// Running members are backends at their addresses; a pending
		// member keeps the backend it had.
		wantBackends := Backends(d.Groups, members)
		serving := map[instance.ID]bool{}
		for _, b := range wantBackends {
			serving[b.ID] = true
		}
		kept := Kept(d.Groups, members)
		for _, b := range before {
			if kept[b.ID] && !serving[b.ID] {
				wantBackends = append(wantBackends, b)
				serving[b.ID] = true
			}
		}
		want := newSimLB(nil, wantBackends).listBackends()
		if got := lb.listBackends(); !slices.Equal(got, want) {
			t.Fatalf("backends after apply %v, want %v", got, want)
		}
		if again := Diff(d, lb.listRoutes(), lb.listBackends(), members, true); !again.Empty() {
			t.Fatalf("diff of the converged load balancer: %+v", again)
		}
		if ch.RoutesChanged() && len(d.Routes) > 0 && (lb.hc == nil || lb.hc.BackendPort != d.Routes[0].Port) {
			t.Fatalf("routes changed but the health check is %+v", lb.hc)
		}
	})
}

// With unknown membership no backend changes, whatever the members say,
// and the routes still converge.
func TestPropertyUnknownMembershipNeverTouchesBackends(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genDesired(t), genMembers(t)
		lb := newSimLB(genObservedRoutes(t), genObservedBackends(t))
		before := lb.listBackends()
		ch := Diff(d, lb.listRoutes(), before, members, false)
		if len(ch.Register) > 0 || len(ch.Deregister) > 0 || len(ch.Readdress) > 0 || !ch.BackendsHeld {
			t.Fatalf("backend changes with unknown membership: %+v", ch)
		}
		lb.apply(ch)
		if got := lb.listBackends(); !slices.Equal(got, before) {
			t.Fatalf("backends changed: %v → %v", before, got)
		}
		if got, want := lb.listRoutes(), wantRoutes(d); !sameRoutes(got, want) {
			t.Fatalf("routes after apply %v, want %v", got, want)
		}
	})
}

// A live member of a routed group is never deregistered (only re-addressed),
// and nothing is registered that is not one.
func TestPropertyLiveMembersStay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, members := genDesired(t), genMembers(t)
		ch := Diff(d, genObservedRoutes(t), genObservedBackends(t), members, true)
		live := map[instance.ID]bool{}
		for _, b := range Backends(d.Groups, members) {
			live[b.ID] = true
		}
		for _, b := range ch.Deregister {
			if live[b.ID] {
				t.Fatalf("live member %s deregistered", b.ID)
			}
		}
		for _, b := range ch.Register {
			if !live[b.ID] {
				t.Fatalf("%s registered but is no live member", b.ID)
			}
		}
	})
}
