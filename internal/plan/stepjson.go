package plan

import (
	"encoding/json"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// A step travels as JSON (`plan -json`, plan files) with what it carries in
// the shapes the CLI prints everywhere else: a route as `lb routes ls
// -json` prints it ({"lb_port", "lb_protocol", "port", "protocol",
// "certificate"}), a backend as {"id", "address"}, a health check with its
// durations as "2s", an authorization as `enrollment describe -json`
// prints it ({"id", "source_id", "properties"}, with "host", "volume",
// "options" and "tags" when set).

type stepWire struct {
	stepFields
	Route         *config.Route                 `json:"route,omitempty"`
	OldRoute      *config.Route                 `json:"old_route,omitempty"`
	HealthCheck   *healthCheckWire              `json:"health_check,omitempty"`
	Backend       *ingress.BackendView          `json:"backend,omitempty"`
	Authorization *enrollment.AuthorizationJSON `json:"authorization,omitempty"`
}

// stepFields is Step without the fields stepWire shapes (same JSON
// names): Step's own encoding, by conversion.
type stepFields struct {
	ID           StepID          `json:"id"`
	Kind         StepKind        `json:"kind"`
	Object       string          `json:"object"`
	Provider     string          `json:"provider,omitempty"`
	After        []StepID        `json:"after,omitempty"`
	Group        string          `json:"group,omitempty"`
	Instance     instance.ID     `json:"instance,omitempty"`
	Made         StepID          `json:"made,omitempty"`
	Awaited      StepID          `json:"awaited,omitempty"`
	LogicalID    string          `json:"logical_id,omitempty"`
	Replaces     instance.ID     `json:"replaces,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Healthy      bool            `json:"healthy,omitempty"`
	Timeout      config.Duration `json:"timeout,omitempty"`
	DrainDelay   config.Duration `json:"drain_delay,omitempty"`
	LoadBalancer string          `json:"loadbalancer,omitempty"`
	Enrollment   string          `json:"enrollment,omitempty"`
	TargetType   string          `json:"target_type,omitempty"`
	Changes      []StateChange   `json:"changes,omitempty"`
}

type healthCheckWire struct {
	BackendPort int             `json:"backend_port"`
	Healthy     int             `json:"healthy"`
	Unhealthy   int             `json:"unhealthy"`
	Interval    config.Duration `json:"interval"`
	Timeout     config.Duration `json:"timeout"`
}

// MarshalJSON writes the step in the CLI's shapes (see above).
func (s Step) MarshalJSON() ([]byte, error) {
	w := stepWire{stepFields: stepFields{
		ID: s.ID, Kind: s.Kind, Object: s.Object, Provider: s.Provider, After: s.After, Group: s.Group,
		Instance: s.Instance, Made: s.Made, Awaited: s.Awaited, LogicalID: s.LogicalID, Replaces: s.Replaces,
		Reason: s.Reason, Healthy: s.Healthy, Timeout: s.Timeout, DrainDelay: s.DrainDelay,
		LoadBalancer: s.LoadBalancer, Enrollment: s.Enrollment, TargetType: s.TargetType, Changes: s.Changes,
	}}
	if s.Route != nil {
		w.Route = ptr(ingress.RouteView(*s.Route))
	}
	if s.OldRoute != nil {
		w.OldRoute = ptr(ingress.RouteView(*s.OldRoute))
	}
	if hc := s.HealthCheck; hc != nil {
		w.HealthCheck = &healthCheckWire{BackendPort: hc.BackendPort, Healthy: hc.Healthy, Unhealthy: hc.Unhealthy,
			Interval: config.Duration(hc.Interval), Timeout: config.Duration(hc.Timeout)}
	}
	if b := s.Backend; b != nil {
		w.Backend = &ingress.BackendView{ID: b.ID, Address: b.Address}
	}
	if a := s.Authorization; a != nil {
		w.Authorization = ptr(enrollment.AuthorizationJSONOf(*a))
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Step) UnmarshalJSON(b []byte) error {
	var w stepWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	f := w.stepFields
	*s = Step{ID: f.ID, Kind: f.Kind, Object: f.Object, Provider: f.Provider, After: f.After, Group: f.Group,
		Instance: f.Instance, Made: f.Made, Awaited: f.Awaited, LogicalID: f.LogicalID, Replaces: f.Replaces,
		Reason: f.Reason, Healthy: f.Healthy, Timeout: f.Timeout, DrainDelay: f.DrainDelay,
		LoadBalancer: f.LoadBalancer, Enrollment: f.Enrollment, TargetType: f.TargetType, Changes: f.Changes}
	if w.Route != nil {
		s.Route = ptr(w.Route.SPI())
	}
	if w.OldRoute != nil {
		s.OldRoute = ptr(w.OldRoute.SPI())
	}
	if hc := w.HealthCheck; hc != nil {
		s.HealthCheck = &loadbalancer.HealthCheck{BackendPort: hc.BackendPort, Healthy: hc.Healthy, Unhealthy: hc.Unhealthy,
			Interval: time.Duration(hc.Interval), Timeout: time.Duration(hc.Timeout)}
	}
	if bv := w.Backend; bv != nil {
		s.Backend = &loadbalancer.Backend{ID: bv.ID, Address: bv.Address}
	}
	if a := w.Authorization; a != nil {
		s.Authorization = ptr(a.Authorization())
	}
	return nil
}
