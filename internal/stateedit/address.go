// Package stateedit decides the `infrakit state` and `infrakit import`
// edits of the state: which objects a state holds and how they are
// addressed, what a record shows, and what removing, moving or importing
// an object changes. Every decision is a pure function of the document (and,
// where members matter, of what the instance provider listed) returning an
// Edit: the document to store and the relabels to make first. Package
// operation does the I/O under the state lock.
package stateedit

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
)

// KindInstance is the kind of a group member's address.
const KindInstance = "instance"

// Address names one object of the state:
//
//	group.web                      a group
//	group.web.instance["compute-1a2b"]  one of its members, by instance ID
//	ingress.api  ingress["test.com"]    an ingress
//	enrollment.nfs                 an enrollment
//
// The rule for names: a name that is an identifier (a letter or underscore,
// then letters, digits, underscores and dashes: every group name) is written
// after a dot; any other name (an ingress "test.com") is written quoted in
// brackets, as Go and HCL quote strings. Instance IDs are always quoted.
// ParseAddress also takes the dotted form of any ingress or enrollment name
// ("ingress.test.com", as plans name objects): after the kind, the rest is
// the name.
type Address struct {
	// Kind is plan.KindGroup, plan.KindIngress or plan.KindEnrollment.
	Kind string
	Name string
	// Instance is set for a group member's address.
	Instance string
}

// Object is the address of the object itself: for a member, its group.
func (a Address) Object() Address { return Address{Kind: a.Kind, Name: a.Name} }

// IsInstance reports whether a names a group member.
func (a Address) IsInstance() bool { return a.Instance != "" }

// String is the address as `state list` prints it.
func (a Address) String() string {
	s := a.Kind + namePart(a.Name)
	if a.Instance != "" {
		s += ".instance[" + strconv.Quote(a.Instance) + "]"
	}
	return s
}

// KindOf is "group", "instance", "ingress" or "enrollment".
func (a Address) KindOf() string {
	if a.IsInstance() {
		return KindInstance
	}
	return a.Kind
}

func namePart(name string) string {
	if isIdentifier(name) {
		return "." + name
	}
	return "[" + strconv.Quote(name) + "]"
}

// isIdentifier is the rule of names a reference can write (every group's).
func isIdentifier(s string) bool { return hclsyntax.ValidIdentifier(s) }

// ParseAddress reads an address (see Address).
func ParseAddress(s string) (Address, error) {
	bad := func(why string) (Address, error) {
		return Address{}, fmt.Errorf("invalid address %q: %s; addresses look like group.web, group.web.instance[\"ID\"], ingress[\"test.com\"] or enrollment.nfs", s, why)
	}
	i := strings.IndexAny(s, ".[")
	if i < 0 {
		return bad("no object name")
	}
	a := Address{Kind: s[:i]}
	switch a.Kind {
	case plan.KindGroup, plan.KindIngress, plan.KindEnrollment:
	default:
		return bad(fmt.Sprintf("%q is not a kind of object the state holds (group, ingress, enrollment)", a.Kind))
	}
	rest := s[i:]
	var err error
	switch {
	case rest[0] == '[':
		a.Name, rest, err = bracketed(rest)
		if err != nil {
			return bad(err.Error())
		}
	case a.Kind != plan.KindGroup:
		// Any text after the dot: the name plans print.
		a.Name, rest = rest[1:], ""
	default:
		a.Name, rest, _ = strings.Cut(rest[1:], ".")
		if rest != "" || strings.HasSuffix(s, ".") {
			rest = "." + rest
		}
	}
	if a.Name == "" {
		return bad("empty name")
	}
	if rest != "" {
		if a.Kind != plan.KindGroup || !strings.HasPrefix(rest, ".instance[") {
			return bad(fmt.Sprintf("unexpected %q after the name", rest))
		}
		a.Instance, rest, err = bracketed(rest[len(".instance"):])
		if err != nil {
			return bad(err.Error())
		}
		if rest != "" || a.Instance == "" {
			return bad("an instance is named by one quoted ID: .instance[\"ID\"]")
		}
	}
	return a, nil
}

// bracketed reads `["text"]` at the start of s.
func bracketed(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s[1:])
	if err != nil || !strings.HasPrefix(s[1+len(q):], "]") {
		return "", "", fmt.Errorf("a bracketed name is a quoted string: [\"name\"]")
	}
	v, err := strconv.Unquote(q)
	if err != nil {
		return "", "", err
	}
	return v, s[1+len(q)+1:], nil
}

// List is every object the state holds, in order: each group (sorted by
// name) followed by its recorded members (sorted by ID), then ingresses,
// then enrollments.
func List(doc *state.Document) []Address {
	var out []Address
	for _, name := range groupNames(doc) {
		out = append(out, Address{Kind: plan.KindGroup, Name: name})
		if st := doc.Groups[name]; st != nil {
			ids := make([]string, 0, len(st.Instances))
			for _, in := range st.Instances {
				ids = append(ids, in.ID)
			}
			slices.Sort(ids)
			for _, id := range slices.Compact(ids) {
				out = append(out, Address{Kind: plan.KindGroup, Name: name, Instance: id})
			}
		}
	}
	for _, kind := range []string{plan.KindIngress, plan.KindEnrollment} {
		for _, name := range followerNames(doc, kind) {
			out = append(out, Address{Kind: kind, Name: name})
		}
	}
	return out
}

// groupNames are the groups of the stored stack and of the records.
func groupNames(doc *state.Document) []string {
	set := map[string]bool{}
	if doc.Stack != nil {
		for _, g := range doc.Stack.Groups {
			set[g.Name] = true
		}
	}
	for name := range doc.Groups {
		set[name] = true
	}
	return slices.SortedFunc(maps.Keys(set), cmp.Compare)
}

func followerNames(doc *state.Document, kind string) []string {
	set := map[string]bool{}
	records := doc.Ingresses
	if kind == plan.KindEnrollment {
		records = doc.Enrollments
	}
	for name := range records {
		set[name] = true
	}
	if doc.Stack != nil {
		if kind == plan.KindIngress {
			for _, in := range doc.Stack.Ingresses {
				set[in.Name] = true
			}
		} else {
			for _, e := range doc.Stack.Enrollments {
				set[e.Name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
