package command

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/sdk/instance"
)

// The group verbs that act: each plans the group's change and executes the
// plan, as apply does (operation's controller.Group).

// GroupScaleCommand is `infrakit group scale NAME [N]`.
type GroupScaleCommand struct {
	Meta
}

// Run prints the group's desired size, or sets it to N and converges.
func (c *GroupScaleCommand) Run(args []string) int {
	fs := c.FlagSet("group scale")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	parallelism := fs.Int("parallelism", operation.DefaultParallelism, "provider calls in flight at once")
	override := fs.Bool("override", false, "set the size of an autoscaled group (within its bounds)")
	name, rest, ok := c.parseGroupArgs("scale", fs, args, 0, 1)
	if !ok {
		return cli.RunResultHelp
	}
	size := -1
	if len(rest) == 1 {
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 0 {
			c.Ui.Error(fmt.Sprintf("The size must be a whole number of at least 0; got %q.\n", rest[0]))
			return cli.RunResultHelp
		}
		size = n
	}
	if *parallelism < 1 {
		c.Ui.Error(fmt.Sprintf("-parallelism must be at least 1; got %d.\n", *parallelism))
		return cli.RunResultHelp
	}

	opts := groupRunnerOptions{operation: "group scale", files: *files, lockTimeout: *lockTimeout, parallelism: *parallelism}
	var progress *progressPrinter
	if size >= 0 {
		progress = c.newProgressPrinter()
		opts.progress = progress.callback()
	}
	r, err := c.groupRunner(opts)
	if err != nil {
		c.showError("Error scaling the group", err)
		return 1
	}
	defer c.closeRunner(r)

	if size < 0 {
		return c.printSize(r, name)
	}
	res, err := r.Groups().SetSize(c.Context(), name, size, controller.ScaleOptions{Override: *override})
	progress.finish()
	failed := c.reportGroupResult(res)
	if err != nil {
		c.showError("Error scaling the group", err)
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Group %q scaled to %d: %d created, %d destroyed%s.", name, size,
		res.Done.Add+res.Done.Replace, res.Done.Destroy, followerPhrase(res)))
	if failed {
		return 1
	}
	return 0
}

// printSize prints the group's desired size as the state records it: the
// size of cattle, the number of logical IDs of pets. Nothing else goes to
// stdout, so scripts can read it.
func (c *GroupScaleCommand) printSize(r *operation.Runner, name string) int {
	n, err := r.Groups().Size(c.Context(), name)
	if errors.Is(err, controller.ErrNotFound) {
		c.showError("No such group", err)
		return 1
	}
	if err != nil {
		c.showError("Error reading the state", err)
		return 1
	}
	c.Ui.Output(strconv.Itoa(n))
	return 0
}

// Synopsis is the one-line description in `infrakit group -help`.
func (c *GroupScaleCommand) Synopsis() string { return "Print a group's size, or set it and converge" }

// Help is the text of `infrakit group scale -help`.
func (c *GroupScaleCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] group scale NAME [N] [options]

  Without N, prints the group's desired size (for pets, the number of
  logical IDs) and nothing else.

  With N, sets the group's desired size to N in the state and creates or
  destroys instances until the group has N, printing progress, before it
  returns. Scaling in removes pending, unhealthy and out-of-date instances
  before healthy current ones. Only cattle (groups with a size) can be
  scaled; pets follow their logical_ids.

  The new size lives in the state, not in the stack files: the next
  "infrakit plan" shows the difference to the size the files declare, and
  "infrakit apply" goes back to it. Edit the files to keep a new size.

  A group with an autoscale block is sized by its autoscaler ("infrakit
  watch" runs it): setting its size is refused unless -override is given,
  and even then the size must lie within the block's min and max. The
  autoscaler resumes from the size set once its cooldown has passed.

Options:

  -override           Set the size of an autoscaled group anyway (within
                      its min and max).

  -parallelism N      Provider calls in flight at once (default 10).

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

// GroupDestroyInstancesCommand is `infrakit group destroy-instances NAME ID...`.
type GroupDestroyInstancesCommand struct {
	Meta
}

// Run destroys the named members; cattle shrink by as many.
func (c *GroupDestroyInstancesCommand) Run(args []string) int {
	fs := c.FlagSet("group destroy-instances")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	parallelism := fs.Int("parallelism", operation.DefaultParallelism, "provider calls in flight at once")
	name, rest, ok := c.parseGroupArgs("destroy-instances", fs, args, 1, -1)
	if !ok {
		return cli.RunResultHelp
	}
	if *parallelism < 1 {
		c.Ui.Error(fmt.Sprintf("-parallelism must be at least 1; got %d.\n", *parallelism))
		return cli.RunResultHelp
	}
	ids := make([]instance.ID, len(rest))
	for i, id := range rest {
		ids[i] = instance.ID(id)
	}

	progress := c.newProgressPrinter()
	r, err := c.groupRunner(groupRunnerOptions{
		operation: "group destroy-instances", files: *files, lockTimeout: *lockTimeout, parallelism: *parallelism,
		progress: progress.callback(),
	})
	if err != nil {
		c.showError("Error destroying instances", err)
		return 1
	}
	defer c.closeRunner(r)

	res, err := r.Groups().DestroyInstances(c.Context(), name, ids)
	progress.finish()
	failed := c.reportGroupResult(res)
	if err != nil {
		c.showError("Error destroying instances", err)
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Destroyed %d of the %s named in group %q%s.", res.Done.Destroy, countOf(len(ids), "instance"), name, followerPhrase(res)))
	if failed {
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit group -help`.
func (c *GroupDestroyInstancesCommand) Synopsis() string {
	return "Destroy chosen instances of a group"
}

// Help is the text of `infrakit group destroy-instances -help`.
func (c *GroupDestroyInstancesCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] group destroy-instances NAME ID... [options]

  Destroys the named instances of the group. For cattle the desired size in
  the state drops by as many, so the group does not grow them back (run
  "infrakit apply" to return to the size the stack files declare). For pets
  the logical IDs stay: the next apply provisions them again.

Options:

  -parallelism N      Provider calls in flight at once (default 10).

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

// GroupFreeCommand is `infrakit group free NAME`.
type GroupFreeCommand struct {
	Meta
}

// Run marks the group freed in the state; no provider is called to change
// anything.
func (c *GroupFreeCommand) Run(args []string) int {
	fs := c.FlagSet("group free")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	name, _, ok := c.parseGroupArgs("free", fs, args, 0, 0)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.groupRunner(groupRunnerOptions{operation: "group free", files: *files, lockTimeout: *lockTimeout})
	if err != nil {
		c.showError("Error freeing the group", err)
		return 1
	}
	defer c.closeRunner(r)

	if _, _, err := r.Groups().Free(c.Context(), &controller.Metadata{Name: name}); err != nil {
		c.showError("Error freeing the group", err)
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Group %q is freed: infrakit no longer manages it and left its instances as they are.\n"+
		"Run \"infrakit apply\" to manage it again.", name))
	return 0
}

// Synopsis is the one-line description in `infrakit group -help`.
func (c *GroupFreeCommand) Synopsis() string {
	return "Stop managing a group, leaving its instances alone"
}

// Help is the text of `infrakit group free -help`.
func (c *GroupFreeCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] group free NAME [options]

  Stops managing the group: infrakit touches none of its instances, and
  neither apply nor watch creates or destroys any for it. The instances and
  their tags stay as they are. "infrakit plan" shows the group as "resume"
  while it is in the stack files; the next "infrakit apply" manages it
  again. A freed group removed from the stack files is never destroyed by
  surprise: its instances are left alone.

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

// GroupDestroyCommand is `infrakit group destroy NAME [-auto-approve]`.
type GroupDestroyCommand struct {
	Meta
}

// Run destroys every member of the group, after asking unless -auto-approve.
func (c *GroupDestroyCommand) Run(args []string) int {
	fs := c.FlagSet("group destroy")
	autoApprove := fs.Bool("auto-approve", false, "destroy without asking")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	parallelism := fs.Int("parallelism", operation.DefaultParallelism, "provider calls in flight at once")
	name, _, ok := c.parseGroupArgs("destroy", fs, args, 0, 0)
	if !ok {
		return cli.RunResultHelp
	}
	if *parallelism < 1 {
		c.Ui.Error(fmt.Sprintf("-parallelism must be at least 1; got %d.\n", *parallelism))
		return cli.RunResultHelp
	}

	progress := c.newProgressPrinter()
	r, err := c.groupRunner(groupRunnerOptions{
		operation: "group destroy", files: *files, lockTimeout: *lockTimeout, parallelism: *parallelism,
		progress: progress.callback(),
	})
	if err != nil {
		c.showError("Error destroying the group", err)
		return 1
	}
	defer c.closeRunner(r)

	if !*autoApprove {
		views, err := c.groupViews(r, []string{name})
		if err != nil || len(views) != 1 {
			c.showError("Error destroying the group", err)
			return 1
		}
		v := views[0]
		// The same question apply and destroy ask; "yes" alone approves.
		if err := c.approve("destroy", fmt.Sprintf("Do you really want to destroy group %q?", name),
			fmt.Sprintf("infrakit will destroy all %d of its instances and remove the group from the state. There is no undo.",
				len(v.Instances))); err != nil {
			c.showError("Destroy cancelled", err)
			return 1
		}
	}
	res, err := r.Groups().Destroy(c.Context(), &controller.Metadata{Name: name})
	progress.finish()
	failed := c.reportGroupResult(res)
	if err != nil {
		c.showError("Error destroying the group", err)
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Group %q destroyed: %s%s.", name, countOf(res.Done.Destroy, "instance")+" destroyed", followerPhrase(res)))
	if failed {
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit group -help`.
func (c *GroupDestroyCommand) Synopsis() string { return "Destroy a group and all its instances" }

// Help is the text of `infrakit group destroy -help`.
func (c *GroupDestroyCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] group destroy NAME [options]

  Destroys every instance of the group and removes the group from the
  state, after asking for confirmation. If the group is still in the stack
  files, the next "infrakit apply" creates it again; remove it from the
  files to be rid of it.

Options:

  -auto-approve       Destroy without asking.

  -parallelism N      Provider calls in flight at once (default 10).

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
