package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/mattn/go-isatty"
	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/state"
)

// ApplyCommand is `infrakit apply`: it plans (or reads a saved plan) and
// makes it so.
type ApplyCommand struct {
	Meta
}

// Run applies. Exit status 0 when everything planned was done, 1 otherwise.
func (c *ApplyCommand) Run(args []string) int {
	fs, sf := c.stackFlagSet("apply")
	autoApprove := fs.Bool("auto-approve", false, "apply without asking for approval")
	sf.forceLineage = fs.Bool("force-lineage", false, "adopt a state of another lineage than the one this directory last used")
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 1 {
		c.Ui.Error(fmt.Sprintf("The apply command takes at most one argument, a saved plan file; got %q.\n", rest))
		return cli.RunResultHelp
	}
	if *sf.parallelism < 1 {
		c.Ui.Error(fmt.Sprintf("-parallelism must be at least 1; got %d.\n", *sf.parallelism))
		return cli.RunResultHelp
	}
	planFile := ""
	if len(rest) == 1 {
		planFile = rest[0]
		if len(*sf.files) > 0 {
			c.Ui.Error("A saved plan holds its stack; -f cannot be used with a plan file.\n")
			return cli.RunResultHelp
		}
		if c.hasVarFlags() {
			// As Terraform: the plan was made with its variables' values,
			// which it records; it is applied with those or not at all.
			c.Ui.Error("Can't set variables when applying a saved plan: the plan holds the values it was made with. " +
				"Make a new plan with these -var and -var-file flags instead.\n")
			return cli.RunResultHelp
		}
	}
	if *sf.jsonOut && !*autoApprove && planFile == "" {
		c.Ui.Error("-json cannot ask for approval: use it with -auto-approve or a saved plan file.\n")
		return cli.RunResultHelp
	}

	var progress *progressPrinter
	if !*sf.jsonOut {
		progress = c.newProgressPrinter()
	}
	r, err := c.runner("apply", sf, progress.callback())
	if err != nil {
		c.showError("Error preparing the apply", err)
		return 1
	}
	defer c.closeRunner(r)

	var p *plan.Plan
	if planFile != "" {
		if p, err = readPlan(c.ClientPath(planFile)); err != nil {
			c.showError("Error reading the saved plan", err)
			return 1
		}
	} else {
		var files map[string]*hcl.File
		var ok bool
		if p, files, ok = c.makePlan(r, false); !ok {
			return 1
		}
		if !*sf.jsonOut {
			if err := c.renderPlan(r, p, *sf.noColor); err != nil {
				c.showError("Error writing the plan", err)
				return 1
			}
		}
		if c.reportUnknown(files, p) {
			return 1
		}
		if p.HasChanges() && !*autoApprove {
			if err := c.approve("apply", "Do you want to perform these actions?",
				"infrakit will perform the actions described above."); err != nil {
				c.showError("Apply cancelled", err)
				return 1
			}
		}
	}
	if !*sf.jsonOut && planFile == "" && p.HasChanges() {
		c.Ui.Output("") // between the plan shown and the progress
	}
	res, err := r.Apply(c.Context(), p)
	// A running watch may write the state between the plan and the apply.
	// An auto-approved plan made by this run is simply made again (a few
	// times at most); a plan the user approved or saved is never swapped.
	for try := 0; try < 3 && planFile == "" && *autoApprove && (errors.Is(err, plan.ErrStalePlan) || errors.Is(err, plan.ErrWorldMoved)); try++ {
		c.Ui.Warn("The state or the world changed while planning (is a watch running?); planning again.")
		again, _, ok := c.makePlan(r, false)
		if !ok {
			return 1
		}
		p = again
		res, err = r.Apply(c.Context(), p)
	}
	progress.finish()
	code := c.reportApply("Apply", p, res, err, *sf.jsonOut)
	if !*sf.jsonOut && res != nil {
		if doc, err := r.State(c.Context()); err == nil {
			c.writeOutputs(doc, p.Desired)
		}
	}
	return code
}

func readPlan(path string) (*plan.Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return plan.Load(f)
}

// errNotApproved is an approval that was not given.
var errNotApproved = errors.New("only 'yes' is accepted to approve")

// approve asks the user to type "yes" before the command's action (verb:
// "apply", "destroy"), as askApproval asks.
func (m *Meta) approve(verb, question, detail string) error {
	answer, err := m.askApproval(verb, fmt.Sprintf("%s\n  %s\n  Only 'yes' will be accepted to approve.\n\n  Enter a value:", question, detail))
	if err != nil {
		return err
	}
	if strings.TrimSpace(answer) != "yes" {
		return errNotApproved
	}
	return nil
}

// askApproval asks prompt on the terminal and returns what was typed.
// Without a terminal to ask on (stdin closed, redirected from a file or
// /dev/null) it refuses at once rather than hang or guess, and says how to
// go on without asking (-auto-approve to verb). The remote CLI asks the
// questions of a remote command with it.
func (m *Meta) askApproval(verb, prompt string) (string, error) {
	if f, ok := m.stdin().(*os.File); ok && !isatty.IsTerminal(f.Fd()) && !isatty.IsCygwinTerminal(f.Fd()) {
		return "", fmt.Errorf("cannot ask for approval: stdin is not a terminal; run with -auto-approve to %s without asking", verb)
	}
	answer, err := m.Ui.Ask(prompt)
	if err != nil {
		return "", fmt.Errorf("no answer (%v); run with -auto-approve to %s without asking", err, verb)
	}
	return answer, nil
}

// stdin is where Ui reads answers from, when it can be told.
func (m *Meta) stdin() io.Reader {
	ui := m.Ui
	if c, ok := ui.(*cli.ConcurrentUi); ok {
		ui = c.Ui
	}
	if b, ok := ui.(*cli.BasicUi); ok {
		return b.Reader
	}
	return nil
}

// applyJSON is the -json result of apply, destroy and the verbs that act:
// "summary" counts the steps done, with the fields (and names) of the
// plan's summary, and "planned" is that summary, so the two compare field
// by field.
type applyJSON struct {
	Stack   string        `json:"stack"`
	Changes bool          `json:"changes"`
	Summary plan.Counts   `json:"summary"`
	Planned plan.Counts   `json:"planned"`
	Failed  []failureJSON `json:"failed"`
	// Skipped counts the steps that waited for a failed one; NotRun those
	// an interrupt kept from starting.
	Skipped int    `json:"skipped"`
	NotRun  int    `json:"not_run"`
	Error   string `json:"error,omitempty"`
}

type failureJSON struct {
	Object   string `json:"object"`
	Step     int    `json:"step"`
	Kind     string `json:"kind"`
	Instance string `json:"instance,omitempty"`
	Error    string `json:"error"`
}

// maxFailuresShown caps the per-step errors printed: a cloud refusing
// thousands of creates says the same thing thousands of times.
const maxFailuresShown = 20

// reportApply renders the outcome of a plan's execution and returns the
// exit status. A result that is nil was refused before anything ran (a
// stale or foreign saved plan, the state lock, an unreadable state): the
// error alone is shown, without a "Resources:" line of zeros that would
// read as if something had been tried.
func (m *Meta) reportApply(verb string, p *plan.Plan, res *controller.Result, err error, jsonOut bool) int {
	refused := res == nil && err != nil
	if res == nil {
		res = &controller.Result{Plan: p}
	}
	code := 0
	if err != nil || len(res.Failed) > 0 {
		code = 1
	}
	if jsonOut {
		out := applyJSON{Failed: []failureJSON{}, Summary: res.Done, Skipped: res.Skipped, NotRun: res.NotRun}
		if p != nil {
			out.Stack, out.Changes, out.Planned = p.Stack, p.HasChanges(), p.Summary
		}
		for _, f := range res.Failed {
			out.Failed = append(out.Failed, failureJSON{Object: f.Step.Object, Step: int(f.Step.ID), Kind: string(f.Step.Kind),
				Instance: string(f.Instance), Error: f.Err.Error()})
		}
		if err != nil {
			out.Error = err.Error()
		}
		if werr := m.WriteJSON(out); werr != nil {
			return 1
		}
		return code
	}
	m.showFailures(res)
	if err != nil {
		summary := "Error applying the plan"
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			summary = verb + " interrupted"
		}
		m.showError(summary, err)
	}
	if refused {
		return code
	}
	followers := p != nil && (len(p.Ingresses)+len(p.Enrollments) > 0)
	counts := res.Done.DonePhrase(followers)
	if verb == "Destroy" && !followers {
		counts = fmt.Sprintf("%d destroyed", res.Done.Destroy)
	}
	switch {
	case code == 0:
		m.Ui.Output(fmt.Sprintf("%s complete! Resources: %s.", verb, counts))
	default:
		tail := fmt.Sprintf("%d failed", len(res.Failed))
		if res.Skipped > 0 {
			tail += fmt.Sprintf(", %d skipped because a step they wait for failed", res.Skipped)
		}
		if res.NotRun > 0 {
			tail += fmt.Sprintf(", %d not started", res.NotRun)
		}
		m.Ui.Output(fmt.Sprintf("%s incomplete. Resources: %s; %s.", verb, counts, tail))
	}
	return code
}

// showFailures shows each failed step as an error diagnostic (at most
// maxFailuresShown of them).
func (m *Meta) showFailures(res *controller.Result) {
	if res == nil {
		return
	}
	var diags hcl.Diagnostics
	for i, f := range res.Failed {
		if i == maxFailuresShown {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError,
				Summary: fmt.Sprintf("%d more steps failed", len(res.Failed)-maxFailuresShown)})
			break
		}
		summary := fmt.Sprintf("%s: %s failed", f.Step.Object, stepNoun(f.Step.Kind))
		if f.Instance != "" {
			summary = fmt.Sprintf("%s: %s of instance %s failed", f.Step.Object, stepNoun(f.Step.Kind), f.Instance)
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: f.Err.Error()})
	}
	m.ShowDiagnostics(nil, diags)
}

// stepNoun names a step kind for people.
func stepNoun(k plan.StepKind) string {
	switch k {
	case plan.StepProvision:
		return "provisioning"
	case plan.StepAwait:
		return "waiting for"
	case plan.StepRegister:
		return "backend registration"
	case plan.StepDeregister:
		return "backend deregistration"
	case plan.StepAuthorize:
		return "authorization"
	case plan.StepRevoke:
		return "revocation"
	case plan.StepDrain:
		return "drain"
	case plan.StepDestroy:
		return "destroy"
	case plan.StepRecord:
		return "state record"
	}
	return string(k)
}

// showError writes err as an error diagnostic with the given summary. Lock
// and stale-plan errors get summaries of their own.
func (m *Meta) showError(summary string, err error) {
	var locked *state.LockedError
	switch {
	case errors.As(err, &locked):
		summary = "Error acquiring the state lock"
	case errors.Is(err, plan.ErrStalePlan), errors.Is(err, plan.ErrOtherState):
		summary = "Saved plan is stale"
	case errors.Is(err, operation.ErrNotInitialized):
		summary = "Providers not installed"
	}
	m.ShowDiagnostics(nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: err.Error()}})
}

// closeRunner stops the providers; a failure is only a warning by then.
func (m *Meta) closeRunner(r *operation.Runner) {
	if err := r.Close(); err != nil {
		m.Ui.Warn(fmt.Sprintf("Warning: stopping providers: %s", err))
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// color reports whether to color output: on a terminal, unless -no-color,
// NO_COLOR (any value, https://no-color.org) or TERM=dumb says otherwise.
func (m *Meta) color(noColor bool) bool {
	return !noColor && colorAllowed(os.Getenv) && (m.Terminal || isTerminal(m.Stdout))
}

// colorAllowed reports whether the environment allows ANSI colors.
func colorAllowed(getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// Progress rendering.
const (
	// largeStep is the size above which a step is not reported line by line.
	largeStep = 50
	// barWidth is the width of the progress bar between its brackets.
	barWidth = 30
	// barRedraw limits how often the bar is redrawn.
	barRedraw = 100 * time.Millisecond
)

// progressPrinter renders the progress of a plan's execution: a line per
// step for small kinds of work (`group.miners: Creating instance... [3/5]`);
// for large ones a bar redrawn in place on a terminal, or a line at every
// tenth otherwise. Errors are always printed. A nil printer prints nothing.
type progressPrinter struct {
	out io.Writer
	ui  cli.Ui
	tty bool

	mu      sync.Mutex
	drawn   time.Time
	barOpen bool // a bar is on screen without its newline
}

func (m *Meta) newProgressPrinter() *progressPrinter {
	return &progressPrinter{out: m.Stdout, ui: m.Ui, tty: m.Terminal || isTerminal(m.Stdout)}
}

func (p *progressPrinter) callback() func(execute.Event) {
	if p == nil {
		return nil
	}
	return p.event
}

func (p *progressPrinter) event(ev execute.Event) {
	verb := progressVerb(ev)
	if verb == "" && ev.Err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	addr := ev.Step.Object
	if ev.Err != nil {
		p.closeBar()
		p.ui.Error(fmt.Sprintf("%s: Error: %v [%d/%d]", addr, ev.Err, ev.Done, ev.Total))
		return
	}
	switch {
	case ev.Total <= largeStep:
		p.ui.Output(fmt.Sprintf("%s: %s [%d/%d]", addr, verb, ev.Done, ev.Total))
	case p.tty:
		if ev.Done < ev.Total && time.Since(p.drawn) < barRedraw {
			return
		}
		filled := barWidth * ev.Done / ev.Total
		bar := strings.Repeat("=", filled)
		if filled < barWidth {
			bar += ">" + strings.Repeat(" ", barWidth-filled-1)
		}
		fmt.Fprintf(p.out, "\r%s: %s [%s] %d/%d", addr, verb, bar, ev.Done, ev.Total)
		p.drawn, p.barOpen = time.Now(), true
		if ev.Done == ev.Total {
			p.closeBar()
		}
	default:
		every := max(ev.Total/10, 1)
		if ev.Done%every == 0 || ev.Done == ev.Total {
			p.ui.Output(fmt.Sprintf("%s: %s [%d/%d]", addr, verb, ev.Done, ev.Total))
		}
	}
}

// progressVerb says what a finished step did ("" for steps not shown: the
// record of the intent, drains).
func progressVerb(ev execute.Event) string {
	s := ev.Step
	switch s.Kind {
	case plan.StepProvision:
		return "Creating instance..."
	case plan.StepAwait:
		return "Waiting for new instances to run..."
	case plan.StepDestroy:
		return fmt.Sprintf("Destroying instance %s...", s.Instance)
	case plan.StepRegister:
		return fmt.Sprintf("Registering backends on %s...", s.LoadBalancer)
	case plan.StepDeregister:
		return fmt.Sprintf("Deregistering backends from %s...", s.LoadBalancer)
	case plan.StepPublish, plan.StepRepublish:
		return fmt.Sprintf("Publishing route %s:%d...", s.LoadBalancer, s.Route.LoadBalancerPort)
	case plan.StepUnpublish:
		return fmt.Sprintf("Unpublishing route %s:%d...", s.LoadBalancer, s.Route.LoadBalancerPort)
	case plan.StepAuthorize:
		return "Authorizing members..."
	case plan.StepRevoke:
		return "Revoking authorizations..."
	}
	return ""
}

// closeBar ends a bar line left open (by an interrupt or an error).
func (p *progressPrinter) closeBar() {
	if p.barOpen {
		fmt.Fprintln(p.out)
		p.barOpen = false
	}
}

// finish ends the progress output.
func (p *progressPrinter) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeBar()
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *ApplyCommand) Synopsis() string {
	return "Create, update and destroy instances to match the stack"
}

// Help is the text of `infrakit apply -help`.
func (c *ApplyCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] apply [options] [PLANFILE]

  Makes the providers match the stack: plans as "infrakit plan" does, shows
  the plan and asks for approval, then creates, replaces and destroys
  instances with bounded parallelism. With PLANFILE (from "plan -out") it
  applies exactly that plan without asking, unless the state has changed
  since the plan was made.

  The state is written in batches while apply works, so an interrupt
  (Ctrl-C) loses nothing: the calls in flight finish, the state records
  every instance created, and running apply again converges without
  duplicates. A failed provider call is reported per instance while the
  rest of the work proceeds.

Options:

  -auto-approve        Apply without asking. Needed when stdin is not a
                       terminal.

  -json                Print the result as one JSON document (needs
                       -auto-approve or PLANFILE).

  -parallelism N       Provider calls in flight at once (default 10).

  -lock-timeout D      How long to wait for the state lock (default 30s).

  -no-color            Print without ANSI colors. Colors are also off when
                       NO_COLOR is set (to anything), TERM=dumb, or the
                       output is not a terminal.

  -force-lineage       Adopt the state although its lineage is not the one
                       this directory last used (recorded in
                       .infrakit/state-lineage). Without it every command
                       refuses such a state: it is another stack's state,
                       copied from another directory, whose instances would
                       be taken for this one's.

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

func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
