package command

import (
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
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, pluginhost.BinaryName("simulator")), "github.com/infrakit/infrakit/plugins/simulator")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Setenv(pluginhost.PluginPathEnv, "")
	t.Setenv("HOME", t.TempDir())
	wd := t.TempDir()
	writeStack(t, wd, simulatorStack)
	if code, stdout, stderr := runCommand(t, initCmd, wd, "-plugin-dir", bin); code != 0 {
		t.Fatalf("init: exit %d\n%s\n%s", code, stdout, stderr)
	}

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
