package command

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/enrollment"
)

// EnrollmentCommand is the parent of the `infrakit enrollment` verbs.
type EnrollmentCommand struct{ Meta }

// Run prints the help, which lists the subcommands.
func (c *EnrollmentCommand) Run([]string) int { return cli.RunResultHelp }

// Synopsis is the one-line description in `infrakit -help`.
func (c *EnrollmentCommand) Synopsis() string { return "Describe, free and destroy enrollments" }

// Help is the text of `infrakit enrollment -help`.
func (c *EnrollmentCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] enrollment <describe|free|destroy> NAME

  An enrollment keeps an authorization list (NFS exports) in step with a
  group: one authorization per running member of its source group. apply
  and watch sync it; so do "group scale", "group destroy-instances" and
  "group destroy" for its source group.

  describe asks the target provider; free stops syncing (and touches
  nothing, unless the enrollment says destroy_on_free); destroy revokes
  its authorizations and removes it from the state.
`)
}

// EnrollmentDescribeCommand is `infrakit enrollment describe NAME [-json]`.
type EnrollmentDescribeCommand struct{ Meta }

// Run asks the target provider for the enrollment's authorizations.
func (c *EnrollmentDescribeCommand) Run(args []string) int {
	fs := c.FlagSet("enrollment describe")
	jsonOut := FlagJSON(fs)
	files := flagStackInputs(fs)
	name, ok := c.objectArgs("enrollment describe", "an enrollment", fs, args)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.objectRunner("enrollment describe", 0, *files)
	if err != nil {
		c.showError("Error describing the enrollment", err)
		return 1
	}
	defer c.closeRunner(r)
	objs, err := r.Enrollments().Describe(c.Context(), &controller.Metadata{Name: name})
	if err != nil {
		c.showError("Error describing the enrollment", err)
		return 1
	}
	freed := objs[0].Freed
	v := &enrollment.View{}
	if err := json.Unmarshal(objs[0].State, v); err != nil {
		c.showError("Error describing the enrollment", err)
		return 1
	}
	if *jsonOut {
		if v.Authorizations == nil {
			v.Authorizations = []enrollment.AuthorizationView{}
		}
		if err := c.WriteJSON(v); err != nil {
			return 1
		}
		return 0
	}
	status := ""
	if freed {
		status = " (free: not synced until the next apply)"
	}
	c.Ui.Output(fmt.Sprintf("Enrollment %q: %d authorizations%s", name, len(v.Authorizations), status))
	if len(v.Authorizations) == 0 {
		return 0
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tPROPERTIES")
	for _, a := range v.Authorizations {
		props := string(a.Properties)
		var compact any
		if json.Unmarshal(a.Properties, &compact) == nil {
			if b, err := json.Marshal(compact); err == nil {
				props = string(b)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", a.ID, a.SourceID, props)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit enrollment -help`.
func (c *EnrollmentDescribeCommand) Synopsis() string {
	return "List an enrollment's authorizations, asking the target"
}

// Help is the text of `infrakit enrollment describe -help`.
func (c *EnrollmentDescribeCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] enrollment describe NAME [-json] [-f FILE]...

  Asks the target provider of enrollment NAME for its authorizations.

Options:

  -json    Print {"enrollment": NAME, "authorizations": [{"id", "source_id",
           "properties"}]}.

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE  Also read FILE as a stack file (repeatable): NAME is looked up
           in the applied stack, or else in the stack files.
`)
}

// EnrollmentFreeCommand is `infrakit enrollment free NAME`.
type EnrollmentFreeCommand struct{ Meta }

// Run marks the enrollment free in the state.
func (c *EnrollmentFreeCommand) Run(args []string) int {
	fs := c.FlagSet("enrollment free")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	name, ok := c.objectArgs("enrollment free", "an enrollment", fs, args)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.objectRunner("enrollment free", *lockTimeout, *files)
	if err != nil {
		c.showError("Error freeing the enrollment", err)
		return 1
	}
	defer c.closeRunner(r)
	_, res, err := r.Enrollments().Free(c.Context(), &controller.Metadata{Name: name})
	failed := c.reportGroupResult(res)
	if err != nil {
		c.showError("Error freeing the enrollment", err)
		return 1
	}
	if failed {
		return 1
	}
	if res != nil && res.Done.Revoke > 0 {
		c.Ui.Output(fmt.Sprintf("Enrollment %q is free; it has destroy_on_free, so its %s were revoked. The next apply resumes it.", name, countOf(res.Done.Revoke, "authorization")))
		return 0
	}
	c.Ui.Output(fmt.Sprintf("Enrollment %q is free: its authorizations are no longer synced and were left as they are. The next apply resumes it.", name))
	return 0
}

// Synopsis is the one-line description in `infrakit enrollment -help`.
func (c *EnrollmentFreeCommand) Synopsis() string { return "Stop syncing an enrollment" }

// Help is the text of `infrakit enrollment free -help`.
func (c *EnrollmentFreeCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] enrollment free NAME [-lock-timeout D] [-var NAME=VALUE]... [-var-file FILE]... [-f FILE]...

  Stops syncing enrollment NAME. Its authorizations are left as they are,
  unless the enrollment sets destroy_on_free = true: then they are
  revoked. The next "infrakit apply" of a stack that declares it resumes it.
`)
}

// EnrollmentDestroyCommand is `infrakit enrollment destroy NAME`.
type EnrollmentDestroyCommand struct{ Meta }

// Run revokes the enrollment's authorizations.
func (c *EnrollmentDestroyCommand) Run(args []string) int {
	fs := c.FlagSet("enrollment destroy")
	autoApprove := fs.Bool("auto-approve", false, "destroy without asking")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	name, ok := c.objectArgs("enrollment destroy", "an enrollment", fs, args)
	if !ok {
		return cli.RunResultHelp
	}
	if !*autoApprove {
		if err := c.approve("destroy", fmt.Sprintf("Do you really want to destroy enrollment %q?", name),
			"infrakit will revoke every one of its authorizations."); err != nil {
			c.showError("Destroy cancelled", err)
			return 1
		}
	}
	r, err := c.objectRunner("enrollment destroy", *lockTimeout, *files)
	if err != nil {
		c.showError("Error destroying the enrollment", err)
		return 1
	}
	defer c.closeRunner(r)
	res, err := r.Enrollments().Destroy(c.Context(), &controller.Metadata{Name: name})
	failed := c.reportGroupResult(res)
	if err != nil {
		c.showError("Error destroying the enrollment", err)
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Enrollment %q destroyed: %s revoked.", name, countOf(res.Done.Revoke, "authorization")))
	if failed {
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit enrollment -help`.
func (c *EnrollmentDestroyCommand) Synopsis() string { return "Revoke an enrollment's authorizations" }

// Help is the text of `infrakit enrollment destroy -help`.
func (c *EnrollmentDestroyCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] enrollment destroy NAME [-auto-approve] [-lock-timeout D] [-f FILE]...

  Revokes every authorization of enrollment NAME and removes it from the
  state. An apply of a stack that still declares it authorizes the
  members again.

Options:

  -auto-approve    Destroy without asking. Needed when stdin is not a terminal.

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE          Also read FILE as a stack file (repeatable): NAME is
                   looked up in the applied stack, or else in the stack files.
`)
}
