// Package controller defines the Controller interface: how the core manages
// one kind of object of a stack (groups, ingresses, enrollments).
//
// A controller is written as observe → diff → act. The diff is a pure
// function that its sub-package exposes on its own (group.Decide, for
// instance) so it can be tested with tables and properties without any
// provider running; the Controller methods wrap that function with the
// observing and acting, which go through the SPI (sdk/instance, sdk/flavor,
// ...), never through go-plugin directly.
//
// Everything a controller returns is data — a Spec, an Object, a Change —
// that can be printed, compared in tests and encoded as JSON.
package controller

import (
	"context"
	"encoding/json"
	"fmt"
)

// Operation is what Plan and Commit are asked to do with a spec.
type Operation string

// Operations.
const (
	// Enforce makes the object match its spec: create what is missing,
	// remove what is extra, replace what is out of date.
	Enforce Operation = "enforce"
	// Destroy removes the object and everything it created.
	Destroy Operation = "destroy"
)

// Valid reports whether op is one of the known operations.
func (op Operation) Valid() bool { return op == Enforce || op == Destroy }

// Kinds of objects, the Spec.Kind values.
const (
	KindGroup      = "group"
	KindIngress    = "ingress"
	KindEnrollment = "enrollment"
)

// Metadata names an object; as an argument it selects objects, and a nil
// *Metadata selects every object the controller manages.
type Metadata struct {
	Name string            `json:"name"`
	Tags map[string]string `json:"tags,omitempty"`
}

// Spec is the desired state of one object. Properties is the object's block
// as JSON in the shape its kind defines (a config.Group for a group), so a
// spec can come from the HCL loader, a legacy JSON file or the state file
// alike.
type Spec struct {
	Kind       string          `json:"kind"`
	Metadata   Metadata        `json:"metadata"`
	Properties json.RawMessage `json:"properties,omitempty"`
}

// String is "kind.name", the address users see in plans and errors.
func (s Spec) String() string { return s.Kind + "." + s.Metadata.Name }

// Object is an object as the controller sees it: the spec it enforces and
// what it observed, in a JSON shape its kind defines (a group's members).
type Object struct {
	Spec  Spec            `json:"spec"`
	State json.RawMessage `json:"state,omitempty"`
}

// Change is what a Commit of an operation and spec would do to one object.
type Change struct {
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	Operation Operation `json:"operation"`
	// Steps are the single actions, in the order Commit would take them.
	Steps []Step `json:"steps,omitempty"`
}

// Empty reports whether committing would do nothing.
func (c Change) Empty() bool { return len(c.Steps) == 0 }

// Step is one action on one target of an object.
type Step struct {
	// Action is a verb in plan vocabulary: "create", "destroy", "replace",
	// "update", "register", "deregister", "authorize", "revoke".
	Action string `json:"action"`
	// Target is what the step acts on: an instance ID, a logical ID, a backend.
	Target string `json:"target,omitempty"`
	// Reason says why, when it is not obvious from Action ("scale-down").
	Reason string `json:"reason,omitempty"`
}

// String renders a step as "action target (reason)".
func (s Step) String() string {
	out := s.Action
	if s.Target != "" {
		out += " " + s.Target
	}
	if s.Reason != "" {
		out += fmt.Sprintf(" (%s)", s.Reason)
	}
	return out
}

// Controller manages the objects of one kind. Every method takes a context
// that bounds the provider calls it makes.
type Controller interface {
	// Plan returns what Commit(ctx, op, spec) would do, changing nothing.
	Plan(ctx context.Context, op Operation, spec Spec) (Change, error)
	// Commit makes it so and returns the object as it now stands. Commit of
	// Enforce may return before the object has converged (instances still
	// pending); later commits, or a watch, finish the job.
	Commit(ctx context.Context, op Operation, spec Spec) (Object, error)
	// Describe observes the selected objects.
	Describe(ctx context.Context, meta *Metadata) ([]Object, error)
	// Free stops managing the selected objects and touches nothing: their
	// instances keep running until a later Commit resumes management.
	Free(ctx context.Context, meta *Metadata) ([]Object, error)
	// Destroy removes the selected objects and everything they created.
	Destroy(ctx context.Context, meta *Metadata) ([]Object, error)
	// Spec returns the specs of every object currently managed.
	Spec(ctx context.Context) ([]Spec, error)
}
