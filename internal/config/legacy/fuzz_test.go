package legacy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/config/legacy"
	"github.com/infrakit/infrakit/sdk/instance"
)

// The fuzz targets feed arbitrary bytes to the readers. `make test` runs
// each for a few seconds and `make fuzz` for a minute (both with a short
// -fuzzminimizetime: the engine minimizes each new interesting input for up
// to a minute by default, counting none of those runs, which is how a 5 s
// run used to try a dozen inputs). Whatever the input:
// nothing panics, every diagnostic points inside the file, and a file that
// loads converts to HCL that loads back into the same model.

func FuzzLegacyJSON(f *testing.F) {
	addSeeds(f, "json", "*.json")
	for _, s := range []string{
		`{"ID": "g", "Properties": {"Allocation": {"LogicalIDs": ["a", "b"]}, "Instance": {"Plugin": "simulator/compute", "Properties": {"for": 1, "a.b": [null, 1e3]}}, "Flavor": {"Plugin": "combo", "Properties": [{"Plugin": "vanilla", "Properties": {"Init": ["x"], "Attachments": [{"ID": "v", "Type": "t"}]}}]}, "Updating": {"Count": 2}}}`,
		`[{"kind": "enrollment", "metadata": {"name": "e"}, "properties": {"List": "s/g", "Instance": {"Plugin": "p.a/t", "Properties": {"h": "x-{{.ID}}-\\{\\{.LogicalID\\}\\}", "n": {"t": "{{index .Tags \"k\"}}"}}}}}]`,
		"{{/* c */}}\n[]",
		`{"ID": "g", "ID": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkSpecification(t, "spec.json", src) })
}

func FuzzYAML(f *testing.F) {
	addSeeds(f, "yaml", "*.y*ml")
	for _, s := range []string{
		"kind: ingress\nmetadata: {name: w}\nproperties:\n  - {L4Plugin: s/lb, Backends: {Groups: [x/g]}, Routes: [{LoadBalancerPort: 80, Port: 1, Protocol: TCP}]}\n---\nkind: group\nmetadata: {name: g}\nproperties: {Allocation: {Size: 0}, Instance: {Plugin: s/c}, Flavor: {Plugin: v}}\n",
		"a: &a [1, *a]\n",
		"{{/* c */}}\n# x\nkind: enrollment\nmetadata: {name: e}\nproperties: {List: g, Instance: {Plugin: s/d, Properties: {h: '{{ \"{{\" }}.ID}}'}}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkSpecification(t, "spec.yaml", src) })
}

// addSeeds adds the walk-through's files of testdata/legacy/DIR.
func addSeeds(f *testing.F, dir, pattern string) {
	files, err := filepath.Glob(filepath.Join(legacyDir, dir, pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in %s (%v)", dir, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func checkSpecification(t *testing.T, name string, src []byte) {
	legacy.IsSpecification(src, name)
	file, diags := legacy.Parse(src, name)
	if file == nil || file.HCL == nil || !bytes.Equal(file.HCL.Bytes, src) {
		t.Fatalf("Parse must return the file with its source")
	}
	checkSubjects(t, map[string][]byte{name: src}, diags)
	if diags.HasErrors() {
		return
	}

	// The whole way: loaded as a stack, converted, loaded again — in
	// memory, so that an input costs no files (thousands a second).
	files := map[string][]byte{name: src, "stack.hcl": []byte(`stack "fuzz" {}`)}
	st, diags := config.LoadSources(files)
	checkSubjects(t, files, diags)
	if diags.HasErrors() {
		return
	}
	out, err := st.MarshalHCL()
	if err != nil {
		t.Fatalf("a loaded stack does not convert: %v", err)
	}
	again, diags := config.LoadSources(map[string][]byte{"main.hcl": out})
	if diags.HasErrors() {
		t.Fatalf("the converted HCL does not load:\n%s\n%s", out, render(again, diags))
	}
	sameJSON(t, "model converted and loaded again", again, st)

	// Enrollment properties render the same from the expression config
	// evaluated and from the HCL text kept in state.
	logical := instance.LogicalID("l-1")
	member, err := config.MemberValue(instance.Description{ID: "i-1", LogicalID: &logical, Tags: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Enrollments {
		fromExpr, errExpr := e.Target.RenderProperties(member)
		fromText := e.Target
		fromText.PropertiesExpr = nil
		text, errText := fromText.RenderProperties(member)
		if (errExpr == nil) != (errText == nil) || string(fromExpr) != string(text) {
			t.Fatalf("enrollment %s renders %s (%v) from its expression but %s (%v) from %q",
				e.Name, fromExpr, errExpr, text, errText, e.Target.Properties)
		}
	}
}

// checkSubjects checks that every diagnostic about one of files points
// inside it, with lines and columns that start at 1.
func checkSubjects(t *testing.T, files map[string][]byte, diags hcl.Diagnostics) {
	t.Helper()
	for _, d := range diags {
		for _, r := range []*hcl.Range{d.Subject, d.Context} {
			if r == nil {
				continue
			}
			src, ok := files[r.Filename]
			if !ok {
				continue
			}
			if r.Start.Byte < 0 || r.Start.Byte > r.End.Byte || r.End.Byte > len(src) || r.Start.Line < 1 || r.Start.Column < 1 {
				t.Fatalf("%q points outside the file (%d bytes): %+v", d.Summary, len(src), *r)
			}
		}
	}
}
