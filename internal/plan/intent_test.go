package plan

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
)

// intentDoc is a state with groups web (stored) and gone (stored, being
// destroyed), a record of ingress test.com with one pending teardown and
// a freed enrollment nfs.
func intentDoc() (*config.Stack, *state.Document, *config.Stack) {
	desired := withIngress(stackOf(cattleGroup("web", 2, "v1")), "test.com", []string{"lb1"}, "web")
	applied := withIngress(stackOf(cattleGroup("web", 1, "v1"), cattleGroup("gone", 1, "v1")), "test.com", []string{"lb1"}, "web")
	applied = withEnrollment(applied, "nfs", "web")
	doc := storedAs(applied, nil)
	doc.Groups["gone"].Destroying = true
	part := IngressPart(applied, "test.com", "lb1")
	doc.Ingresses = map[string]*state.ControllerStatus{"test.com": {Pending: []*config.Stack{part}}}
	doc.Enrollments = map[string]*state.ControllerStatus{"nfs": {Freed: true}}
	return desired, doc, part
}

func TestApplyChange(t *testing.T) {
	members := recordOf(running("w", 2, "h"))
	for _, tc := range []struct {
		name   string
		change func(part *config.Stack) StateChange
		check  func(t *testing.T, doc *state.Document, desired *config.Stack)
	}{
		{"store-stack keeps the config of a group being destroyed",
			func(*config.Stack) StateChange { return StateChange{Kind: StoreStack} },
			func(t *testing.T, doc *state.Document, desired *config.Stack) {
				if doc.Stack.Group("web") != desired.Group("web") || doc.Stack.Group("gone") == nil || len(desired.Groups) != 1 {
					t.Errorf("stored groups %v", names(doc.Stack))
				}
			}},
		{"set-size sets the stored size, not the desired stack's",
			func(*config.Stack) StateChange { return StateChange{Kind: SetSize, Object: "group.web", Size: 7} },
			func(t *testing.T, doc *state.Document, desired *config.Stack) {
				if *doc.Stack.Group("web").Size != 7 {
					t.Errorf("stored size %d", *doc.Stack.Group("web").Size)
				}
			}},
		{"set-members replaces the record",
			func(*config.Stack) StateChange {
				return StateChange{Kind: SetMembers, Object: "group.web", Members: members}
			},
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if !slices.Equal(doc.Groups["web"].Instances, members) {
					t.Errorf("record %+v", doc.Groups["web"].Instances)
				}
				members[0].ID = "changed"
				if doc.Groups["web"].Instances[0].ID == "changed" {
					t.Error("the record shares the change's members")
				}
			}},
		{"resume clears a group's freed and destroying marks",
			func(*config.Stack) StateChange { return StateChange{Kind: Resume, Object: "group.gone"} },
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if g := doc.Groups["gone"]; g.Freed || g.Destroying {
					t.Errorf("record %+v", g)
				}
			}},
		{"resume drops an enrollment record left empty",
			func(*config.Stack) StateChange { return StateChange{Kind: Resume, Object: "enrollment.nfs"} },
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if _, ok := doc.Enrollments["nfs"]; ok {
					t.Errorf("record %+v kept", doc.Enrollments["nfs"])
				}
			}},
		{"mark-freed marks a group",
			func(*config.Stack) StateChange { return StateChange{Kind: MarkFreed, Object: "group.web"} },
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if !doc.Groups["web"].Freed {
					t.Error("not freed")
				}
			}},
		{"mark-freed makes an ingress record",
			func(*config.Stack) StateChange { return StateChange{Kind: MarkFreed, Object: "ingress.other.com"} },
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if rec := doc.Ingresses["other.com"]; rec == nil || !rec.Freed {
					t.Errorf("record %+v", rec)
				}
			}},
		{"resume-update and mark-destroying",
			func(*config.Stack) StateChange { return StateChange{Kind: MarkDestroying, Object: "group.web"} },
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				ApplyChange(doc, nil, StateChange{Kind: ResumeUpdate, Object: "group.web"})
				if g := doc.Groups["web"]; !g.Destroying || g.UpdateStopped {
					t.Errorf("record %+v", g)
				}
			}},
		{"forget-group drops the record and the stored configuration",
			func(*config.Stack) StateChange { return StateChange{Kind: ForgetGroup, Object: "group.gone"} },
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if _, ok := doc.Groups["gone"]; ok || doc.Stack.Group("gone") != nil {
					t.Errorf("gone kept: %v", names(doc.Stack))
				}
			}},
		{"add-pending records a teardown once",
			func(part *config.Stack) StateChange {
				cp := *part
				return StateChange{Kind: AddPending, Object: "ingress.test.com", Part: &cp}
			},
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if n := len(doc.Ingresses["test.com"].Pending); n != 1 {
					t.Errorf("%d pending teardowns", n)
				}
			}},
		{"clear-pending drops the teardown and the record left empty",
			func(part *config.Stack) StateChange {
				return StateChange{Kind: ClearPending, Object: "ingress.test.com", Part: part}
			},
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if _, ok := doc.Ingresses["test.com"]; ok {
					t.Errorf("record %+v kept", doc.Ingresses["test.com"])
				}
			}},
		{"forget drops the stored block, keeping what is still owed",
			func(*config.Stack) StateChange { return StateChange{Kind: Forget, Object: "ingress.test.com"} },
			func(t *testing.T, doc *state.Document, _ *config.Stack) {
				if doc.Stack.Ingress("test.com") != nil || len(doc.Ingresses["test.com"].Pending) != 1 {
					t.Errorf("stack %+v, record %+v", doc.Stack.Ingresses, doc.Ingresses["test.com"])
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired, doc, part := intentDoc()
			applied := doc.Stack
			before, _ := json.Marshal(applied)
			desiredBefore, _ := json.Marshal(desired)
			ApplyChange(doc, desired, tc.change(part))
			tc.check(t, doc, desired)
			// The stack as it was stored, and the desired stack, are values:
			// a change makes a new stored stack.
			if after, _ := json.Marshal(applied); string(after) != string(before) {
				t.Errorf("the stack stored before changed:\n%s\n%s", before, after)
			}
			if after, _ := json.Marshal(desired); string(after) != string(desiredBefore) {
				t.Errorf("the desired stack changed")
			}
		})
	}
}

// A stored stack shared with the plan (what StoreStack stores) does not
// change with later changes.
func TestApplyChangeLeavesTheDesiredStackAlone(t *testing.T) {
	desired, doc, _ := intentDoc()
	doc.Groups["gone"].Destroying = false
	ApplyChange(doc, desired, StateChange{Kind: StoreStack})
	if doc.Stack != desired {
		t.Fatal("store-stack did not store the desired stack")
	}
	ApplyChange(doc, desired, StateChange{Kind: SetSize, Object: "group.web", Size: 9})
	ApplyChange(doc, desired, StateChange{Kind: SetSize, Object: "group.nope", Size: 9})
	if *desired.Group("web").Size != 2 || *doc.Stack.Group("web").Size != 9 {
		t.Errorf("desired size %d, stored %d", *desired.Group("web").Size, *doc.Stack.Group("web").Size)
	}
}

func TestStoredStack(t *testing.T) {
	desired, doc, _ := intentDoc()
	doc.Stack.Groups = append(doc.Stack.Groups, cattleGroup("loose", 1, "v1"), cattleGroup("dropped", 1, "v1"))
	doc.Groups["loose"] = &state.GroupStatus{Freed: true}
	doc.Groups["dropped"] = &state.GroupStatus{}
	got := StoredStack(desired, doc)
	if want := []string{"web", "gone", "loose"}; !slices.Equal(names(got), want) {
		t.Errorf("stored groups %v, want %v", names(got), want)
	}
	if len(desired.Groups) != 1 {
		t.Error("StoredStack changed the desired stack")
	}
	if got.Ingress("test.com") != desired.Ingress("test.com") {
		t.Error("the stored stack is not the desired one with groups kept")
	}
	if StoredStack(desired, nil) != desired || StoredStack(desired, state.NewDocument()) != desired {
		t.Error("with nothing stored, the desired stack is stored as it is")
	}
	doc.Groups["gone"].Destroying, doc.Groups["loose"].Freed = false, false
	if StoredStack(desired, doc) != desired {
		t.Error("with nothing to keep, the desired stack is stored as it is")
	}
}

// Applying a plan's state changes in step order leaves the state that
// plans nothing more for the world the plan promised: here, a group
// leaving the stack (marked, then forgotten) and a load balancer released
// (pending, then cleared).
func TestApplyChangesOfAPlan(t *testing.T) {
	webG, api := cattleGroup("web", 1, "v1"), cattleGroup("api", 1, "v1")
	old := withIngress(stackOf(webG, api), "test.com", []string{"lb1", "lb2"}, "web", "api")
	ms := map[string][]group.Member{"web": running("w", 1, hashOf(t, webG)), "api": running("a", 1, hashOf(t, api))}
	desired := withIngress(stackOf(webG), "test.com", []string{"lb1"}, "web")
	doc := storedAs(old, ms)
	p := compute(t, desired, doc, converged(t, old, ms), Scope{})
	for _, s := range p.Steps {
		for _, c := range s.Changes {
			ApplyChange(doc, p.Desired, c)
		}
	}
	if !SameStack(doc.Stack, desired) || doc.Groups["api"] != nil || doc.Ingresses["test.com"] != nil {
		t.Errorf("state after the plan: stack %v, groups %v, ingresses %v", names(doc.Stack), doc.Groups, doc.Ingresses)
	}
	// The world as promised: api gone, lb2 empty, lb1 serving web.
	promised := map[string][]group.Member{"web": ms["web"]}
	p = compute(t, desired, doc, converged(t, desired, promised), Scope{})
	if len(p.Steps) != 0 {
		t.Errorf("the plan after has steps:\n%s", dump(p.Steps))
	}
}

func TestSplitObject(t *testing.T) {
	for in, want := range map[string][2]string{
		"ingress.test.com": {"ingress", "test.com"},
		"group.web":        {"group", "web"},
		"state":            {"state", ""},
	} {
		if k, n := SplitObject(in); k != want[0] || n != want[1] {
			t.Errorf("SplitObject(%q) = %q, %q", in, k, n)
		}
	}
}

func names(st *config.Stack) []string {
	var out []string
	for _, g := range st.Groups {
		out = append(out, g.Name)
	}
	return out
}
