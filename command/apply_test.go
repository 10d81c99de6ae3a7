package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
)

func planCmd(m Meta) cli.Command    { return &PlanCommand{Meta: m} }
func applyCmd(m Meta) cli.Command   { return &ApplyCommand{Meta: m} }
func destroyCmd(m Meta) cli.Command { return &DestroyCommand{Meta: m} }
func showCmd(m Meta) cli.Command    { return &ShowCommand{Meta: m} }

// lifecycleStack has a cattle group whose size the tests rewrite, and pets.
const lifecycleStack = `
stack "lifecycle" {}

provider "simulator" {}
provider "vanilla" {}

group "miners" {
  size = %d
  tags = { project = "e2e" }
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "custom field for miners" }
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo miner"], tags = { tier = "miners" } }
  }
}

group "db" {
  logical_ids = ["10.0.0.1", "10.0.0.2"]
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}
`

// stackDir is a working directory holding lifecycleStack at the given size,
// initialized with the providers built in bin.
func stackDir(t *testing.T, bin string, size int) string {
	t.Helper()
	wd := t.TempDir()
	writeLifecycleStack(t, wd, size)
	if code, _, stderr := runIn(t, initCmd, wd, "", "-plugin-dir", bin); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	return wd
}

func writeLifecycleStack(t *testing.T, wd string, size int) {
	t.Helper()
	src := fmt.Sprintf(lifecycleStack, size)
	if err := os.WriteFile(filepath.Join(wd, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runIn runs a command in wd with stdin, returning exit code and output.
func runIn(t *testing.T, newCmd func(Meta) cli.Command, wd, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	m := NewMeta(wd, strings.NewReader(stdin), &stdout, &stderr)
	code := newCmd(m).Run(args)
	return code, stdout.String(), stderr.String()
}

// instanceFiles counts the simulator's compute instances in wd.
func instanceFiles(t *testing.T, wd string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(wd, ".infrakit", "simulator", "instances", "compute", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

func wantExit(t *testing.T, what string, code, want int, stdout, stderr string) {
	t.Helper()
	if code != want {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, code, want, stdout, stderr)
	}
}

// TestPlanApplyShowDestroy drives the stack verbs in-process against real
// provider subprocesses and a real state file.
func TestPlanApplyShowDestroy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and launches providers")
	}
	bin := buildProviders(t)
	wd := stackDir(t, bin, 5)

	// plan: changes, exit 2 with -detailed-exitcode; -out saves it.
	code, stdout, stderr := runIn(t, planCmd, wd, "", "-detailed-exitcode", "-out", "tfplan")
	wantExit(t, "plan", code, 2, stdout, stderr)
	for _, want := range []string{`+ group "miners"`, "Plan: 7 instances to add, 0 to roll, 0 to destroy.", "infrakit apply tfplan"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, stdout)
		}
	}

	// apply without a terminal to ask on refuses, pointing at -auto-approve.
	code, stdout, stderr = runIn(t, applyCmd, wd, "")
	wantExit(t, "apply without an answer", code, 1, stdout, stderr)
	if !strings.Contains(stderr, "-auto-approve") || instanceFiles(t, wd) != 0 {
		t.Fatalf("apply without an answer: stderr %q, %d instances", stderr, instanceFiles(t, wd))
	}
	// anything but "yes" cancels
	code, stdout, stderr = runIn(t, applyCmd, wd, "no\n")
	wantExit(t, "apply answered no", code, 1, stdout, stderr)
	if !strings.Contains(stdout, "Do you want to perform these actions?") || !strings.Contains(stderr, "Apply cancelled") {
		t.Errorf("apply answered no: stdout %q stderr %q", stdout, stderr)
	}

	// apply the saved plan: no question, progress per instance.
	code, stdout, stderr = runIn(t, applyCmd, wd, "", "tfplan")
	wantExit(t, "apply tfplan", code, 0, stdout, stderr)
	for _, want := range []string{"group.miners: Creating instance... [5/5]", "group.db: Creating instance... [2/2]",
		"Apply complete! Resources: 7 added, 0 rolled, 0 destroyed."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("apply output lacks %q:\n%s", want, stdout)
		}
	}
	if n := instanceFiles(t, wd); n != 7 {
		t.Fatalf("%d instances after apply, want 7", n)
	}
	// The saved plan is stale now: refused before anything ran, so the
	// error alone is shown, without a line of resources.
	code, stdout, stderr = runIn(t, applyCmd, wd, "", "tfplan")
	wantExit(t, "apply stale tfplan", code, 1, stdout, stderr)
	if !strings.Contains(stderr, "Saved plan is stale") || strings.Contains(stdout, "Resources:") {
		t.Errorf("stale plan: stdout %q, stderr %q", stdout, stderr)
	}

	code, stdout, stderr = runIn(t, planCmd, wd, "", "-detailed-exitcode")
	wantExit(t, "plan after apply", code, 0, stdout, stderr)
	if !strings.Contains(stdout, "No changes.") {
		t.Errorf("plan after apply:\n%s", stdout)
	}

	// show, human and JSON
	code, stdout, stderr = runIn(t, showCmd, wd, "")
	wantExit(t, "show", code, 0, stdout, stderr)
	if !strings.Contains(stdout, "Stack:   lifecycle") || !strings.Contains(stdout, "miners  5") || !strings.Contains(stdout, "pets (2)") {
		t.Errorf("show:\n%s", stdout)
	}
	code, stdout, stderr = runIn(t, showCmd, wd, "", "-json")
	wantExit(t, "show -json", code, 0, stdout, stderr)
	var shown showJSON
	if err := json.Unmarshal([]byte(stdout), &shown); err != nil {
		t.Fatalf("show -json: %v\n%s", err, stdout)
	}
	if shown.Stack != "lifecycle" || shown.Serial == 0 || len(shown.Groups) != 2 || shown.Groups[0].Instances != 5 || *shown.Groups[0].Size != 5 {
		t.Errorf("show -json = %+v", shown)
	}

	// grow with -auto-approve -json: one JSON document, no progress lines
	writeLifecycleStack(t, wd, 8)
	code, stdout, stderr = runIn(t, planCmd, wd, "", "-json")
	wantExit(t, "plan -json", code, 0, stdout, stderr)
	var jp plan.JSONPlan
	if err := json.Unmarshal([]byte(stdout), &jp); err != nil || !jp.Changes || jp.Summary.Add != 3 {
		t.Fatalf("plan -json = %+v, %v\n%s", jp, err, stdout)
	}
	code, stdout, stderr = runIn(t, applyCmd, wd, "", "-auto-approve", "-json", "-parallelism", "2")
	wantExit(t, "apply -json", code, 0, stdout, stderr)
	var res applyJSON
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Summary.Add != 3 || res.Summary != jp.Summary ||
		res.Stack != "lifecycle" || len(res.Failed) != 0 {
		t.Fatalf("apply -json = %+v, %v\n%s", res, err, stdout)
	}

	// destroy, answered yes
	code, stdout, stderr = runIn(t, destroyCmd, wd, "yes\n")
	wantExit(t, "destroy", code, 0, stdout, stderr)
	if !strings.Contains(stdout, "Destroy complete! Resources: 10 destroyed.") || !strings.Contains(stdout, "Destroying instance") {
		t.Errorf("destroy output:\n%s", stdout)
	}
	if n := instanceFiles(t, wd); n != 0 {
		t.Fatalf("%d instances after destroy", n)
	}
	code, stdout, stderr = runIn(t, destroyCmd, wd, "")
	wantExit(t, "second destroy", code, 0, stdout, stderr)
	if !strings.Contains(stdout, "No changes.") {
		t.Errorf("second destroy:\n%s", stdout)
	}
}

func TestPlanWithoutInit(t *testing.T) {
	wd := t.TempDir()
	writeLifecycleStack(t, wd, 1)
	code, stdout, stderr := runIn(t, planCmd, wd, "")
	wantExit(t, "plan without init", code, 1, stdout, stderr)
	if !strings.Contains(stderr, "infrakit init") {
		t.Errorf("plan without init: stderr %q, want it to say run infrakit init", stderr)
	}
}

func TestShowWithoutState(t *testing.T) {
	code, stdout, stderr := runIn(t, showCmd, t.TempDir(), "")
	wantExit(t, "show", code, 0, stdout, stderr)
	if strings.TrimSpace(stdout) != "No state." {
		t.Errorf("show without state: %q", stdout)
	}
	code, stdout, stderr = runIn(t, showCmd, t.TempDir(), "", "-json")
	wantExit(t, "show -json", code, 0, stdout, stderr)
	if strings.TrimSpace(stdout) != `{
  "stack": "",
  "serial": 0,
  "lineage": "",
  "groups": [],
  "ingresses": [],
  "enrollments": []
}` {
		t.Errorf("show -json without state: %s", stdout)
	}
}

func TestStackVerbsRefuseBadArguments(t *testing.T) {
	wd := t.TempDir()
	for _, tc := range []struct {
		name string
		cmd  func(Meta) cli.Command
		args []string
		want string
	}{
		{"plan positional", planCmd, []string{"extra"}, "takes no arguments"},
		{"plan parallelism", planCmd, []string{"-parallelism", "0"}, "-parallelism must be at least 1"},
		{"apply two files", applyCmd, []string{"a", "b"}, "at most one argument"},
		{"apply json asks", applyCmd, []string{"-json"}, "-auto-approve"},
		{"apply plan with -f", applyCmd, []string{"-f", "x.hcl", "tfplan"}, "-f cannot be used"},
		{"destroy json asks", destroyCmd, []string{"-json"}, "-auto-approve"},
		{"show positional", showCmd, []string{"x"}, "takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runIn(t, tc.cmd, wd, "", tc.args...)
			if code != cli.RunResultHelp || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want usage error mentioning %q", code, stderr, tc.want)
			}
		})
	}
}

func TestProgressPrinter(t *testing.T) {
	render := func(tty bool, events ...execute.Event) (string, string) {
		var out, errs bytes.Buffer
		ui := &cli.BasicUi{Writer: &out, ErrorWriter: &errs}
		p := &progressPrinter{out: &out, ui: ui, tty: tty}
		for _, ev := range events {
			p.event(ev)
		}
		p.finish()
		return out.String(), errs.String()
	}
	steps := func(kind plan.StepKind, n int) []execute.Event {
		var evs []execute.Event
		for i := 1; i <= n; i++ {
			evs = append(evs, execute.Event{Step: plan.Step{Kind: kind, Object: "group.g", Instance: "i-1"},
				Status: execute.StatusDone, Done: i, Total: n})
		}
		return evs
	}

	out, _ := render(false, steps(plan.StepProvision, 3)...)
	if out != "group.g: Creating instance... [1/3]\ngroup.g: Creating instance... [2/3]\ngroup.g: Creating instance... [3/3]\n" {
		t.Errorf("small step:\n%s", out)
	}
	out, _ = render(false, steps(plan.StepDestroy, 1)...)
	if out != "group.g: Destroying instance i-1... [1/1]\n" {
		t.Errorf("destroy:\n%s", out)
	}
	// A large step on a pipe: a line per tenth.
	out, _ = render(false, steps(plan.StepProvision, 1000)...)
	if lines := strings.Count(out, "\n"); lines != 10 || !strings.HasSuffix(out, "[1000/1000]\n") {
		t.Errorf("large step printed %d lines:\n%s", lines, out)
	}
	// On a terminal: a bar redrawn in place, ended by a newline.
	out, _ = render(true, steps(plan.StepProvision, 1000)...)
	if !strings.HasPrefix(out, "\rgroup.g: Creating instance... [") || !strings.HasSuffix(out, "[==============================] 1000/1000\n") ||
		strings.Count(out, "\n") != 1 || strings.Count(out, "\r") > 20 {
		t.Errorf("bar output: %q", out)
	}
	// Errors always print, and close an open bar first.
	evs := steps(plan.StepProvision, 100)[:60]
	evs = append(evs, execute.Event{Step: plan.Step{Kind: plan.StepProvision, Object: "group.g"}, Status: execute.StatusFailed,
		Err: errors.New("boom"), Done: 61, Total: 100})
	out, errOut := render(true, evs...)
	if !strings.HasSuffix(out, "\n") || !strings.Contains(errOut, "group.g: Error: boom [61/100]") {
		t.Errorf("error: out %q err %q", out, errOut)
	}
}

// TestReportApplyRefused: an apply refused before it ran anything (no
// result: a stale or foreign plan, the state lock) reports its error alone;
// one that ran reports its resources, complete or not.
func TestReportApplyRefused(t *testing.T) {
	p := &plan.Plan{Stack: "s"}
	for _, tc := range []struct {
		name      string
		res       *controller.Result
		err       error
		summary   string
		resources string
	}{
		{"stale", nil, fmt.Errorf("%w: the state changed after the plan was made (serial 1, now 3); run plan again", plan.ErrStalePlan),
			"Error: Saved plan is stale", ""},
		{"other lineage", nil, fmt.Errorf("%w: it was made against state lineage a, but the current state has lineage b", plan.ErrOtherState),
			"Error: Saved plan is stale", ""},
		{"locked", nil, &state.LockedError{State: "infrakit.state.json", Cause: errors.New("timeout")},
			"Error: Error acquiring the state lock", ""},
		{"failed midway", &controller.Result{Done: plan.Counts{Add: 2}}, errors.New("provider died"),
			"Error: Error applying the plan", "Apply incomplete. Resources: 2 added, 0 rolled, 0 destroyed; 0 failed."},
		{"done", &controller.Result{Done: plan.Counts{Add: 1}}, nil, "", "Apply complete! Resources: 1 added, 0 rolled, 0 destroyed."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, stdout, stderr := newTestMeta(t)
			code := m.reportApply("Apply", p, tc.res, tc.err, false)
			if want := map[bool]int{true: 1, false: 0}[tc.err != nil]; code != want {
				t.Errorf("exit %d, want %d", code, want)
			}
			if tc.summary != "" && !strings.Contains(stderr.String(), tc.summary) {
				t.Errorf("stderr lacks %q:\n%s", tc.summary, stderr)
			}
			if got := strings.TrimSpace(stdout.String()); got != tc.resources {
				t.Errorf("stdout %q, want %q", got, tc.resources)
			}
		})
	}
}
