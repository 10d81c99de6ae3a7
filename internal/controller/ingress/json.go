package ingress

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Changes travel as JSON in `plan -json` and in plan files, in the shapes
// the CLI's other -json output uses: a route as `lb routes ls -json` prints
// it ({"lb_port", "lb_protocol", "port", "protocol", "certificate"}), a
// backend as {"id", "address"}, and the health check with durations as Go
// duration strings ("2s"):
//
//	{"loadbalancer": "lb2",
//	 "publish": [{"lb_port": 8080, "lb_protocol": "https", "port": 8080, "protocol": "http", "certificate": "c"}],
//	 "republish": [{"old": ROUTE, "new": ROUTE}], "unpublish": [ROUTE],
//	 "health_check": {"backend_port": 8080, "healthy": 2, "unhealthy": 2, "interval": "2s", "timeout": "1s"},
//	 "register": [{"id": "i-1", "address": "10.0.0.1"}], "readdress": [{"old": BACKEND, "new": BACKEND}],
//	 "deregister": [BACKEND], "backends_held": true}
//
// Empty lists and false flags are left out.

type changesJSON struct {
	LoadBalancer string              `json:"loadbalancer"`
	Publish      []config.Route      `json:"publish,omitempty"`
	Republish    []routeChangeJSON   `json:"republish,omitempty"`
	Unpublish    []config.Route      `json:"unpublish,omitempty"`
	HealthCheck  *healthCheckJSON    `json:"health_check,omitempty"`
	Register     []BackendView       `json:"register,omitempty"`
	Readdress    []backendChangeJSON `json:"readdress,omitempty"`
	Deregister   []BackendView       `json:"deregister,omitempty"`
	BackendsHeld bool                `json:"backends_held,omitempty"`
}

type routeChangeJSON struct {
	Old config.Route `json:"old"`
	New config.Route `json:"new"`
}

type backendChangeJSON struct {
	Old BackendView `json:"old"`
	New BackendView `json:"new"`
}

type healthCheckJSON struct {
	BackendPort int    `json:"backend_port"`
	Healthy     int    `json:"healthy"`
	Unhealthy   int    `json:"unhealthy"`
	Interval    string `json:"interval"`
	Timeout     string `json:"timeout"`
}

// RouteView is a route in the CLI's JSON shape.
func RouteView(r loadbalancer.Route) config.Route {
	return config.Route{LBPort: r.LoadBalancerPort, LBProtocol: r.LoadBalancerProtocol,
		Port: r.Port, Protocol: r.Protocol, Certificate: r.Certificate}
}

func routeViews(rs []loadbalancer.Route) []config.Route {
	if rs == nil {
		return nil
	}
	out := make([]config.Route, len(rs))
	for i, r := range rs {
		out[i] = RouteView(r)
	}
	return out
}

func spiRoutes(vs []config.Route) []loadbalancer.Route {
	if vs == nil {
		return nil
	}
	out := make([]loadbalancer.Route, len(vs))
	for i, v := range vs {
		out[i] = v.SPI()
	}
	return out
}

func backendViews(bs []loadbalancer.Backend) []BackendView {
	if bs == nil {
		return nil
	}
	out := make([]BackendView, len(bs))
	for i, b := range bs {
		out[i] = BackendView{ID: b.ID, Address: b.Address}
	}
	return out
}

func backendsOf(vs []BackendView) []loadbalancer.Backend {
	if vs == nil {
		return nil
	}
	out := make([]loadbalancer.Backend, len(vs))
	for i, v := range vs {
		out[i] = loadbalancer.Backend{ID: v.ID, Address: v.Address}
	}
	return out
}

// MarshalJSON writes the changes in the CLI's JSON shapes (see above).
func (c Changes) MarshalJSON() ([]byte, error) {
	out := changesJSON{
		LoadBalancer: c.LoadBalancer,
		Publish:      routeViews(c.Publish),
		Unpublish:    routeViews(c.Unpublish),
		Register:     backendViews(c.Register),
		Deregister:   backendViews(c.Deregister),
		BackendsHeld: c.BackendsHeld,
	}
	for _, r := range c.Republish {
		out.Republish = append(out.Republish, routeChangeJSON{Old: RouteView(r.Old), New: RouteView(r.New)})
	}
	for _, b := range c.Readdress {
		out.Readdress = append(out.Readdress, backendChangeJSON{
			Old: BackendView{ID: b.Old.ID, Address: b.Old.Address},
			New: BackendView{ID: b.New.ID, Address: b.New.Address},
		})
	}
	if hc := c.HealthCheck; hc != nil {
		out.HealthCheck = &healthCheckJSON{BackendPort: hc.BackendPort, Healthy: hc.Healthy, Unhealthy: hc.Unhealthy,
			Interval: hc.Interval.String(), Timeout: hc.Timeout.String()}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Changes) UnmarshalJSON(b []byte) error {
	var in changesJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	out := Changes{
		LoadBalancer: in.LoadBalancer,
		Publish:      spiRoutes(in.Publish),
		Unpublish:    spiRoutes(in.Unpublish),
		Register:     backendsOf(in.Register),
		Deregister:   backendsOf(in.Deregister),
		BackendsHeld: in.BackendsHeld,
	}
	for _, r := range in.Republish {
		out.Republish = append(out.Republish, RouteChange{Old: r.Old.SPI(), New: r.New.SPI()})
	}
	for _, x := range in.Readdress {
		out.Readdress = append(out.Readdress, BackendChange{
			Old: loadbalancer.Backend{ID: x.Old.ID, Address: x.Old.Address},
			New: loadbalancer.Backend{ID: x.New.ID, Address: x.New.Address},
		})
	}
	if hc := in.HealthCheck; hc != nil {
		interval, err := time.ParseDuration(hc.Interval)
		if err != nil {
			return fmt.Errorf("health_check.interval: %w", err)
		}
		timeout, err := time.ParseDuration(hc.Timeout)
		if err != nil {
			return fmt.Errorf("health_check.timeout: %w", err)
		}
		out.HealthCheck = &loadbalancer.HealthCheck{BackendPort: hc.BackendPort, Healthy: hc.Healthy,
			Unhealthy: hc.Unhealthy, Interval: interval, Timeout: timeout}
	}
	*c = out
	return nil
}
