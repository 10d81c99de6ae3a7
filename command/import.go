package command

import (
	"fmt"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/plan"
	"github.com/infrakit/infrakit/internal/stateedit"
	"github.com/infrakit/infrakit/sdk/instance"
)

// ImportCommand is `infrakit import group.NAME ID...`.
type ImportCommand struct {
	Meta
}

// Run adopts existing instances into a group of the stack files, after
// showing what it will do and asking.
func (c *ImportCommand) Run(args []string) int {
	fs := c.FlagSet("import")
	autoApprove := fs.Bool("auto-approve", false, "import without asking for approval")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackFiles(fs)
	positional, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(positional) < 2 {
		c.Ui.Error("The import command needs a group's address and at least one instance ID: infrakit import group.NAME ID...\n")
		return cli.RunResultHelp
	}
	to, err := stateedit.ParseAddress(positional[0])
	if err == nil && (to.Kind != plan.KindGroup || to.IsInstance()) {
		err = fmt.Errorf("instances are imported into a group: group.NAME, not %s", to)
	}
	if err != nil {
		c.Ui.Error(err.Error() + "\n")
		return cli.RunResultHelp
	}
	ids := make([]instance.ID, 0, len(positional)-1)
	for _, id := range positional[1:] {
		ids = append(ids, instance.ID(id))
	}

	r, err := c.stateRunner("import", *files, *lockTimeout)
	if err != nil {
		c.showError("Error importing", err)
		return 1
	}
	defer c.closeRunner(r)
	st, srcFiles, diags := r.LoadStack(c.Context())
	c.ShowDiagnostics(srcFiles, diags)
	if diags.HasErrors() {
		return 1
	}
	confirm := func(e *stateedit.Edit) error {
		c.Ui.Output("infrakit will adopt these instances:\n")
		for _, line := range e.Changes {
			c.Ui.Output("  " + line)
		}
		c.Ui.Output("")
		if *autoApprove {
			return nil
		}
		err := c.approve("import", "Do you want to import these instances?",
			"infrakit will tag them as members of the group, as shown above; the next plan counts them.")
		c.Ui.Output("")
		return err
	}
	e, err := r.Import(c.Context(), st, to.Name, ids, confirm)
	if err != nil {
		c.showError("Error importing", err)
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Import complete: %s now in group %q. \"infrakit plan\" shows the group with them.",
		countOf(len(e.Relabels), "instance"), to.Name))
	return 0
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *ImportCommand) Synopsis() string { return "Adopt existing instances into a group" }

// Help is the text of `infrakit import -help`.
func (c *ImportCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] import group.NAME ID... [options]

  Adopts existing instances into group NAME of the stack files: each is
  tagged through the group's instance provider (its Label call) with the
  group's tags, infrakit.stack and infrakit.group, and for pets its logical
  ID. The next plan counts them as members; when the state holds the group,
  its record gains them at once. It shows what it will do and asks first.

  Refused, and nothing is imported, when an ID is not listed by the
  group's instance provider (of the group's type), when an instance belongs
  to another group (release it there with "infrakit state rm" first), or
  for pets when its logical ID is not one of the group's or is another
  member's. IDs that are members already are left alone.

  An instance keeps the configuration hash tag it has. One without the
  group's hash is out of date, and the next apply replaces it as a rolling
  update does, since infrakit cannot know it was made from the group's
  configuration; "infrakit state rm" followed by "infrakit import" of the
  same instances restores them exactly.

Options:

  -auto-approve       Import without asking for approval.

  -lock-timeout D     How long to wait for the state lock (default 30s).

  -f FILE             Also read this stack file (repeatable).
`)
}
