package command

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/state"
)

// ShowCommand is `infrakit show`: a summary of the state. It asks no
// provider.
type ShowCommand struct {
	Meta
}

// showJSON is `show -json`.
type showJSON struct {
	// Stack is the stored stack's name; empty when nothing is stored.
	Stack   string          `json:"stack"`
	Serial  uint64          `json:"serial"`
	Lineage string          `json:"lineage"`
	Groups  []showGroupJSON `json:"groups"`
	// Ingresses and Enrollments are those of the stored stack, in its
	// order; never null.
	Ingresses   []showIngressJSON    `json:"ingresses"`
	Enrollments []showEnrollmentJSON `json:"enrollments"`
}

type showIngressJSON struct {
	Ingress string `json:"ingress"`
	Freed   bool   `json:"freed"`
	// LoadBalancers are the load balancers its rules name, in rule order,
	// each once with the groups routed to it.
	LoadBalancers []showRoutedJSON `json:"loadbalancers"`
}

type showRoutedJSON struct {
	LoadBalancer string   `json:"loadbalancer"`
	Groups       []string `json:"groups"`
}

type showEnrollmentJSON struct {
	Enrollment string `json:"enrollment"`
	// Source is the group whose members are enrolled.
	Source string `json:"source"`
	Freed  bool   `json:"freed"`
}

type showGroupJSON struct {
	Group string `json:"group"`
	// Size is the desired size of cattle; absent for pets.
	Size       *int     `json:"size,omitempty"`
	LogicalIDs []string `json:"logical_ids,omitempty"`
	// Instances counts the members recorded.
	Instances     int  `json:"instances"`
	Freed         bool `json:"freed"`
	UpdateStopped bool `json:"update_stopped"`
}

func newShowJSON(doc *state.Document) showJSON {
	out := showJSON{Serial: doc.Serial, Lineage: doc.Lineage, Groups: []showGroupJSON{},
		Ingresses: []showIngressJSON{}, Enrollments: []showEnrollmentJSON{}}
	if doc.IsNew() {
		out.Lineage = "" // a lineage no one stored yet
	}
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		g := showGroupJSON{Group: name}
		if doc.Stack != nil {
			if cfg := doc.Stack.Group(name); cfg != nil {
				g.Size, g.LogicalIDs = cfg.Size, cfg.LogicalIDs
			}
		}
		if st := doc.Groups[name]; st != nil {
			g.Instances, g.Freed, g.UpdateStopped = len(st.Instances), st.Freed, st.UpdateStopped
		}
		out.Groups = append(out.Groups, g)
	}
	if doc.Stack != nil {
		out.Stack = doc.Stack.Name
		for _, g := range doc.Stack.Groups {
			add(g.Name)
		}
		out.Ingresses, out.Enrollments = showControllers(doc)
	}
	for _, name := range sortedGroupNames(doc) {
		add(name)
	}
	return out
}

// showControllers lists the stored stack's ingresses and enrollments.
func showControllers(doc *state.Document) ([]showIngressJSON, []showEnrollmentJSON) {
	ings, ens := []showIngressJSON{}, []showEnrollmentJSON{}
	for _, in := range doc.Stack.Ingresses {
		j := showIngressJSON{Ingress: in.Name, Freed: doc.Ingresses[in.Name] != nil && doc.Ingresses[in.Name].Freed,
			LoadBalancers: []showRoutedJSON{}}
		at := map[string]int{}
		for _, rule := range in.Rules {
			i, ok := at[rule.LoadBalancer]
			if !ok {
				i = len(j.LoadBalancers)
				at[rule.LoadBalancer] = i
				j.LoadBalancers = append(j.LoadBalancers, showRoutedJSON{LoadBalancer: rule.LoadBalancer, Groups: []string{}})
			}
			for _, g := range rule.Groups {
				if !slices.Contains(j.LoadBalancers[i].Groups, g) {
					j.LoadBalancers[i].Groups = append(j.LoadBalancers[i].Groups, g)
				}
			}
		}
		ings = append(ings, j)
	}
	for _, en := range doc.Stack.Enrollments {
		ens = append(ens, showEnrollmentJSON{Enrollment: en.Name, Source: en.Source,
			Freed: doc.Enrollments[en.Name] != nil && doc.Enrollments[en.Name].Freed})
	}
	return ings, ens
}

func sortedGroupNames(doc *state.Document) []string {
	return slices.Sorted(maps.Keys(doc.Groups))
}

// Run prints the state summary.
func (c *ShowCommand) Run(args []string) int {
	fs := c.FlagSet("show")
	jsonOut := FlagJSON(fs)
	files := flagStackFiles(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The show command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}
	r, err := operation.New(c.Context(), operation.Options{
		WorkDir: c.WorkDir, StackDir: c.stackDir(), ExtraFiles: c.stackFilePaths(*files), Logger: c.Logger.Named("show"),
	})
	if err != nil {
		c.showError("Error reading the state", err)
		return 1
	}
	defer c.closeRunner(r)
	doc, err := r.State(c.Context())
	if err != nil {
		c.showError("Error reading the state", err)
		return 1
	}
	summary := newShowJSON(doc)
	if *jsonOut {
		if err := c.WriteJSON(summary); err != nil {
			return 1
		}
		return 0
	}
	if doc.IsNew() {
		c.Ui.Output("No state.")
		return 0
	}
	fmt.Fprintf(c.Stdout, "Stack:   %s\nSerial:  %d\nLineage: %s\n", summary.Stack, summary.Serial, summary.Lineage)
	if len(summary.Groups) == 0 {
		fmt.Fprintln(c.Stdout, "\nNo groups.")
		return 0
	}
	fmt.Fprintln(c.Stdout)
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSIZE\tINSTANCES\tSTATUS")
	for _, g := range summary.Groups {
		size := "-"
		switch {
		case g.Size != nil:
			size = strconv.Itoa(*g.Size)
		case len(g.LogicalIDs) > 0:
			size = fmt.Sprintf("pets (%d)", len(g.LogicalIDs))
		}
		status := "managed"
		if g.Freed {
			status = "freed"
		}
		if g.UpdateStopped {
			status += ", update stopped"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", g.Group, size, g.Instances, status)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *ShowCommand) Synopsis() string { return "Summarize the state" }

// Help is the text of `infrakit show -help`.
func (c *ShowCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] show [-json] [-f FILE]...

  Summarizes the state: the stack last applied, the state's serial and
  lineage, and each group with its desired size and the number of instances
  recorded. It reads only the state file and asks no provider; use
  "infrakit group ls" to see the instances as the providers report them.

Options:

  -json   Print the summary as one JSON document:
          {"stack", "serial", "lineage", "groups": [{"group", "size",
          "logical_ids", "instances", "freed", "update_stopped"}],
          "ingresses": [{"ingress", "freed", "loadbalancers":
          [{"loadbalancer", "groups"}]}], "enrollments": [{"enrollment",
          "source", "freed"}]}

  -f FILE Accepted, as by every command that reads the stack; show reads
          only the state. Repeatable.
`)
}
