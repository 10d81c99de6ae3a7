package command

import (
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
)

// The `infrakit lb` verbs ask a load balancer's provider what it holds now.
// The load balancer is found by its loadbalancer block, in the applied stack
// or else in the stack files; the state is never taken for the answer.

// objectArgs parses the arguments of a verb that takes exactly one NAME
// (flags before or after it). It prints what is wrong and returns ok=false
// (the caller returns cli.RunResultHelp).
func (m *Meta) objectArgs(verb, what string, fs *flag.FlagSet, args []string) (string, bool) {
	positional, err := ParseArgs(fs, args)
	if err != nil {
		m.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return "", false
	}
	switch {
	case len(positional) == 0:
		m.Ui.Error(fmt.Sprintf("The %s command needs the name of %s.\n", verb, what))
		return "", false
	case len(positional) > 1:
		m.Ui.Error(fmt.Sprintf("The %s command got unexpected arguments %q.\n", verb, positional[1:]))
		return "", false
	}
	return positional[0], true
}

// objectRunner starts a Runner for an lb, ingress or enrollment verb, with
// the -f stack files as given. Close it.
func (m *Meta) objectRunner(op string, lockTimeout time.Duration, files []string) (*operation.Runner, error) {
	return m.groupRunner(groupRunnerOptions{operation: op, files: files, lockTimeout: lockTimeout})
}

// LBCommand is the parent of the `infrakit lb` verbs.
type LBCommand struct{ Meta }

// Run prints the help, which lists the subcommands.
func (c *LBCommand) Run([]string) int { return cli.RunResultHelp }

// Synopsis is the one-line description in `infrakit -help`.
func (c *LBCommand) Synopsis() string { return "List the routes and backends of load balancers" }

// Help is the text of `infrakit lb -help`.
func (c *LBCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] lb <routes|backends> ls NAME [-json] [-f FILE]...

  Asks a load balancer's provider for its routes or its backends. NAME is a
  loadbalancer block of the applied stack (or, before the first apply, of
  the stack files). What an ingress makes of them is what "infrakit apply"
  and "infrakit watch" keep in step with the groups.
`)
}

// LBRoutesCommand is the parent of `infrakit lb routes ls`.
type LBRoutesCommand struct{ Meta }

// Run prints the help.
func (c *LBRoutesCommand) Run([]string) int { return cli.RunResultHelp }

// Synopsis is the one-line description in `infrakit lb -help`.
func (c *LBRoutesCommand) Synopsis() string { return "List a load balancer's routes" }

// Help is the text of `infrakit lb routes -help`.
func (c *LBRoutesCommand) Help() string {
	return "Usage: infrakit [global options] lb routes ls NAME [-json]\n\n  Lists the routes a load balancer publishes, as its provider reports them."
}

// LBBackendsCommand is the parent of `infrakit lb backends ls`.
type LBBackendsCommand struct{ Meta }

// Run prints the help.
func (c *LBBackendsCommand) Run([]string) int { return cli.RunResultHelp }

// Synopsis is the one-line description in `infrakit lb -help`.
func (c *LBBackendsCommand) Synopsis() string { return "List a load balancer's backends" }

// Help is the text of `infrakit lb backends -help`.
func (c *LBBackendsCommand) Help() string {
	return "Usage: infrakit [global options] lb backends ls NAME [-json]\n\n  Lists the backends registered with a load balancer, as its provider reports them."
}

// LBRoutesListCommand is `infrakit lb routes ls NAME [-json]`.
type LBRoutesListCommand struct{ Meta }

// routesJSON is the -json shape of `lb routes ls` (DESIGN.md).
type routesJSON struct {
	LoadBalancer string         `json:"loadbalancer"`
	Routes       []config.Route `json:"routes"`
}

// Run asks the provider and prints the routes.
func (c *LBRoutesListCommand) Run(args []string) int {
	fs := c.FlagSet("lb routes ls")
	jsonOut := FlagJSON(fs)
	files := flagStackInputs(fs)
	name, ok := c.objectArgs("lb routes ls", "a load balancer", fs, args)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.objectRunner("lb routes ls", 0, *files)
	if err != nil {
		c.showError("Error listing routes", err)
		return 1
	}
	defer c.closeRunner(r)
	routes, err := r.LoadBalancerRoutes(c.Context(), name)
	if err != nil {
		c.showError("Error listing routes", err)
		return 1
	}
	out := routesJSON{LoadBalancer: name, Routes: make([]config.Route, 0, len(routes))}
	for _, rt := range routes {
		out.Routes = append(out.Routes, config.Route{LBPort: rt.LoadBalancerPort, LBProtocol: rt.LoadBalancerProtocol,
			Port: rt.Port, Protocol: rt.Protocol, Certificate: rt.Certificate})
	}
	if *jsonOut {
		if err := c.WriteJSON(out); err != nil {
			return 1
		}
		return 0
	}
	if len(out.Routes) == 0 {
		c.Ui.Output(fmt.Sprintf("Load balancer %q publishes no routes.", name))
		return 0
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LB PORT\tLB PROTOCOL\tPORT\tPROTOCOL\tCERTIFICATE")
	for _, rt := range out.Routes {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", rt.LBPort, rt.LBProtocol, rt.Port, rt.Protocol, orDash(rt.Certificate))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit lb routes -help`.
func (c *LBRoutesListCommand) Synopsis() string { return "List a load balancer's routes" }

// Help is the text of `infrakit lb routes ls -help`.
func (c *LBRoutesListCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] lb routes ls NAME [-json] [-f FILE]...

  Lists the routes load balancer NAME publishes, asking its provider.

Options:

  -json    Print {"loadbalancer": NAME, "routes": [{"lb_port", "lb_protocol",
           "port", "protocol", "certificate"}]}.

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE  Also read FILE as a stack file (repeatable): NAME is looked up
           in the applied stack, or else in the stack files.
`)
}

// LBBackendsListCommand is `infrakit lb backends ls NAME [-json]`.
type LBBackendsListCommand struct{ Meta }

// backendsJSON is the -json shape of `lb backends ls` (DESIGN.md).
type backendsJSON struct {
	LoadBalancer string   `json:"loadbalancer"`
	Backends     []string `json:"backends"`
}

// Run asks the provider and prints the backends.
func (c *LBBackendsListCommand) Run(args []string) int {
	fs := c.FlagSet("lb backends ls")
	jsonOut := FlagJSON(fs)
	files := flagStackInputs(fs)
	name, ok := c.objectArgs("lb backends ls", "a load balancer", fs, args)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.objectRunner("lb backends ls", 0, *files)
	if err != nil {
		c.showError("Error listing backends", err)
		return 1
	}
	defer c.closeRunner(r)
	bs, err := r.LoadBalancerBackends(c.Context(), name)
	if err != nil {
		c.showError("Error listing backends", err)
		return 1
	}
	if *jsonOut {
		out := backendsJSON{LoadBalancer: name, Backends: make([]string, 0, len(bs))}
		for _, b := range bs {
			out.Backends = append(out.Backends, string(b.ID))
		}
		if err := c.WriteJSON(out); err != nil {
			return 1
		}
		return 0
	}
	if len(bs) == 0 {
		c.Ui.Output(fmt.Sprintf("Load balancer %q has no backends.", name))
		return 0
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS")
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%s\n", b.ID, orDash(b.Address))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit lb backends -help`.
func (c *LBBackendsListCommand) Synopsis() string { return "List a load balancer's backends" }

// Help is the text of `infrakit lb backends ls -help`.
func (c *LBBackendsListCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] lb backends ls NAME [-json] [-f FILE]...

  Lists the backends registered with load balancer NAME, asking its provider.

Options:

  -json    Print {"loadbalancer": NAME, "backends": ["id", ...]}.

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE  Also read FILE as a stack file (repeatable): NAME is looked up
           in the applied stack, or else in the stack files.
`)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
