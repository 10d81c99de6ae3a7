// Package provider holds what every provider answers about itself (its Metadata
// and property schemas) and the diagnostics providers return, so the core can
// point at the exact attribute of a stack file that is wrong.
package provider

import (
	"fmt"
	"strings"
)

// Kind names one of the SPIs a provider can implement.
type Kind string

// The SPI kinds.
const (
	KindInstance     Kind = "instance"
	KindFlavor       Kind = "flavor"
	KindLoadBalancer Kind = "loadbalancer"
	KindAuthorizer   Kind = "nfs"
	KindMetrics      Kind = "metrics"
)

// AnyName is the object name a provider lists when it serves any name of a kind
// (the simulator serves every load balancer name it is asked for).
const AnyName = "*"

// Metadata is what a provider says about itself.
type Metadata struct {
	Name    string
	Version string
	// Objects lists each kind/type (or load balancer name) the provider serves,
	// with the schema of its properties.
	Objects []Object
}

// Object is one served kind and type ("instance"/"compute", "flavor"/"vanilla",
// "loadbalancer"/"*", "nfs"/"disk").
type Object struct {
	Kind   Kind
	Type   string
	Schema Schema
	// HealthFromState, for a flavor, says that its Healthy judges nothing
	// but the instance's state: every instance that is not terminating is
	// healthy. The host then does not ask it, which spares a group's
	// every member's description on the wire each interval.
	HealthFromState bool
	// PrepareAhead, for a flavor, says that its Prepare computes the spec
	// and does nothing else: the host may then prepare several new members
	// in one call (flavor.BatchPreparer, the PrepareBatch RPC) before it
	// provisions any of them. Leave it false when Prepare acts outside the
	// call (adds a cluster member, allocates an address): each member is
	// then prepared right before it is provisioned.
	PrepareAhead bool
}

// Find returns the object of the given kind and type, honouring AnyName.
func (m Metadata) Find(kind Kind, typ string) (Object, bool) {
	for _, o := range m.Objects {
		if o.Kind == kind && (o.Type == typ || o.Type == AnyName) {
			return o, true
		}
	}
	return Object{}, false
}

// Types lists the types served for a kind, in declaration order.
func (m Metadata) Types(kind Kind) []string {
	var out []string
	for _, o := range m.Objects {
		if o.Kind == kind {
			out = append(out, o.Type)
		}
	}
	return out
}

// Schema describes the properties object of one served type. Attribute types
// are cty type names as written in HCL type constraints ("string", "number",
// "bool", "list(string)", "map(string)", "any").
type Schema struct {
	Attributes map[string]Attribute
	// Open means attributes not listed are accepted (free-form properties).
	Open bool
}

// Attribute is one property in a Schema.
type Attribute struct {
	Type        string
	Required    bool
	Description string
}

// Severity of a Diagnostic.
type Severity int

// Severities, matching hcl.DiagnosticSeverity's order.
const (
	Error Severity = iota + 1
	Warning
)

// Diagnostic is a problem a provider found. Path names the attribute inside
// the properties object it is about (["init", "0"]); empty means the whole object.
type Diagnostic struct {
	Severity Severity
	Summary  string
	Detail   string
	Path     []string
}

// Diagnostics is a list of Diagnostic; a non-empty list with an Error in it is an error.
type Diagnostics []Diagnostic

// Error renders the diagnostics on one line each.
func (ds Diagnostics) Error() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString("; ")
		}
		if len(d.Path) > 0 {
			fmt.Fprintf(&b, "%s: ", strings.Join(d.Path, "."))
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString(": " + d.Detail)
		}
	}
	return b.String()
}

// HasErrors reports whether any diagnostic is an Error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Err returns ds as an error when it has errors, nil otherwise.
func (ds Diagnostics) Err() error {
	if ds.HasErrors() {
		return ds
	}
	return nil
}

// AttributeError is a shorthand for a one-error Diagnostics about an attribute.
func AttributeError(summary, detail string, path ...string) Diagnostics {
	return Diagnostics{{Severity: Error, Summary: summary, Detail: detail, Path: path}}
}
