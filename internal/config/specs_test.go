package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
)

// The old formats themselves are tested in package legacy; these tests are
// about how Load makes them part of a stack.

const webGroupJSON = `{"ID": "web", "Properties": {"Allocation": {"Size": 2},
  "Instance": {"Plugin": "simulator/compute"}, "Flavor": {"Plugin": "vanilla"}}}`

// diagnostic returns the first diagnostic with summary, or fails.
func diagnostic(t *testing.T, st *config.Stack, diags hcl.Diagnostics, summary string) *hcl.Diagnostic {
	t.Helper()
	for _, d := range diags {
		if d.Summary == summary {
			return d
		}
	}
	t.Fatalf("no %q among:\n%s", summary, render(st, diags))
	return nil
}

// TestSpecificationsInDirectory: the directory's JSON and YAML files that
// are specifications join its *.hcl files; the state file, a saved plan and
// other tools' files are left out; a broken one is reported, not skipped.
func TestSpecificationsInDirectory(t *testing.T) {
	st, diags, dir := loadSource(t, map[string]string{
		"stack.hcl":           `stack "s" {}`,
		"web.json":            webGroupJSON,
		"infrakit.state.json": `{"version": 1, "serial": 3, "lineage": "x", "desired": {"groups": []}}`,
		"plan.json":           `{"format_version": 1, "desired": {}}`,
		"package.json":        `{"name": "tooling", "version": "1.0.0"}`,
		"compose.yaml":        "services:\n  web: {image: nginx}\n",
		"deploy.yml":          "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
		".hidden.json":        `{"ID": "hidden"}`,
	})
	if len(diags) > 0 {
		t.Fatalf("%s", render(st, diags))
	}
	if len(st.Groups) != 1 || st.Group("web") == nil {
		t.Fatalf("groups %v, want web only", st.Groups)
	}
	if _, ok := st.Files[filepath.Join(dir, "web.json")]; !ok || len(st.Files) != 2 {
		t.Errorf("files read: %v", mapKeys(st.Files))
	}

	_, diags, _ = loadSource(t, map[string]string{
		"stack.hcl":   `stack "s" {}`,
		"broken.json": `{"ID": "web",`,
	})
	if d := diagnostic(t, st, diags, "Invalid JSON"); pos("", d.Subject) == "" || !strings.HasSuffix(d.Subject.Filename, "broken.json") {
		t.Errorf("broken.json: %v", d)
	}
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, filepath.Base(k))
	}
	return out
}

// TestExtraSpecificationAlwaysRead: a file named with -f is read as a
// specification whatever it holds, so a mistake in it is not skipped.
func TestExtraSpecificationAlwaysRead(t *testing.T) {
	st, _, dir := loadSource(t, map[string]string{"stack.hcl": `stack "s" {}`, "other.json": `{"Id2": 1}`})
	if len(st.Groups) != 0 {
		t.Fatalf("other.json is not a specification of the directory")
	}
	st, diags := config.Load(dir, filepath.Join(dir, "other.json"))
	d := diagnostic(t, st, diags, "Unrecognized specification")
	if got := pos(dir, d.Subject); got != "other.json:1:1" {
		t.Errorf("at %s", got)
	}
}

// TestStateFilesNeverRead: the local state and the files its backend keeps
// beside it are not specifications, whatever they hold, so a truncated
// state is left to the state backend to refuse (with its own message)
// rather than reported as invalid JSON. Named with -f, a file is read.
func TestStateFilesNeverRead(t *testing.T) {
	truncated := `{"version": 1, "serial": 3, "lineage": "x", "stack": {"groups": [{"ID": "web", "Properties": {"Allo`
	st, diags, dir := loadSource(t, map[string]string{
		"stack.hcl":                          `stack "s" {}`,
		config.StateFile:                     truncated,
		config.StateFile + ".backup":         webGroupJSON,
		config.StateFile + ".tmp-12345.json": truncated,
	})
	if len(diags) > 0 {
		t.Fatalf("the state files were read:\n%s", render(st, diags))
	}
	if len(st.Groups) != 0 || len(st.Files) != 1 {
		t.Fatalf("files read %v, groups %v; want stack.hcl alone", mapKeys(st.Files), st.Groups)
	}
	_, diags = config.Load(dir, filepath.Join(dir, config.StateFile))
	if !diags.HasErrors() {
		t.Error("a state named with -f must be read, and it is not a valid specification")
	}
}

// TestBrokenFileThatIsNoSpecification: a file of the directory that does
// not parse is an error when its text shows a specification (an "ID" or
// "Properties" key, a kind infrakit reads), and otherwise left out with a
// warning that says why and points at the syntax error.
func TestBrokenFileThatIsNoSpecification(t *testing.T) {
	st, diags, dir := loadSource(t, map[string]string{
		"stack.hcl":     `stack "s" {}`,
		"web.json":      webGroupJSON,
		"tsconfig.json": "{\n  // comments are not JSON\n  \"compilerOptions\": {}\n}\n",
		"notes.yaml":    "title: [unclosed\n",
	})
	if diags.HasErrors() {
		t.Fatalf("a stray broken file is not an error:\n%s", render(st, diags))
	}
	if st.Group("web") == nil {
		t.Fatalf("web.json was not read")
	}
	var skipped []string
	for _, d := range diags {
		skipped = append(skipped, d.Summary)
		if !strings.Contains(d.Detail, "not part of the stack") || d.Subject == nil {
			t.Errorf("warning %q: detail %q, subject %v", d.Summary, d.Detail, d.Subject)
		}
	}
	if strings.Join(skipped, "; ") != "File not read: notes.yaml; File not read: tsconfig.json" {
		t.Errorf("warnings %q, want one per broken file, in name order", skipped)
	}
	if got := pos(dir, diags[1].Subject); got != "tsconfig.json:2:3" {
		t.Errorf("the tsconfig.json warning is at %s, want its syntax error at tsconfig.json:2:3", got)
	}
	if out := render(st, diags[1:]); !strings.Contains(out, "// comments are not JSON") {
		t.Errorf("the warning should show the line:\n%s", out)
	}

	// Broken specifications stay errors: JSON with an ID, YAML with a kind.
	for name, src := range map[string]string{
		"broken.json": `{"ID": "web", "Properties": {"Allocation": {"Size": 2}`,
		"broken.yaml": "kind: group\nmetadata: {name: web\nproperties: {}\n",
		"legacy.yml":  "ID: web\nProperties: [\n",
	} {
		st, diags, _ := loadSource(t, map[string]string{"stack.hcl": `stack "s" {}`, name: src})
		if !diags.HasErrors() || !strings.HasSuffix(diags.Errs()[0].(*hcl.Diagnostic).Subject.Filename, name) {
			t.Errorf("%s: want its syntax error:\n%s", name, render(st, diags))
		}
	}
}

// TestMisspelledFieldBesideKind: a new-schema document is recognized by
// its kind (group, ingress or enrollment, in any case) and metadata too,
// not only by a properties field, so a misspelled one is an error naming
// it instead of the document being silently left out.
func TestMisspelledFieldBesideKind(t *testing.T) {
	for _, kind := range []string{"group", "Ingress", "ENROLLMENT"} {
		src := "kind: " + kind + "\nmetadata: {name: web}\nproprties:\n  Allocation: {Size: 2}\n"
		st, diags, dir := loadSource(t, map[string]string{"stack.hcl": `stack "s" {}`, "web.yml": src})
		d := diagnostic(t, st, diags, "Unknown field")
		if !strings.Contains(d.Detail, `no field "proprties"`) || !strings.Contains(d.Detail, `Did you mean "properties"?`) {
			t.Errorf("kind %s: detail %q", kind, d.Detail)
		}
		if got := pos(dir, d.Subject); got != "web.yml:3:1" {
			t.Errorf("kind %s: at %s, want web.yml:3:1", kind, got)
		}
	}
	// Another tool's kind, or a kind without metadata, is not a specification.
	st, diags, _ := loadSource(t, map[string]string{
		"stack.hcl":  `stack "s" {}`,
		"deploy.yml": "kind: Deployment\nmetadata: {name: x}\nproprties: {}\n",
		"list.yml":   "kind: group\nitems: []\n",
	})
	if len(diags) > 0 {
		t.Errorf("not specifications:\n%s", render(st, diags))
	}
}

// TestImpliedProvidersAndLoadBalancers: what the specifications name and
// the stack does not declare is added once; what the stack declares is
// its own, and a load balancer named with another provider is an error.
func TestImpliedProvidersAndLoadBalancers(t *testing.T) {
	ingress := "kind: ingress\nmetadata: {name: web}\nproperties:\n" +
		"  - {L4Plugin: simulator/lb1, Backends: {Groups: [s/web]}, Routes: [{LoadBalancerPort: 80, Port: 8080}]}\n" +
		"  - {L4Plugin: simulator/lb2, Backends: {Groups: [s/web]}, Routes: [{LoadBalancerPort: 80, Port: 8080}]}\n"
	st, diags, dir := loadSource(t, map[string]string{
		"stack.hcl":    "stack \"s\" {}\nprovider \"vanilla\" { debug = true }\nloadbalancer \"lb2\" { provider = simulator }\n",
		"web.json":     webGroupJSON,
		"ingress.yaml": ingress,
	})
	if len(diags) > 0 {
		t.Fatalf("%s", render(st, diags))
	}
	var keys []string
	for _, p := range st.Providers {
		keys = append(keys, p.Key())
	}
	if strings.Join(keys, " ") != "vanilla simulator" {
		t.Errorf("providers %q, want the declared vanilla then the implied simulator", keys)
	}
	if v := st.Provider("vanilla"); string(v.Config) != `{"debug":true}` || filepath.Base(v.DeclRange.Filename) != "stack.hcl" {
		t.Errorf("vanilla should be the declared block: %+v", v)
	}
	if s := st.Provider("simulator"); pos(dir, &s.DeclRange) != "ingress.yaml:4:16" {
		t.Errorf("simulator is implied where it is first named; at %s", pos(dir, &s.DeclRange))
	}
	if len(st.LoadBalancers) != 2 || st.LoadBalancers[0].Name != "lb2" || st.LoadBalancers[1].Name != "lb1" ||
		st.LoadBalancers[1].Provider != "simulator" || pos(dir, &st.LoadBalancers[1].DeclRange) != "ingress.yaml:4:16" {
		t.Errorf("load balancers: declared lb2, then implied lb1: %+v %+v", st.LoadBalancers[0], st.LoadBalancers[1])
	}

	st, diags, dir = loadSource(t, map[string]string{
		"stack.hcl":    "stack \"s\" {}\nloadbalancer \"lb1\" { provider = vanilla }\n",
		"web.json":     webGroupJSON,
		"ingress.yaml": ingress,
	})
	d := diagnostic(t, st, diags, "Conflicting load balancer")
	if got := pos(dir, d.Subject); got != "ingress.yaml:4:16" || !strings.Contains(d.Detail, `served by provider "vanilla"`) {
		t.Errorf("at %s: %s", got, d.Detail)
	}
}

// TestDuplicateAcrossFormats: a group declared in HCL and in a
// specification is a duplicate, reported at the second with the first.
func TestDuplicateAcrossFormats(t *testing.T) {
	st, diags, dir := loadSource(t, map[string]string{
		"stack.hcl": "stack \"s\" {}\nprovider \"simulator\" {}\nprovider \"vanilla\" {}\n" +
			"group \"web\" {\n  size = 1\n  instance {\n    provider = simulator\n    type = \"compute\"\n  }\n  flavor { provider = vanilla }\n}\n",
		"web.json": webGroupJSON,
	})
	d := diagnostic(t, st, diags, "Duplicate group")
	if got := pos(dir, d.Subject); got != "web.json:1:8" || !strings.Contains(d.Detail, "stack.hcl:4:1") {
		t.Errorf("at %s: %s", got, d.Detail)
	}
}

// TestImpliedStackName: specifications without a stack block form a stack
// named after their directory, with a warning saying how to pin the name.
func TestImpliedStackName(t *testing.T) {
	st, diags, dir := loadSource(t, map[string]string{"web.json": webGroupJSON})
	// t.TempDir's "001": a name may not start with a digit, so an
	// underscore goes in front.
	want := "_" + filepath.Base(dir)
	if st.Name != want || diags.HasErrors() {
		t.Fatalf("stack %q, want %q:\n%s", st.Name, want, render(st, diags))
	}
	d := diagnostic(t, st, diags, "Stack name implied")
	if d.Severity != hcl.DiagWarning || !strings.Contains(d.Detail, `stack "`+want+`" {}`) {
		t.Errorf("%+v", d)
	}

	// Read without a directory, the stack is named after the first
	// specification's.
	st, _ = config.Load("", filepath.Join(dir, "web.json"))
	if st.Name != want {
		t.Errorf("stack %q, want %q", st.Name, want)
	}

	// HCL files alone still need their stack block.
	_, diags, _ = loadSource(t, map[string]string{"main.hcl": `provider "simulator" {}`})
	diagnostic(t, st, diags, "Missing stack block")
}
