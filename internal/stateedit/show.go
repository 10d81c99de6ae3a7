package stateedit

import (
	"fmt"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
)

// Record is what `state show` prints of one object: what the state holds
// of it. Its JSON is `state show -json`.
type Record struct {
	Address string `json:"address"`
	// Kind is "group", "instance", "ingress" or "enrollment".
	Kind string `json:"kind"`
	// Group is set for a group, Instance for a member, Ingress or
	// Enrollment for those.
	Group      *GroupRecord    `json:"group,omitempty"`
	Instance   *InstanceRecord `json:"instance,omitempty"`
	Ingress    *FollowerRecord `json:"ingress,omitempty"`
	Enrollment *FollowerRecord `json:"enrollment,omitempty"`
}

// GroupRecord is a group's record: its configuration as last applied (nil
// when the state holds none), its flags and its recorded members.
type GroupRecord struct {
	Name          string        `json:"name"`
	Config        *config.Group `json:"config"`
	ConfigHash    string        `json:"config_hash,omitempty"`
	Freed         bool          `json:"freed"`
	UpdateStopped bool          `json:"update_stopped"`
	Destroying    bool          `json:"destroying"`
	Instances     []string      `json:"instances"`
}

// InstanceRecord is a member as the state records it. Tags are the
// infrakit tags the record says it carries (the state keeps the record,
// the provider keeps the tags; `group describe` shows them as listed).
type InstanceRecord struct {
	Group      string            `json:"group"`
	ID         string            `json:"id"`
	LogicalID  string            `json:"logical_id,omitempty"`
	ConfigHash string            `json:"config_hash,omitempty"`
	State      string            `json:"state,omitempty"`
	Address    string            `json:"address,omitempty"`
	Tags       map[string]string `json:"tags"`
}

// FollowerRecord is an ingress's or an enrollment's record: its block as
// last applied (nil when the state holds none), whether it is freed, and
// how many teardowns are pending.
type FollowerRecord struct {
	Name    string `json:"name"`
	Config  any    `json:"config"`
	Freed   bool   `json:"freed"`
	Pending int    `json:"pending"`
}

// NotFoundError is an address the state does not hold.
type NotFoundError struct{ Address Address }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("the state holds no %s; \"infrakit state list\" lists what it holds", e.Address)
}

// Show is the record at a.
func Show(doc *state.Document, a Address) (*Record, error) {
	rec := &Record{Address: a.String(), Kind: a.KindOf()}
	switch a.Kind {
	case plan.KindGroup:
		cfg, st := storedGroup(doc, a.Name), doc.Groups[a.Name]
		if cfg == nil && st == nil {
			return nil, &NotFoundError{a}
		}
		if st == nil {
			st = &state.GroupStatus{}
		}
		if a.IsInstance() {
			in := findInstance(st, a.Instance)
			if in == nil {
				return nil, &NotFoundError{a}
			}
			rec.Instance = instanceRecord(doc, a.Name, *in)
			return rec, nil
		}
		g := &GroupRecord{Name: a.Name, Config: cfg, Freed: st.Freed, UpdateStopped: st.UpdateStopped,
			Destroying: st.Destroying, Instances: []string{}}
		if cfg != nil {
			g.ConfigHash = cfg.ConfigHash()
		}
		for _, in := range st.Instances {
			g.Instances = append(g.Instances, in.ID)
		}
		rec.Group = g
	case plan.KindIngress, plan.KindEnrollment:
		f, ok := follower(doc, a)
		if !ok {
			return nil, &NotFoundError{a}
		}
		if a.Kind == plan.KindIngress {
			rec.Ingress = f
		} else {
			rec.Enrollment = f
		}
	}
	return rec, nil
}

func instanceRecord(doc *state.Document, group string, in state.Instance) *InstanceRecord {
	stack := ""
	if doc.Stack != nil {
		stack = doc.Stack.Name
	}
	return &InstanceRecord{Group: group, ID: in.ID, LogicalID: in.LogicalID, ConfigHash: in.ConfigHash,
		State: in.State, Address: in.Address, Tags: tags.Member(stack, group, in.ConfigHash, in.LogicalID)}
}

func follower(doc *state.Document, a Address) (*FollowerRecord, bool) {
	f := &FollowerRecord{Name: a.Name}
	var st *state.ControllerStatus
	if a.Kind == plan.KindIngress {
		st = doc.Ingresses[a.Name]
		if doc.Stack != nil && doc.Stack.Ingress(a.Name) != nil {
			f.Config = doc.Stack.Ingress(a.Name)
		}
	} else {
		st = doc.Enrollments[a.Name]
		if doc.Stack != nil && doc.Stack.Enrollment(a.Name) != nil {
			f.Config = doc.Stack.Enrollment(a.Name)
		}
	}
	if st == nil && f.Config == nil {
		return nil, false
	}
	if st != nil {
		f.Freed, f.Pending = st.Freed, len(st.Pending)
	}
	return f, true
}

func storedGroup(doc *state.Document, name string) *config.Group {
	if doc.Stack == nil {
		return nil
	}
	return doc.Stack.Group(name)
}

func findInstance(st *state.GroupStatus, id string) *state.Instance {
	if st == nil {
		return nil
	}
	for i := range st.Instances {
		if st.Instances[i].ID == id {
			return &st.Instances[i]
		}
	}
	return nil
}
