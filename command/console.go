package command

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
)

// ConsoleCommand is `infrakit console`: expressions evaluated against the
// stack's variables and locals and the members the state records, one a
// line, as `terraform console` does.
type ConsoleCommand struct {
	Meta
}

// consoleFile names each input line in diagnostics.
const consoleFile = "<console-input>"

// Run reads expressions from stdin until it ends (or "exit"). Exit status
// 1 when the stack does not load or an expression failed.
func (c *ConsoleCommand) Run(args []string) int {
	fs := c.FlagSet("console")
	files := flagStackInputs(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The console command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}
	st, diags := c.loadStack(*files)
	c.ShowDiagnostics(st.Files, diags)
	if diags.HasErrors() {
		return 1
	}
	obs, err := c.consoleObserved(st)
	if err != nil {
		c.showError("Error reading the state", err)
		return 1
	}
	ctx := st.EvalContext(obs)
	in := c.stdin()
	if in == nil {
		in = os.Stdin
	}
	failed := false
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" {
			continue
		}
		if line == "exit" {
			break
		}
		if !c.evalLine(line, ctx) {
			failed = true
		}
	}
	if err := scanner.Err(); err != nil && err != io.EOF {
		c.showError("Error reading the input", err)
		return 1
	}
	if failed {
		return 1
	}
	return 0
}

// evalLine evaluates and prints one expression, or its diagnostics.
func (c *ConsoleCommand) evalLine(line string, ctx *hcl.EvalContext) bool {
	src := []byte(line)
	files := map[string]*hcl.File{consoleFile: {Bytes: src}}
	expr, diags := hclsyntax.ParseExpression(src, consoleFile, hcl.InitialPos)
	if diags.HasErrors() {
		c.ShowDiagnostics(files, diags)
		return false
	}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		c.ShowDiagnostics(files, diags)
		return false
	}
	if v.ContainsMarked() {
		c.Ui.Output(sensitiveValue)
		return true
	}
	c.Ui.Output(formatValue(v))
	return true
}

// consoleObserved is the members the state records; a group the state does
// not know yet has unknown members, shown as (known after apply).
func (c *ConsoleCommand) consoleObserved(st *config.Stack) (*config.Observed, error) {
	r, err := operation.New(c.Context(), operation.Options{WorkDir: c.WorkDir, Logger: c.Logger.Named("console")})
	if err != nil {
		return nil, err
	}
	defer c.closeRunner(r)
	doc, err := r.State(c.Context())
	if err != nil {
		return nil, err
	}
	obs := doc.Observed()
	obs.Unknown = map[string]bool{}
	for _, g := range st.Groups {
		if _, known := doc.Groups[g.Name]; !known {
			obs.Unknown[g.Name] = true
		}
	}
	return obs, nil
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *ConsoleCommand) Synopsis() string { return "Evaluate expressions against the stack and state" }

// Help is the text of `infrakit console -help`.
func (c *ConsoleCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] console [-var NAME=VALUE]... [-var-file FILE]... [-f FILE]...

  Reads expressions from stdin, one a line, and prints each one's value
  (or its error), as "terraform console" does: var.NAME, local.NAME, the
  functions, group.NAME (name, size, members: id, logical_id, address and
  state of each member the state records) and loadbalancer.NAME (name,
  provider, lb_ports). It stops at the end of the input or at "exit", so
  it works non-interactively:

      echo 'length(group.web.members)' | infrakit console

  A sensitive value is shown as (sensitive value); members of a group not
  applied yet as (known after apply). It changes nothing and asks no
  provider.

Options:

  -var NAME=VALUE      Set a stack variable, as for plan. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE              Also read FILE as a stack file. Repeatable.

  Exit status: 0 when every expression evaluated, 1 otherwise.
`)
}
