package command

import (
	"fmt"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
)

// ConvertCommand is `infrakit convert FILE...`: it prints specifications in
// the old formats (and any stack files given with them) as one HCL stack file.
type ConvertCommand struct {
	Meta
}

// Run loads the files as one stack and prints it with config's MarshalHCL:
// formatted as fmt writes, and loading back into the same stack.
func (c *ConvertCommand) Run(args []string) int {
	fs := c.FlagSet("convert")
	files := flagStackFiles(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	// The files may be named as arguments or with -f, as other commands
	// take them; they are read in the order given.
	rest = append(rest, *files...)
	if len(rest) == 0 {
		c.Ui.Error("The convert command needs the files to convert.\n")
		return cli.RunResultHelp
	}

	stack, diags := config.Load("", c.stackFilePaths(rest)...)
	c.ShowDiagnostics(stack.Files, diags)
	if diags.HasErrors() {
		return 1
	}
	out, err := stack.MarshalHCL()
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: cannot write the stack as HCL: %s", err))
		return 1
	}
	if _, err := c.Stdout.Write(out); err != nil {
		c.Ui.Error(fmt.Sprintf("Error: %s", err))
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *ConvertCommand) Synopsis() string {
	return "Print old-format specifications as an HCL stack file"
}

// Help is the text of `infrakit convert -help`.
func (c *ConvertCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] convert FILE... [-f FILE]...

  Reads the files as one stack and prints it as one HCL stack file, laid
  out as "infrakit fmt" writes it. The files are specifications in the old
  formats -- the legacy group JSON ({"ID": ..., "Properties": ...}) and the
  new schema (kind: group, ingress or enrollment; YAML or JSON) -- and may
  include *.hcl stack files.

  The output declares what the old formats left implied: a provider block
  for each plugin the specifications name ("simulator/compute" is provider
  simulator, type compute) and a loadbalancer block for each L4Plugin.
  Pass your stack file along (infrakit convert stack.hcl groups.json) to
  keep its stack block and provider settings; without a stack block the
  stack is named after the directory of the first file.

  Fields of the old formats that infrakit has no use for are reported as
  warnings on the standard error; the HCL is written to the standard
  output. Nothing else is read or changed.

  The files may also be named with -f FILE (repeatable), as other commands
  take stack files; they are read after the arguments.

  See website/migration.md for every old field and what it becomes.
`)
}
