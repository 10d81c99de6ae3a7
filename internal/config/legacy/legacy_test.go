package legacy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/config/legacy"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

const (
	legacyDir = "../../../testdata/legacy"
	e2eDir    = "../../../testdata/e2e"
)

// render is the CLI rendering of diagnostics, for failure messages.
func render(st *config.Stack, diags hcl.Diagnostics) string {
	var b strings.Builder
	if err := config.WriteDiagnostics(&b, st.Files, diags, false); err != nil {
		return err.Error()
	}
	return b.String()
}

// mustLoad loads a stack directory (and extra files) and fails on any
// diagnostic.
func mustLoad(t testing.TB, dir string, extra ...string) *config.Stack {
	t.Helper()
	st, diags := config.Load(dir, extra...)
	if len(diags) > 0 {
		t.Fatalf("loading %s %v:\n%s", dir, extra, render(st, diags))
	}
	return st
}

// writeFiles writes name -> content into a fresh directory.
func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// modelJSON is a model as state stores it: without source ranges.
func modelJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sameJSON(t testing.TB, what string, got, want any) {
	t.Helper()
	if g, w := modelJSON(t, got), modelJSON(t, want); g != w {
		t.Errorf("%s differs\ngot:\n%s\nwant:\n%s", what, g, w)
	}
}

func providerKeys(st *config.Stack) []string {
	var keys []string
	for _, p := range st.Providers {
		keys = append(keys, p.Key())
	}
	slices.Sort(keys)
	return keys
}

// TestWalkthroughEquivalence loads the walk-through from the old formats
// (testdata/legacy/json: legacy group JSON and new-schema JSON;
// testdata/legacy/yaml: new-schema YAML) and from its HCL
// (testdata/e2e/stack.hcl) and checks that the models, the config hashes
// and the plans are the same. The legacy group JSON has no group tags (old
// instances got theirs from the flavor), so for it the HCL's group tags
// are left out of the expectation.
func TestWalkthroughEquivalence(t *testing.T) {
	for _, tc := range []struct {
		dir       string
		groupTags bool
	}{{"json", false}, {"yaml", true}} {
		t.Run(tc.dir, func(t *testing.T) {
			got := mustLoad(t, filepath.Join(legacyDir, tc.dir))
			want := mustLoad(t, e2eDir)
			if !tc.groupTags {
				for _, g := range want.Groups {
					g.Tags = nil
				}
			}
			if got.Name != want.Name {
				t.Errorf("stack %q, want %q", got.Name, want.Name)
			}
			if g, w := providerKeys(got), providerKeys(want); !slices.Equal(g, w) {
				t.Errorf("providers %q, want %q (implied from the specifications)", g, w)
			}
			sameJSON(t, "groups", got.Groups, want.Groups)
			for _, wg := range want.Groups {
				if gg := got.Group(wg.Name); gg == nil || gg.ConfigHash() != wg.ConfigHash() {
					t.Errorf("group %s: config hash differs from the HCL's %s", wg.Name, wg.ConfigHash())
				}
			}
			sameJSON(t, "load balancers", got.LoadBalancers, want.LoadBalancers)
			sameJSON(t, "ingresses", got.Ingresses, want.Ingresses)
			sameJSON(t, "enrollments", got.Enrollments, want.Enrollments)

			// The plans from nothing, and from the world the HCL stack made
			// (every member up to date), are the same.
			for name, world := range map[string]plan.World{"empty": {}, "converged": convergedWorld(want)} {
				gp, err := plan.Compute(got, nil, world, plan.Scope{})
				if err != nil {
					t.Fatal(err)
				}
				wp, err := plan.Compute(want, nil, world, plan.Scope{})
				if err != nil {
					t.Fatal(err)
				}
				sameJSON(t, name+" plan", []any{gp.Groups, gp.Summary}, []any{wp.Groups, wp.Summary})
				if name == "converged" && gp.HasChanges() {
					t.Errorf("the legacy stack plans changes to the world its HCL made:\n%s", modelJSON(t, gp.Groups))
				}
			}
		})
	}
}

// convergedWorld is every group of st at its size, up to date and healthy.
func convergedWorld(st *config.Stack) plan.World {
	w := plan.World{Members: map[string][]group.Member{}}
	for _, g := range st.Groups {
		for i := range *g.Size {
			w.Members[g.Name] = append(w.Members[g.Name], group.Member{
				ID:         instance.ID(fmt.Sprintf("%s-%d", g.Name, i)),
				ConfigHash: g.ConfigHash(),
				State:      instance.StateRunning,
				Health:     flavor.HealthHealthy,
			})
		}
	}
	return w
}

// TestConvert: the HCL a stack of specifications converts to (what
// `infrakit convert` prints) is fmt-clean, loads back into the same model,
// and converts to itself.
func TestConvert(t *testing.T) {
	sources := map[string]string{
		"json":  filepath.Join(legacyDir, "json"),
		"yaml":  filepath.Join(legacyDir, "yaml"),
		"combo": writeFiles(t, map[string]string{"stack.hcl": `stack "s" {}`, "spec.yaml": comboSpec}),
	}
	for name, dir := range sources {
		t.Run(name, func(t *testing.T) {
			st := mustLoad(t, dir)
			out, err := st.MarshalHCL()
			if err != nil {
				t.Fatal(err)
			}
			if formatted, diags := config.Format(out, "converted.hcl"); diags.HasErrors() || string(formatted) != string(out) {
				t.Errorf("converted HCL is not fmt-clean (%v):\n%s", diags, out)
			}
			back := mustLoad(t, writeFiles(t, map[string]string{"main.hcl": string(out)}))
			sameJSON(t, "re-loaded model", back, st)
			again, err := back.MarshalHCL()
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(out) {
				t.Errorf("converting twice differs\nfirst:\n%s\nsecond:\n%s", out, again)
			}
		})
	}
}

// comboSpec uses what the walk-through does not: a combo flavor, pets,
// vanilla attachments, fields in other cases, escaped member references.
const comboSpec = `
kind: group
metadata: {name: pets, tags: {role: db}}
properties:
  allocation: {logicalIDs: [10.0.0.1, 10.0.0.2]}
  instance: {plugin: simulator/disk, properties: {size_gb: 20, "weird key": [1, 2.5, true, null]}}
  flavor:
    Plugin: combo
    Properties:
      - Plugin: vanilla
        Properties:
          Init: ["echo ${HOME} %{x}"]
          Attachments: [{ID: vol-1, Type: ebs}]
      - Plugin: simulator
        Properties: {health: healthy}
---
kind: enrollment
metadata: {name: backup}
properties:
  List: group/pets
  Instance:
    Plugin: simulator/disk
    Properties:
      id: '{{ "{{" }} .ID }}'
      name: 'pet-\{\{.LogicalID\}\}-of-{{index .Tags "infrakit.group"}}'
      owner: '{{.Tags.role}}'
      literal: "50% ${not a ref}"
      nested: {list: ["{{.ID}}", 1]}
`

// comboJSON is a legacy group JSON whose combo flavor combines vanilla
// (attachments, init, tags), the simulator's flavor, and a nested combo.
const comboJSON = `{"ID": "workers", "Properties": {
  "Allocation": {"Size": 3},
  "Instance": {"Plugin": "simulator/compute", "Properties": {"note": "n"}},
  "Flavor": {"Plugin": "combo", "Properties": [
    {"Plugin": "vanilla", "Properties": {
      "Init": ["echo one"],
      "Tags": {"tier": "web", "a": "1"},
      "Attachments": [{"ID": "vol-1", "Type": "ebs"}]}},
    {"Plugin": "simulator", "Properties": {"health": "healthy"}},
    {"Plugin": "combo", "Properties": [
      {"Plugin": "vanilla", "Properties": {"Init": ["echo two"], "Tags": {"a": "2"}}}]}
  ]}
}}`

// TestLegacyJSONCombo: a legacy JSON combo flavor becomes one flavor block
// per flavor it combines, in order (a nested combo's in its place), each
// with its converted properties; convert prints them in that order.
func TestLegacyJSONCombo(t *testing.T) {
	st := mustLoad(t, writeFiles(t, map[string]string{"stack.hcl": `stack "s" {}`, "workers.json": comboJSON}))
	g := st.Group("workers")
	if g == nil || g.Size == nil || *g.Size != 3 {
		t.Fatalf("workers: %s", modelJSON(t, g))
	}
	type flavor struct{ provider, properties string }
	var got []flavor
	for _, f := range g.Flavors {
		got = append(got, flavor{f.Provider, string(f.Properties)})
	}
	want := []flavor{
		{"vanilla", `{"attachments":[{"id":"vol-1","type":"ebs"}],"init":["echo one"],"tags":{"a":"1","tier":"web"}}`},
		{"simulator", `{"health":"healthy"}`},
		{"vanilla", `{"init":["echo two"],"tags":{"a":"2"}}`},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("flavors\n got %q\nwant %q", got, want)
	}

	out, err := st.MarshalHCL()
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	var at []int
	for _, marker := range []string{`"vol-1"`, "health = \"healthy\"", `"echo two"`} {
		i := strings.Index(text, marker)
		if i < 0 {
			t.Fatalf("converted HCL lacks %q:\n%s", marker, text)
		}
		at = append(at, i)
	}
	if strings.Count(text, "flavor {") != 3 || !slices.IsSorted(at) {
		t.Errorf("convert should print three flavor blocks in the combo's order:\n%s", text)
	}
}

func TestComboPetsAndMemberReferences(t *testing.T) {
	st := mustLoad(t, writeFiles(t, map[string]string{"stack.hcl": `stack "s" {}`, "spec.yaml": comboSpec}))
	g := st.Group("pets")
	if g == nil || !slices.Equal(g.LogicalIDs, []string{"10.0.0.1", "10.0.0.2"}) || g.Tags["role"] != "db" {
		t.Fatalf("pets: %s", modelJSON(t, g))
	}
	if len(g.Flavors) != 2 || g.Flavors[0].Provider != "vanilla" || g.Flavors[1].Provider != "simulator" {
		t.Fatalf("combo should become two flavor blocks in order: %s", modelJSON(t, g.Flavors))
	}
	if got, want := string(g.Flavors[0].Properties), `{"attachments":[{"id":"vol-1","type":"ebs"}],"init":["echo ${HOME} %{x}"]}`; got != want {
		t.Errorf("vanilla properties %s, want %s", got, want)
	}
	if got, want := string(g.Instance.Properties), `{"size_gb":20,"weird key":[1,2.5,true,null]}`; got != want {
		t.Errorf("instance properties %s, want %s", got, want)
	}
	e := st.Enrollment("backup")
	want := `{ id = member.id, name = "pet-${member.logical_id}-of-${member.tags["infrakit.group"]}", owner = member.tags["role"], literal = "50% $${not a ref}", nested = { list = [member.id, 1] } }`
	if e == nil || e.Target.Properties != want {
		t.Fatalf("enrollment properties\n got %s\nwant %s", e.Target.Properties, want)
	}
	// Rendered for one member, as the enrollment controller renders them.
	logical := instance.LogicalID("10.0.0.2")
	member, err := config.MemberValue(instance.Description{ID: "i-7", LogicalID: &logical, Tags: map[string]string{"infrakit.group": "pets", "role": "db"}})
	if err != nil {
		t.Fatal(err)
	}
	props, err := e.Target.RenderProperties(member)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(props), `{"id":"i-7","literal":"50% ${not a ref}","name":"pet-10.0.0.2-of-pets","nested":{"list":["i-7",1]},"owner":"db"}`; got != want {
		t.Errorf("rendered %s\nwant %s", got, want)
	}
	// The expression config evaluated while loading and the text kept in
	// state render the same.
	e.Target.PropertiesExpr = nil
	fromText, err := e.Target.RenderProperties(member)
	if err != nil || string(fromText) != string(props) {
		t.Errorf("rendered from the source text: %s (%v), from the expression %s", fromText, err, props)
	}
}

// TestDiagnostics: errors and warnings point at the JSON or YAML, by file,
// line and column, whether the old format's reader finds them or config's
// checks of the stack language do.
func TestDiagnostics(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		src      string
		severity hcl.DiagnosticSeverity
		pos      string // file:line:col of the first diagnostic of severity
		summary  string
		detail   string
	}{
		{
			name: "unknown field", file: "g.json",
			src:      `{"ID": "g", "Properties": {"Allocation": {"Sise": 3}, "Instance": {"Plugin": "simulator/compute"}, "Flavor": {"Plugin": "vanilla"}}}`,
			severity: hcl.DiagError, pos: "g.json:1:43", summary: "Unknown field",
			detail: `Properties.Allocation has no field "Sise"; its fields are Size, LogicalIDs. Did you mean "Size"?`,
		},
		{
			name: "unknown top-level field", file: "g.json",
			src:      "[\n  {\"ID\": \"g\", \"Propertys\": {}}\n]",
			severity: hcl.DiagError, pos: "g.json:2:15", summary: "Unknown field",
			detail: `A legacy group has no field "Propertys"; its fields are ID, Properties. Did you mean "Properties"?`,
		},
		{
			name: "JSON syntax", file: "g.json",
			src:      "{\n  \"ID\": \"g\"\n  \"Properties\": {}\n}",
			severity: hcl.DiagError, pos: "g.json:3:3", summary: "Invalid JSON", detail: `Unexpected '"' where ',' or '}' was expected.`,
		},
		{
			name: "duplicate key", file: "g.json",
			src:      `{"ID": "g", "ID": "h"}`,
			severity: hcl.DiagError, pos: "g.json:1:13", summary: "Invalid JSON", detail: `The key "ID" is already set at line 1`,
		},
		{
			name: "template action", file: "g.json",
			src:      "{{/* fine */}}\n{{ if .x }}",
			severity: hcl.DiagError, pos: "g.json:2:1", summary: "Invalid JSON", detail: "Template actions ({{ ... }}) are not supported",
		},
		{
			name: "comment keeps lines", file: "g.json",
			src:      "{{/* a comment\n   over two lines */}}\n{\"ID\": \"g\", \"Properties\": {\"Allocation\": {\"Size\": -1}, \"Instance\": {\"Plugin\": \"simulator/compute\"}, \"Flavor\": {\"Plugin\": \"vanilla\"}}}",
			severity: hcl.DiagError, pos: "g.json:3:51", summary: "Invalid value", detail: "at least 0; got -1",
		},
		{
			name: "invalid group name", file: "g.json",
			src:      `{"ID": "my group", "Properties": {"Allocation": {"Size": 1}, "Instance": {"Plugin": "simulator/compute"}, "Flavor": {"Plugin": "vanilla"}}}`,
			severity: hcl.DiagError, pos: "g.json:1:8", summary: "Invalid group name", detail: `"my group" cannot be referenced`,
		},
		{
			name: "instance without type", file: "g.json",
			src:      `{"ID": "g", "Properties": {"Allocation": {"Size": 1}, "Instance": {"Plugin": "simulator"}, "Flavor": {"Plugin": "vanilla"}}}`,
			severity: hcl.DiagError, pos: "g.json:1:78", summary: "Missing type in Plugin", detail: `write simulator/TYPE`,
		},
		{
			name: "not a specification", file: "g.json",
			src:      `{"id2": 1}`,
			severity: hcl.DiagError, pos: "g.json:1:1", summary: "Unrecognized specification", detail: `"kind"`,
		},
		{
			name: "updating warns", file: "g.json",
			src:      "{\"ID\": \"g\", \"Properties\": {\"Allocation\": {\"Size\": 1}, \"Instance\": {\"Plugin\": \"simulator/compute\"}, \"Flavor\": {\"Plugin\": \"vanilla\"},\n \"Updating\": {\"Duration\": \"30s\"}}}",
			severity: hcl.DiagWarning, pos: "g.json:2:15", summary: "Field not carried over", detail: "Properties.Updating.Duration is ignored: infrakit moves on once a replacement is healthy",
		},
		{
			name: "plugin options warn", file: "g.yaml",
			src:      "kind: group\nmetadata: {name: g}\nproperties:\n  Allocation: {Size: 1}\n  Instance:\n    Plugin: simulator/compute\n    Options: {x: 1}\n  Flavor: {Plugin: vanilla}\n",
			severity: hcl.DiagWarning, pos: "g.yaml:7:5", summary: "Field not carried over", detail: "properties.Instance.Options is ignored: plugin options",
		},
		{
			name: "unknown kind", file: "g.yaml",
			src:      "kind: gruop\nmetadata: {name: g}\nproperties: {}\n",
			severity: hcl.DiagError, pos: "g.yaml:1:7", summary: "Unknown kind", detail: `Did you mean "group"?`,
		},
		{
			name: "YAML syntax", file: "g.yaml",
			src:      "kind: group\nmetadata:\n  name: g\n tags: {}\n",
			severity: hcl.DiagError, pos: "g.yaml:4:2", summary: "Invalid YAML", detail: "Did not find expected key.",
		},
		{
			name: "reserved tag", file: "g.yaml",
			src:      "kind: group\nmetadata:\n  name: g\n  tags:\n    infrakit.group: x\nproperties:\n  Allocation: {Size: 1}\n  Instance: {Plugin: simulator/compute}\n  Flavor: {Plugin: vanilla}\n",
			severity: hcl.DiagError, pos: "g.yaml:5:5", summary: "Reserved tag", detail: `"infrakit.group" cannot be set here`,
		},
		{
			name: "undeclared group", file: "i.yaml",
			src:      "kind: ingress\nmetadata: {name: web}\nproperties:\n  - L4Plugin: simulator/lb1\n    Backends: {Groups: [mystack/catle]}\n    Routes: [{LoadBalancerPort: 80, Port: 8080}]\n",
			severity: hcl.DiagError, pos: "i.yaml:5:25", summary: "Reference to undeclared group", detail: `No group named "catle" is declared.`,
		},
		{
			name: "bad protocol", file: "i.yaml",
			src:      "kind: ingress\nmetadata: {name: web}\nproperties:\n  - L4Plugin: simulator/lb1\n    Backends: {Groups: []}\n    Routes:\n      - {LoadBalancerPort: 80, Port: 8080, Protocol: WebSocket}\n",
			severity: hcl.DiagError, pos: "i.yaml:7:54", summary: "Invalid protocol", detail: `got "websocket"`,
		},
		{
			name: "ingress tags warn", file: "i.yaml",
			src:      "kind: ingress\nmetadata: {name: web, tags: {a: b}}\nproperties:\n  - L4Plugin: simulator/lb1\n    RouteSources: {swarm: {Host: unix:///var/run/docker.sock}}\n    Backends: {Groups: []}\n    Routes: [{LoadBalancerPort: 80, Port: 8080}]\n",
			severity: hcl.DiagWarning, pos: "i.yaml:2:23", summary: "Field not carried over", detail: "an ingress has no tags",
		},
		{
			name: "route sources warn", file: "i.yaml",
			src:      "kind: ingress\nmetadata: {name: web, tags: {a: b}}\nproperties:\n  - L4Plugin: simulator/lb1\n    RouteSources: {swarm: {Host: unix:///var/run/docker.sock}}\n    Backends: {Groups: []}\n    Routes: [{LoadBalancerPort: 80, Port: 8080}]\n",
			severity: hcl.DiagWarning, pos: "i.yaml:5:5", summary: "Field not carried over", detail: "properties[0].RouteSources is ignored: routes are the ones listed in Routes",
		},
		{
			name: "unsupported template", file: "e.yaml",
			src:      "kind: enrollment\nmetadata: {name: nfs}\nproperties:\n  List: s/g\n  Instance:\n    Plugin: simulator/disk\n    Properties: {host: '{{ .Properties.ip }}'}\n",
			severity: hcl.DiagError, pos: "e.yaml:7:24", summary: "Unsupported template action", detail: "{{ .Properties.ip }} cannot be translated",
		},
		{
			name: "static list", file: "e.yaml",
			src:      "kind: enrollment\nmetadata: {name: nfs}\nproperties:\n  List: [{ID: a}]\n  Instance: {Plugin: simulator/disk}\n",
			severity: hcl.DiagError, pos: "e.yaml:4:9", summary: "Unsupported List", detail: "name it, like List: mystack/cattle",
		},
		{
			name: "combo needs a list", file: "g.json",
			src:      `{"ID": "g", "Properties": {"Allocation": {"Size": 1}, "Instance": {"Plugin": "simulator/compute"}, "Flavor": {"Plugin": "combo", "Properties": {"Init": []}}}}`,
			severity: hcl.DiagError, pos: "g.json:1:144", summary: "Invalid combo flavor", detail: "list the flavors it combines",
		},
		{
			name: "alias bomb", file: "g.yaml",
			src:      "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
			severity: hcl.DiagError, summary: "Specification too large", detail: "more than 100000 values",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{tt.file: tt.src})
			st, diags := config.Load("", filepath.Join(dir, tt.file))
			var first *hcl.Diagnostic
			for _, d := range diags {
				if d.Severity == tt.severity && d.Summary == tt.summary && strings.Contains(d.Detail, tt.detail) {
					first = d
					break
				}
			}
			if first == nil {
				t.Fatalf("no %q diagnostic (severity %v) with %q:\n%s", tt.summary, tt.severity, tt.detail, render(st, diags))
			}
			if tt.pos != "" {
				if first.Subject == nil {
					t.Fatalf("%q has no subject", first.Summary)
				}
				r := first.Subject
				if got := fmt.Sprintf("%s:%d:%d", filepath.Base(r.Filename), r.Start.Line, r.Start.Column); got != tt.pos {
					t.Errorf("at %s, want %s:\n%s", got, tt.pos, render(st, diags))
				}
			}
			if first.Summary != tt.summary || !strings.Contains(first.Detail, tt.detail) {
				t.Errorf("got %q: %q\nwant %q containing %q\n%s", first.Summary, first.Detail, tt.summary, tt.detail, render(st, diags))
			}
			// Every diagnostic renders with its source line.
			if text := render(st, diags); first.Subject != nil && !strings.Contains(text, fmt.Sprintf("%4d: ", first.Subject.Start.Line)) {
				t.Errorf("rendered without the source line:\n%s", text)
			}
		})
	}
}

// TestValidSpecificationsHaveNoWarnings: the walk-through's files are
// read without a single warning, so the warnings tests see are meant.
func TestValidSpecificationsHaveNoWarnings(t *testing.T) {
	for _, dir := range []string{"json", "yaml"} {
		mustLoad(t, filepath.Join(legacyDir, dir))
	}
}

// TestIsSpecification: what a stack's directory reads as a specification.
// A file that parses is one by its fields; one that does not is one when
// its text shows a specification's key or kind, and then carries its
// syntax error either way.
func TestIsSpecification(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		spec      bool
		syntaxErr bool
		why       string
	}{
		{"legacy.json", `{"ID": "web", "Properties": {}}`, true, false, ""},
		{"list.json", `[{"properties": {}}]`, true, false, ""},
		{"group.yml", "kind: Group\nmetadata: {name: web}\nproprties: {}\n", true, false, ""},
		{"ingress.yaml", "---\nfoo: 1\n---\nKIND: ingress\nMetadata: {}\n", true, false, ""},
		{"k8s.yml", "kind: Deployment\nmetadata: {name: x}\n", false, false, ""},
		{"nometa.yml", "kind: group\nname: x\n", false, false, ""},
		{"package.json", `{"name": "x", "version": "1.0.0"}`, false, false, ""},
		{"broken.json", `{"ID": "web",`, true, true, "an ID key"},
		{"broken-props.json", "{\n  \"Properties\" : {\"Allocation\": ", true, true, "a Properties key"},
		{"broken.yml", "kind: 'enrollment'\nmetadata: {name: x\n", true, true, "a kind infrakit reads"},
		{"broken-flow.yml", "- {ID: web, Properties: [}\n", true, true, "an ID key in flow style"},
		{"tsconfig.json", "{\n  // comment\n  \"id\": 1,\n  \"SomeID\": 2\n}", false, true, ""},
		{"k8s-broken.yml", "kind: Deployment\nmetadata: {name: x\n", false, true, ""},
		{"empty.json", "", false, true, ""},
	} {
		spec, syntax := legacy.IsSpecification([]byte(tc.src), tc.name)
		if spec != tc.spec || (syntax != nil) != tc.syntaxErr {
			t.Errorf("%s: spec %v, syntax error %v; want %v, %v (%s)", tc.name, spec, syntax, tc.spec, tc.syntaxErr, tc.why)
		}
		if syntax != nil && (syntax.Severity != hcl.DiagError || syntax.Subject == nil || syntax.Subject.Filename != tc.name) {
			t.Errorf("%s: syntax error %+v, want an error at the file", tc.name, syntax)
		}
	}
}
