package command

import (
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/stateedit"
)

// StateRemoveCommand is `infrakit state rm ADDRESS...`.
type StateRemoveCommand struct {
	Meta
}

// Run forgets the objects named, destroying nothing.
func (c *StateRemoveCommand) Run(args []string) int {
	fs := c.FlagSet("state rm")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackFiles(fs)
	addrs, ok := c.parseAddresses("state rm", fs, args, 1, -1)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.stateRunner("state rm", *files, *lockTimeout)
	if err != nil {
		c.showError("Error removing from the state", err)
		return 1
	}
	defer c.closeRunner(r)
	e, err := r.StateRemove(c.Context(), addrs)
	if err != nil {
		c.showError("Error removing from the state", err)
		return 1
	}
	c.showEdit(e)
	return 0
}

// showEdit prints what an edit did.
func (m *Meta) showEdit(e *stateedit.Edit) {
	for _, line := range e.Changes {
		m.Ui.Output(line)
	}
}

// Synopsis is the one-line description in `infrakit state -help`.
func (c *StateRemoveCommand) Synopsis() string { return "Forget objects without destroying them" }

// Help is the text of `infrakit state rm -help`.
func (c *StateRemoveCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] state rm ADDRESS... [options]

  Forgets objects: they leave the state, and nothing is destroyed.

  group.NAME.instance["ID"]  The member leaves its group: its record goes,
                             and the instance provider relabels it with an
                             empty infrakit.group tag, so no plan, watch or
                             "group ls" finds it by its tags again. The
                             group's size is unchanged, so the next apply
                             creates a replacement. "infrakit import" takes
                             it back.
  group.NAME                 The group's configuration and record go, and
                             every member the provider lists is released
                             the same way. A stack that still declares the
                             group plans it anew.
  ingress.NAME, enrollment.NAME
                             The block and its record go; the routes,
                             backends and authorizations stay, and a stack
                             that no longer declares it does not tear
                             them down.

  Ingresses and enrollments follow membership: the next apply or watch pass
  deregisters and revokes a released instance.

  The instances are relabeled first and the state stored last, so a command
  that fails half way can be run again.

Options:

  -lock-timeout D     How long to wait for the state lock (default 30s).

  -f FILE             Accepted, as by every command that reads the stack;
                      the state verbs read no stack file. Repeatable.
`)
}

// StateMoveCommand is `infrakit state mv FROM TO`.
type StateMoveCommand struct {
	Meta
}

// Run renames an object in the state, or moves a member to another group.
func (c *StateMoveCommand) Run(args []string) int {
	fs := c.FlagSet("state mv")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackFiles(fs)
	addrs, ok := c.parseAddresses("state mv", fs, args, 2, 2)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.stateRunner("state mv", *files, *lockTimeout)
	if err != nil {
		c.showError("Error moving in the state", err)
		return 1
	}
	defer c.closeRunner(r)
	e, err := r.StateMove(c.Context(), addrs[0], addrs[1])
	if err != nil {
		c.showError("Error moving in the state", err)
		return 1
	}
	c.showEdit(e)
	return 0
}

// Synopsis is the one-line description in `infrakit state -help`.
func (c *StateMoveCommand) Synopsis() string {
	return "Rename an object, or move a member to another group"
}

// Help is the text of `infrakit state mv -help`.
func (c *StateMoveCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] state mv FROM TO [options]

  Renames an object in the state, for a stack whose block was renamed, or
  moves a member to another group.

  group.A group.B            Group A becomes B: its configuration, its
                             record, and the stored ingress rules and
                             enrollments that name it. Every member is
                             relabeled infrakit.group = B. The configuration
                             hash ignores the name, so nothing rolls. B must
                             not be in the state yet.
  group.A.instance["ID"] group.B
                             The member moves to group B (served by the same
                             provider and type; for pets its logical ID must
                             be one of B's). It keeps its configuration
                             hash: if B's differs, the next apply rolls it.
  ingress.A ingress.B        The ingress is renamed.

  Enrollments are not moved: their authorizations carry the enrollment's
  name, and an authorizer cannot relabel them.

Options:

  -lock-timeout D     How long to wait for the state lock (default 30s).

  -f FILE             Accepted, as by every command that reads the stack;
                      the state verbs read no stack file. Repeatable.
`)
}
