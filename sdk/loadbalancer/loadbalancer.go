// Package loadbalancer is the SPI of L4 load balancer providers.
package loadbalancer

import (
	"context"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

// Protocol of a route's side.
type Protocol string

// Protocols.
const (
	TCP   Protocol = "tcp"
	HTTP  Protocol = "http"
	HTTPS Protocol = "https"
	SSL   Protocol = "ssl"
	UDP   Protocol = "udp"
)

// Route forwards LoadBalancerPort on the load balancer to Port on the backends.
type Route struct {
	Port                 int
	Protocol             Protocol
	LoadBalancerPort     int
	LoadBalancerProtocol Protocol
	Certificate          string // empty when none
}

// HealthCheck is how the load balancer probes backends.
type HealthCheck struct {
	BackendPort int
	Healthy     int // consecutive successes to mark healthy
	Unhealthy   int // consecutive failures to mark unhealthy
	Interval    time.Duration
	Timeout     time.Duration
}

// Backend is an instance behind the load balancer: its ID and the address it
// is reachable at, so address-routing (HAProxy) and ID-taking (cloud) LBs both fit.
type Backend struct {
	ID      instance.ID
	Address string
}

// L4 is one named load balancer.
type L4 interface {
	Routes(ctx context.Context) ([]Route, error)
	Publish(ctx context.Context, route Route) error
	Unpublish(ctx context.Context, loadBalancerPort int) error
	ConfigureHealthCheck(ctx context.Context, hc HealthCheck) error
	Backends(ctx context.Context) ([]Backend, error)
	RegisterBackends(ctx context.Context, backends []Backend) error
	DeregisterBackends(ctx context.Context, ids []instance.ID) error
}
