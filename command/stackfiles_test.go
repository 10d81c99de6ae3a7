package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/operation"
)

func lbRoutesListCmd(m Meta) cli.Command    { return &LBRoutesListCommand{Meta: m} }
func lbBackendsListCmd(m Meta) cli.Command  { return &LBBackendsListCommand{Meta: m} }
func ingressDescribeCmd(m Meta) cli.Command { return &IngressDescribeCommand{Meta: m} }
func ingressFreeCmd(m Meta) cli.Command     { return &IngressFreeCommand{Meta: m} }
func ingressDestroyCmd(m Meta) cli.Command  { return &IngressDestroyCommand{Meta: m} }
func enrollDescribeCmd(m Meta) cli.Command  { return &EnrollmentDescribeCommand{Meta: m} }
func enrollFreeCmd(m Meta) cli.Command      { return &EnrollmentFreeCommand{Meta: m} }
func enrollDestroyCmd(m Meta) cli.Command   { return &EnrollmentDestroyCommand{Meta: m} }

// TestEveryStackCommandTakesF: every command that reads the stack or acts
// on its objects accepts -f FILE (repeatable), before or after its
// arguments, so a script can pass the same files to all of them. In an
// empty directory they fail for want of a stack or providers, never with
// the usage.
func TestEveryStackCommandTakesF(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  func(Meta) cli.Command
		args []string
	}{
		{"init", initCmd, nil},
		{"validate", validateCmd, nil},
		{"fmt", fmtCmd, nil},
		{"convert", convertCmd, nil},
		{"plan", planCmd, nil},
		{"apply", applyCmd, []string{"-auto-approve"}},
		{"destroy", destroyCmd, []string{"-auto-approve"}},
		{"show", showCmd, nil},
		{"watch", watchCmd, []string{"-listen", "127.0.0.1:0"}},
		{"group ls", groupListCmd, []string{"web"}},
		{"group describe", groupDescribeCmd, []string{"web"}},
		{"group scale", groupScaleCmd, []string{"web", "3"}},
		{"group destroy-instances", groupDestroyInstancesCmd, []string{"web", "i-1"}},
		{"group free", groupFreeCmd, []string{"web"}},
		{"group destroy", groupDestroyCmd, []string{"web", "-auto-approve"}},
		{"group stop-update", stopUpdateCmd, []string{"web"}},
		{"lb routes ls", lbRoutesListCmd, []string{"lb1"}},
		{"lb backends ls", lbBackendsListCmd, []string{"lb1"}},
		{"ingress describe", ingressDescribeCmd, []string{"in"}},
		{"ingress free", ingressFreeCmd, []string{"in"}},
		{"ingress destroy", ingressDestroyCmd, []string{"in", "-auto-approve"}},
		{"enrollment describe", enrollDescribeCmd, []string{"nfs"}},
		{"enrollment free", enrollFreeCmd, []string{"nfs"}},
		{"enrollment destroy", enrollDestroyCmd, []string{"nfs", "-auto-approve"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-f", "a.hcl"}, tc.args...)
			args = append(args, "-f", "b.json")
			code, _, stderr := runCommand(t, tc.cmd, t.TempDir(), args...)
			if code == cli.RunResultHelp || strings.Contains(stderr, "flag provided but not defined") {
				t.Errorf("%s -f: exit %d, stderr %q; want -f accepted", tc.name, code, stderr)
			}
		})
	}
}

// lbStack is a stack without load balancers; lbFile, named with -f, adds one.
const (
	lbStack = `stack "lbs" {}

provider "simulator" {}
`
	lbFile = `loadbalancer "lb1" { provider = simulator }
`
)

// TestObjectVerbsReadExtraFiles: the lb, ingress and enrollment verbs look
// an object up in the stack files before the first apply, and those
// include the -f files.
func TestObjectVerbsReadExtraFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and launches providers")
	}
	bin := buildProviders(t)
	wd := t.TempDir()
	writeStack(t, wd, lbStack)
	extra := filepath.Join(t.TempDir(), "lb.hcl")
	writeFile(t, extra, lbFile, 0o644)
	if code, _, stderr := runCommand(t, initCmd, wd, "-plugin-dir", bin, "-f", extra); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}

	code, _, stderr := runCommand(t, lbRoutesListCmd, wd, "lb1")
	if code != 1 || !strings.Contains(stderr, `load balancer "lb1" is declared neither`) {
		t.Errorf("lb routes ls lb1 without -f: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runCommand(t, lbRoutesListCmd, wd, "lb1", "-f", extra)
	if code != 0 || !strings.Contains(stdout, `Load balancer "lb1" publishes no routes.`) {
		t.Errorf("lb routes ls lb1 -f: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCommand(t, lbBackendsListCmd, wd, "-f", extra, "-json", "lb1")
	var out backendsJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil || out.LoadBalancer != "lb1" || out.Backends == nil {
		t.Errorf("lb backends ls -f ... -json lb1: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestTruncatedStateIsRefusedByTheState: a truncated state file in the
// working directory is not read as a specification of the stack; plan
// reaches the state backend, which refuses it with its own message. A
// stray broken JSON file beside it is skipped with a warning, not an error.
func TestTruncatedStateIsRefusedByTheState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and launches providers")
	}
	bin := buildProviders(t)
	wd := stackDir(t, bin, 1)
	code, stdout, stderr := runIn(t, applyCmd, wd, "", "-auto-approve")
	wantExit(t, "apply", code, 0, stdout, stderr)

	statePath := filepath.Join(wd, operation.StateFile)
	full, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, statePath, string(full[:len(full)/2]), 0o600)
	writeFile(t, filepath.Join(wd, "tsconfig.json"), "{\n  // comments are not JSON\n}\n", 0o644)

	code, stdout, stderr = runIn(t, planCmd, wd, "")
	wantExit(t, "plan with a truncated state", code, 1, stdout, stderr)
	if !strings.Contains(stderr, operation.StateFile) || !strings.Contains(stderr, "is truncated") {
		t.Errorf("plan should show the state's refusal:\n%s", stderr)
	}
	if strings.Contains(stderr, "Invalid JSON") || strings.Contains(stderr, "on "+operation.StateFile) {
		t.Errorf("the state file was read as a specification:\n%s", stderr)
	}
	if !strings.Contains(stderr, "Warning: File not read: tsconfig.json") || !strings.Contains(stderr, "on tsconfig.json:2:3") {
		t.Errorf("the stray broken file should be named in a warning:\n%s", stderr)
	}
	if got, _ := os.ReadFile(statePath); len(got) != len(full)/2 {
		t.Errorf("the truncated state was overwritten")
	}
}

// TestDiagnosticDetailsNameFilesRelative: where a diagnostic's detail
// names another place in the stack ("size is set at main.hcl:6:3"), the
// file is named as in the location line: relative to the working
// directory, or as given when it lies outside it.
func TestDiagnosticDetailsNameFilesRelative(t *testing.T) {
	wd := t.TempDir()
	writeStack(t, wd, `stack "s" {}

provider "simulator" {}

group "web" {
  size        = 1
  logical_ids = ["a"]
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = simulator }
}
`)
	writeFile(t, filepath.Join(wd, "other.hcl"), "provider \"simulator\" {}\n", 0o644)
	outside := filepath.Join(t.TempDir(), "outside.hcl")
	writeFile(t, outside, "provider \"simulator\" {}\n", 0o644)

	code, _, stderr := runCommand(t, validateCmd, wd, "-f", outside)
	if code != 1 {
		t.Fatalf("validate: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"size is set at main.hcl:6:3.",
		"on other.hcl:1:1",
		`Provider "simulator" is already declared at main.hcl:3:1.`,
		"on " + outside + ":1:1",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, wd+string(filepath.Separator)) {
		t.Errorf("a file in the working directory is named by its absolute path:\n%s", stderr)
	}
}
