// Package plan compares the desired stack with the state and the observed
// world and returns a Plan: a value that says, group by group, which instances
// infrakit would create, replace and destroy. A plan can be printed (for
// people in Terraform's vocabulary, for programs as JSON), saved with
// `plan -out FILE` and applied later, provided the state has not moved since.
//
// Computing a plan is pure: the caller observes the world (one
// DescribeInstances per group) and passes it in; nothing here calls a
// provider. The per-group decision is group.Decide, so `plan` shows exactly
// what the group controller would do.
//
// Choices made for groups outside the plain cases:
//   - A group in the state (or observed by its tags) but not in the stack is
//     destroyed: all its live members.
//   - A freed group that is in the stack is shown as "resume": apply manages
//     it again, and the plan lists what that first pass will do.
//   - A freed group that is no longer in the stack is shown as "free": its
//     instances are left alone and its record stays freed, so a later plan
//     never destroys them by surprise. It is no change.
//   - A group whose observation failed is shown as "unknown" with the error,
//     and its changes are not counted.
package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// FormatVersion is the version of the plan file this build writes and reads.
const FormatVersion = 2

// Action is what a plan does to one group.
type Action string

// Actions.
const (
	// ActionCreate: a new group; its instances are created.
	ActionCreate Action = "create"
	// ActionUpdate: the group's size or members change (grow, shrink, repair).
	ActionUpdate Action = "update"
	// ActionRoll: members are out of date and will be replaced (-/+).
	ActionRoll Action = "roll"
	// ActionDestroy: the group left the stack; all its members are destroyed.
	ActionDestroy Action = "destroy"
	// ActionResume: a freed group in the stack is managed again.
	ActionResume Action = "resume"
	// ActionFree: a freed group not in the stack; nothing is touched.
	ActionFree Action = "free"
	// ActionNoOp: the group matches its configuration.
	ActionNoOp Action = "no-op"
	// ActionUnknown: the group could not be observed; see GroupChange.Error.
	ActionUnknown Action = "unknown"
)

// IsChange reports whether applying the action changes anything.
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
	// Desired is the stack that apply will store as the desired stack.
	Desired *config.Stack `json:"desired"`
	// Groups has one entry per group: those of the stack in stack order,
	// then the others by name.
	Groups  []GroupChange `json:"groups"`
	Summary Summary       `json:"summary"`
	// Ingresses and Enrollments are added by the caller (AddControllers).
	Ingresses   []IngressChange    `json:"ingresses,omitempty"`
	Enrollments []EnrollmentChange `json:"enrollments,omitempty"`
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
	// Roll lists the out-of-date members to replace, in batches that the
	// group's update policy paces.
	Roll []instance.ID `json:"roll,omitempty"`
	// UpdateStopped is set when `group stop-update` halted the group's roll.
	UpdateStopped bool `json:"update_stopped,omitempty"`
	// Error is why the group could not be observed (ActionUnknown).
	Error string `json:"error,omitempty"`
}

// Summary counts instances over all groups, and the route, backend and
// authorization changes of ingresses and enrollments.
type Summary struct {
	Add            int `json:"add"`
	Roll           int `json:"roll"`
	Destroy        int `json:"destroy"`
	Routes         int `json:"routes,omitempty"`
	Backends       int `json:"backends,omitempty"`
	Authorizations int `json:"authorizations,omitempty"`
}

// World is what the caller observed.
type World struct {
	// Members of each group by group name, as group.MembersFromDescriptions
	// returns them. A group that is absent has no members.
	Members map[string][]group.Member
	// Failed holds the groups whose observation failed, with the error.
	Failed map[string]error
}

// HasChanges reports whether applying the plan would change anything
// (`plan -detailed-exitcode` exits 2 then). Groups of unknown state do not
// count: the caller reports them as errors.
func (p *Plan) HasChanges() bool {
	for _, g := range p.Groups {
		if g.Action.IsChange() {
			return true
		}
	}
	return p.controllersChange()
}

// Compute plans the way from the state doc (nil when there is none) and the
// observed world to the desired stack. Its cost is linear in the number of
// members (plus one sort by ID per group).
func Compute(desired *config.Stack, doc *state.Document, world World) (*Plan, error) {
	if desired == nil {
		return nil, errors.New("plan: no desired stack")
	}
	p := &Plan{FormatVersion: FormatVersion, Stack: desired.Name, Desired: desired}
	var statuses map[string]*state.GroupStatus
	known := map[string]bool{} // groups the state knows about
	if doc != nil {
		p.StateLineage, p.StateSerial = doc.Lineage, doc.Serial
		statuses = doc.Groups
		for name := range doc.Groups {
			known[name] = true
		}
		if doc.Stack != nil {
			for _, g := range doc.Stack.Groups {
				if g != nil {
					known[g.Name] = true
				}
			}
		}
	}

	inStack := make(map[string]bool, len(desired.Groups))
	for i, g := range desired.Groups {
		if g == nil {
			return nil, fmt.Errorf("plan: group %d of stack %q is nil", i, desired.Name)
		}
		if inStack[g.Name] {
			return nil, fmt.Errorf("plan: group %q is declared twice", g.Name)
		}
		inStack[g.Name] = true
		p.Groups = append(p.Groups, planGroup(g, statuses[g.Name], known[g.Name], world))
	}

	goneSet := map[string]bool{}
	for name := range known {
		goneSet[name] = true
	}
	for name := range world.Members {
		goneSet[name] = true
	}
	for name := range world.Failed {
		goneSet[name] = true
	}
	for name := range inStack {
		delete(goneSet, name)
	}
	gone := slices.Sorted(maps.Keys(goneSet))
	for _, name := range gone {
		if gc, ok := planGone(name, statuses[name], known[name], world); ok {
			p.Groups = append(p.Groups, gc)
		}
	}

	for _, g := range p.Groups {
		p.Summary.Add += len(g.Create)
		p.Summary.Roll += len(g.Roll)
		p.Summary.Destroy += len(g.Destroy)
	}
	return p, nil
}

// planGroup plans a group of the desired stack.
func planGroup(g *config.Group, st *state.GroupStatus, known bool, world World) GroupChange {
	d := group.DesiredFromConfig(g)
	gc := GroupChange{Group: g.Name, ConfigHash: d.ConfigHash}
	if st != nil {
		gc.UpdateStopped = st.UpdateStopped
	}
	if err, failed := world.Failed[g.Name]; failed {
		gc.Action, gc.Error = ActionUnknown, errorText(err)
		return gc
	}
	members := world.Members[g.Name]
	dec := group.Decide(d, members)
	gc.Before = len(group.Live(members))
	gc.After = gc.Before + len(dec.Create) - len(dec.Destroy)
	gc.Create, gc.Destroy, gc.Roll = dec.Create, dec.Destroy, dec.Roll
	switch {
	case st != nil && st.Freed:
		gc.Action = ActionResume
	case !known && gc.Before == 0:
		gc.Action = ActionCreate
	case len(dec.Roll) > 0:
		// A roll is the more disruptive change; a size change beside it
		// still shows in Before/After and the lists.
		gc.Action = ActionRoll
	case !dec.Settled():
		gc.Action = ActionUpdate
	default:
		gc.Action = ActionNoOp
	}
	return gc
}

// planGone plans a group that is not in the desired stack. ok is false when
// there is nothing to say about it (unknown to the state, no live members).
func planGone(name string, st *state.GroupStatus, known bool, world World) (gc GroupChange, ok bool) {
	gc = GroupChange{Group: name}
	live := group.Live(world.Members[name])
	if st != nil && st.Freed {
		gc.Action, gc.Before, gc.After = ActionFree, len(live), len(live)
		return gc, true
	}
	if err, failed := world.Failed[name]; failed {
		gc.Action, gc.Error = ActionUnknown, errorText(err)
		return gc, true
	}
	if !known && len(live) == 0 {
		return gc, false
	}
	gc.Action, gc.Before = ActionDestroy, len(live)
	for _, m := range live {
		gc.Destroy = append(gc.Destroy, group.Destroy{ID: m.ID, Reason: instance.ReasonTerminate})
	}
	return gc, true
}

func errorText(err error) string {
	if err == nil {
		return "observation failed"
	}
	return err.Error()
}
