package watch

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/ownership"
	"github.com/infrakit/infrakit/internal/state"
)

// docOf is a state of n cattle groups g0..g(n-1), each recording members.
func docOf(n int, members func(g int) []state.Instance) *state.Document {
	doc := state.NewDocument()
	doc.Serial = 1 // as stored
	doc.Stack = &config.Stack{Name: "s"}
	for i := range n {
		size := 1
		name := fmt.Sprintf("g%d", i)
		doc.Stack.Groups = append(doc.Stack.Groups, &config.Group{Name: name, Size: &size})
		doc.Group(name).Instances = members(i)
	}
	return doc
}

// clone is a copy of doc as another reader decodes it.
func clone(t interface{ Fatal(...any) }, doc *state.Document) *state.Document {
	b, err := state.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := state.Decode("test", b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// specOf is group name of doc as a pass reads it.
func specOf(doc *state.Document, name string) groupSpec {
	sp := groupSpec{cfg: doc.Stack.Group(name), lineage: doc.Lineage, serial: doc.Serial, doc: doc}
	if st := doc.Groups[name]; st != nil {
		sp.freed, sp.updateStopped, sp.recorded = st.Freed || st.Destroying, st.UpdateStopped, slices.Clone(st.Instances)
	}
	return sp
}

// In scale-out mode, the other members recording their groups never make
// a pass stale, however many writes they made; any change of the group's
// own record, of the desired stack or of the lineage does.
func TestGroupStale(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(t, "groups")
		members := func(g int) []state.Instance {
			k := rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("members of g%d", g))
			var out []state.Instance
			for j := range k {
				out = append(out, state.Instance{ID: fmt.Sprintf("i-%d-%d", g, j), State: "running"})
			}
			return out
		}
		read := docOf(n, members)
		spec := specOf(clone(t, read), "g0")
		now := clone(t, read)
		if groupStale(spec, spec.recorded, now) {
			t.Fatal("the state as read is stale")
		}
		// Others record their groups.
		writes := rapid.IntRange(1, 10).Draw(t, "writes")
		for w := range writes {
			g := rapid.IntRange(1, n-1).Draw(t, "other group")
			now.Group(fmt.Sprintf("g%d", g)).Instances = append(now.Group(fmt.Sprintf("g%d", g)).Instances,
				state.Instance{ID: fmt.Sprintf("new-%d", w)})
			now.Serial++
		}
		if groupStale(spec, spec.recorded, clone(t, now)) {
			t.Fatal("other members' records made the pass stale")
		}
		switch rapid.IntRange(0, 4).Draw(t, "change") {
		case 0:
			now.Group("g0").Instances = append(now.Group("g0").Instances, state.Instance{ID: "behind-its-back"})
		case 1:
			now.Group("g0").Freed = true
		case 2:
			now.Group("g0").UpdateStopped = true
		case 3:
			size := 7
			now.Stack.Groups[rapid.IntRange(0, n-1).Draw(t, "scaled")].Size = &size
		case 4:
			now.Lineage = "another"
		}
		if !groupStale(spec, spec.recorded, clone(t, now)) {
			t.Fatal("a change the pass depends on did not make it stale")
		}
	})
}

// A sync is stale on a change of the stack or of what the state records
// of ingresses and enrollments, not on the groups' records.
func TestFollowersStale(t *testing.T) {
	read := docOf(2, func(int) []state.Instance { return nil })
	read.Ingresses = map[string]*state.ControllerStatus{"web": {}}
	now := clone(t, read)
	now.Group("g1").Instances = []state.Instance{{ID: "x"}}
	now.Serial += 3
	if followersStale(read, now) {
		t.Error("a group's record made a sync stale")
	}
	now.Ingresses["web"].Freed = true
	if !followersStale(read, now) {
		t.Error("an ingress freed since the sync read the state did not make it stale")
	}

	// A group the ingress follows: its owner (another member) recorded a
	// change of membership since the sync read the state.
	read.Stack.Ingresses = []*config.Ingress{{Name: "web", Rules: []config.Rule{{Groups: []string{"g1"}}}}}
	now = clone(t, read)
	now.Group("g0").Instances = []state.Instance{{ID: "y"}}
	if followersStale(read, now) {
		t.Error("a record of a group no follower follows made a sync stale")
	}
	now.Group("g1").Instances = []state.Instance{{ID: "x"}}
	if !followersStale(read, now) {
		t.Error("a record of a followed group changed by its owner did not make the sync stale")
	}
}

// The Balancer shares every group, ingress and enrollment of the stack.
func TestObjectsOf(t *testing.T) {
	if objectsOf(nil) != nil || objectsOf(state.NewDocument()) != nil {
		t.Error("objects without a stack")
	}
	doc := docOf(2, func(int) []state.Instance { return nil })
	doc.Stack.Ingresses = []*config.Ingress{{Name: "web"}}
	doc.Stack.Enrollments = []*config.Enrollment{{Name: "nfs"}}
	want := []ownership.Object{{Kind: "group", Name: "g0"}, {Kind: "group", Name: "g1"},
		{Kind: "ingress", Name: "web"}, {Kind: "enrollment", Name: "nfs"}}
	if got := objectsOf(doc); !slices.Equal(got, want) {
		t.Errorf("objectsOf = %v, want %v", got, want)
	}
}
