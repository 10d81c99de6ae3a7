package ingress

import (
	"reflect"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

const (
	running     = instance.StateRunning
	pending     = instance.StatePending
	terminating = instance.StateTerminating
)

func route(lbPort, port int, cert string) loadbalancer.Route {
	return loadbalancer.Route{
		LoadBalancerPort: lbPort, LoadBalancerProtocol: loadbalancer.HTTPS,
		Port: port, Protocol: loadbalancer.HTTP, Certificate: cert,
	}
}

func member(id, addr string, st instance.State) group.Member {
	return group.Member{ID: instance.ID(id), Address: addr, State: st}
}

func backend(id, addr string) loadbalancer.Backend {
	return loadbalancer.Backend{ID: instance.ID(id), Address: addr}
}

func hcOn(port int) *loadbalancer.HealthCheck {
	hc := DefaultHealthCheck
	hc.BackendPort = port
	return &hc
}

func TestDiff(t *testing.T) {
	lb1 := DesiredLB{LoadBalancer: "lb1", Routes: []loadbalancer.Route{route(80, 80, "c1")}, Groups: []string{"miners"}}
	miners := map[string][]group.Member{"miners": {
		member("m1", "10.0.0.1", running), member("m2", "10.0.0.2", running), member("m3", "10.0.0.3", pending),
	}}
	converged := []loadbalancer.Backend{backend("m1", "10.0.0.1"), backend("m2", "10.0.0.2"), backend("m3", "10.0.0.3")}

	tests := []struct {
		name     string
		desired  DesiredLB
		routes   []loadbalancer.Route
		backends []loadbalancer.Backend
		members  map[string][]group.Member
		known    bool
		want     Changes
	}{
		{
			name:    "empty load balancer: publish, health check, register the running members",
			desired: lb1, members: miners, known: true,
			want: Changes{
				Publish:     []loadbalancer.Route{route(80, 80, "c1")},
				HealthCheck: hcOn(80),
				Register:    converged[:2], // m3 is pending: registered once it runs
			},
		},
		{
			name: "converged: nothing", desired: lb1, members: miners, known: true,
			routes: []loadbalancer.Route{route(80, 80, "c1")}, backends: converged,
		},
		{
			name: "protocols compare without case", desired: lb1, members: miners, known: true,
			routes:   []loadbalancer.Route{{LoadBalancerPort: 80, LoadBalancerProtocol: "HTTPS", Port: 80, Protocol: "Http", Certificate: "c1"}},
			backends: converged,
		},
		{
			name: "certificate changed: republish", desired: lb1, members: miners, known: true,
			routes: []loadbalancer.Route{route(80, 80, "old")}, backends: converged,
			want: Changes{
				Republish:   []RouteChange{{Old: route(80, 80, "old"), New: route(80, 80, "c1")}},
				HealthCheck: hcOn(80),
			},
		},
		{
			name: "backend port changed: republish", desired: lb1, members: miners, known: true,
			routes: []loadbalancer.Route{route(80, 8080, "c1")}, backends: converged,
			want: Changes{
				Republish:   []RouteChange{{Old: route(80, 8080, "c1"), New: route(80, 80, "c1")}},
				HealthCheck: hcOn(80),
			},
		},
		{
			name: "backend protocol changed: republish", desired: lb1, members: miners, known: true,
			routes:   []loadbalancer.Route{{LoadBalancerPort: 80, LoadBalancerProtocol: loadbalancer.HTTPS, Port: 80, Protocol: loadbalancer.TCP, Certificate: "c1"}},
			backends: converged,
			want: Changes{
				Republish: []RouteChange{{
					Old: loadbalancer.Route{LoadBalancerPort: 80, LoadBalancerProtocol: loadbalancer.HTTPS, Port: 80, Protocol: loadbalancer.TCP, Certificate: "c1"},
					New: route(80, 80, "c1"),
				}},
				HealthCheck: hcOn(80),
			},
		},
		{
			name: "routes nobody declares are unpublished", desired: lb1, members: miners, known: true,
			routes:   []loadbalancer.Route{route(443, 443, ""), route(80, 80, "c1"), route(22, 22, "")},
			backends: converged,
			want: Changes{
				Unpublish:   []loadbalancer.Route{route(22, 22, ""), route(443, 443, "")},
				HealthCheck: hcOn(80),
			},
		},
		{
			name: "members gone and strangers: deregister", desired: lb1, known: true,
			members:  map[string][]group.Member{"miners": {member("m1", "10.0.0.1", running)}},
			routes:   []loadbalancer.Route{route(80, 80, "c1")},
			backends: append([]loadbalancer.Backend{backend("stranger", "")}, converged...),
			want: Changes{
				Deregister: []loadbalancer.Backend{backend("m2", "10.0.0.2"), backend("m3", "10.0.0.3"), backend("stranger", "")},
			},
		},
		{
			name: "terminating members are deregistered, pending ones wait, and keep what they have", desired: lb1, known: true,
			members: map[string][]group.Member{"miners": {
				member("m1", "10.0.0.1", terminating), member("m4", "10.0.0.4", pending), member("m5", "10.0.0.5", pending),
			}},
			routes:   []loadbalancer.Route{route(80, 80, "c1")},
			backends: []loadbalancer.Backend{backend("m1", "10.0.0.1"), backend("m5", "10.0.0.5")},
			want: Changes{
				Deregister: []loadbalancer.Backend{backend("m1", "10.0.0.1")},
			},
		},
		{
			name: "address changed: readdress", desired: lb1, known: true,
			members:  map[string][]group.Member{"miners": {member("m1", "10.9.9.9", running)}},
			routes:   []loadbalancer.Route{route(80, 80, "c1")},
			backends: []loadbalancer.Backend{backend("m1", "10.0.0.1")},
			want: Changes{
				Readdress: []BackendChange{{Old: backend("m1", "10.0.0.1"), New: backend("m1", "10.9.9.9")}},
			},
		},
		{
			name: "a member without an address is registered by ID", desired: lb1, known: true,
			members: map[string][]group.Member{"miners": {member("m1", "", running)}},
			routes:  []loadbalancer.Route{route(80, 80, "c1")},
			want:    Changes{Register: []loadbalancer.Backend{backend("m1", "")}},
		},
		{
			name: "unknown membership: routes sync, backends held", desired: lb1, known: false,
			routes:   []loadbalancer.Route{route(80, 80, "old")},
			backends: []loadbalancer.Backend{backend("stranger", "")},
			want: Changes{
				Republish:    []RouteChange{{Old: route(80, 80, "old"), New: route(80, 80, "c1")}},
				HealthCheck:  hcOn(80),
				BackendsHeld: true,
			},
		},
		{
			name: "several groups: the union, each ID once", known: true,
			desired: DesiredLB{LoadBalancer: "lb1", Routes: []loadbalancer.Route{route(80, 80, "")}, Groups: []string{"a", "b", "missing"}},
			members: map[string][]group.Member{
				"a": {member("x", "10.0.0.1", running), member("y", "10.0.0.2", running)},
				"b": {member("y", "10.0.0.2", running), member("z", "10.0.0.3", running)},
				"c": {member("not-routed", "10.0.0.4", running)},
			},
			routes: []loadbalancer.Route{route(80, 80, "")},
			want: Changes{Register: []loadbalancer.Backend{
				backend("x", "10.0.0.1"), backend("y", "10.0.0.2"), backend("z", "10.0.0.3"),
			}},
		},
		{
			name: "teardown: an empty desired state empties the load balancer", known: true,
			desired:  DesiredLB{LoadBalancer: "lb1"},
			routes:   []loadbalancer.Route{route(80, 80, "c1")},
			backends: converged,
			want: Changes{
				Unpublish:  []loadbalancer.Route{route(80, 80, "c1")},
				Deregister: converged,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.LoadBalancer = tt.desired.LoadBalancer
			got := Diff(tt.desired, tt.routes, tt.backends, tt.members, tt.known)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Diff:\n got %+v\nwant %+v", got, tt.want)
			}
			if got.Empty() != tt.want.Empty() {
				t.Fatalf("Empty() = %v", got.Empty())
			}
		})
	}
}

func TestDesiredLBs(t *testing.T) {
	in := &config.Ingress{Name: "test.com", Rules: []config.Rule{
		{LoadBalancer: "lb1", Groups: []string{"miners"}, Routes: []config.Route{
			{LBPort: 80, LBProtocol: "https", Port: 80, Protocol: "http", Certificate: "c1"},
		}},
		{LoadBalancer: "lb2", Groups: []string{"miners"}, Routes: []config.Route{
			{LBPort: 8080, LBProtocol: "tcp", Port: 8080, Protocol: "tcp"},
		}},
		{LoadBalancer: "lb1", Groups: []string{"cattle", "miners"}, Routes: []config.Route{
			{LBPort: 443, LBProtocol: "tcp", Port: 8443, Protocol: "tcp"},
			{LBPort: 80, LBProtocol: "tcp", Port: 9999, Protocol: "tcp"}, // a duplicate port: the first declared wins
		}},
	}}
	got := DesiredLBs(in)
	want := []DesiredLB{
		{LoadBalancer: "lb1", Groups: []string{"miners", "cattle"}, Routes: []loadbalancer.Route{
			route(80, 80, "c1"),
			{LoadBalancerPort: 443, LoadBalancerProtocol: "tcp", Port: 8443, Protocol: "tcp"},
		}},
		{LoadBalancer: "lb2", Groups: []string{"miners"}, Routes: []loadbalancer.Route{
			{LoadBalancerPort: 8080, LoadBalancerProtocol: "tcp", Port: 8080, Protocol: "tcp"},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DesiredLBs:\n got %+v\nwant %+v", got, want)
	}
	if hc := got[0].HealthCheck(); hc == nil || hc.BackendPort != 80 {
		t.Fatalf("health check of lb1 = %+v, want the first route's backend port 80", hc)
	}
	if hc := (DesiredLB{LoadBalancer: "x"}).HealthCheck(); hc != nil {
		t.Fatalf("health check without routes = %+v, want none", hc)
	}
}

func TestRegistered(t *testing.T) {
	observed := []loadbalancer.Backend{backend("c", "10.0.0.3"), backend("a", "10.0.0.1"), backend("b", ""), backend("a", "10.0.0.9")}
	got := Registered(observed, []instance.ID{"c", "a", "x", "c"})
	want := []loadbalancer.Backend{backend("a", "10.0.0.1"), backend("c", "10.0.0.3")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Registered = %+v, want %+v", got, want)
	}
	if got := Registered(observed, nil); len(got) != 0 {
		t.Fatalf("Registered of none = %+v", got)
	}
}
