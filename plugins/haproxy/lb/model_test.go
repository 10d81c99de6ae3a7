package lb

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/provider"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in   string
		host string
		port int
		err  bool
	}{
		{"", "", 0, false},
		{"10.0.0.1", "10.0.0.1", 0, false},
		{"10.0.0.1:8080", "10.0.0.1", 8080, false},
		{"[::1]:8080", "::1", 8080, false},
		{"::1", "::1", 0, false},
		{"[::1]", "::1", 0, false},
		{"web-1", "web-1", 0, false},
		{"web-1.example.com:80", "web-1.example.com", 80, false},
		{"10.0.0.1:0", "", 0, true},
		{"10.0.0.1:70000", "", 0, true},
		{"10.0.0.1:http", "", 0, true},
		{":80", "", 0, true},
		{"a b", "", 0, true},
		{"10.0.0.0/8", "", 0, true},
	}
	for _, tt := range tests {
		host, port, err := parseAddress(tt.in)
		if (err != nil) != tt.err || host != tt.host || port != tt.port {
			t.Errorf("parseAddress(%q) = %q, %d, %v; want %q, %d, error %v", tt.in, host, port, err, tt.host, tt.port, tt.err)
		}
	}
}

func TestRouteRecordDiagnostics(t *testing.T) {
	ok := loadbalancer.Route{Port: 8080, Protocol: "http", LoadBalancerPort: 80, LoadBalancerProtocol: "HTTPS", Certificate: "cert-1"}
	rt, err := routeRecord(ok)
	if err != nil {
		t.Fatal(err)
	}
	if rt.route() != ok {
		t.Fatalf("a route must come back exactly as published: %+v != %+v", rt.route(), ok)
	}
	tests := []struct {
		mutate func(*loadbalancer.Route)
		path   string
	}{
		{func(r *loadbalancer.Route) { r.LoadBalancerPort = 0 }, "lb_port"},
		{func(r *loadbalancer.Route) { r.Port = 65536 }, "port"},
		{func(r *loadbalancer.Route) { r.LoadBalancerProtocol = "udp" }, "lb_protocol"},
		{func(r *loadbalancer.Route) { r.Protocol = "gopher" }, "protocol"},
		{func(r *loadbalancer.Route) { r.Certificate = "my cert" }, "certificate"},
	}
	for _, tt := range tests {
		r := ok
		tt.mutate(&r)
		_, err := routeRecord(r)
		var ds provider.Diagnostics
		if !errors.As(err, &ds) || len(ds) != 1 || !slices.Equal(ds[0].Path, []string{tt.path}) {
			t.Errorf("route %+v: want one diagnostic at %s, got %v", r, tt.path, err)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"lb1", "web_front", "a.b-c", "X"} {
		if err := checkName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-lb", "lb 1", "lb/1", "lb:1", "é"} {
		if err := checkName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRegister(t *testing.T) {
	l := &LB{Slots: 2}
	if err := l.register([]loadbalancer.Backend{{ID: "b", Address: "10.0.0.2:81"}, {ID: "a", Address: "10.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	l.Backends[0].IP, l.Backends[1].IP = "10.0.0.1", "10.0.0.2"
	if err := l.assignSlots(2); err != nil {
		t.Fatal(err)
	}
	// Re-registering with the same address changes nothing; a new address
	// keeps the slot but must be resolved again.
	if err := l.register([]loadbalancer.Backend{{ID: "a", Address: "10.0.0.1"}, {ID: "b", Address: "10.0.0.9:81"}}); err != nil {
		t.Fatal(err)
	}
	want := []BackendRecord{
		{ID: "a", Address: "10.0.0.1", IP: "10.0.0.1", Slot: 1},
		{ID: "b", Address: "10.0.0.9:81", Port: 81, Slot: 2},
	}
	if !slices.Equal(l.Backends, want) {
		t.Fatalf("got %+v, want %+v", l.Backends, want)
	}
	// A bad address refuses the whole call, at the element's path.
	err := l.register([]loadbalancer.Backend{{ID: "c", Address: "10.0.0.3"}, {ID: "d", Address: "10.0.0.4:99999"}})
	var ds provider.Diagnostics
	if !errors.As(err, &ds) || !slices.Equal(ds[0].Path, []string{"1", "address"}) {
		t.Fatalf("want a diagnostic at 1.address, got %v", err)
	}
	if len(l.Backends) != 2 {
		t.Fatalf("a refused call changed the backends: %+v", l.Backends)
	}
	l.deregister([]instance.ID{"a", "unknown"})
	if len(l.Backends) != 1 || l.Backends[0].ID != "b" {
		t.Fatalf("after deregister: %+v", l.Backends)
	}
}

func TestAssignSlotsTable(t *testing.T) {
	b := func(id, ip string, slot int) BackendRecord {
		return BackendRecord{ID: id, Address: ip, IP: ip, Slot: slot}
	}
	tests := []struct {
		name      string
		slots     int
		in        []BackendRecord
		want      []int
		wantSlots int
	}{
		{"new take the lowest free", 4, []BackendRecord{b("a", "1.1.1.1", 0), b("b", "1.1.1.2", 1), b("c", "1.1.1.3", 0)}, []int{2, 1, 3}, 4},
		{"unresolved get none", 4, []BackendRecord{b("a", "", 3), b("b", "1.1.1.2", 0)}, []int{0, 1}, 4},
		{"duplicates are reassigned", 4, []BackendRecord{b("a", "1.1.1.1", 2), b("b", "1.1.1.2", 2)}, []int{2, 1}, 4},
		{"out of range is reassigned", 2, []BackendRecord{b("a", "1.1.1.1", 7)}, []int{1}, 2},
		{"growth doubles", 2, []BackendRecord{b("a", "1", 1), b("b", "2", 2), b("c", "3", 0), b("d", "4", 0), b("e", "5", 0)}, []int{1, 2, 3, 4, 5}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &LB{Slots: tt.slots, Backends: tt.in}
			if err := l.assignSlots(tt.slots); err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, x := range l.Backends {
				got = append(got, x.Slot)
			}
			if !slices.Equal(got, tt.want) || l.Slots != tt.wantSlots {
				t.Fatalf("slots %v of %d, want %v of %d", got, l.Slots, tt.want, tt.wantSlots)
			}
		})
	}
}

// TestAssignSlotsProperties: after any sequence of registrations and
// deregistrations, every resolved backend has a slot of its own within
// Slots, unresolved ones have none, Slots never shrinks, and a backend
// keeps its slot for as long as it stays.
func TestAssignSlotsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		initial := rapid.IntRange(1, 8).Draw(t, "initial")
		l := &LB{Slots: initial}
		steps := rapid.IntRange(1, 30).Draw(t, "steps")
		for i := range steps {
			before := map[string]int{}
			for _, b := range l.Backends {
				if b.Slot > 0 {
					before[b.ID] = b.Slot
				}
			}
			prevSlots := l.Slots
			if rapid.Bool().Draw(t, fmt.Sprintf("register%d", i)) {
				var bs []loadbalancer.Backend
				for j := range rapid.IntRange(1, 6).Draw(t, fmt.Sprintf("n%d", i)) {
					id := fmt.Sprintf("m%d", rapid.IntRange(0, 20).Draw(t, fmt.Sprintf("id%d.%d", i, j)))
					bs = append(bs, loadbalancer.Backend{ID: instance.ID(id), Address: "10.0.0.1"})
				}
				if err := l.register(bs); err != nil {
					t.Fatal(err)
				}
			} else {
				var ids []instance.ID
				for j := range rapid.IntRange(1, 4).Draw(t, fmt.Sprintf("n%d", i)) {
					ids = append(ids, instance.ID(fmt.Sprintf("m%d", rapid.IntRange(0, 20).Draw(t, fmt.Sprintf("id%d.%d", i, j)))))
				}
				l.deregister(ids)
			}
			for j := range l.Backends {
				if l.Backends[j].IP == "" && rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("resolves%d.%d", i, j)) > 0 {
					l.Backends[j].IP = "10.0.0.1"
				}
			}
			if err := l.assignSlots(initial); err != nil {
				t.Fatal(err)
			}
			if l.Slots < prevSlots {
				t.Fatalf("slots shrank from %d to %d", prevSlots, l.Slots)
			}
			used := map[int]string{}
			for _, b := range l.Backends {
				switch {
				case b.IP == "" && b.Slot != 0:
					t.Fatalf("unresolved backend %s has slot %d", b.ID, b.Slot)
				case b.IP != "" && (b.Slot < 1 || b.Slot > l.Slots):
					t.Fatalf("backend %s has slot %d of %d", b.ID, b.Slot, l.Slots)
				case b.IP != "" && used[b.Slot] != "":
					t.Fatalf("backends %s and %s share slot %d", used[b.Slot], b.ID, b.Slot)
				}
				if b.Slot > 0 {
					used[b.Slot] = b.ID
				}
				if s, ok := before[b.ID]; ok && s != b.Slot {
					t.Fatalf("backend %s moved from slot %d to %d", b.ID, s, b.Slot)
				}
			}
		}
	})
}

func TestHealthCheckRecord(t *testing.T) {
	r, err := healthCheckRecord(loadbalancer.HealthCheck{})
	if err != nil || r != nil {
		t.Fatalf("the zero health check turns checks off: %+v %v", r, err)
	}
	r, err = healthCheckRecord(loadbalancer.HealthCheck{BackendPort: 80, Healthy: 2, Unhealthy: 3, Interval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if *r != (HealthCheckRecord{BackendPort: 80, Healthy: 2, Unhealthy: 3, IntervalMS: 10000, TimeoutMS: 10000}) {
		t.Fatalf("got %+v", *r)
	}
	_, err = healthCheckRecord(loadbalancer.HealthCheck{Healthy: -1, Interval: time.Second})
	var ds provider.Diagnostics
	if !errors.As(err, &ds) || !slices.Equal(ds[0].Path, []string{"healthy"}) {
		t.Fatalf("want a diagnostic at healthy, got %v", err)
	}
}
