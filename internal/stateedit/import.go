package stateedit

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

// ImportRequest is what Import decides on.
type ImportRequest struct {
	// Stack is the stack's name; Group the group to adopt into, as the
	// stack files declare it.
	Stack string
	Group *config.Group
	IDs   []instance.ID
	// All is every instance the group's instance provider lists of its
	// type (DescribeInstances with no tags).
	All []instance.Description
}

// Import adopts existing instances into a group: each is relabeled with
// the group's tags (its tags attribute, infrakit.stack and infrakit.group,
// and the logical ID of a pet), so the next plan counts it as a member; when the state holds
// the group, its record gains the instance at once.
//
// Refused, naming every offending ID: an ID the provider does not list, an
// instance that belongs to another group (its infrakit.group tag names one;
// "infrakit state rm" or "state mv" releases it first), and for pets an
// instance whose logical ID is not one of the group's, or is held by
// another member. An instance that is a member already is left alone.
//
// An instance keeps the config hash tag it has: one without the group's
// hash is out of date, and the next apply rolls it as any out-of-date
// member (after the update policy), since infrakit cannot know that it was
// made from the group's configuration.
func Import(doc *state.Document, r ImportRequest) (*Edit, error) {
	out, err := clone(doc)
	if err != nil {
		return nil, err
	}
	e := &Edit{Doc: out}
	byID := make(map[instance.ID]instance.Description, len(r.All))
	held := map[string]instance.ID{} // logical ID -> member holding it
	for _, d := range r.All {
		byID[d.ID] = d
		if isMember(d, r.Stack, r.Group.Name) && logicalID(d) != "" {
			held[logicalID(d)] = d.ID
		}
	}
	var problems, already []string
	seen := map[instance.ID]bool{}
	for _, id := range r.IDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		d, ok := byID[id]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%q: provider %q lists no %s instance with this ID", id, r.Group.Instance.Provider, r.Group.Instance.Type))
			continue
		case isMember(d, r.Stack, r.Group.Name):
			already = append(already, string(id))
			continue
		case d.Tags[tags.Group] != "":
			owner, how := fmt.Sprintf("group %q", d.Tags[tags.Group]), ""
			if s := d.Tags[tags.Stack]; s != r.Stack {
				owner += fmt.Sprintf(" of stack %q", s)
				how = "release it there first (\"infrakit state rm\" in that stack's directory)"
			} else {
				from := Address{Kind: "group", Name: d.Tags[tags.Group], Instance: string(id)}
				how = fmt.Sprintf("move it with \"infrakit state mv '%s' group.%s\"", from, r.Group.Name)
			}
			problems = append(problems, fmt.Sprintf("%q: it belongs to %s (tag %s); %s", id, owner, tags.Group, how))
			continue
		}
		// The group's own tags too, as its members are provisioned with.
		set := maps.Clone(r.Group.Tags)
		if set == nil {
			set = map[string]string{}
		}
		set[tags.Stack], set[tags.Group] = r.Stack, r.Group.Name
		if len(r.Group.LogicalIDs) > 0 {
			l := logicalID(d)
			switch {
			case l == "":
				problems = append(problems, fmt.Sprintf("%q: group %q is pets (logical_ids), and this instance has no logical ID", id, r.Group.Name))
				continue
			case !slices.Contains(r.Group.LogicalIDs, l):
				problems = append(problems, fmt.Sprintf("%q: its logical ID %q is not one of group %q's (%s)", id, l, r.Group.Name, strings.Join(r.Group.LogicalIDs, ", ")))
				continue
			case held[l] != "":
				problems = append(problems, fmt.Sprintf("%q: logical ID %q is held by member %q", id, l, held[l]))
				continue
			}
			held[l] = id
			set[tags.LogicalID] = l
		}
		e.Relabels = append(e.Relabels, Relabel{Group: r.Group, ID: id, Tags: set})
		line := fmt.Sprintf("%s: imported (tags %s)", Address{Kind: "group", Name: r.Group.Name, Instance: string(id)}, formatTags(set))
		if d.Tags[tags.ConfigHash] != r.Group.ConfigHash() {
			line += "; its configuration hash is not the group's, so the next apply replaces it"
		}
		e.Changes = append(e.Changes, line)
		if out.Stack != nil && out.Stack.Group(r.Group.Name) != nil {
			g := out.Group(r.Group.Name)
			g.Instances = append(slices.DeleteFunc(g.Instances, func(i state.Instance) bool { return i.ID == string(id) }),
				state.Instance{ID: string(id), LogicalID: logicalID(d), ConfigHash: d.Tags[tags.ConfigHash], State: string(d.State), Address: d.Address})
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("nothing was imported into group %q:\n  %s", r.Group.Name, strings.Join(problems, "\n  "))
	}
	if len(e.Relabels) == 0 {
		return nil, fmt.Errorf("nothing to import: %s already members of group %q", quoteList(already), r.Group.Name)
	}
	for _, id := range already {
		e.Changes = append(e.Changes, fmt.Sprintf("%q: already a member of group %q; left alone", id, r.Group.Name))
	}
	return e, nil
}

func isMember(d instance.Description, stack, group string) bool {
	return d.Tags[tags.Stack] == stack && d.Tags[tags.Group] == group
}

func formatTags(t map[string]string) string {
	keys := slices.Sorted(maps.Keys(t))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, t[k])
	}
	return strings.Join(parts, ", ")
}

func quoteList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	if len(q) == 1 {
		return q[0] + " is"
	}
	return strings.Join(q, ", ") + " are"
}
