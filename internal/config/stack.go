// Package config loads a stack (every *.hcl file of a working directory) into
// a typed, JSON-serialisable model with references resolved, and reports bad
// input as hcl.Diagnostics that point at the file, line and column.
//
// The model is what `apply` stores in state as the desired stack, so every
// field that matters for acting survives a JSON round trip; source ranges and
// parsed expressions are kept beside them (json:"-") for diagnostics only.
package config

import (
	"encoding/json"
	"time"

	"github.com/hashicorp/hcl/v2"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Stack is a whole loaded stack. It is what `apply` stores in state as the
// desired stack, so every field that matters for acting is JSON-serialisable;
// source ranges are kept for diagnostics only.
type Stack struct {
	Name          string          `json:"name"`
	Providers     []*Provider     `json:"providers"`
	Groups        []*Group        `json:"groups"`
	LoadBalancers []*LoadBalancer `json:"loadbalancers,omitempty"`
	Ingresses     []*Ingress      `json:"ingresses,omitempty"`
	Enrollments   []*Enrollment   `json:"enrollments,omitempty"`
	// Variables are the variable blocks with the values the stack was
	// loaded with, in declaration order; Locals the locals' values (those
	// wholly known), SensitiveLocals the locals derived from a sensitive
	// variable; Outputs the output blocks, unevaluated.
	Variables       []*Variable                        `json:"variables,omitempty"`
	Locals          map[string]ctyjson.SimpleJSONValue `json:"locals,omitempty"`
	SensitiveLocals map[string]bool                    `json:"sensitive_locals,omitempty"`
	Outputs         []*Output                          `json:"outputs,omitempty"`
	// Limits is the stack block's limits block; nil means the defaults.
	Limits *Limits `json:"limits,omitempty"`

	// Backend is the stack block's backend block; nil means the local file.
	// It says where state lives, so it is not stored in state.
	Backend *Backend `json:"-"`

	// Files are the parsed sources, for rendering diagnostics with the line shown.
	Files map[string]*hcl.File `json:"-"`
	// DeclRange is the stack block's header.
	DeclRange hcl.Range `json:"-"`
}

// Provider returns the provider block with the given key ("simulator",
// "simulator.nfs-auth"), or nil.
func (s *Stack) Provider(key string) *Provider {
	for _, p := range s.Providers {
		if p.Key() == key {
			return p
		}
	}
	return nil
}

// Group returns the named group, or nil.
func (s *Stack) Group(name string) *Group {
	for _, g := range s.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// LoadBalancer returns the named load balancer, or nil.
func (s *Stack) LoadBalancer(name string) *LoadBalancer {
	for _, lb := range s.LoadBalancers {
		if lb.Name == name {
			return lb
		}
	}
	return nil
}

// Ingress returns the named ingress, or nil.
func (s *Stack) Ingress(name string) *Ingress {
	for _, in := range s.Ingresses {
		if in.Name == name {
			return in
		}
	}
	return nil
}

// Enrollment returns the named enrollment, or nil.
func (s *Stack) Enrollment(name string) *Enrollment {
	for _, e := range s.Enrollments {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// Provider is a provider block. Key() identifies its process.
type Provider struct {
	Name  string `json:"name"`
	Alias string `json:"alias,omitempty"`
	// Config holds the block's other attributes as a JSON object (may be empty).
	Config json.RawMessage `json:"config,omitempty"`
	// Parallelism bounds the calls in flight to this provider process
	// (0: only -parallelism bounds them).
	Parallelism int `json:"parallelism,omitempty"`

	DeclRange hcl.Range `json:"-"`
}

// Key is "name" or "name.alias": the identity of one provider process.
func (p *Provider) Key() string {
	if p.Alias == "" {
		return p.Name
	}
	return p.Name + "." + p.Alias
}

// Group is a group block: cattle (Size) or pets (LogicalIDs).
type Group struct {
	Name string `json:"name"`
	// Size is nil for pets. size = 0 is legal. For an autoscaled group it
	// is the start size, within the autoscale bounds; the loader sets it to
	// min when the group leaves size out, so cattle always have one.
	Size *int `json:"size,omitempty"`
	// LogicalIDs is non-empty for pets and nil for cattle.
	LogicalIDs []string          `json:"logical_ids,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Instance   Plugin            `json:"instance"`
	// Flavors combine in order; there is at least one.
	Flavors []Plugin     `json:"flavors"`
	Update  UpdatePolicy `json:"update"`
	Health  HealthPolicy `json:"health"`
	// DrainDelay is how long a member that leaves waits, once it is
	// deregistered from its load balancers, before it is drained and
	// destroyed, so that requests in flight finish.
	DrainDelay Duration `json:"drain_delay"`
	// Autoscale is the group's autoscale block; nil when the group is
	// sized by hand. When set, the group is cattle and Size is the start
	// size.
	Autoscale *Autoscale `json:"autoscale,omitempty"`

	DeclRange hcl.Range `json:"-"`
	// LogicalIDsExpr is the logical_ids expression (nil without one), where
	// a flavor's diagnostic about a logical ID is reported.
	LogicalIDsExpr hcl.Expression `json:"-"`
}

// DefaultDrainDelay is the drain_delay of a group that sets none: a few
// seconds, enough for requests in flight through a load balancer to finish.
const DefaultDrainDelay = Duration(3 * time.Second)

// Allocation is how the group is sized, as the flavor SPI takes it.
func (g *Group) Allocation() flavor.Allocation {
	var a flavor.Allocation
	if g.Size != nil {
		a.Size = *g.Size
	}
	for _, id := range g.LogicalIDs {
		a.LogicalIDs = append(a.LogicalIDs, instance.LogicalID(id))
	}
	return a
}

// Plugin is an instance or flavor block: which provider, which type, and the
// properties to pass (a JSON object: the cty value encoded as JSON).
type Plugin struct {
	// Provider is the provider key ("simulator", "simulator.nfs-auth").
	Provider   string          `json:"provider"`
	Type       string          `json:"type,omitempty"`
	Properties json.RawMessage `json:"properties,omitempty"`
	// TypeImplied is set when a flavor block named no type and
	// ValidateWithProviders filled in the provider's only flavor type. The
	// config hash ignores such a type, so validating never changes the hash.
	TypeImplied bool `json:"type_implied,omitempty"`

	DeclRange       hcl.Range `json:"-"`
	ProviderRange   hcl.Range `json:"-"`
	TypeRange       hcl.Range `json:"-"`
	PropertiesRange hcl.Range `json:"-"`
	// PropertiesExpr lets diagnostics with an attribute path point inside the object.
	PropertiesExpr hcl.Expression `json:"-"`
}

// UpdatePolicy is the group's update block (used by rolling updates).
type UpdatePolicy struct {
	MaxParallel    int      `json:"max_parallel"`
	MaxUnavailable int      `json:"max_unavailable"`
	HealthTimeout  Duration `json:"health_timeout"`
}

// DefaultUpdatePolicy is the update policy of a group without an update block.
func DefaultUpdatePolicy() UpdatePolicy {
	return UpdatePolicy{MaxParallel: 1, MaxUnavailable: 0, HealthTimeout: Duration(5 * time.Minute)}
}

// HealthPolicy is the group's health block (used by watch).
type HealthPolicy struct {
	Grace            Duration `json:"grace"`
	ReplaceUnhealthy bool     `json:"replace_unhealthy"`
	// MaxReplacementsPerHour of 0 means unlimited.
	MaxReplacementsPerHour int `json:"max_replacements_per_hour"`
	// BrakeMin is the fewest dead members at one observation that engage
	// watch's mass-failure brake; 0 means watch's default (3). A file can
	// only say 1 or more; 0 is what a stack without the attribute (or one
	// stored before it existed) holds, so its JSON and its encoding are
	// unchanged.
	BrakeMin int `json:"brake_min,omitempty"`
}

// DefaultHealthPolicy is the health policy of a group without a health block.
func DefaultHealthPolicy() HealthPolicy {
	return HealthPolicy{Grace: Duration(30 * time.Second), ReplaceUnhealthy: true}
}

// DefaultSyncInterval is how often an ingress or enrollment without a
// sync_interval is reconciled.
const DefaultSyncInterval = Duration(10 * time.Second)

// LoadBalancer is a loadbalancer block: a named L4 load balancer served by a provider.
type LoadBalancer struct {
	Name string `json:"name"`
	// Provider is the provider key.
	Provider string `json:"provider"`

	DeclRange     hcl.Range `json:"-"`
	ProviderRange hcl.Range `json:"-"`
}

// Ingress is an ingress block: routes on load balancers to the members of groups.
type Ingress struct {
	Name         string   `json:"name"`
	SyncInterval Duration `json:"sync_interval"`
	Rules        []Rule   `json:"rules"`

	DeclRange hcl.Range `json:"-"`
}

// Rule is an ingress rule: the members of Groups become backends of
// LoadBalancer, which publishes Routes.
type Rule struct {
	// LoadBalancer is the name of a loadbalancer block.
	LoadBalancer string `json:"loadbalancer"`
	// Groups are group names; there is at least one.
	Groups []string `json:"groups"`
	// Routes has at least one route; lb ports are unique per load balancer.
	Routes []Route `json:"routes"`

	DeclRange hcl.Range `json:"-"`
}

// Route is a rule's route block. Its JSON shape is the one `lb routes ls -json` prints.
type Route struct {
	LBPort      int                   `json:"lb_port"`
	LBProtocol  loadbalancer.Protocol `json:"lb_protocol"`
	Port        int                   `json:"port"`
	Protocol    loadbalancer.Protocol `json:"protocol"`
	Certificate string                `json:"certificate,omitempty"`

	DeclRange hcl.Range `json:"-"`
}

// SPI is the route as the load balancer SPI takes it.
func (r Route) SPI() loadbalancer.Route {
	return loadbalancer.Route{
		Port:                 r.Port,
		Protocol:             r.Protocol,
		LoadBalancerPort:     r.LBPort,
		LoadBalancerProtocol: r.LBProtocol,
		Certificate:          r.Certificate,
	}
}

// Enrollment is an enrollment block: every member of the Source group gets an
// authorization at the target provider, rendered from the target properties.
type Enrollment struct {
	Name string `json:"name"`
	// Source is a group name.
	Source       string           `json:"source"`
	Target       EnrollmentTarget `json:"target"`
	SyncInterval Duration         `json:"sync_interval"`
	// DestroyOnFree revokes the authorizations when the enrollment is freed.
	DestroyOnFree bool `json:"destroy_on_free"`

	DeclRange   hcl.Range `json:"-"`
	SourceRange hcl.Range `json:"-"`
}

// EnrollmentTarget is an enrollment's target block. Its properties may refer
// to `member` (each source instance), so they are kept unevaluated: as source
// text (which survives JSON and state) and, when loaded from files, as the
// parsed expression. RenderProperties evaluates them for one member.
type EnrollmentTarget struct {
	// Provider is the provider key.
	Provider string `json:"provider"`
	Type     string `json:"type"`
	// Properties is the HCL source text of the properties expression; empty
	// means an empty object.
	Properties string `json:"properties,omitempty"`
	// Scope holds var and local, as objects of the values the properties
	// refer to, when they refer to any: the properties are rendered per
	// member long after the stack was loaded.
	Scope map[string]ctyjson.SimpleJSONValue `json:"scope,omitempty"`

	DeclRange       hcl.Range      `json:"-"`
	ProviderRange   hcl.Range      `json:"-"`
	TypeRange       hcl.Range      `json:"-"`
	PropertiesRange hcl.Range      `json:"-"`
	PropertiesExpr  hcl.Expression `json:"-"`
}

// Duration is a time.Duration that reads and writes as "30s" in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// String is the Go duration string ("30s", "5m0s").
func (d Duration) String() string { return time.Duration(d).String() }
