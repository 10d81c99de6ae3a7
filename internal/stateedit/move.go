package stateedit

import (
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Move renames an object in the state, or moves a member to another group:
//
//   - group.A → group.B: the group's configuration and record are B's; the
//     stored ingress rules and enrollments naming A name B; every member
//     the provider lists is relabeled infrakit.group = B, so B finds them
//     (the config hash ignores the name: nothing rolls). B must be new.
//   - group.A.instance["ID"] → group.B (or group.B.instance["ID"]): the
//     record moves and the instance is relabeled into B, whose instance
//     block must be served by the same provider and type; for pets its
//     logical ID must be one of B's. It keeps its config hash tag: when B's
//     differs, the next apply rolls it like any out-of-date member.
//   - ingress.A → ingress.B: the block and record are renamed.
//
// Enrollments are not moved: the authorizations they made carry their name
// (infrakit.enrollment.name) and an authorizer cannot relabel them.
func Move(doc *state.Document, from, to Address, listed Listing) (*Edit, error) {
	if from.Kind != to.Kind {
		return nil, fmt.Errorf("cannot move %s to %s: a %s stays a %s", from, to, from.Kind, from.Kind)
	}
	out, err := clone(doc)
	if err != nil {
		return nil, err
	}
	e := &Edit{Doc: out}
	switch {
	case from.Kind == plan.KindEnrollment:
		return nil, fmt.Errorf("cannot move %s: its authorizations carry its name (%s), and an authorizer cannot relabel them; rename it in the stack and apply (which revokes and re-authorizes)",
			from, tags.EnrollmentName)
	case from.IsInstance():
		err = moveInstance(e, doc, from, to, listed)
	case to.IsInstance():
		return nil, fmt.Errorf("cannot move %s to %s: a group moves to a group", from, to)
	case from.Kind == plan.KindGroup:
		err = renameGroup(e, doc, from, to, listed)
	default:
		err = renameIngress(e, doc, from, to)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

func renameGroup(e *Edit, doc *state.Document, from, to Address, listed Listing) error {
	cfg := storedGroup(doc, from.Name)
	if cfg == nil && doc.Groups[from.Name] == nil {
		return &NotFoundError{from}
	}
	if cfg == nil {
		return fmt.Errorf("cannot move %s: the state holds no configuration for it, so its members cannot be listed", from)
	}
	if storedGroup(doc, to.Name) != nil || doc.Groups[to.Name] != nil {
		return fmt.Errorf("cannot move %s to %s: the state already holds %s", from, to, to)
	}
	if !hclsyntax.ValidIdentifier(to.Name) || len(to.Name) > config.MaxNameLength {
		return fmt.Errorf("cannot move %s to %s: a group's name must start with a letter or underscore and contain only letters, digits, underscores and dashes (at most %d bytes)",
			from, to, config.MaxNameLength)
	}
	out := e.Doc
	out.Stack.Group(from.Name).Name = to.Name
	renameGroupRefs(out.Stack, from.Name, to.Name)
	for _, records := range []map[string]*state.ControllerStatus{out.Ingresses, out.Enrollments} {
		for _, st := range records {
			for _, p := range st.Pending {
				renameGroupRefs(p, from.Name, to.Name)
			}
		}
	}
	if st, ok := out.Groups[from.Name]; ok {
		delete(out.Groups, from.Name)
		out.Groups[to.Name] = st
	}
	moved := *cfg
	moved.Name = to.Name
	for _, d := range listed[from.Name] {
		e.Relabels = append(e.Relabels, Relabel{Group: &moved, ID: d.ID, Tags: map[string]string{tags.Group: to.Name}})
	}
	e.Changes = append(e.Changes, fmt.Sprintf("%s: moved to %s; its %s relabeled (%s = %q)",
		from, to, countOf(len(listed[from.Name]), "instance"), tags.Group, to.Name))
	return nil
}

// renameGroupRefs makes the ingress rules and enrollments of st that name
// group from name to.
func renameGroupRefs(st *config.Stack, from, to string) {
	if st == nil {
		return
	}
	for _, in := range st.Ingresses {
		for i := range in.Rules {
			for j, g := range in.Rules[i].Groups {
				if g == from {
					in.Rules[i].Groups[j] = to
				}
			}
		}
	}
	for _, en := range st.Enrollments {
		if en.Source == from {
			en.Source = to
		}
	}
}

func moveInstance(e *Edit, doc *state.Document, from, to Address, listed Listing) error {
	if to.IsInstance() && to.Instance != from.Instance {
		return fmt.Errorf("cannot move %s to %s: an instance keeps its ID", from, to)
	}
	to = Address{Kind: plan.KindGroup, Name: to.Name, Instance: from.Instance}
	if from.Name == to.Name {
		return fmt.Errorf("%s is already in group %q", from, to.Name)
	}
	src, dst := storedGroup(doc, from.Name), storedGroup(doc, to.Name)
	in, desc := findInstance(doc.Groups[from.Name], from.Instance), findListed(listed[from.Name], from.Instance)
	switch {
	case in == nil && desc == nil:
		return &NotFoundError{from}
	case desc == nil:
		return fmt.Errorf("cannot move %s: the provider no longer lists it as a member of group %q (it is gone, or has left the group); \"infrakit state rm\" forgets its record", from, from.Name)
	case src == nil:
		return fmt.Errorf("cannot move %s: the state holds no configuration for group %q", from, from.Name)
	case dst == nil:
		return fmt.Errorf("cannot move %s to %s: the state holds no group %q (apply it first)", from, to, to.Name)
	case src.Instance.Provider != dst.Instance.Provider || src.Instance.Type != dst.Instance.Type:
		return fmt.Errorf("cannot move %s to group %q: its instances are %s of provider %q, group %q's are %s of provider %q",
			from, to.Name, src.Instance.Type, src.Instance.Provider, to.Name, dst.Instance.Type, dst.Instance.Provider)
	}
	logical := logicalID(*desc)
	if len(dst.LogicalIDs) > 0 && !slices.Contains(dst.LogicalIDs, logical) {
		return fmt.Errorf("cannot move %s to group %q: that group's members are pets with logical IDs %q, and this instance's logical ID is %q",
			from, to.Name, dst.LogicalIDs, logical)
	}
	rec := state.Instance{ID: string(desc.ID), LogicalID: logical, ConfigHash: desc.Tags[tags.ConfigHash], State: string(desc.State), Address: desc.Address}
	if in != nil {
		rec = *in
	}
	out := e.Doc
	if og := out.Groups[from.Name]; og != nil {
		og.Instances = slices.DeleteFunc(og.Instances, func(i state.Instance) bool { return i.ID == from.Instance })
	}
	dg := out.Group(to.Name)
	dg.Instances = append(slices.DeleteFunc(dg.Instances, func(i state.Instance) bool { return i.ID == from.Instance }), rec)
	e.Relabels = append(e.Relabels, Relabel{Group: src, ID: desc.ID, Tags: map[string]string{tags.Group: to.Name}})
	e.Changes = append(e.Changes, fmt.Sprintf("%s: moved to %s (%s = %q)", from, to, tags.Group, to.Name))
	return nil
}

func renameIngress(e *Edit, doc *state.Document, from, to Address) error {
	if _, ok := follower(doc, from); !ok {
		return &NotFoundError{from}
	}
	if _, ok := follower(doc, to); ok {
		return fmt.Errorf("cannot move %s to %s: the state already holds %s", from, to, to)
	}
	out := e.Doc
	if out.Stack != nil {
		if in := out.Stack.Ingress(from.Name); in != nil {
			in.Name = to.Name
		}
	}
	if st, ok := out.Ingresses[from.Name]; ok {
		delete(out.Ingresses, from.Name)
		out.Ingresses[to.Name] = st
		for _, p := range st.Pending {
			if in := p.Ingress(from.Name); in != nil {
				in.Name = to.Name
			}
		}
	}
	e.Changes = append(e.Changes, fmt.Sprintf("%s: moved to %s", from, to))
	return nil
}

// logicalID is a description's logical ID: the provider's, else its tag.
func logicalID(d instance.Description) string {
	if d.LogicalID != nil {
		return string(*d.LogicalID)
	}
	return d.Tags[tags.LogicalID]
}
