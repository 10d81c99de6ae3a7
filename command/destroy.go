package command

import (
	"fmt"
	"strings"

	"github.com/mitchellh/cli"
)

// DestroyCommand is `infrakit destroy`: it destroys every instance of every
// group in the state.
type DestroyCommand struct {
	Meta
}

// Run plans the destruction from the state, asks, and applies it.
func (c *DestroyCommand) Run(args []string) int {
	fs, sf := c.stackFlagSet("destroy")
	autoApprove := fs.Bool("auto-approve", false, "destroy without asking for approval")
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The destroy command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}
	if *sf.parallelism < 1 {
		c.Ui.Error(fmt.Sprintf("-parallelism must be at least 1; got %d.\n", *sf.parallelism))
		return cli.RunResultHelp
	}
	if *sf.jsonOut && !*autoApprove {
		c.Ui.Error("-json cannot ask for approval: use it with -auto-approve.\n")
		return cli.RunResultHelp
	}

	var progress *progressPrinter
	if !*sf.jsonOut {
		progress = c.newProgressPrinter()
	}
	r, err := c.runner("destroy", sf, progress.callback())
	if err != nil {
		c.showError("Error preparing the destroy", err)
		return 1
	}
	defer c.closeRunner(r)

	p, files, ok := c.makePlan(r, true)
	if !ok {
		return 1
	}
	if !*sf.jsonOut {
		if !p.HasChanges() {
			c.Ui.Output("No changes. No instances need to be destroyed.")
		} else if err := c.renderPlan(r, p, *sf.noColor); err != nil {
			c.showError("Error writing the plan", err)
			return 1
		}
	}
	if c.reportUnknown(files, p) {
		return 1
	}
	if p.HasChanges() && !*autoApprove {
		if err := c.approve("destroy", "Do you really want to destroy all instances?",
			"infrakit will destroy every instance of the groups in the state, as shown above.\n  There is no undo."); err != nil {
			c.showError("Destroy cancelled", err)
			return 1
		}
		c.Ui.Output("")
	}
	res, err := r.Apply(c.Context(), p)
	progress.finish()
	return c.reportApply("Destroy", p, res, err, *sf.jsonOut)
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *DestroyCommand) Synopsis() string { return "Destroy every instance of the stack" }

// Help is the text of `infrakit destroy -help`.
func (c *DestroyCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] destroy [options]

  Destroys every instance of every group recorded in the state and removes
  the groups from the state. It works from the state alone, so it needs no
  stack files. Freed groups ("infrakit group free") are not managed, so
  their instances are left alone.

Options:

  -auto-approve        Destroy without asking. Needed when stdin is not a
                       terminal.

  -json                Print the result as one JSON document (needs
                       -auto-approve).

  -parallelism N       Provider calls in flight at once (default 10).

  -lock-timeout D      How long to wait for the state lock (default 30s).

  -no-color            Print without ANSI colors. Colors are also off when
                       NO_COLOR is set (to anything), TERM=dumb, or the
                       output is not a terminal.

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE              Accepted, as by every command that reads the stack;
                       destroy works from the state and reads no stack
                       file. Repeatable.
`)
}
