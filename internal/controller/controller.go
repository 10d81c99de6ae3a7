// Package controller defines how the CLI's object verbs (and, served over
// HTTP, a remote client's) reach the objects of a stack: the Controller
// interface of the design, one per kind of object (groups, ingresses,
// enrollments), and Group, which adds the verbs of groups.
//
// Every verb that acts does so the one way infrakit acts: it computes a
// plan (package plan) for the object and hands it to the executor
// (package execute), under the state lock; a verb's Result is that plan
// and what its execution did. The sub-packages hold each kind's pure
// decisions (group.Decide, ingress.Diff, enrollment.Diff), which the
// planner calls; they act on nothing themselves.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/instance"
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
	KindGroup      = plan.KindGroup
	KindIngress    = plan.KindIngress
	KindEnrollment = plan.KindEnrollment
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

// Object is an object as the controller sees it: its spec, and what was
// observed of it, in a JSON shape its kind defines (a group's members, an
// ingress's routes and backends, an enrollment's authorizations).
type Object struct {
	Spec  Spec            `json:"spec"`
	Freed bool            `json:"freed,omitempty"`
	State json.RawMessage `json:"state,omitempty"`
}

// Result is what a verb that acts did: the plan it made and what executing
// it did.
type Result struct {
	Plan *plan.Plan `json:"plan"`
	// Done counts the steps done, with the fields of the plan's Summary.
	Done plan.Counts `json:"done"`
	// Failed are the steps that failed; Skipped and NotRun count those
	// that waited for a failed one, and those an interrupt kept from
	// starting.
	Failed  []execute.Failure `json:"-"`
	Skipped int               `json:"skipped,omitempty"`
	NotRun  int               `json:"not_run,omitempty"`
}

// Err joins the failures into one error (nil without any).
func (r *Result) Err() error {
	if r == nil {
		return nil
	}
	errs := make([]error, 0, len(r.Failed))
	for _, f := range r.Failed {
		errs = append(errs, f)
	}
	return errors.Join(errs...)
}

// Controller manages the objects of one kind. Every method takes a context
// that bounds the provider calls it makes.
type Controller interface {
	// Plan returns what Commit(ctx, op, spec) would do, changing nothing.
	Plan(ctx context.Context, op Operation, spec Spec) (*plan.Plan, error)
	// Commit makes it so (Enforce stores spec as the object's and
	// converges it, resuming it if it was freed; Destroy removes it and
	// what it made) and returns what was done.
	Commit(ctx context.Context, op Operation, spec Spec) (*Result, error)
	// Describe observes the selected objects.
	Describe(ctx context.Context, meta *Metadata) ([]Object, error)
	// Free stops managing the selected objects and touches nothing (an
	// enrollment with destroy_on_free revokes its authorizations): a
	// later apply resumes them.
	Free(ctx context.Context, meta *Metadata) ([]Object, *Result, error)
	// Destroy removes the selected objects and everything they made.
	Destroy(ctx context.Context, meta *Metadata) (*Result, error)
	// Spec returns the specs of every object managed.
	Spec(ctx context.Context) ([]Spec, error)
}

// Group is the Controller of groups, with the verbs the CLI exposes for a
// group.
type Group interface {
	Controller
	// Size is the number of members group name should have: its size for
	// cattle, the number of logical IDs for pets.
	Size(ctx context.Context, name string) (int, error)
	// SetSize sets the size of cattle and converges the group to it
	// (creates or destroys members, with their backends and
	// authorizations); pets are sized by their logical IDs and refused.
	// An autoscaled group's size is its autoscaler's: it is set only with
	// opts.Override, and never outside the autoscale bounds.
	SetSize(ctx context.Context, name string, n int, opts ScaleOptions) (*Result, error)
	// DestroyInstances destroys the given live members; the size of cattle
	// shrinks by as many. An ID that is no live member is refused, and
	// nothing is destroyed.
	DestroyInstances(ctx context.Context, name string, ids []instance.ID) (*Result, error)
	// StopUpdate halts the group's rolling update until the next apply.
	StopUpdate(ctx context.Context, name string) error
}

// ScaleOptions are SetSize's options.
type ScaleOptions struct {
	// Override sets the size of an autoscaled group (within its bounds);
	// its autoscaler resumes from that size after its cooldown.
	Override bool
}

// ErrNotFound is matched (errors.Is) by the error for an object the state
// does not know.
var ErrNotFound = errors.New("not in the state")

// ErrFreed is matched (errors.Is) by the error of a verb refused because
// the object is freed.
var ErrFreed = errors.New("is free (not managed)")

// Freed is the one refusal of every verb that would act on a freed object:
// only apply (which resumes it) and destroy (asked explicitly) act on one.
func Freed(kind, name string) error {
	return fmt.Errorf("%s %q %w: run \"infrakit apply\" to manage it again, or \"infrakit %s destroy %s\" to destroy it",
		kind, name, ErrFreed, kind, name)
}

// NotFound is the error of a verb naming an object the state does not know.
func NotFound(kind, name string) error {
	hint := "apply the stack first"
	if kind == KindGroup {
		hint += ", or see `infrakit group ls`"
	}
	return fmt.Errorf("%s %q is %w (%s)", kind, name, ErrNotFound, hint)
}
