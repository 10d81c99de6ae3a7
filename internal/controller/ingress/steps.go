package ingress

import (
	"fmt"
	"strings"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Step actions of an ingress change, besides controller's "register",
// "deregister", "replace" and "update".
const (
	ActionPublish   = "publish"
	ActionUnpublish = "unpublish"
)

// Steps renders the changes as plan steps, in the order the Controller takes
// them: registers and re-addressed backends, then routes (unpublish,
// republish, publish), the health check, and last the deregisters.
// Targets read "lb1:8080" for a route and "lb1/<instance id>" for a backend.
func (c Changes) Steps() []controller.Step {
	var out []controller.Step
	lb := c.LoadBalancer
	backend := func(b loadbalancer.Backend) string { return lb + "/" + string(b.ID) }
	route := func(r loadbalancer.Route) string { return fmt.Sprintf("%s:%d", lb, r.LoadBalancerPort) }
	for _, b := range c.Register {
		out = append(out, controller.Step{Action: "register", Target: backend(b), Reason: addressReason(b.Address)})
	}
	for _, b := range c.Readdress {
		out = append(out, controller.Step{Action: "replace", Target: backend(b.New),
			Reason: fmt.Sprintf("address %s → %s", orNone(b.Old.Address), orNone(b.New.Address))})
	}
	for _, r := range c.Unpublish {
		out = append(out, controller.Step{Action: ActionUnpublish, Target: route(r), Reason: RouteString(r)})
	}
	for _, r := range c.Republish {
		out = append(out, controller.Step{Action: "replace", Target: route(r.New), Reason: routeDelta(r.Old, r.New)})
	}
	for _, r := range c.Publish {
		out = append(out, controller.Step{Action: ActionPublish, Target: route(r), Reason: RouteString(r)})
	}
	if c.HealthCheck != nil {
		out = append(out, controller.Step{Action: "update", Target: lb + " health check",
			Reason: fmt.Sprintf("backend port %d", c.HealthCheck.BackendPort)})
	}
	for _, b := range c.Deregister {
		out = append(out, controller.Step{Action: "deregister", Target: backend(b), Reason: addressReason(b.Address)})
	}
	return out
}

// RouteString is a route as users read it: "https:443 → http:8080 (certificate cert-1)".
func RouteString(r loadbalancer.Route) string {
	s := fmt.Sprintf("%s:%d → %s:%d", r.LoadBalancerProtocol, r.LoadBalancerPort, r.Protocol, r.Port)
	if r.Certificate != "" {
		s += " (certificate " + r.Certificate + ")"
	}
	return s
}

// routeDelta says what changed between two routes on one lb port.
func routeDelta(old, new loadbalancer.Route) string {
	var parts []string
	if !strings.EqualFold(string(old.LoadBalancerProtocol), string(new.LoadBalancerProtocol)) {
		parts = append(parts, fmt.Sprintf("lb_protocol %s → %s", old.LoadBalancerProtocol, new.LoadBalancerProtocol))
	}
	if old.Port != new.Port {
		parts = append(parts, fmt.Sprintf("port %d → %d", old.Port, new.Port))
	}
	if !strings.EqualFold(string(old.Protocol), string(new.Protocol)) {
		parts = append(parts, fmt.Sprintf("protocol %s → %s", old.Protocol, new.Protocol))
	}
	if old.Certificate != new.Certificate {
		parts = append(parts, fmt.Sprintf("certificate %s → %s", orNone(old.Certificate), orNone(new.Certificate)))
	}
	return strings.Join(parts, ", ")
}

func addressReason(addr string) string {
	if addr == "" {
		return ""
	}
	return "address " + addr
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
