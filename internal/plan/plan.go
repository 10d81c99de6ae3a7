// Package plan computes infrakit's unit of work: a Plan, a graph of steps
// (provision, await, register and deregister backends, publish and
// unpublish routes, authorize, revoke, drain, destroy, record) with their
// dependencies, from the desired stack, the state and the observed world.
// `plan` renders it (for people in Terraform's vocabulary, for programs as
// JSON), `plan -out` saves it, `apply` and every `watch` pass hand it to
// the executor, which runs its steps and nothing else.
//
// Computing a plan is pure: the caller observes the world (one
// DescribeInstances per group, the load balancers' routes and backends,
// the authorizers' authorizations) and passes it in. What a group needs is
// group.Decide's and group.RollSchedule's (ApplyWork), or the caller's
// (Scope.Work: a watch pass, a group verb); what its followers need is
// ingress.Diff's and enrollment.Diff's, for the members as the plan leaves
// them. The order of the steps (make before break, intent before action)
// is in their dependencies; see step.go.
//
// Choices made for objects outside the plain cases:
//   - A group in the state but not in the stack is destroyed: all its live
//     members, after it is marked as being destroyed; its record goes once
//     they are.
//   - A freed object in the stack is shown as "resume": apply manages it
//     again. One not in the stack is shown as "free" and left alone.
//   - An object whose observation failed is shown as "unknown" with the
//     error, and gets no step.
//   - Teardowns (a load balancer an ingress lets go of, an enrollment's old
//     target) are recorded in the state by the intent and cleared by a
//     record step once done, so one that fails is retried by the next plan.
package plan

import (
	"errors"
	"fmt"
	"github.com/infrakit/infrakit/internal/autoscale"
	"maps"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
)

// FormatVersion is the version of the plan file this build writes and reads.
const FormatVersion = 3

// Action is what a plan does to one object.
type Action string

// Actions.
const (
	// ActionCreate: a new object; its members, routes, backends or
	// authorizations are made.
	ActionCreate Action = "create"
	// ActionUpdate: the object changes (a group's size or members, a load
	// balancer's routes or backends, authorizations).
	ActionUpdate Action = "update"
	// ActionRoll: a group's members are out of date and will be replaced.
	ActionRoll Action = "roll"
	// ActionDestroy: the object left the stack; everything it made goes.
	ActionDestroy Action = "destroy"
	// ActionResume: a freed object in the stack is managed again.
	ActionResume Action = "resume"
	// ActionFree: a freed object not in the stack; nothing is touched.
	ActionFree Action = "free"
	// ActionNoOp: the object matches its configuration.
	ActionNoOp Action = "no-op"
	// ActionUnknown: the object could not be observed; see Error.
	ActionUnknown Action = "unknown"
)

// IsChange reports whether the action changes anything.
func (a Action) IsChange() bool {
	switch a {
	case ActionNoOp, ActionFree, ActionUnknown:
		return false
	}
	return true
}

// Plan is what apply would do. It is saved and loaded as JSON.
type Plan struct {
	FormatVersion int `json:"format_version"`
	// Stack is the desired stack's name.
	Stack string `json:"stack"`
	// StateLineage and StateSerial identify the state the plan was made
	// against; CheckState refuses to apply it to any other.
	StateLineage string `json:"state_lineage"`
	StateSerial  uint64 `json:"state_serial"`
	// Desired is the stack the plan converges to (stored by StoreStack).
	Desired *config.Stack `json:"desired"`
	// Groups, Ingresses and Enrollments say, object by object, what the
	// steps do: those of the stack in stack order, then the others by name.
	Groups      []GroupChange      `json:"groups"`
	Ingresses   []IngressChange    `json:"ingresses,omitempty"`
	Enrollments []EnrollmentChange `json:"enrollments,omitempty"`
	// Steps are the work; Summary counts them.
	Steps   []Step `json:"steps,omitempty"`
	Summary Counts `json:"summary"`
	// Observed fingerprints the members each group had when the plan was
	// made (CheckWorld): a saved plan acts on those members only.
	Observed map[string]string `json:"observed,omitempty"`
	// Autoscale says, for each autoscaled group, whose size the plan
	// converges to: the autoscaler's, kept, or the stack's start size.
	Autoscale []autoscale.Ownership `json:"autoscale,omitempty"`
}

// GroupChange is the plan for one group.
type GroupChange struct {
	Group  string `json:"group"`
	Action Action `json:"action"`
	// Before counts the live members observed; After the members there will
	// be (both 0 when the action is unknown).
	Before int `json:"before"`
	After  int `json:"after"`
	// ConfigHash is the desired config hash (empty for groups not in the stack).
	ConfigHash string          `json:"config_hash,omitempty"`
	Create     []group.Create  `json:"create,omitempty"`
	Destroy    []group.Destroy `json:"destroy,omitempty"`
	// Replace are members replaced for their health.
	Replace []Replacement `json:"replace,omitempty"`
	// Roll are the out-of-date members a rolling update replaces, in the
	// batches the group's update policy paces.
	Roll [][]Replacement `json:"roll,omitempty"`
	// RollWait says why out-of-date members are left out of the roll.
	RollWait string `json:"roll_wait,omitempty"`
	// UpdateStopped is set when `group stop-update` halted the group's
	// roll; apply resumes it.
	UpdateStopped bool `json:"update_stopped,omitempty"`
	// WasDestroying is set when the group was being destroyed (an
	// interrupted destroy) and is managed again (ActionResume).
	WasDestroying bool `json:"was_destroying,omitempty"`
	// Error is why the group could not be observed (ActionUnknown).
	Error string `json:"error,omitempty"`
}

// Rolled counts the members the group's rolling update replaces.
func (g GroupChange) Rolled() int {
	n := 0
	for _, b := range g.Roll {
		n += len(b)
	}
	return n
}

// HasChanges reports whether applying the plan would change anything
// (`plan -detailed-exitcode` exits 2 then): a provider call, a record
// other than storing the stack or the members as observed (which a plan
// does silently), or an object created, resumed or destroyed. Objects of
// unknown state do not count: the caller reports them as errors.
func (p *Plan) HasChanges() bool {
	for _, s := range p.Steps {
		if s.Calls() {
			return true
		}
		for _, c := range s.Changes {
			switch c.Kind {
			case StoreStack, SetMembers, ResumeUpdate, SetSize:
			default:
				return true
			}
		}
	}
	for _, g := range p.Groups {
		if g.Action.IsChange() && g.Action != ActionUpdate && g.Action != ActionRoll {
			return true
		}
	}
	for _, c := range p.Enrollments {
		if len(c.Settings) > 0 && c.Action != ActionUnknown {
			return true
		}
	}
	return false
}

// Unknown lists the objects that could not be observed, with why.
func (p *Plan) Unknown() []string {
	var out []string
	for _, g := range p.Groups {
		if g.Action == ActionUnknown {
			out = append(out, fmt.Sprintf("group %q: %s", g.Group, g.Error))
		}
	}
	for _, c := range p.Ingresses {
		if c.Action == ActionUnknown {
			out = append(out, fmt.Sprintf("ingress %q: %s", c.Ingress, c.Error))
		}
	}
	for _, c := range p.Enrollments {
		if c.Action == ActionUnknown {
			out = append(out, fmt.Sprintf("enrollment %q: %s", c.Enrollment, c.Error))
		}
	}
	return out
}

// Compute plans the way from doc (nil when no state is stored) and the
// observed world to desired, for what scope covers. Its cost is linear in
// the number of members, backends and authorizations (plus sorting).
func Compute(desired *config.Stack, doc *state.Document, world World, scope Scope) (*Plan, error) {
	if desired == nil {
		return nil, errors.New("plan: no desired stack")
	}
	if doc == nil {
		doc = &state.Document{}
	}
	p := &Plan{FormatVersion: FormatVersion, Stack: desired.Name, Desired: desired,
		StateLineage: doc.Lineage, StateSerial: doc.Serial}
	doc, resumed := unfreed(doc, scope.Resume)
	c := &computation{b: newBuilder(), desired: desired, doc: doc, world: world, scope: scope, plan: p}
	c.intent.marks = append(c.intent.marks, resumed...)
	for _, st := range []*config.Stack{doc.Stack, desired} {
		if st != nil {
			for _, g := range st.Groups {
				if g != nil {
					c.b.providers[g.Name] = g.Instance.Provider
				}
			}
		}
	}
	if err := c.groups(); err != nil {
		return nil, err
	}
	c.ingresses()
	c.enrollments()
	if !sameStack(StoredStack(desired, doc), doc.Stack) {
		c.intent.store = append(c.intent.store, StateChange{Kind: StoreStack})
	}
	c.b.intent = c.intent.ordered()
	p.Steps = c.b.finish()
	p.Summary = CountSteps(p.Steps)
	p.Observed = fingerprints(c.planned, world)
	if err := Check(p.Steps); err != nil {
		return nil, fmt.Errorf("plan: %w", err) // a planner bug: never act on it
	}
	return p, nil
}

// unfreed is doc with the objects of resume not freed (doc itself is not
// changed), and the intent's changes that resume them.
func unfreed(doc *state.Document, resume []string) (*state.Document, []StateChange) {
	if len(resume) == 0 {
		return doc, nil
	}
	out := *doc
	out.Groups = maps.Clone(doc.Groups)
	out.Ingresses = maps.Clone(doc.Ingresses)
	out.Enrollments = maps.Clone(doc.Enrollments)
	var changes []StateChange
	for _, object := range resume {
		kind, name := SplitObject(object)
		switch kind {
		case KindGroup:
			if st := out.Groups[name]; st != nil && st.Freed {
				cp := *st
				cp.Freed = false
				out.Groups[name] = &cp
				changes = append(changes, StateChange{Kind: Resume, Object: object})
			}
		case KindIngress, KindEnrollment:
			m := out.Ingresses
			if kind == KindEnrollment {
				m = out.Enrollments
			}
			if rec := m[name]; rec != nil && rec.Freed {
				cp := *rec
				cp.Freed = false
				m[name] = &cp
				changes = append(changes, StateChange{Kind: Resume, Object: object})
			}
		}
	}
	return &out, changes
}

// computation is one Compute in progress.
type computation struct {
	b       *builder
	desired *config.Stack
	doc     *state.Document
	world   World
	scope   Scope
	plan    *Plan
	intent  intents
	// planned are the groups the plan acts on, whose members it fingerprints.
	planned []string
}

// intents are the state changes of the intent, in the order they must be
// applied: marks before the stack is stored (StoredStack keeps the groups
// marked as being destroyed).
type intents struct {
	marks, pending, members, store []StateChange
}

func (i intents) ordered() []StateChange {
	var out []StateChange
	for _, part := range [][]StateChange{i.marks, i.pending, i.members, i.store} {
		out = append(out, part...)
	}
	return out
}
