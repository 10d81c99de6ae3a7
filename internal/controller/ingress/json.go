package ingress

import (
	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// RouteView is a route in the CLI's JSON shape (`lb routes ls -json`).
func RouteView(r loadbalancer.Route) config.Route {
	return config.Route{LBPort: r.LoadBalancerPort, LBProtocol: r.LoadBalancerProtocol,
		Port: r.Port, Protocol: r.Protocol, Certificate: r.Certificate}
}
