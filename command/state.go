package command

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/stateedit"
)

// StateCommand is the parent of the `infrakit state` verbs; alone it prints
// its help.
type StateCommand struct {
	Meta
}

// Run prints the help, which lists the subcommands.
func (c *StateCommand) Run([]string) int { return cli.RunResultHelp }

// Synopsis is the one-line description in `infrakit -help`.
func (c *StateCommand) Synopsis() string { return "List, show, forget and rename what the state holds" }

// Help is the text of `infrakit state -help`.
func (c *StateCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] state <subcommand> [args]

  Reads and edits the state, as Terraform's state commands do. Objects are
  named by address:

    group.web                          a group
    group.web.instance["compute-1a2b"] one of its members, by instance ID
    ingress.api, ingress["test.com"]   an ingress
    enrollment.nfs                     an enrollment

  A name that is an identifier follows a dot; any other name is quoted in
  brackets (the dotted form "ingress.test.com" that plans print is read
  too). Quote addresses for the shell: 'group.web.instance["ID"]'.

  "state rm" and "state mv" take the state lock, and the local backend keeps
  the state they replace as infrakit.state.json.backup.
`)
}

// stateRunner starts an operation.Runner for a state verb. Close it.
func (m *Meta) stateRunner(op string, files []string, lockTimeout time.Duration) (*operation.Runner, error) {
	return m.groupRunner(groupRunnerOptions{operation: op, files: files, lockTimeout: lockTimeout})
}

// readState reads the state for a verb that only looks at it (no lock, no
// provider), reporting an error itself.
func (m *Meta) readState(op string, files []string) (*state.Document, bool) {
	r, err := m.stateRunner(op, files, 0)
	if err != nil {
		m.showError("Error reading the state", err)
		return nil, false
	}
	defer m.closeRunner(r)
	doc, err := r.State(m.Context())
	if err != nil {
		m.showError("Error reading the state", err)
		return nil, false
	}
	return doc, true
}

// parseAddresses reads the positional addresses of a state verb.
func (m *Meta) parseAddresses(verb string, fs *flag.FlagSet, args []string, min, max int) ([]stateedit.Address, bool) {
	positional, err := ParseArgs(fs, args)
	if err != nil {
		m.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return nil, false
	}
	switch {
	case len(positional) < min:
		m.Ui.Error(fmt.Sprintf("The %s command needs %s.\n", verb, map[bool]string{true: "an address", false: "more addresses"}[min == 1]))
		return nil, false
	case max >= 0 && len(positional) > max:
		m.Ui.Error(fmt.Sprintf("The %s command got unexpected arguments %q.\n", verb, positional[max:]))
		return nil, false
	}
	out := make([]stateedit.Address, 0, len(positional))
	for _, p := range positional {
		a, err := stateedit.ParseAddress(p)
		if err != nil {
			m.Ui.Error(err.Error() + "\n")
			return nil, false
		}
		out = append(out, a)
	}
	return out, true
}

// StateListCommand is `infrakit state list [ADDRESS]...`.
type StateListCommand struct {
	Meta
}

// Run prints the addresses the state holds, one per line: all of them, or
// those equal to or inside the addresses given.
func (c *StateListCommand) Run(args []string) int {
	fs := c.FlagSet("state list")
	files := flagStackFiles(fs)
	filter, ok := c.parseAddresses("state list", fs, args, 0, -1)
	if !ok {
		return cli.RunResultHelp
	}
	doc, ok := c.readState("state list", *files)
	if !ok {
		return 1
	}
	for _, a := range stateedit.List(doc) {
		if len(filter) == 0 || slices.ContainsFunc(filter, func(f stateedit.Address) bool { return f == a || (!f.IsInstance() && f == a.Object()) }) {
			c.Ui.Output(a.String())
		}
	}
	return 0
}

// Synopsis is the one-line description in `infrakit state -help`.
func (c *StateListCommand) Synopsis() string { return "List the objects the state holds" }

// Help is the text of `infrakit state list -help`.
func (c *StateListCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] state list [ADDRESS]... [options]

  Prints the address of every object the state holds, one per line: each
  group followed by its recorded members, then the ingresses and the
  enrollments. With addresses, prints only those, and the members of the
  groups named. It reads the state only (no lock, no provider): members
  are the ones the last apply or watch pass recorded.

Options:

  -f FILE             Accepted, as by every command that reads the stack;
                      the state verbs read no stack file. Repeatable.
`)
}

// StateShowCommand is `infrakit state show ADDRESS [-json]`.
type StateShowCommand struct {
	Meta
}

// Run prints the record of one object.
func (c *StateShowCommand) Run(args []string) int {
	fs := c.FlagSet("state show")
	jsonOut := FlagJSON(fs)
	files := flagStackFiles(fs)
	addrs, ok := c.parseAddresses("state show", fs, args, 1, 1)
	if !ok {
		return cli.RunResultHelp
	}
	doc, ok := c.readState("state show", *files)
	if !ok {
		return 1
	}
	rec, err := stateedit.Show(doc, addrs[0])
	if err != nil {
		c.showError("No such object", err)
		return 1
	}
	if *jsonOut {
		if err := c.WriteJSON(rec); err != nil {
			c.showError("Error writing the output", err)
			return 1
		}
		return 0
	}
	var buf bytes.Buffer
	if err := renderRecord(&buf, doc.Stack, rec); err != nil {
		c.showError("Error showing the record", err)
		return 1
	}
	c.Ui.Output(strings.TrimRight(buf.String(), "\n"))
	return 0
}

// renderRecord writes a record as Terraform's state show does: a comment
// with the address, then the object's attributes (a block as HCL).
func renderRecord(w io.Writer, stored *config.Stack, rec *stateedit.Record) error {
	fmt.Fprintf(w, "# %s:\n", rec.Address)
	switch {
	case rec.Instance != nil:
		in := rec.Instance
		attrs := [][2]string{{"id", in.ID}, {"group", in.Group}, {"logical_id", in.LogicalID},
			{"config_hash", in.ConfigHash}, {"state", in.State}, {"address", in.Address}}
		tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
		for _, a := range attrs {
			if a[1] != "" {
				fmt.Fprintf(tw, "%s\t= %q\n", a[0], a[1])
			}
		}
		tw.Flush()
		fmt.Fprintln(w, "tags = {")
		for _, k := range slices.Sorted(maps.Keys(in.Tags)) {
			if in.Tags[k] != "" {
				fmt.Fprintf(w, "  %q = %q\n", k, in.Tags[k])
			}
		}
		fmt.Fprintln(w, "}")
	case rec.Group != nil:
		g := rec.Group
		if g.Config != nil {
			if err := writeBlock(w, &config.Stack{Groups: []*config.Group{g.Config}}); err != nil {
				return err
			}
			fmt.Fprintf(w, "# config hash %s\n", g.ConfigHash)
		} else {
			fmt.Fprintln(w, "# the state holds no configuration for this group")
		}
		fmt.Fprintf(w, "# %s recorded", countOf(len(g.Instances), "member"))
		for _, flag := range []struct {
			on   bool
			name string
		}{{g.Freed, "freed"}, {g.UpdateStopped, "rolling update stopped"}, {g.Destroying, "being destroyed"}} {
			if flag.on {
				fmt.Fprintf(w, "; %s", flag.name)
			}
		}
		fmt.Fprintln(w)
	default:
		f, st := rec.Ingress, &config.Stack{}
		if f == nil {
			f = rec.Enrollment
		}
		switch cfg := f.Config.(type) {
		case *config.Ingress:
			st.Ingresses = []*config.Ingress{cfg}
		case *config.Enrollment:
			st.Enrollments = []*config.Enrollment{cfg}
		}
		if f.Config != nil {
			if err := writeBlock(w, st); err != nil {
				return err
			}
		} else {
			fmt.Fprintln(w, "# the state holds no configuration for it")
		}
		fmt.Fprintf(w, "# freed: %t; pending teardowns: %d\n", f.Freed, f.Pending)
	}
	return nil
}

// writeBlock writes the one block of st as HCL (without the stack block
// MarshalHCL begins with).
func writeBlock(w io.Writer, st *config.Stack) error {
	out, err := st.MarshalHCL()
	if err != nil {
		return err
	}
	if _, rest, ok := bytes.Cut(out, []byte("\n\n")); ok {
		out = rest
	}
	_, err = w.Write(out)
	return err
}

// Synopsis is the one-line description in `infrakit state -help`.
func (c *StateShowCommand) Synopsis() string { return "Show the record of one object of the state" }

// Help is the text of `infrakit state show -help`.
func (c *StateShowCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] state show ADDRESS [options]

  Prints what the state holds of one object. For a member: its instance ID,
  logical ID, configuration hash, state and address as last recorded, and
  the infrakit tags that record implies. For a group, an ingress or an
  enrollment: its block as last applied, as HCL, and its record (freed,
  stopped, members). It reads the state only; "infrakit group describe"
  asks the providers.

Options:

  -json               Print the record as JSON.

  -f FILE             Accepted, as by every command that reads the stack;
                      the state verbs read no stack file. Repeatable.
`)
}
