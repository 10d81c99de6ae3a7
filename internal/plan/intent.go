package plan

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// StateChangeKind is what a StateChange does to the state document.
type StateChangeKind string

// State changes. The intent of a plan (its first record step) stores the
// stack, marks what is about to be torn down and resumes what is managed
// again; later record steps forget what was torn down, once it is.
const (
	// StoreStack stores the plan's desired stack (StoredStack of it).
	StoreStack StateChangeKind = "store-stack"
	// SetSize sets the stored size of cattle Name to Size.
	SetSize StateChangeKind = "set-size"
	// SetMembers replaces the recorded members of group Name with Members
	// (the members observed, when the record disagreed with them).
	SetMembers StateChangeKind = "set-members"
	// Resume clears the freed mark of Object (and a group's being destroyed).
	Resume StateChangeKind = "resume"
	// MarkFreed marks Object freed: nothing manages it until an apply
	// resumes it.
	MarkFreed StateChangeKind = "mark-freed"
	// ResumeUpdate clears group Name's stopped rolling update.
	ResumeUpdate StateChangeKind = "resume-update"
	// MarkDestroying marks group Name as being destroyed: nothing manages
	// it any more, and every plan destroys what is left of it until
	// ForgetGroup.
	MarkDestroying StateChangeKind = "mark-destroying"
	// ForgetGroup drops group Name's record and its stored configuration.
	ForgetGroup StateChangeKind = "forget-group"
	// AddPending records Part as a teardown of Object that must finish:
	// what it names is no longer in the stored stack.
	AddPending StateChangeKind = "add-pending"
	// ClearPending drops the pending teardown Part of Object, done now.
	ClearPending StateChangeKind = "clear-pending"
	// Forget drops the record of ingress or enrollment Object (and its
	// stored block), once it is torn down.
	Forget StateChangeKind = "forget"
)

// StateChange is one change to the state document.
type StateChange struct {
	Kind StateChangeKind `json:"kind"`
	// Object is "group.NAME", "ingress.NAME" or "enrollment.NAME".
	Object  string           `json:"object,omitempty"`
	Size    int              `json:"size,omitempty"`
	Members []state.Instance `json:"members,omitempty"`
	Part    *config.Stack    `json:"part,omitempty"`
}

// ApplyChange applies c to doc. desired is the plan's desired stack
// (StoreStack stores StoredStack(desired, doc)).
func ApplyChange(doc *state.Document, desired *config.Stack, c StateChange) {
	kind, name := SplitObject(c.Object)
	switch c.Kind {
	case StoreStack:
		doc.Stack = StoredStack(desired, doc)
	case SetSize:
		setSize(doc, name, c.Size)
	case SetMembers:
		doc.Group(name).Instances = slices.Clone(c.Members)
	case Resume:
		resume(doc, kind, name)
	case MarkFreed:
		if kind == KindGroup {
			doc.Group(name).Freed = true
		} else {
			controllerRecord(doc, kind, name, true).Freed = true
		}
	case ResumeUpdate:
		doc.Group(name).UpdateStopped = false
	case MarkDestroying:
		doc.Group(name).Destroying = true
	case ForgetGroup:
		delete(doc.Groups, name)
		if doc.Stack != nil && doc.Stack.Group(name) != nil {
			out := *doc.Stack
			out.Groups = slices.DeleteFunc(slices.Clone(out.Groups), func(g *config.Group) bool { return g.Name == name })
			doc.Stack = &out
		}
	case AddPending:
		rec := controllerRecord(doc, kind, name, true)
		if !slices.ContainsFunc(rec.Pending, func(p *config.Stack) bool { return sameStack(p, c.Part) }) {
			rec.Pending = append(rec.Pending, c.Part)
		}
	case ClearPending:
		if rec := controllerRecord(doc, kind, name, false); rec != nil {
			rec.Pending = slices.DeleteFunc(rec.Pending, func(p *config.Stack) bool { return sameStack(p, c.Part) })
			dropEmpty(doc, kind, name)
		}
	case Forget:
		forget(doc, kind, name)
	}
}

// StoredStack is the stack apply stores for desired over doc: desired, plus
// the configuration of the groups the stored stack has and desired lacks
// that are freed (so they can still be observed and destroyed later) or
// being destroyed (so what is left of them can be).
func StoredStack(desired *config.Stack, doc *state.Document) *config.Stack {
	if doc == nil || doc.Stack == nil || desired == nil {
		return desired
	}
	var keep []*config.Group
	for _, g := range doc.Stack.Groups {
		st := doc.Groups[g.Name]
		if desired.Group(g.Name) == nil && st != nil && (st.Freed || st.Destroying) {
			keep = append(keep, g)
		}
	}
	if len(keep) == 0 {
		return desired
	}
	out := *desired
	out.Groups = append(slices.Clone(desired.Groups), keep...)
	return &out
}

// setSize sets the stored size of cattle name on copies of the stored
// stack and group: the stored stack is often the plan's desired stack
// itself (StoreStack), which must not change under the plan.
func setSize(doc *state.Document, name string, n int) {
	if doc.Stack == nil {
		return
	}
	i := slices.IndexFunc(doc.Stack.Groups, func(g *config.Group) bool { return g.Name == name })
	if i < 0 || doc.Stack.Groups[i].Size == nil {
		return
	}
	g := *doc.Stack.Groups[i]
	g.Size = &n
	out := *doc.Stack
	out.Groups = slices.Clone(out.Groups)
	out.Groups[i] = &g
	doc.Stack = &out
}

func resume(doc *state.Document, kind, name string) {
	if kind == KindGroup {
		g := doc.Group(name)
		g.Freed, g.Destroying = false, false
		return
	}
	if rec := controllerRecord(doc, kind, name, false); rec != nil {
		rec.Freed = false
		dropEmpty(doc, kind, name)
	}
}

// controllerRecord is the record of an ingress or enrollment, made when
// create is set.
func controllerRecord(doc *state.Document, kind, name string, create bool) *state.ControllerStatus {
	m := &doc.Ingresses
	if kind == KindEnrollment {
		m = &doc.Enrollments
	}
	if (*m)[name] == nil {
		if !create {
			return nil
		}
		if *m == nil {
			*m = map[string]*state.ControllerStatus{}
		}
		(*m)[name] = &state.ControllerStatus{}
	}
	return (*m)[name]
}

// dropEmpty deletes a record left with nothing to say.
func dropEmpty(doc *state.Document, kind, name string) {
	m := doc.Ingresses
	if kind == KindEnrollment {
		m = doc.Enrollments
	}
	if rec := m[name]; rec != nil && !rec.Freed && len(rec.Pending) == 0 {
		delete(m, name)
	}
}

// forget drops an ingress's or enrollment's record and stored block. Its
// pending teardowns stay: they are still owed.
func forget(doc *state.Document, kind, name string) {
	if rec := controllerRecord(doc, kind, name, false); rec != nil {
		rec.Freed = false
		dropEmpty(doc, kind, name)
	}
	if doc.Stack == nil {
		return
	}
	out := *doc.Stack
	switch kind {
	case KindIngress:
		out.Ingresses = slices.DeleteFunc(slices.Clone(out.Ingresses), func(in *config.Ingress) bool { return in.Name == name })
	case KindEnrollment:
		out.Enrollments = slices.DeleteFunc(slices.Clone(out.Enrollments), func(e *config.Enrollment) bool { return e.Name == name })
	}
	doc.Stack = &out
}

// Object kinds of addresses.
const (
	KindGroup      = "group"
	KindIngress    = "ingress"
	KindEnrollment = "enrollment"
)

// Address is "kind.name".
func Address(kind, name string) string { return kind + "." + name }

// SplitObject splits "kind.name" (the name may hold dots: "ingress.test.com").
func SplitObject(object string) (kind, name string) {
	for i := 0; i < len(object); i++ {
		if object[i] == '.' {
			return object[:i], object[i+1:]
		}
	}
	return object, ""
}

// sameStack reports whether two stacks encode the same.
func sameStack(a, b *config.Stack) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// SameStack reports whether two stacks are stored the same.
func SameStack(a, b *config.Stack) bool { return sameStack(a, b) }
