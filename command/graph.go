package command

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/plan"
)

// GraphCommand is `infrakit graph`: the stack's dependency graph, or the
// plan's steps, in Graphviz's DOT language.
type GraphCommand struct {
	Meta
}

// Run prints the graph. Without -plan it reads only the stack files.
func (c *GraphCommand) Run(args []string) int {
	fs := c.FlagSet("graph")
	sf := &stackFlags{
		files:       flagStackInputs(fs),
		parallelism: fs.Int("parallelism", operation.DefaultParallelism, "provider calls in flight at once"),
		lockTimeout: FlagLockTimeout(fs),
	}
	withPlan := fs.Bool("plan", false, "print the plan's steps and their order instead")
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The graph command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}
	if !*withPlan {
		stack, diags := c.loadStack(*sf.files)
		c.ShowDiagnostics(stack.Files, diags)
		if diags.HasErrors() {
			return 1
		}
		return c.write(func(w io.Writer) error { return writeStackDOT(w, stack) })
	}
	r, err := c.runner("graph", sf, nil)
	if err != nil {
		c.showError("Error preparing the plan", err)
		return 1
	}
	defer c.closeRunner(r)
	p, _, ok := c.makePlan(r, false)
	if !ok {
		return 1
	}
	return c.write(func(w io.Writer) error { return writePlanDOT(w, p) })
}

func (c *GraphCommand) write(render func(io.Writer) error) int {
	if err := render(c.Stdout); err != nil {
		c.showError("Error writing the graph", err)
		return 1
	}
	return 0
}

// writeStackDOT writes the stack's objects, an edge from each to what it
// refers to (what must exist before it and outlive it).
func writeStackDOT(w io.Writer, st *config.Stack) error {
	g := st.Graph()
	var b strings.Builder
	b.WriteString("digraph {\n  compound = \"true\"\n  newrank = \"true\"\n  rankdir = \"RL\"\n")
	for _, n := range g.Nodes() {
		fmt.Fprintf(&b, "  %s [label = %s, shape = \"box\"]\n", dotID(n.String()), dotID(n.String()))
	}
	for _, n := range g.Nodes() {
		for _, d := range g.Dependencies(n) {
			fmt.Fprintf(&b, "  %s -> %s\n", dotID(n.String()), dotID(d.String()))
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writePlanDOT writes the plan's steps, an edge from each step to the steps
// it waits for, clustered by object.
func writePlanDOT(w io.Writer, p *plan.Plan) error {
	var b strings.Builder
	b.WriteString("digraph {\n  compound = \"true\"\n  newrank = \"true\"\n  rankdir = \"RL\"\n")
	var objects []string
	byObject := map[string][]plan.Step{}
	for _, s := range p.Steps {
		if _, seen := byObject[s.Object]; !seen {
			objects = append(objects, s.Object)
		}
		byObject[s.Object] = append(byObject[s.Object], s)
	}
	for i, o := range objects {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label = %s\n", i, dotID(o))
		for _, s := range byObject[o] {
			fmt.Fprintf(&b, "    %s [label = %s, shape = \"box\"]\n", stepNode(s.ID), dotID(stepLabel(s)))
		}
		b.WriteString("  }\n")
	}
	for _, s := range p.Steps {
		for _, a := range s.After {
			fmt.Fprintf(&b, "  %s -> %s\n", stepNode(s.ID), stepNode(a))
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func stepNode(id plan.StepID) string { return "step" + strconv.Itoa(int(id)) }

// stepLabel is "3 register compute-1a2b on lb1".
func stepLabel(s plan.Step) string {
	parts := []string{strconv.Itoa(int(s.ID)), string(s.Kind)}
	if s.Instance != "" {
		parts = append(parts, string(s.Instance))
	} else if s.LogicalID != "" {
		parts = append(parts, s.LogicalID)
	} else if s.Made != 0 {
		parts = append(parts, fmt.Sprintf("(made by %d)", s.Made))
	}
	if s.LoadBalancer != "" {
		parts = append(parts, "on "+s.LoadBalancer)
	}
	return strings.Join(parts, " ")
}

// dotID quotes s as a DOT identifier.
func dotID(s string) string { return strconv.Quote(s) }

// Synopsis is the one-line description in `infrakit -help`.
func (c *GraphCommand) Synopsis() string {
	return "Print the stack's dependency graph, or the plan's steps, as DOT"
}

// Help is the text of `infrakit graph -help`.
func (c *GraphCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] graph [-plan] [options]

  Prints a graph in Graphviz's DOT language, for "dot -Tsvg":

  Without -plan, the stack's objects (providers, groups, load balancers,
  ingresses, enrollments), with an edge from each object to those it
  refers to: what must exist before it and outlive it. It reads only the
  stack files.

  With -plan, the steps of the plan "infrakit plan" would show, by object,
  with an edge from each step to the steps it waits for: the order apply
  executes them in. It asks the providers and takes the state lock, as
  plan does.

Options:

  -plan                Print the plan's steps instead of the stack's objects.

  -parallelism N       Provider calls in flight at once while planning
                       (default 10).

  -lock-timeout D      How long to wait for the state lock (default 30s).

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
