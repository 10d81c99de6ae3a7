package command

import (
	"fmt"
	"strings"

	"github.com/mitchellh/cli"
)

// GroupStopUpdateCommand is `infrakit group stop-update NAME`.
type GroupStopUpdateCommand struct {
	Meta
}

// Run marks the group's rolling update stopped in the state, then shows
// how far the roll got.
func (c *GroupStopUpdateCommand) Run(args []string) int {
	fs := c.FlagSet("group stop-update")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	name, _, ok := c.parseGroupArgs("stop-update", fs, args, 0, 0)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.groupRunner(groupRunnerOptions{operation: "group stop-update", files: *files, lockTimeout: *lockTimeout})
	if err != nil {
		c.showError("Error stopping the rolling update", err)
		return 1
	}
	defer c.closeRunner(r)

	if err := r.Groups().StopUpdate(c.Context(), name); err != nil {
		c.showError("Error stopping the rolling update", err)
		return 1
	}
	msg := fmt.Sprintf("The rolling update of group %q is stopped: no more of its instances are replaced until the next \"infrakit apply\".", name)
	views, err := c.groupViews(r, []string{name})
	if err == nil && len(views) != 1 {
		err = fmt.Errorf("group %q: not described", name)
	}
	if err != nil {
		// The mark is stored; only the progress report failed.
		c.Ui.Output(msg)
		c.Ui.Warn(fmt.Sprintf("Warning: could not observe the group: %s", err))
		return 0
	}
	outdated, total := rollProgress(views[0])
	if outdated == 0 {
		all := fmt.Sprintf("All %d of its instances are", total)
		if total == 1 {
			all = "Its one instance is"
		}
		msg += "\n" + all + " up to date: there was no roll in progress."
	} else {
		verb := "are out of date and stay"
		if outdated == 1 {
			verb = "is out of date and stays"
		}
		msg += fmt.Sprintf("\n%d of its %s %s so.", outdated, countOf(total, "instance"), verb)
	}
	c.Ui.Output(msg)
	return 0
}

// Synopsis is the one-line description in `infrakit group -help`.
func (c *GroupStopUpdateCommand) Synopsis() string { return "Halt a group's rolling update" }

// Help is the text of `infrakit group stop-update -help`.
func (c *GroupStopUpdateCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] group stop-update NAME [options]

  Halts the rolling update of the group: "infrakit watch" replaces no more
  of its out-of-date instances (replacements already created are finished,
  so the group keeps its size), and the group keeps its mix of old and new
  instances. The mark lives in the state; the next "infrakit apply" clears
  it and rolls again, from whatever configuration it applies.

  "infrakit group describe NAME" shows how many instances are out of date.

Options:

  -lock-timeout D     How long to wait for the state lock (default 30s).

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE             Accepted, as by every command that reads the stack,
                      so scripts can pass the same files everywhere; the
                      group verbs read no stack file. Repeatable.
`)
}
