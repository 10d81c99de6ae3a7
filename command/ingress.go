package command

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/ingress"
)

// IngressCommand is the parent of the `infrakit ingress` verbs.
type IngressCommand struct{ Meta }

// Run prints the help, which lists the subcommands.
func (c *IngressCommand) Run([]string) int { return cli.RunResultHelp }

// Synopsis is the one-line description in `infrakit -help`.
func (c *IngressCommand) Synopsis() string { return "Describe, free and destroy ingresses" }

// Help is the text of `infrakit ingress -help`.
func (c *IngressCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] ingress <describe|free|destroy> NAME

  An ingress keeps load balancers in step with groups: each load balancer
  its rules name publishes exactly their routes and has exactly the
  members of their groups as backends. "infrakit apply" and "infrakit
  watch" sync it; so do "group scale", "group destroy-instances" and
  "group destroy" for the groups it routes to.

  describe asks the load balancers; free stops syncing and touches
  nothing (a later apply resumes); destroy unpublishes the routes and
  deregisters the backends, and removes the ingress from the state.
`)
}

// IngressDescribeCommand is `infrakit ingress describe NAME [-json]`.
type IngressDescribeCommand struct{ Meta }

// ingressJSON is the -json shape of `ingress describe`.
type ingressJSON struct {
	Ingress       string         `json:"ingress"`
	Freed         bool           `json:"freed"`
	LoadBalancers []ingress.View `json:"loadbalancers"`
}

// Run asks the ingress's load balancers and prints their routes and backends.
func (c *IngressDescribeCommand) Run(args []string) int {
	fs := c.FlagSet("ingress describe")
	jsonOut := FlagJSON(fs)
	files := flagStackInputs(fs)
	name, ok := c.objectArgs("ingress describe", "an ingress", fs, args)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.objectRunner("ingress describe", 0, *files)
	if err != nil {
		c.showError("Error describing the ingress", err)
		return 1
	}
	defer c.closeRunner(r)
	objs, err := r.Ingresses().Describe(c.Context(), &controller.Metadata{Name: name})
	if err != nil {
		c.showError("Error describing the ingress", err)
		return 1
	}
	v := ingressJSON{Ingress: name, Freed: objs[0].Freed, LoadBalancers: []ingress.View{}}
	if err := json.Unmarshal(objs[0].State, &v.LoadBalancers); err != nil {
		c.showError("Error describing the ingress", err)
		return 1
	}
	if *jsonOut {
		out := v
		if err := c.WriteJSON(out); err != nil {
			return 1
		}
		return 0
	}
	status := "synced"
	if v.Freed {
		status = "free (not synced until the next apply)"
	}
	c.Ui.Output(fmt.Sprintf("Ingress %q: %s", v.Ingress, status))
	for _, lb := range v.LoadBalancers {
		c.Ui.Output(fmt.Sprintf("\nLoad balancer %q: %s, %s", lb.LoadBalancer, countOf(len(lb.Routes), "route"), countOf(len(lb.Backends), "backend")))
		tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
		for _, rt := range lb.Routes {
			fmt.Fprintf(tw, "  route\t%d %s -> %d %s\t%s\n", rt.LBPort, rt.LBProtocol, rt.Port, rt.Protocol, orDash(rt.Certificate))
		}
		for _, b := range lb.Backends {
			fmt.Fprintf(tw, "  backend\t%s\t%s\n", b.ID, orDash(b.Address))
		}
		if err := tw.Flush(); err != nil {
			return 1
		}
	}
	return 0
}

// Synopsis is the one-line description in `infrakit ingress -help`.
func (c *IngressDescribeCommand) Synopsis() string {
	return "Show an ingress's load balancers: routes and backends"
}

// Help is the text of `infrakit ingress describe -help`.
func (c *IngressDescribeCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] ingress describe NAME [-json] [-f FILE]...

  Asks every load balancer of ingress NAME for its routes and backends.

Options:

  -json    Print {"ingress", "freed", "loadbalancers": [{"loadbalancer",
           "routes": [...], "backends": [{"id", "address"}]}]}.

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE  Also read FILE as a stack file (repeatable): NAME is looked up
           in the applied stack, or else in the stack files.
`)
}

// IngressFreeCommand is `infrakit ingress free NAME`.
type IngressFreeCommand struct{ Meta }

// Run marks the ingress free in the state.
func (c *IngressFreeCommand) Run(args []string) int {
	fs := c.FlagSet("ingress free")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	name, ok := c.objectArgs("ingress free", "an ingress", fs, args)
	if !ok {
		return cli.RunResultHelp
	}
	r, err := c.objectRunner("ingress free", *lockTimeout, *files)
	if err != nil {
		c.showError("Error freeing the ingress", err)
		return 1
	}
	defer c.closeRunner(r)
	if _, _, err := r.Ingresses().Free(c.Context(), &controller.Metadata{Name: name}); err != nil {
		c.showError("Error freeing the ingress", err)
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Ingress %q is free: its load balancers are no longer synced and were left as they are. The next apply resumes it.", name))
	return 0
}

// Synopsis is the one-line description in `infrakit ingress -help`.
func (c *IngressFreeCommand) Synopsis() string { return "Stop syncing an ingress; touch nothing" }

// Help is the text of `infrakit ingress free -help`.
func (c *IngressFreeCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] ingress free NAME [-lock-timeout D] [-var NAME=VALUE]... [-var-file FILE]... [-f FILE]...

  Stops syncing ingress NAME: its routes and backends are left exactly as
  they are, and neither apply's group verbs nor watch change them. The
  next "infrakit apply" of a stack that declares it resumes syncing.
`)
}

// IngressDestroyCommand is `infrakit ingress destroy NAME`.
type IngressDestroyCommand struct{ Meta }

// Run tears the ingress down.
func (c *IngressDestroyCommand) Run(args []string) int {
	fs := c.FlagSet("ingress destroy")
	autoApprove := fs.Bool("auto-approve", false, "destroy without asking")
	lockTimeout := FlagLockTimeout(fs)
	files := flagStackInputs(fs)
	name, ok := c.objectArgs("ingress destroy", "an ingress", fs, args)
	if !ok {
		return cli.RunResultHelp
	}
	if !*autoApprove {
		if err := c.approve("destroy", fmt.Sprintf("Do you really want to destroy ingress %q?", name),
			"infrakit will unpublish every route and deregister every backend of its load balancers."); err != nil {
			c.showError("Destroy cancelled", err)
			return 1
		}
	}
	r, err := c.objectRunner("ingress destroy", *lockTimeout, *files)
	if err != nil {
		c.showError("Error destroying the ingress", err)
		return 1
	}
	defer c.closeRunner(r)
	res, err := r.Ingresses().Destroy(c.Context(), &controller.Metadata{Name: name})
	failed := c.reportGroupResult(res)
	if err != nil {
		c.showError("Error destroying the ingress", err)
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Ingress %q destroyed: %s unpublished, %s deregistered.", name,
		countOf(res.Done.Unpublish, "route"), countOf(res.Done.Deregister, "backend")))
	if failed {
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit ingress -help`.
func (c *IngressDestroyCommand) Synopsis() string {
	return "Unpublish an ingress's routes and deregister its backends"
}

// Help is the text of `infrakit ingress destroy -help`.
func (c *IngressDestroyCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] ingress destroy NAME [-auto-approve] [-lock-timeout D] [-f FILE]...

  Unpublishes every route and deregisters every backend of the load
  balancers of ingress NAME, and removes it from the state. An apply of a
  stack that still declares it publishes it again.

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
