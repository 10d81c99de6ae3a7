package stateedit

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Edit is a decided change of the state: the relabels to make through the
// instance providers, then the document to store.
//
// Relabels come first and the document last, so an edit that fails half
// way can be run again: Label merges tags, so relabeling twice is harmless,
// and until the document is stored the state still names what the edit
// acts on.
type Edit struct {
	// Doc is the state after the edit: a copy; the document read is
	// untouched.
	Doc *state.Document
	// Relabels are the Label calls to make, in order.
	Relabels []Relabel
	// Changes say what the edit does, a line per object, for humans.
	Changes []string
}

// Relabel is one Label call: tags merged into instance ID of the group
// whose instance block (provider and type) serves it.
type Relabel struct {
	Group *config.Group
	ID    instance.ID
	Tags  map[string]string
}

// Listing is what the instance providers listed, by group name: each
// group's members (by its tags, tags.GroupSelector). A group absent from
// it could not be listed (the state holds no configuration for it).
type Listing map[string][]instance.Description

// Released is the tag a forgotten instance gets: an empty group, which no
// group's selector matches, so no plan, watch or `group ls` counts it
// again, while infrakit.stack still says where it came from.
func Released() map[string]string { return map[string]string{tags.Group: ""} }

// clone is a deep copy of doc (through JSON: the document's own format).
func clone(doc *state.Document) (*state.Document, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("copy state: %w", err)
	}
	var out state.Document
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("copy state: %w", err)
	}
	return &out, nil
}

// Remove forgets the objects at addrs, touching nothing else of the world:
//
//   - group.NAME: the group's configuration and record leave the state, and
//     each member the provider lists is released (Released) so the next
//     plan does not find it by its tags: a stack that still declares the
//     group plans it anew, as Terraform does after `state rm`;
//   - group.NAME.instance["ID"]: the member's record leaves the group and
//     the instance is released: the group no longer counts it (its size is
//     unchanged, so the next plan replaces it);
//   - ingress.NAME, enrollment.NAME: the block and its record leave the
//     state: what it published or authorized stays, and a stack that no
//     longer declares it does not tear it down.
//
// No instance is destroyed. Followers follow membership: a released
// instance is deregistered and revoked by the next apply or watch pass.
func Remove(doc *state.Document, addrs []Address, listed Listing) (*Edit, error) {
	out, err := clone(doc)
	if err != nil {
		return nil, err
	}
	e := &Edit{Doc: out}
	removed := map[Address]bool{}
	for _, a := range addrs {
		if removed[a] || removed[a.Object()] {
			continue
		}
		if err := remove(e, doc, a, listed); err != nil {
			return nil, err
		}
		removed[a] = true
	}
	return e, nil
}

func remove(e *Edit, doc *state.Document, a Address, listed Listing) error {
	out := e.Doc
	switch {
	case a.Kind == plan.KindGroup && a.IsInstance():
		cfg, st := storedGroup(doc, a.Name), doc.Groups[a.Name]
		in, desc := findInstance(st, a.Instance), findListed(listed[a.Name], a.Instance)
		if in == nil && desc == nil {
			return &NotFoundError{a}
		}
		if og := out.Groups[a.Name]; og != nil {
			og.Instances = slices.DeleteFunc(og.Instances, func(i state.Instance) bool { return i.ID == a.Instance })
		}
		line := fmt.Sprintf("%s: forgotten; the instance stays", a)
		if desc != nil && cfg != nil {
			e.Relabels = append(e.Relabels, Relabel{Group: cfg, ID: desc.ID, Tags: Released()})
			line += fmt.Sprintf(" and leaves the group (tag %s set to \"\")", tags.Group)
		}
		e.Changes = append(e.Changes, line)
	case a.Kind == plan.KindGroup:
		cfg, st := storedGroup(doc, a.Name), doc.Groups[a.Name]
		if cfg == nil && st == nil {
			return &NotFoundError{a}
		}
		if out.Stack != nil {
			out.Stack.Groups = slices.DeleteFunc(out.Stack.Groups, func(g *config.Group) bool { return g.Name == a.Name })
		}
		delete(out.Groups, a.Name)
		descs, ok := listed[a.Name]
		for _, d := range descs {
			e.Relabels = append(e.Relabels, Relabel{Group: cfg, ID: d.ID, Tags: Released()})
		}
		line := fmt.Sprintf("%s: forgotten; its %s stay and leave it (tag %s set to \"\")", a, countOf(len(descs), "instance"), tags.Group)
		if !ok || cfg == nil {
			line = fmt.Sprintf("%s: forgotten; its members could not be listed (the state holds no configuration for it), so they keep their tags", a)
		}
		e.Changes = append(e.Changes, line)
	default:
		if _, ok := follower(doc, a); !ok {
			return &NotFoundError{a}
		}
		if a.Kind == plan.KindIngress {
			delete(out.Ingresses, a.Name)
			if out.Stack != nil {
				out.Stack.Ingresses = slices.DeleteFunc(out.Stack.Ingresses, func(in *config.Ingress) bool { return in.Name == a.Name })
			}
			e.Changes = append(e.Changes, fmt.Sprintf("%s: forgotten; its routes and backends stay", a))
		} else {
			delete(out.Enrollments, a.Name)
			if out.Stack != nil {
				out.Stack.Enrollments = slices.DeleteFunc(out.Stack.Enrollments, func(en *config.Enrollment) bool { return en.Name == a.Name })
			}
			e.Changes = append(e.Changes, fmt.Sprintf("%s: forgotten; its authorizations stay", a))
		}
	}
	return nil
}

func findListed(descs []instance.Description, id string) *instance.Description {
	for i := range descs {
		if string(descs[i].ID) == id {
			return &descs[i]
		}
	}
	return nil
}

func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
