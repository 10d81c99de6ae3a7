package command

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/pluginhost"
)

func validateCmd(m Meta) cli.Command { return &ValidateCommand{Meta: m} }

// simulatorStack uses only the simulator: instances, its flavor, a load balancer.
const simulatorStack = `stack "v" {}

provider "simulator" {}

group "web" {
  size = 1
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor {
    provider   = simulator
    properties = { tags = { tier = "web" } }
  }
}

loadbalancer "lb1" { provider = simulator }
`

func TestValidateStackErrors(t *testing.T) {
	wd := t.TempDir()
	writeStack(t, wd, strings.Replace(simulatorStack, "size = 1", "sise = 1", 1))
	code, stdout, stderr := runCommand(t, validateCmd, wd)
	if code != 1 || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	for _, want := range []string{
		"Error: Unsupported argument",
		`on main.hcl:6:3, in group "web":`,
		"   6:   sise = 1\n        ^^^^\n",
		`Did you mean "size"?`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	code, _, _ = runCommand(t, validateCmd, wd, "extra")
	if code != cli.RunResultHelp {
		t.Errorf("positional argument: exit %d", code)
	}
}

func TestValidateNotInitialized(t *testing.T) {
	wd := t.TempDir()
	writeStack(t, wd, simulatorStack)
	code, _, stderr := runCommand(t, validateCmd, wd)
	if code != 1 || !strings.Contains(stderr, "Error: Provider unavailable") || !strings.Contains(stderr, "main.hcl:3:1") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}

// TestValidateWithSimulator installs the real simulator provider and
// validates against it: a valid stack passes, and a property its schema
// does not have is underlined in the file.
func TestValidateWithSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a provider")
	}
	wd := initSimulator(t, simulatorStack)

	code, stdout, stderr := runCommand(t, validateCmd, wd)
	if code != 0 || !strings.Contains(stdout, "Success! The stack is valid.") {
		t.Fatalf("valid stack: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	writeStack(t, wd, strings.Replace(simulatorStack, "{ tags = {", "{ tag = {", 1)+
		"loadbalancer \"lb2\" { provider = simulator }\n")
	code, _, stderr = runCommand(t, validateCmd, wd)
	if code != 1 {
		t.Fatalf("invalid stack: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"Error: Unsupported property",
		"main.hcl:13:20",
		`has no property "tag"; did you mean "tags"?`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Count(stderr, "Error:") != 1 {
		t.Errorf("want exactly one error:\n%s", stderr)
	}
}

func TestValidateJSON(t *testing.T) {
	wd := t.TempDir()
	writeStack(t, wd, strings.Replace(simulatorStack, "size = 1", "sise = 1", 1))
	code, stdout, stderr := runCommand(t, validateCmd, wd, "-json")
	if code != 1 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got validateJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if got.FormatVersion != "1.0" || got.Valid || got.ErrorCount != 1 || got.WarningCount != 0 || len(got.Diagnostics) != 1 {
		t.Fatalf("validate -json: %+v", got)
	}
	d := got.Diagnostics[0]
	if d.Severity != "error" || d.Summary != "Unsupported argument" || d.Range == nil || d.Range.Filename != "main.hcl" ||
		d.Range.Start.Line != 6 || d.Range.Start.Column != 3 || d.Range.End.Column != 7 {
		t.Errorf("diagnostic: %+v range %+v", d, d.Range)
	}
	if s := d.Snippet; s == nil || s.Context == nil || *s.Context != `group "web"` || s.StartLine != 6 ||
		s.Code[s.HighlightStartOffset:s.HighlightEndOffset] != "sise" || s.Values == nil {
		t.Errorf("snippet: %+v", d.Snippet)
	}

	// Not initialized: the providers' absence is a diagnostic too, and a
	// valid syntax alone does not make the stack valid.
	writeStack(t, wd, simulatorStack)
	code, stdout, _ = runCommand(t, validateCmd, wd, "-json")
	got = validateJSON{}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 1 || got.Valid || got.ErrorCount == 0 {
		t.Errorf("not initialized: exit %d, %v, %s", code, err, stdout)
	}
}

// initSimulator writes stack into a new working directory and installs the
// real simulator provider there (`infrakit init`), built from source.
func initSimulator(t *testing.T, stack string) (wd string) {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, pluginhost.BinaryName("simulator")), "github.com/infrakit/infrakit/plugins/simulator")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Setenv(pluginhost.PluginPathEnv, "")
	t.Setenv("HOME", t.TempDir())
	wd = t.TempDir()
	writeStack(t, wd, stack)
	if code, stdout, stderr := runCommand(t, initCmd, wd, "-plugin-dir", bin); code != 0 {
		t.Fatalf("init: exit %d\n%s\n%s", code, stdout, stderr)
	}
	return wd
}
