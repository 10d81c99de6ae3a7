// Package config loads a stack (every *.hcl file of a working directory) into
// a typed, JSON-serialisable model with references resolved, and reports bad
// input as hcl.Diagnostics that point at the file, line and column.
package config

import (
	"encoding/json"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Stack is a whole loaded stack. It is what `apply` stores in state as the
// desired stack, so every field that matters for acting is JSON-serialisable;
// source ranges are kept for diagnostics only.
type Stack struct {
	Name      string      `json:"name"`
	Providers []*Provider `json:"providers"`
	Groups    []*Group    `json:"groups"`

	// Files are the parsed sources, for rendering diagnostics with the line shown.
	Files map[string]*hcl.File `json:"-"`
}

// Provider is a provider block. Key() identifies its process.
type Provider struct {
	Name  string `json:"name"`
	Alias string `json:"alias,omitempty"`
	// Config holds the block's other attributes as a JSON object (may be empty).
	Config json.RawMessage `json:"config,omitempty"`

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
	// Size is nil for pets. size = 0 is legal.
	Size       *int              `json:"size,omitempty"`
	LogicalIDs []string          `json:"logical_ids,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Instance   Plugin            `json:"instance"`
	Flavors    []Plugin          `json:"flavors"`
	Update     UpdatePolicy      `json:"update"`
	Health     HealthPolicy      `json:"health"`

	DeclRange hcl.Range `json:"-"`
}

// Plugin is an instance or flavor block: which provider, which type, and the
// properties to pass (a JSON object: the cty value encoded as JSON).
type Plugin struct {
	// Provider is the provider key ("simulator", "simulator.nfs-auth").
	Provider   string          `json:"provider"`
	Type       string          `json:"type,omitempty"`
	Properties json.RawMessage `json:"properties,omitempty"`

	DeclRange       hcl.Range `json:"-"`
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

// HealthPolicy is the group's health block (used by watch).
type HealthPolicy struct {
	Grace                  Duration `json:"grace"`
	ReplaceUnhealthy       bool     `json:"replace_unhealthy"`
	MaxReplacementsPerHour int      `json:"max_replacements_per_hour"`
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
