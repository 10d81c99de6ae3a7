package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// outputsJSON is `output -json` as a script reads it.
type outputsJSON map[string]struct {
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type"`
	Value     json.RawMessage `json:"value"`
}

func (w *workdir) outputs() outputsJSON {
	w.t.Helper()
	res := w.ok("output", "-json")
	var out outputsJSON
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		w.t.Fatalf("output -json: %v\n%s", err, res)
	}
	return out
}

// addresses is output "addresses" (group.web.members[*].address).
func (w *workdir) addresses() []string {
	w.t.Helper()
	var addrs []string
	if err := json.Unmarshal(w.outputs()["addresses"].Value, &addrs); err != nil {
		w.t.Fatalf("addresses: %v", err)
	}
	return addrs
}

// plannedSize is the size plan -json says group web will have.
func (w *workdir) plannedSize(args ...string) int {
	w.t.Helper()
	res := w.ok(append([]string{"plan", "-json"}, args...)...)
	var p planJSON
	if err := json.Unmarshal([]byte(res.stdout), &p); err != nil {
		w.t.Fatalf("plan -json: %v\n%s", err, res)
	}
	for _, g := range p.Groups {
		if g.Group == "web" {
			return g.After
		}
	}
	w.t.Fatalf("plan has no group web: %s", res)
	return 0
}

// console runs `infrakit console` with input on stdin.
func (w *workdir) console(input string, args ...string) result {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "infrakit"), append([]string{"console"}, args...)...)
	cmd.Dir, cmd.Env, cmd.Stdin = w.dir, w.env, strings.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{args: append([]string{"console"}, args...), stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		w.t.Fatalf("console: %v", err)
	}
	return res
}

// TestLanguagePrecedence gives var.size a value from each source in turn
// and checks the plan takes the one Terraform's order says wins: the
// environment < infrakit.ivars < *.auto.ivars (name order) < -var-file
// and -var in command-line order.
func TestLanguagePrecedence(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/lang")
	w.init()
	if got := w.plannedSize(); got != 2 {
		t.Fatalf("default: size %d, want 2", got)
	}
	w.env = append(w.env, "INFRAKIT_VAR_size=1")
	steps := []struct {
		file, content string
		args          []string
		want          int
	}{
		{want: 1},
		{file: "infrakit.ivars", content: "size = 2\n", want: 2},
		{file: "b.auto.ivars", content: "size = 4\n", want: 4},
		{file: "a.auto.ivars.json", content: `{"size": 3}`, want: 4}, // b after a
		{file: "x.ivars", content: "size = 6\n", args: []string{"-var-file", "x.ivars"}, want: 6},
		{args: []string{"-var-file", "x.ivars", "-var", "size=7"}, want: 7},
		{args: []string{"-var", "size=7", "-var-file", "x.ivars"}, want: 6},
	}
	for _, s := range steps {
		if s.file != "" {
			w.writeFile(s.file, s.content)
		}
		if got := w.plannedSize(s.args...); got != s.want {
			t.Fatalf("after %s %v: size %d, want %d", s.file, s.args, got, s.want)
		}
	}
}

// TestLanguageApplyOutputs applies the language stack with values of
// every type from the command line and a variable file, and reads its
// outputs: the members' addresses follow a scale, a sensitive value is
// never printed, the console sees the state's members, and a saved plan
// keeps the values it was made with.
func TestLanguageApplyOutputs(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/lang")
	w.init()
	w.writeFile("prod.ivars", "labels = { team = \"ops\" }\ndb = { host = \"db.prod\", port = 6432 }\n")
	args := []string{"-var", "size=3", "-var", "public=true", "-var", "ports=[81]", "-var-file", "prod.ivars", "-var", "token=hunter2-secret"}

	plan := w.ok(append([]string{"plan"}, args...)...)
	for _, want := range []string{"Changes to Outputs:", "+ addresses = (known after apply)", `+ prefix = "WEB"`, "+ front_ports = [81]", "+ token = (sensitive value)"} {
		if !strings.Contains(plan.stdout, want) {
			t.Errorf("plan does not show %q:\n%s", want, plan.stdout)
		}
	}
	apply := w.ok(append([]string{"apply", "-auto-approve"}, args...)...)
	if !strings.Contains(apply.stdout, "Outputs:\n\naddresses = [") || !strings.Contains(apply.stdout, "token = (sensitive value)") {
		t.Errorf("apply does not print the outputs:\n%s", apply.stdout)
	}
	for _, r := range []result{plan, apply, w.ok("output"), w.ok("output", "-json"), w.ok("output", "token")} {
		if strings.Contains(r.stdout+r.stderr, "hunter2-secret") {
			t.Fatalf("the sensitive value is printed: %s", r)
		}
	}

	// The values reached the provider: the instances carry them.
	for _, in := range w.groups()["web"].Instances {
		if in.Tags["team"] != "ops" || in.Tags["exposed"] != "true" {
			t.Errorf("instance %s tags = %v, want team=ops and exposed=true", in.ID, in.Tags)
		}
	}
	addrs := w.addresses()
	if len(addrs) != 3 || slices.Contains(addrs, "") {
		t.Fatalf("addresses = %q, want 3 addresses", addrs)
	}
	out := w.outputs()
	if compact(out["count"].Value) != "3" || compact(out["prefix"].Value) != `"WEB"` || compact(out["front_ports"].Value) != "[81]" {
		t.Errorf("outputs = %s", w.ok("output", "-json").stdout)
	}
	if !out["token"].Sensitive || out["token"].Value != nil {
		t.Errorf("token output = %+v, want sensitive without a value", out["token"])
	}

	// A scale changes the members, and so the outputs.
	w.ok("group", "scale", "web", "1")
	after := w.addresses()
	if len(after) != 1 || !slices.Contains(addrs, after[0]) {
		t.Fatalf("after scale to 1: addresses = %q, want one of %q", after, addrs)
	}
	if got := strings.TrimSpace(w.ok("output", "count").stdout); got != "1" {
		t.Errorf("output count = %q, want 1", got)
	}

	// The console evaluates against the variables and the state's members.
	con := w.console("length(group.web.members)\nupper(var.name)\nvar.token\ngroup.web.members[0].address\n", "-var", "name=api")
	wantLines := []string{"1", `"API"`, "(sensitive value)", `"` + after[0] + `"`}
	if con.code != 0 || strings.Join(strings.Fields(con.stdout), " ") != strings.Join(wantLines, " ") {
		t.Errorf("console = %s, want %q", con, wantLines)
	}
	bad := w.console("nosuch(1)\nlength(var.ports)\n")
	if bad.code != 1 || !strings.Contains(bad.stderr, "Call to unknown function") || strings.TrimSpace(bad.stdout) != "1" {
		t.Errorf("console with an error = %s", bad)
	}

	// A saved plan keeps its values and refuses new ones.
	w.ok("plan", "-var", "size=2", "-out", "two.plan")
	refused := w.expect(1, "apply", "-var", "size=2", "two.plan")
	if !strings.Contains(refused.stderr, "Can't set variables when applying a saved plan") {
		t.Errorf("apply PLANFILE -var: %s", refused)
	}
	w.ok("apply", "two.plan")
	if n := len(w.addresses()); n != 2 {
		t.Errorf("after applying the saved plan: %d addresses, want 2", n)
	}
}

// TestLanguageBadInput: each mistake is a diagnostic with the file and
// line, and nothing runs.
func TestLanguageBadInput(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/lang")
	w.init()
	tests := []struct {
		name    string
		file    string // an extra stack file
		args    []string
		summary string
		at      string
	}{
		{name: "undeclared variable", args: []string{"-var-file", "bad.ivars"}, file: "bad.ivars", summary: "Value for undeclared variable", at: "bad.ivars:1"},
		{name: "wrong type", file: "bad.ivars", args: []string{"-var-file", "bad.ivars"}, summary: "Invalid value for variable", at: "bad.ivars:1"},
		{name: "failed validation", args: []string{"-var", "size=99"}, summary: "Invalid value for variable", at: "stack.hcl:18"},
		{name: "cycle between locals", file: "cycle.hcl", summary: "Cycle in local values", at: "cycle.hcl:2"},
		{name: "unknown function", file: "fn.hcl", summary: "Call to unknown function", at: "fn.hcl:2"},
		{name: "undeclared reference", file: "ref.hcl", summary: "Reference to undeclared input variable", at: "ref.hcl:2"},
	}
	contents := map[string]map[string]string{
		"undeclared variable":  {"bad.ivars": "sise = 3\n"},
		"wrong type":           {"bad.ivars": "ports = \"eighty\"\n"},
		"cycle between locals": {"cycle.hcl": "locals {\n  a = local.b\n  b = local.a\n}\n"},
		"unknown function":     {"fn.hcl": "locals {\n  x = sizeof(var.ports)\n}\n"},
		"undeclared reference": {"ref.hcl": "output \"x\" {\n  value = var.nope\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, src := range contents[tt.name] {
				w.writeFile(name, src)
				defer w.remove(name)
			}
			for _, cmd := range [][]string{{"validate"}, {"plan"}, {"apply", "-auto-approve"}} {
				res := w.expect(1, append(cmd, tt.args...)...)
				if !strings.Contains(res.stderr, tt.summary) || !strings.Contains(res.stderr, tt.at) {
					t.Errorf("want %q at %s; %s", tt.summary, tt.at, res)
				}
			}
			if ids := w.simulatorInstances("compute"); len(ids) != 0 {
				t.Fatalf("instances were made: %v", ids)
			}
		})
	}
}

func (w *workdir) remove(name string) {
	w.t.Helper()
	if err := os.Remove(filepath.Join(w.dir, name)); err != nil {
		w.t.Fatal(err)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
