package providertest

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/provider"
)

func (s *suite) testLoadBalancer(t *testing.T) {
	name := s.cfg.LoadBalancer
	if name == "" {
		t.Skipf("provider serves load balancers %q but Config.LoadBalancer names none to test", s.md.Types(provider.KindLoadBalancer))
	}
	if _, ok := s.md.Find(provider.KindLoadBalancer, name); !ok {
		t.Fatalf("Config.LoadBalancer is %q but the provider serves load balancers %q", name, s.md.Types(provider.KindLoadBalancer))
	}
	lb := s.client.LoadBalancer(name)
	t.Run("Routes", func(t *testing.T) { s.testRoutes(t, lb) })
	t.Run("HealthCheck", func(t *testing.T) {
		ctx, cancel := s.ctx(t)
		defer cancel()
		hc := loadbalancer.HealthCheck{BackendPort: 8080, Healthy: 2, Unhealthy: 3, Interval: 10 * time.Second, Timeout: 2 * time.Second}
		if err := lb.ConfigureHealthCheck(ctx, hc); err != nil {
			t.Errorf("configure health check %+v: %v", hc, err)
		}
	})
	t.Run("Backends", func(t *testing.T) { s.testBackends(t, lb) })
}

// testRoutes publishes a route on a port unlikely to be in use and checks
// Routes before and after it is unpublished.
func (s *suite) testRoutes(t *testing.T, lb loadbalancer.L4) {
	port := 20000 + rand.IntN(10000)
	route := loadbalancer.Route{
		Port:                 port,
		Protocol:             loadbalancer.HTTP,
		LoadBalancerPort:     port,
		LoadBalancerProtocol: loadbalancer.HTTPS,
		Certificate:          "providertest-cert",
	}
	ctx, cancel := s.ctx(t)
	defer cancel()
	if err := lb.Publish(ctx, route); err != nil {
		t.Fatalf("publish %+v: %v", route, err)
	}
	t.Cleanup(func() {
		ctx, cancel := s.cleanupCtx()
		defer cancel()
		if err := lb.Unpublish(ctx, port); err != nil {
			t.Errorf("cleanup: unpublish %d: %v", port, err)
		}
	})
	routes, err := lb.Routes(ctx)
	if err != nil {
		t.Fatalf("routes: %v", err)
	}
	if !slices.Contains(routes, route) {
		t.Fatalf("routes after publishing %+v: %+v", route, routes)
	}
	if err := lb.Unpublish(ctx, port); err != nil {
		t.Fatalf("unpublish %d: %v", port, err)
	}
	if routes, err = lb.Routes(ctx); err != nil {
		t.Fatalf("routes: %v", err)
	}
	if i := slices.IndexFunc(routes, func(r loadbalancer.Route) bool { return r.LoadBalancerPort == port }); i >= 0 {
		t.Errorf("route on port %d still listed after unpublish: %+v", port, routes[i])
	}
}

// testBackends registers two backends, deregisters one, and checks Backends
// after each step.
func (s *suite) testBackends(t *testing.T, lb loadbalancer.L4) {
	prefix := "providertest-" + randomID()
	a := loadbalancer.Backend{ID: instance.ID(prefix + "-a"), Address: "192.0.2.10:8080"}
	b := loadbalancer.Backend{ID: instance.ID(prefix + "-b"), Address: "192.0.2.11:8080"}
	ctx, cancel := s.ctx(t)
	defer cancel()
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{a, b}); err != nil {
		t.Fatalf("register backends: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := s.cleanupCtx()
		defer cancel()
		if err := lb.DeregisterBackends(ctx, []instance.ID{a.ID, b.ID}); err != nil {
			t.Errorf("cleanup: deregister backends: %v", err)
		}
	})
	got := s.backends(t, lb)
	for _, want := range []loadbalancer.Backend{a, b} {
		if !slices.Contains(got, want) {
			t.Errorf("backend %+v not listed after register: %+v", want, got)
		}
	}
	if err := lb.DeregisterBackends(ctx, []instance.ID{a.ID}); err != nil {
		t.Fatalf("deregister backend %q: %v", a.ID, err)
	}
	got = s.backends(t, lb)
	if slices.ContainsFunc(got, func(x loadbalancer.Backend) bool { return x.ID == a.ID }) {
		t.Errorf("backend %q still listed after deregister: %+v", a.ID, got)
	}
	if !slices.Contains(got, b) {
		t.Errorf("backend %+v gone after deregistering only %q: %+v", b, a.ID, got)
	}
}

func (s *suite) backends(t *testing.T, lb loadbalancer.L4) []loadbalancer.Backend {
	t.Helper()
	ctx, cancel := s.ctx(t)
	defer cancel()
	bs, err := lb.Backends(ctx)
	if err != nil {
		t.Fatalf("backends: %v", err)
	}
	return bs
}
