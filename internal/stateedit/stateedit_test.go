package stateedit

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
)

func intp(n int) *int { return &n }

// testDoc is a state with cattle "web" (2 members), pets "db" (1 of 2),
// an ingress "test.com" following web and an enrollment "nfs" of web.
func testDoc() *state.Document {
	web := &config.Group{Name: "web", Size: intp(2), Instance: config.Plugin{Provider: "simulator", Type: "compute"},
		Flavors: []config.Plugin{{Provider: "vanilla"}}}
	db := &config.Group{Name: "db", LogicalIDs: []string{"10.0.0.1", "10.0.0.2"}, Instance: config.Plugin{Provider: "simulator", Type: "compute"},
		Flavors: []config.Plugin{{Provider: "vanilla"}}}
	other := &config.Group{Name: "other", Size: intp(1), Instance: config.Plugin{Provider: "docker", Type: "container"},
		Flavors: []config.Plugin{{Provider: "vanilla"}}}
	doc := state.NewDocument()
	doc.Serial = 7
	doc.Stack = &config.Stack{Name: "s", Groups: []*config.Group{web, db, other},
		LoadBalancers: []*config.LoadBalancer{{Name: "lb1", Provider: "simulator"}},
		Ingresses:     []*config.Ingress{{Name: "test.com", Rules: []config.Rule{{LoadBalancer: "lb1", Groups: []string{"web"}}}}},
		Enrollments:   []*config.Enrollment{{Name: "nfs", Source: "web"}}}
	doc.Group("web").Instances = []state.Instance{{ID: "w2", ConfigHash: web.ConfigHash()}, {ID: "w1", ConfigHash: web.ConfigHash()}}
	doc.Group("db").Instances = []state.Instance{{ID: "d1", LogicalID: "10.0.0.1"}}
	doc.Group("other")
	doc.Ingresses = map[string]*state.ControllerStatus{"test.com": {}}
	return doc
}

func member(id, group, logical string) instance.Description {
	d := instance.Description{ID: instance.ID(id), State: instance.StateRunning,
		Tags: map[string]string{tags.Stack: "s", tags.Group: group}}
	if logical != "" {
		l := instance.LogicalID(logical)
		d.LogicalID = &l
	}
	return d
}

func testListing() Listing {
	return Listing{
		"web":   {member("w1", "web", ""), member("w2", "web", ""), member("w3", "web", "")},
		"db":    {member("d1", "db", "10.0.0.1")},
		"other": {},
	}
}

func TestAddresses(t *testing.T) {
	for _, tc := range []struct {
		in, out string // out "" : same as in; "error: ..." a refusal
		want    Address
	}{
		{in: "group.web", want: Address{Kind: "group", Name: "web"}},
		{in: `group.web.instance["compute-1a2b"]`, want: Address{Kind: "group", Name: "web", Instance: "compute-1a2b"}},
		{in: `group.web.instance["a.b]"]`, want: Address{Kind: "group", Name: "web", Instance: "a.b]"}},
		{in: `group["web"]`, out: "group.web", want: Address{Kind: "group", Name: "web"}},
		{in: "ingress.test.com", out: `ingress["test.com"]`, want: Address{Kind: "ingress", Name: "test.com"}},
		{in: `ingress["test.com"]`, want: Address{Kind: "ingress", Name: "test.com"}},
		{in: "ingress.api", want: Address{Kind: "ingress", Name: "api"}},
		{in: `enrollment["nfs exports"]`, want: Address{Kind: "enrollment", Name: "nfs exports"}},
		{in: "enrollment.nfs", want: Address{Kind: "enrollment", Name: "nfs"}},
		{in: "web", out: "error: no object name"},
		{in: "loadbalancer.lb1", out: "error: not a kind"},
		{in: "group.", out: "error: empty name"},
		{in: "group.web.", out: "error: unexpected"},
		{in: "group.web.instance", out: "error: unexpected"},
		{in: "group.web.instance[x]", out: "error: quoted string"},
		{in: `group.web.instance["x"].y`, out: "error: one quoted ID"},
		{in: `ingress["x"].instance["y"]`, out: "error: unexpected"},
		{in: `group.web.instance[""]`, out: "error: one quoted ID"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			a, err := ParseAddress(tc.in)
			if want, ok := strings.CutPrefix(tc.out, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("ParseAddress = %+v, %v; want an error saying %q", a, err, want)
				}
				return
			}
			if err != nil || a != tc.want {
				t.Fatalf("ParseAddress = %+v, %v; want %+v", a, err, tc.want)
			}
			out := tc.out
			if out == "" {
				out = tc.in
			}
			if a.String() != out {
				t.Errorf("String() = %s, want %s", a, out)
			}
			if back, err := ParseAddress(a.String()); err != nil || back != a {
				t.Errorf("String() does not parse back: %+v, %v", back, err)
			}
		})
	}
}

func TestList(t *testing.T) {
	var got []string
	for _, a := range List(testDoc()) {
		got = append(got, a.String())
	}
	want := []string{"group.db", `group.db.instance["d1"]`, "group.other", "group.web", `group.web.instance["w1"]`, `group.web.instance["w2"]`,
		`ingress["test.com"]`, "enrollment.nfs"}
	if !slices.Equal(got, want) {
		t.Errorf("List =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l := List(state.NewDocument()); len(l) != 0 {
		t.Errorf("List of an empty state = %v", l)
	}
}

func mustParse(t *testing.T, s string) Address {
	t.Helper()
	a, err := ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestShow(t *testing.T) {
	doc := testDoc()
	rec, err := Show(doc, mustParse(t, `group.db.instance["d1"]`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{tags.Stack: "s", tags.Group: "db", tags.ConfigHash: "", tags.LogicalID: "10.0.0.1"}
	if rec.Kind != "instance" || rec.Instance.ID != "d1" || rec.Instance.LogicalID != "10.0.0.1" || !maps.Equal(rec.Instance.Tags, want) {
		t.Errorf("instance record = %+v", rec.Instance)
	}
	rec, err = Show(doc, mustParse(t, "group.web"))
	if err != nil || rec.Group.Config.Name != "web" || rec.Group.ConfigHash != doc.Stack.Group("web").ConfigHash() || !slices.Equal(rec.Group.Instances, []string{"w2", "w1"}) {
		t.Errorf("group record = %+v, %v", rec.Group, err)
	}
	rec, err = Show(doc, mustParse(t, "ingress.test.com"))
	if err != nil || rec.Ingress == nil || rec.Ingress.Config == nil || rec.Address != `ingress["test.com"]` {
		t.Errorf("ingress record = %+v, %v", rec, err)
	}
	b, err := json.Marshal(rec)
	if err != nil || !strings.Contains(string(b), `"kind":"ingress"`) {
		t.Errorf("JSON = %s, %v", b, err)
	}
	for _, missing := range []string{"group.nope", `group.web.instance["w9"]`, "enrollment.x"} {
		if _, err := Show(doc, mustParse(t, missing)); err == nil || !strings.Contains(err.Error(), "holds no") {
			t.Errorf("Show(%s) = %v, want not found", missing, err)
		}
	}
}

// ids are the recorded members of group name in doc.
func ids(doc *state.Document, name string) []string {
	var out []string
	if st := doc.Groups[name]; st != nil {
		for _, in := range st.Instances {
			out = append(out, in.ID)
		}
	}
	slices.Sort(out)
	return out
}

func relabels(e *Edit) []string {
	var out []string
	for _, r := range e.Relabels {
		out = append(out, string(r.ID)+":"+r.Group.Instance.Provider+":"+formatTags(r.Tags))
	}
	return out
}

func TestRemove(t *testing.T) {
	released := `infrakit.group=""`
	for _, tc := range []struct {
		name     string
		addrs    []string
		check    func(t *testing.T, doc *state.Document)
		relabels []string
		err      string
	}{
		{name: "one member", addrs: []string{`group.web.instance["w1"]`},
			check: func(t *testing.T, doc *state.Document) {
				if got := ids(doc, "web"); !slices.Equal(got, []string{"w2"}) || *doc.Stack.Group("web").Size != 2 {
					t.Errorf("web = %v size %d", got, *doc.Stack.Group("web").Size)
				}
			},
			relabels: []string{"w1:simulator:" + released}},
		{name: "a listed member not yet recorded", addrs: []string{`group.web.instance["w3"]`},
			relabels: []string{"w3:simulator:" + released}},
		{name: "a group, and its member named too", addrs: []string{"group.web", `group.web.instance["w1"]`},
			check: func(t *testing.T, doc *state.Document) {
				if doc.Stack.Group("web") != nil || doc.Groups["web"] != nil {
					t.Errorf("web is still in the state")
				}
				// The followers' references stay: the stored stack may name what it no longer holds.
				if doc.Stack.Ingress("test.com") == nil || doc.Stack.Group("db") == nil {
					t.Errorf("the rest of the state went too")
				}
			},
			relabels: []string{"w1:simulator:" + released, "w2:simulator:" + released, "w3:simulator:" + released}},
		{name: "ingress and enrollment", addrs: []string{`ingress["test.com"]`, "enrollment.nfs"},
			check: func(t *testing.T, doc *state.Document) {
				if doc.Stack.Ingress("test.com") != nil || doc.Ingresses["test.com"] != nil || doc.Stack.Enrollment("nfs") != nil {
					t.Errorf("the ingress or enrollment is still there")
				}
				if len(doc.Stack.LoadBalancers) != 1 || len(ids(doc, "web")) != 2 {
					t.Errorf("more went than asked")
				}
			}},
		{name: "unknown group", addrs: []string{"group.nope"}, err: "holds no group.nope"},
		{name: "unknown member", addrs: []string{`group.web.instance["w9"]`}, err: `holds no group.web.instance["w9"]`},
		{name: "unknown ingress", addrs: []string{"ingress.nope"}, err: "holds no ingress.nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := testDoc()
			before, _ := json.Marshal(doc)
			var addrs []Address
			for _, s := range tc.addrs {
				addrs = append(addrs, mustParse(t, s))
			}
			e, err := Remove(doc, addrs, testListing())
			if after, _ := json.Marshal(doc); string(after) != string(before) {
				t.Fatalf("Remove changed the document it was given")
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := relabels(e); !slices.Equal(got, tc.relabels) {
				t.Errorf("relabels = %v, want %v", got, tc.relabels)
			}
			if len(e.Changes) == 0 {
				t.Errorf("no change described")
			}
			if tc.check != nil {
				tc.check(t, e.Doc)
			}
			if err := config.CheckStored(e.Doc.Stack); err != nil {
				t.Errorf("the edited stack would be refused: %v", err)
			}
		})
	}
}

func TestMove(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		check          func(t *testing.T, doc *state.Document)
		relabels       []string
		err            string
	}{
		{name: "rename a group", from: "group.web", to: "group.front",
			check: func(t *testing.T, doc *state.Document) {
				if doc.Stack.Group("web") != nil || doc.Stack.Group("front") == nil || !slices.Equal(ids(doc, "front"), []string{"w1", "w2"}) {
					t.Errorf("not renamed")
				}
				if g := doc.Stack.Ingress("test.com").Rules[0].Groups; !slices.Equal(g, []string{"front"}) || doc.Stack.Enrollment("nfs").Source != "front" {
					t.Errorf("references not renamed: %v %s", g, doc.Stack.Enrollment("nfs").Source)
				}
			},
			relabels: []string{`w1:simulator:infrakit.group="front"`, `w2:simulator:infrakit.group="front"`, `w3:simulator:infrakit.group="front"`}},
		{name: "cattle to pets without a logical ID", from: `group.web.instance["w1"]`, to: `group.db.instance["w1"]`, err: "pets with logical IDs"},
		{name: "a pet to cattle", from: `group.db.instance["d1"]`, to: "group.web",
			check: func(t *testing.T, doc *state.Document) {
				if !slices.Equal(ids(doc, "web"), []string{"d1", "w1", "w2"}) || len(ids(doc, "db")) != 0 {
					t.Errorf("web %v db %v", ids(doc, "web"), ids(doc, "db"))
				}
			},
			relabels: []string{`d1:simulator:infrakit.group="web"`}},
		{name: "another provider", from: `group.web.instance["w1"]`, to: "group.other", err: `provider "docker"`},
		{name: "instance keeps its ID", from: `group.web.instance["w1"]`, to: `group.db.instance["x"]`, err: "keeps its ID"},
		{name: "onto an existing group", from: "group.web", to: "group.db", err: "already holds group.db"},
		{name: "group to member", from: "group.web", to: `group.db.instance["x"]`, err: "a group moves to a group"},
		{name: "kinds differ", from: "group.web", to: "ingress.web", err: "stays a group"},
		{name: "rename an ingress", from: `ingress["test.com"]`, to: "ingress.api",
			check: func(t *testing.T, doc *state.Document) {
				if doc.Stack.Ingress("api") == nil || doc.Ingresses["api"] == nil || doc.Ingresses["test.com"] != nil {
					t.Errorf("not renamed")
				}
			}},
		{name: "an enrollment", from: "enrollment.nfs", to: "enrollment.n2", err: "infrakit.enrollment.name"},
		{name: "unknown", from: "group.nope", to: "group.x", err: "holds no group.nope"},
		{name: "a member gone from the world", from: `group.db.instance["gone"]`, to: "group.web", err: "holds no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Move(testDoc(), mustParse(t, tc.from), mustParse(t, tc.to), testListing())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := relabels(e); !slices.Equal(got, tc.relabels) {
				t.Errorf("relabels = %v, want %v", got, tc.relabels)
			}
			tc.check(t, e.Doc)
		})
	}
}

func TestImport(t *testing.T) {
	doc := testDoc()
	web, db := doc.Stack.Group("web"), doc.Stack.Group("db")
	free := func(id, logical string) instance.Description {
		d := member(id, "", logical)
		d.Tags = map[string]string{tags.Stack: "s", tags.Group: "", tags.ConfigHash: web.ConfigHash()}
		return d
	}
	foreign := instance.Description{ID: "f1", Tags: map[string]string{"owner": "someone"}}
	all := []instance.Description{member("w1", "web", ""), free("r1", ""), free("r2", "10.0.0.2"), free("r3", "10.0.0.1"),
		free("r4", "10.0.0.9"), foreign, member("o1", "other", ""),
		{ID: "x1", Tags: map[string]string{tags.Stack: "elsewhere", tags.Group: "web"}}}
	for _, tc := range []struct {
		name     string
		group    *config.Group
		ids      []instance.ID
		relabels []string
		err      string
	}{
		{name: "released and foreign into cattle", group: web, ids: []instance.ID{"r1", "f1", "r1"},
			relabels: []string{`r1:simulator:infrakit.group="web", infrakit.stack="s"`, `f1:simulator:infrakit.group="web", infrakit.stack="s"`}},
		{name: "a pet", group: db, ids: []instance.ID{"r2"},
			relabels: []string{`r2:simulator:infrakit.group="db", infrakit.logical_id="10.0.0.2", infrakit.stack="s"`}},
		{name: "a member already, and one more", group: web, ids: []instance.ID{"w1", "r1"},
			relabels: []string{`r1:simulator:infrakit.group="web", infrakit.stack="s"`}},
		{name: "only members already", group: web, ids: []instance.ID{"w1"}, err: `"w1" is already`},
		{name: "not listed", group: web, ids: []instance.ID{"r1", "nope"}, err: `"nope": provider "simulator" lists no compute instance`},
		{name: "another group's", group: web, ids: []instance.ID{"o1"}, err: `belongs to group "other"`},
		{name: "another stack's", group: web, ids: []instance.ID{"x1"}, err: `group "web" of stack "elsewhere"`},
		{name: "a pet whose logical ID is held", group: db, ids: []instance.ID{"r3"}, err: `held by member "d1"`},
		{name: "a pet of another logical ID", group: db, ids: []instance.ID{"r4"}, err: `"10.0.0.9" is not one of`},
		{name: "a pet without logical ID", group: db, ids: []instance.ID{"f1"}, err: "has no logical ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed := all
			if tc.group == db {
				listed = append(slices.Clone(all), member("d1", "db", "10.0.0.1"))
			}
			e, err := Import(doc, ImportRequest{Stack: "s", Group: tc.group, IDs: tc.ids, All: listed})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := relabels(e); !slices.Equal(got, tc.relabels) {
				t.Errorf("relabels = %v, want %v", got, tc.relabels)
			}
			for _, r := range e.Relabels {
				if !slices.Contains(ids(e.Doc, tc.group.Name), string(r.ID)) {
					t.Errorf("%s is not recorded in group %s: %v", r.ID, tc.group.Name, ids(e.Doc, tc.group.Name))
				}
			}
		})
	}
	// An instance without the group's hash is said to be replaced next.
	e, err := Import(doc, ImportRequest{Stack: "s", Group: web, IDs: []instance.ID{"f1"}, All: all})
	if err != nil || !strings.Contains(strings.Join(e.Changes, "\n"), "replaces it") {
		t.Errorf("import of an instance of another configuration: %v, %v", e, err)
	}
}
