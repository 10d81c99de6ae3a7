package ingress

import (
	"reflect"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Teardown takes off a load balancer an ingress lets go of everything but
// what the rules still naming it want; it never adds or changes.
func TestTeardown(t *testing.T) {
	routes := []loadbalancer.Route{route(80, 8080, "c1"), route(443, 8443, "c2")}
	backends := []loadbalancer.Backend{backend("i-1", "10.0.0.1"), backend("i-2", "10.0.0.2"), backend("i-3", "")}
	members := map[string][]group.Member{"web": {member("i-2", "10.0.0.2", running), member("i-9", "10.0.0.9", running)}}
	tests := []struct {
		name    string
		remain  DesiredLB
		members map[string][]group.Member
		known   bool
		want    Changes
	}{
		{
			name:   "nothing remains: everything goes, membership not needed",
			remain: DesiredLB{LoadBalancer: "lb3"},
			want: Changes{LoadBalancer: "lb3", Unpublish: routes,
				Deregister: backends},
		},
		{
			name: "another ingress keeps a route and a group: the rest goes, nothing is added",
			remain: DesiredLB{LoadBalancer: "lb3", Groups: []string{"web"},
				Routes: []loadbalancer.Route{route(443, 9443, "other"), route(8080, 8080, "")}},
			members: members, known: true,
			want: Changes{LoadBalancer: "lb3", Unpublish: routes[:1],
				Deregister: []loadbalancer.Backend{backend("i-1", "10.0.0.1"), backend("i-3", "")}},
		},
		{
			name:   "the remaining groups' membership is unknown: backends are held",
			remain: DesiredLB{LoadBalancer: "lb3", Groups: []string{"web"}},
			known:  false,
			want:   Changes{LoadBalancer: "lb3", Unpublish: routes, BackendsHeld: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Teardown(tt.remain, routes, backends, tt.members, tt.known)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Teardown =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestReleasedAndWanted(t *testing.T) {
	rule := func(lb string, groups []string, ports ...int) config.Rule {
		r := config.Rule{LoadBalancer: lb, Groups: groups}
		for _, p := range ports {
			r.Routes = append(r.Routes, config.Route{LBPort: p, LBProtocol: loadbalancer.HTTPS, Port: p, Protocol: loadbalancer.HTTP})
		}
		return r
	}
	stored := &config.Ingress{Name: "test.com", Rules: []config.Rule{
		rule("lb1", []string{"miners"}, 80), rule("lb2", []string{"miners"}, 8080), rule("lb3", []string{"cattle"}, 8888)}}
	tests := []struct {
		name    string
		desired *config.Ingress
		moved   func(string) bool
		want    []string
	}{
		{name: "unchanged", desired: stored},
		{name: "rule moved from lb3 to lb4", want: []string{"lb3"}, desired: &config.Ingress{Name: "test.com", Rules: []config.Rule{
			rule("lb1", []string{"miners"}, 80), rule("lb2", []string{"miners"}, 8080), rule("lb4", []string{"cattle"}, 8888)}}},
		{name: "rule removed", want: []string{"lb3"}, desired: &config.Ingress{Name: "test.com", Rules: []config.Rule{
			rule("lb1", []string{"miners"}, 80), rule("lb2", []string{"miners"}, 8080)}}},
		{name: "rule removed, its load balancer still named by another rule (Diff's job)", desired: &config.Ingress{Name: "test.com", Rules: []config.Rule{
			rule("lb1", []string{"miners"}, 80), rule("lb2", []string{"miners"}, 8080), rule("lb3", []string{"miners"}, 9999)}}},
		{name: "ingress left the stack", want: []string{"lb1", "lb2", "lb3"}},
		{name: "load balancer moved to another provider", desired: stored, moved: func(lb string) bool { return lb == "lb2" }, want: []string{"lb2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Released(stored, tt.desired, tt.moved); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Released = %v, want %v", got, tt.want)
			}
		})
	}

	other := &config.Ingress{Name: "other", Rules: []config.Rule{rule("lb3", []string{"web"}, 443), rule("lb1", nil, 80), rule("lb3", []string{"web", "api"}, 443, 80)}}
	got := Wanted("lb3", []*config.Ingress{stored, other})
	want := DesiredLB{LoadBalancer: "lb3", Groups: []string{"cattle", "web", "api"},
		Routes: []loadbalancer.Route{rule("", nil, 8888).Routes[0].SPI(), rule("", nil, 443).Routes[0].SPI(), rule("", nil, 80).Routes[0].SPI()}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Wanted = %+v, want %+v", got, want)
	}
	if got := Wanted("lb9", []*config.Ingress{stored, nil}); !reflect.DeepEqual(got, DesiredLB{LoadBalancer: "lb9"}) {
		t.Fatalf("Wanted of an unnamed load balancer = %+v", got)
	}
}
