package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
)

func convertCmd(m Meta) cli.Command { return &ConvertCommand{Meta: m} }

// copyLegacy copies testdata/legacy/DIR into a fresh working directory.
func copyLegacy(t *testing.T, dir string) string {
	t.Helper()
	wd := t.TempDir()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "legacy", dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in testdata/legacy/%s (%v)", dir, err)
	}
	for _, f := range files {
		writeFile(t, filepath.Join(wd, filepath.Base(f)), readFile(t, f), 0o644)
	}
	return wd
}

// TestConvert: the walk-through's old files convert to HCL that is
// fmt-clean, declares the implied providers and load balancers, loads
// into the stack the old files make, and converts to itself.
func TestConvert(t *testing.T) {
	for _, dir := range []string{"json", "yaml"} {
		t.Run(dir, func(t *testing.T) {
			wd := copyLegacy(t, dir)
			names, err := filepath.Glob(filepath.Join(wd, "*"))
			if err != nil {
				t.Fatal(err)
			}
			args := make([]string, len(names))
			for i, n := range names {
				args[i] = filepath.Base(n) // relative to the working directory
			}
			code, stdout, stderr := runCommand(t, convertCmd, wd, args...)
			if code != 0 || stderr != "" {
				t.Fatalf("convert: exit %d\n%s", code, stderr)
			}
			if formatted, diags := config.Format([]byte(stdout), "out.hcl"); diags.HasErrors() || string(formatted) != stdout {
				t.Errorf("output is not fmt-clean:\n%s", stdout)
			}
			for _, want := range []string{
				`stack "mystack" {}`, `provider "simulator" {}`, "alias = \"nfs-auth\"", `provider "vanilla" {}`,
				`loadbalancer "lb3" {`, `group "cattle" {`, `ingress "test.com" {`,
				"properties = { host = member.id, iops = 10 }",
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}

			old, diags := config.Load(wd)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			converted := t.TempDir()
			writeFile(t, filepath.Join(converted, "main.hcl"), stdout, 0o644)
			back, diags := config.Load(converted)
			if len(diags) > 0 {
				t.Fatalf("the output does not load cleanly: %v", diags)
			}
			if g, w := modelString(t, back), modelString(t, old); g != w {
				t.Errorf("the output loads into another stack\ngot:\n%s\nwant:\n%s", g, w)
			}

			code, again, stderr := runCommand(t, convertCmd, converted, "main.hcl")
			if code != 0 || again != stdout {
				t.Errorf("converting the output again: exit %d %s\n%s", code, stderr, again)
			}
		})
	}
}

func modelString(t *testing.T, st *config.Stack) string {
	t.Helper()
	m := NewMeta("", strings.NewReader(""), nil, nil)
	var b strings.Builder
	m.Stdout = &b
	if err := m.WriteJSON(st); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestConvertReportsWhere(t *testing.T) {
	wd := t.TempDir()
	writeFile(t, filepath.Join(wd, "stack.hcl"), `stack "s" {}`, 0o644)
	writeFile(t, filepath.Join(wd, "web.yaml"),
		"kind: group\nmetadata: {name: web}\nproperties:\n  Allocation: {Sise: 2}\n  Instance: {Plugin: simulator/compute}\n  Flavor: {Plugin: vanilla}\n", 0o644)
	code, stdout, stderr := runCommand(t, convertCmd, wd, "stack.hcl", "web.yaml")
	if code != 1 || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	for _, want := range []string{
		"Error: Unknown field", "on web.yaml:4:16:", "   4:   Allocation: {Sise: 2}\n", `Did you mean "Size"?`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	// A field infrakit has no use for is a warning: the HCL is still printed.
	writeFile(t, filepath.Join(wd, "web.yaml"),
		"kind: group\nmetadata: {name: web}\nproperties:\n  Allocation: {Size: 2}\n  Instance: {Plugin: simulator/compute}\n  Flavor: {Plugin: vanilla}\n  Updating: {Count: 3}\n", 0o644)
	code, stdout, stderr = runCommand(t, convertCmd, wd, "web.yaml", "stack.hcl")
	if code != 0 || !strings.Contains(stdout, `group "web" {`) || !strings.Contains(stderr, "Warning: Field not carried over") || !strings.Contains(stderr, "web.yaml:7:14") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	if code, _, _ := runCommand(t, convertCmd, wd); code != cli.RunResultHelp {
		t.Errorf("no files: exit %d, want the usage", code)
	}
	// The files may be named with -f too, as other commands take them.
	if code, fromF, stderr := runCommand(t, convertCmd, wd, "-f", "web.yaml", "stack.hcl"); code != 0 || fromF != stdout {
		t.Errorf("convert -f web.yaml stack.hcl: exit %d\n%s\n%s", code, fromF, stderr)
	}
	if code, _, stderr := runCommand(t, convertCmd, wd, "missing.json"); code != 1 || !strings.Contains(stderr, "missing.json") {
		t.Errorf("missing file: exit %d\n%s", code, stderr)
	}
}

// TestLoadStackWithExtraFiles: -f adds a specification to the working
// directory's stack, named relative to it, and read whatever it holds.
func TestLoadStackWithExtraFiles(t *testing.T) {
	m, _, _ := newTestMeta(t)
	writeFile(t, filepath.Join(m.WorkDir, "stack.hcl"), `stack "s" {}`, 0o644)
	if err := os.Mkdir(filepath.Join(m.WorkDir, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(m.WorkDir, "old", "web.json"),
		`{"ID": "web", "Properties": {"Allocation": {"Size": 1}, "Instance": {"Plugin": "simulator/compute"}, "Flavor": {"Plugin": "vanilla"}}}`, 0o644)

	fs := m.FlagSet("test")
	files := flagStackFiles(fs)
	if _, err := ParseArgs(fs, []string{"-f", "old/web.json"}); err != nil {
		t.Fatal(err)
	}
	st, diags := m.loadStack(*files)
	if len(diags) > 0 || st.Group("web") == nil || st.Provider("simulator") == nil || st.Provider("vanilla") == nil {
		t.Fatalf("diags %v, groups %v, providers %v", diags, st.Groups, st.Providers)
	}
	st, _ = m.loadStack(nil)
	if st.Group("web") != nil {
		t.Errorf("without -f the file in a subdirectory is not part of the stack")
	}
}
