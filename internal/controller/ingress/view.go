package ingress

import (
	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// View is one load balancer of an ingress as `ingress describe` shows it:
// routes as `lb routes ls -json` prints them, and backends.
type View struct {
	LoadBalancer string         `json:"loadbalancer"`
	Routes       []config.Route `json:"routes"`
	Backends     []BackendView  `json:"backends"`
}

// BackendView is a backend in a View.
type BackendView struct {
	ID      instance.ID `json:"id"`
	Address string      `json:"address,omitempty"`
}

// ViewOf is the view of what load balancer lb lists.
func ViewOf(lb string, routes []loadbalancer.Route, backends []loadbalancer.Backend) View {
	v := View{LoadBalancer: lb, Routes: make([]config.Route, 0, len(routes)), Backends: make([]BackendView, 0, len(backends))}
	for _, r := range routes {
		v.Routes = append(v.Routes, RouteView(r))
	}
	for _, b := range backends {
		v.Backends = append(v.Backends, BackendView{ID: b.ID, Address: b.Address})
	}
	return v
}
