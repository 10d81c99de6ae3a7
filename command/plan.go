package command

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// PlanCommand is `infrakit plan`: it observes the providers and shows what
// apply would do.
type PlanCommand struct {
	Meta
}

// stackFlags are the flags plan, apply and destroy share.
type stackFlags struct {
	files       *fileFlag
	parallelism *int
	jsonOut     *bool
	lockTimeout *time.Duration
	noColor     *bool
	// forceLineage is apply's -force-lineage (nil for other commands).
	forceLineage *bool
}

func (m *Meta) stackFlagSet(name string) (*flag.FlagSet, *stackFlags) {
	fs := m.FlagSet(name)
	sf := &stackFlags{}
	sf.files = flagStackInputs(fs)
	sf.parallelism = fs.Int("parallelism", operation.DefaultParallelism, "provider calls in flight at once")
	sf.jsonOut = FlagJSON(fs)
	sf.lockTimeout = FlagLockTimeout(fs)
	sf.noColor = FlagNoColor(fs)
	return fs, sf
}

// runner starts an operation.Runner over the working directory.
func (m *Meta) runner(op string, sf *stackFlags, progress func(execute.Event)) (*operation.Runner, error) {
	return operation.New(m.Context(), operation.Options{
		WorkDir:     m.WorkDir,
		StackDir:    m.stackDir(),
		ExtraFiles:  m.stackFilePaths(*sf.files),
		Inputs:      m.inputs(),
		Logger:      m.Logger.Named(op),
		Parallelism: *sf.parallelism,
		LockTimeout: *sf.lockTimeout,
		Operation:   op,
		LockWait:    m.Stderr,
		// Only apply adopts a state of another lineage, when asked.
		ForceLineage: sf.forceLineage != nil && *sf.forceLineage,
		Progress:     progress,
	})
}

// Run plans and renders the plan. Exit status: 0 success (with
// -detailed-exitcode: no changes), 1 error, 2 changes with -detailed-exitcode.
func (c *PlanCommand) Run(args []string) int {
	fs, sf := c.stackFlagSet("plan")
	out := fs.String("out", "", "save the plan to this file, for `infrakit apply FILE`")
	detailed := fs.Bool("detailed-exitcode", false, "exit 2 when there are changes")
	destroy := fs.Bool("destroy", false, "plan the destruction of everything in state")
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The plan command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}
	if *sf.parallelism < 1 {
		c.Ui.Error(fmt.Sprintf("-parallelism must be at least 1; got %d.\n", *sf.parallelism))
		return cli.RunResultHelp
	}

	r, err := c.runner("plan", sf, nil)
	if err != nil {
		c.showError("Error preparing the plan", err)
		return 1
	}
	defer c.closeRunner(r)

	p, files, ok := c.makePlan(r, *destroy)
	if !ok {
		return 1
	}
	if *sf.jsonOut {
		if err := plan.RenderJSON(c.Stdout, p); err != nil {
			c.showError("Error writing the plan", err)
			return 1
		}
	} else if err := c.renderPlan(r, p, *sf.noColor); err != nil {
		c.showError("Error writing the plan", err)
		return 1
	}
	if *out != "" {
		if err := savePlan(c.ClientPath(*out), p); err != nil {
			c.showError("Error saving the plan", err)
			return 1
		}
		if !*sf.jsonOut {
			c.Ui.Output(fmt.Sprintf("\nSaved the plan to: %s\n\nTo perform exactly these actions, run:\n  infrakit apply %s", *out, *out))
		}
	}
	if c.reportUnknown(files, p) {
		return 1
	}
	if *detailed && p.HasChanges() {
		return 2
	}
	return 0
}

// makePlan loads the stack and computes the plan, reporting errors as
// diagnostics. A destroy plan works from the state alone: it needs no stack
// files, so broken or deleted ones never stand in the way of a destroy.
func (m *Meta) makePlan(r *operation.Runner, destroy bool) (*plan.Plan, map[string]*hcl.File, bool) {
	var files map[string]*hcl.File
	var st *config.Stack
	if !destroy {
		var diags hcl.Diagnostics
		st, files, diags = r.LoadStack(m.Context())
		m.ShowDiagnostics(files, diags)
		if diags.HasErrors() {
			return nil, files, false
		}
	}
	p, err := r.Plan(m.Context(), st, operation.PlanMode{Destroy: destroy})
	var diags hcl.Diagnostics
	switch {
	case errors.As(err, &diags):
		m.ShowDiagnostics(files, diags)
		return nil, files, false
	case err != nil:
		m.showError("Error computing the plan", err)
		return nil, files, false
	}
	return p, files, true
}

// renderPlan renders the plan for people, with the changes to outputs.
func (m *Meta) renderPlan(r *operation.Runner, p *plan.Plan, noColor bool) error {
	if err := plan.RenderHuman(m.Stdout, p, plan.HumanOptions{Color: m.color(noColor)}); err != nil {
		return err
	}
	doc, err := r.State(m.Context())
	if err != nil {
		return err
	}
	return writePlanOutputs(m.Stdout, p, doc)
}

// reportUnknown shows an error for each object that could not be observed
// and reports whether there was any.
func (m *Meta) reportUnknown(files map[string]*hcl.File, p *plan.Plan) bool {
	var diags hcl.Diagnostics
	add := func(kind, name, detail string) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError,
			Summary: fmt.Sprintf("%s %q could not be observed", kind, name), Detail: detail})
	}
	for _, g := range p.Groups {
		if g.Action == plan.ActionUnknown {
			add("Group", g.Group, g.Error)
		}
	}
	for _, c := range p.Ingresses {
		if c.Action == plan.ActionUnknown {
			add("Ingress", c.Ingress, c.Error)
		}
	}
	for _, c := range p.Enrollments {
		if c.Action == plan.ActionUnknown {
			add("Enrollment", c.Enrollment, c.Error)
		}
	}
	m.ShowDiagnostics(files, diags)
	return len(diags) > 0
}

// savePlan writes the plan file atomically (a failed save never leaves half
// a plan), 0600: a plan carries the stack's properties.
func savePlan(path string, p *plan.Plan) error {
	var buf bytes.Buffer
	if err := p.Save(&buf); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, buf.Bytes(), 0o600)
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *PlanCommand) Synopsis() string { return "Show what apply would change" }

// Help is the text of `infrakit plan -help`.
func (c *PlanCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] plan [options]

  Loads the stack, lists every group's instances from its provider (by the
  tags infrakit puts on them) and shows what apply would do: instances to
  create (+), groups to change in place (~), instances to replace because
  their configuration changed (-/+) and instances or groups to destroy (-).
  plan changes nothing.

  Health is asked only where the plan depends on it (which members a
  scale-down removes, rolling updates); replacing unhealthy members is the
  job of "infrakit watch".

Options:

  -out FILE            Save the plan, to apply exactly it with
                       "infrakit apply FILE". apply refuses it once the
                       state has changed.

  -detailed-exitcode   Exit 0 with no changes, 2 with changes, 1 on error.

  -destroy             Plan the destruction of every group in the state.

  -json                Print the plan as one JSON document.

  -parallelism N       Provider calls in flight at once (default 10).

  -lock-timeout D      How long to wait for the state lock (default 30s).

  -no-color            Print without ANSI colors. Colors are also off when
                       NO_COLOR is set (to anything), TERM=dumb, or the
                       output is not a terminal.

  -var NAME=VALUE      Set the stack variable NAME. The text is the value
                       of a string, number or bool variable, and an HCL
                       expression (["a", "b"], { k = "v" }) for other
                       types. Repeatable.

  -var-file FILE       Read variable values from FILE: name = value lines
                       in HCL, or a JSON object when FILE ends in .json.
                       Repeatable. -var and -var-file apply in the order
                       given, over INFRAKIT_VAR_NAME in the environment,
                       infrakit.ivars and *.auto.ivars.

  -f FILE              Also read FILE as a stack file. Repeatable.
`)
}
