package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// The `infrakit group` verbs act on one group of the applied stack: they
// read the state and ask the providers, never the stack files, so they work
// on what apply last made and not on edits that were not applied yet.

// GroupCommand is the parent of the `infrakit group` verbs; alone it prints
// its help.
type GroupCommand struct {
	Meta
}

// Run prints the help, which lists the subcommands.
func (c *GroupCommand) Run([]string) int { return cli.RunResultHelp }

// Synopsis is the one-line description in `infrakit -help`.
func (c *GroupCommand) Synopsis() string { return "List, inspect, scale, free and destroy groups" }

// Help is the text of `infrakit group -help`.
func (c *GroupCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] group <subcommand> [args]

  Operates on the groups of the applied stack. The group verbs read the
  state and ask the providers what exists; they do not read the stack
  files, so they act on what "infrakit apply" last made.

  Verbs that change something (scale, destroy-instances, free, destroy)
  take the state lock, like apply.

  Every verb accepts -f FILE (repeatable), as every command that reads the
  stack does, so scripts can pass the same files everywhere; the group
  verbs read no stack file.
`)
}

// groupJSON is the -json shape of one group: `group describe -json` prints
// one, `group ls -json` an array of them. The DESIGN.md contract is "group"
// and "instances"; "size" (absent for pets) and "freed" are additions.
type groupJSON struct {
	Group string `json:"group"`
	// Size is the desired size of cattle; nil (absent) for pets.
	Size      *int           `json:"size,omitempty"`
	Freed     bool           `json:"freed"`
	Instances []instanceJSON `json:"instances"`
	// Rolling is the rolling update's progress.
	Rolling rollingJSON `json:"rolling"`
	// Brake is the mass-failure brake as the watch running on the local
	// state reports it (group describe only; absent when none answers).
	Brake *status.Brake `json:"brake,omitempty"`
	// Autoscale is the autoscaler's bounds and latest decisions as that
	// watch reports them (group describe only; absent for a group without
	// an autoscale block, or when no watch answers).
	Autoscale *status.Autoscale `json:"autoscale,omitempty"`
}

// rollingJSON is how far a group's rolling update got: Outdated of its
// instances still carry another configuration hash than the group's.
type rollingJSON struct {
	Outdated int `json:"outdated"`
	// Stopped is set by `group stop-update`, until the next apply.
	Stopped bool `json:"stopped"`
}

// rollProgress counts the out-of-date members of a group view, and all.
func rollProgress(v operation.GroupView) (outdated, total int) {
	for _, m := range v.Instances {
		if v.ConfigHash != "" && m.ConfigHash != v.ConfigHash {
			outdated++
		}
	}
	return outdated, len(v.Instances)
}

// instanceJSON is one member in groupJSON.
type instanceJSON struct {
	ID instance.ID `json:"id"`
	// LogicalID is null for cattle, so "no logical ID" is not an empty one.
	LogicalID *string           `json:"logical_id"`
	Tags      map[string]string `json:"tags"`
	State     instance.State    `json:"state"`
	Health    flavor.Health     `json:"health"`
	// Address is where the instance is reachable, as its provider reports
	// it; "" when it reports none.
	Address string `json:"address"`
}

// newGroupJSON converts a group view into its -json shape. Members are
// sorted by logical ID and then ID so the output is stable between runs.
func newGroupJSON(v operation.GroupView) groupJSON {
	out := groupJSON{Group: v.Name, Size: v.Size, Freed: v.Freed, Instances: []instanceJSON{}}
	out.Rolling.Outdated, _ = rollProgress(v)
	out.Rolling.Stopped = v.UpdateStopped
	for _, m := range sortedGroupMembers(v.Instances) {
		inst := instanceJSON{ID: m.ID, Tags: v.Tags[m.ID], State: m.State, Health: m.Health, Address: m.Address}
		if m.LogicalID != "" {
			inst.LogicalID = &m.LogicalID
		}
		if inst.Tags == nil {
			inst.Tags = map[string]string{}
		}
		out.Instances = append(out.Instances, inst)
	}
	return out
}

// sortedGroupMembers returns a copy of members ordered by logical ID, then ID.
func sortedGroupMembers(members []group.Member) []group.Member {
	out := slices.Clone(members)
	slices.SortFunc(out, func(a, b group.Member) int {
		if c := strings.Compare(a.LogicalID, b.LogicalID); c != 0 {
			return c
		}
		return strings.Compare(string(a.ID), string(b.ID))
	})
	return out
}

// groupSize describes a group's size for people: "5", or "pets" when the
// group is sized by logical IDs.
func groupSize(v operation.GroupView) string {
	if v.Size == nil {
		return "pets"
	}
	return strconv.Itoa(*v.Size)
}

// sizePhrase is the group's size for a sentence: "size 3" for cattle,
// "pets" for pets (their number is their logical IDs').
func sizePhrase(v operation.GroupView) string {
	if v.Size == nil {
		return "pets"
	}
	return "size " + strconv.Itoa(*v.Size)
}

// groupStatus is "managed", "freed", or "destroying" (a group destroy
// that did not finish).
func groupStatus(v operation.GroupView) string {
	switch {
	case v.Freed:
		return "freed"
	case v.Destroying:
		return "destroying"
	}
	return "managed"
}

// countHealthyMembers counts the members their flavors call healthy.
func countHealthyMembers(members []group.Member) int {
	n := 0
	for _, m := range members {
		if m.Health == flavor.HealthHealthy {
			n++
		}
	}
	return n
}

// writeGroupTable writes the `group ls` table.
func writeGroupTable(w io.Writer, views []operation.GroupView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSIZE\tINSTANCES\tHEALTHY\tSTATUS")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n",
			v.Name, groupSize(v), len(v.Instances), countHealthyMembers(v.Instances), groupStatus(v))
	}
	return tw.Flush()
}

// writeGroupDescription writes `group describe`: a header line, then one row
// per member with its user tags (infrakit's own tags are in -json).
func writeGroupDescription(w io.Writer, v operation.GroupView) error {
	fmt.Fprintf(w, "Group %q: %s, %s (%d healthy), %s\n",
		v.Name, sizePhrase(v), countOf(len(v.Instances), "instance"), countHealthyMembers(v.Instances), groupStatus(v))
	switch outdated, total := rollProgress(v); {
	case v.UpdateStopped:
		fmt.Fprintf(w, "Rolling update: stopped by group stop-update until the next apply; %d of %s out of date\n", outdated, countOf(total, "instance"))
	case outdated > 0:
		fmt.Fprintf(w, "Rolling update: %d of %s out of date (%d replaced)\n", outdated, countOf(total, "instance"), total-outdated)
	}
	if len(v.Instances) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLOGICAL ID\tSTATE\tHEALTH\tTAGS")
	for _, m := range sortedGroupMembers(v.Instances) {
		logical := m.LogicalID
		if logical == "" {
			logical = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, logical, m.State, m.Health, groupUserTags(v.Tags[m.ID]))
	}
	return tw.Flush()
}

// groupUserTags formats the tags a user set (not infrakit.*) as "k=v,k=v", sorted.
func groupUserTags(t map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if !tags.IsReserved(k) {
			parts = append(parts, k+"="+t[k])
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// groupRunnerOptions are the knobs a group verb passes to its Runner.
type groupRunnerOptions struct {
	operation string
	// files are the -f stack files, as given.
	files       []string
	lockTimeout time.Duration
	parallelism int
	progress    func(execute.Event)
}

// groupRunner starts an operation.Runner for a group verb. Close it.
func (m *Meta) groupRunner(o groupRunnerOptions) (*operation.Runner, error) {
	return operation.New(m.Context(), operation.Options{
		WorkDir:     m.WorkDir,
		StackDir:    m.stackDir(),
		ExtraFiles:  m.stackFilePaths(o.files),
		Inputs:      m.inputs(),
		Logger:      m.Logger.Named(strings.ReplaceAll(o.operation, " ", "-")),
		Parallelism: o.parallelism,
		LockTimeout: o.lockTimeout,
		Operation:   o.operation,
		LockWait:    m.Stderr,
		Progress:    o.progress,
	})
}

// reportGroupResult shows what a group verb did to the ingresses and
// enrollments that follow the group, and each failed step as an error
// diagnostic (as apply does); it reports whether a step failed.
func (m *Meta) reportGroupResult(res *controller.Result) bool {
	if res == nil {
		return false
	}
	m.showFailures(res)
	return len(res.Failed) > 0
}

// followerPhrase is "; 2 backends registered, 1 authorization made" for
// what a verb did to load balancers and authorizations ("" when nothing).
func followerPhrase(res *controller.Result) string {
	if res == nil || res.Done.Followers() == 0 {
		return ""
	}
	c := res.Done
	var parts []string
	for _, x := range []struct {
		n          int
		noun, verb string
	}{{c.Publish, "route", "published"}, {c.Republish, "route", "republished"}, {c.Unpublish, "route", "unpublished"},
		{c.Register, "backend", "registered"}, {c.Deregister, "backend", "deregistered"},
		{c.Authorize, "authorization", "made"}, {c.Revoke, "authorization", "revoked"}} {
		if x.n > 0 {
			parts = append(parts, countOf(x.n, x.noun)+" "+x.verb)
		}
	}
	return "; " + strings.Join(parts, ", ")
}

// groupViews asks the groups controller for the views of every group, or
// of the named ones in the order named, with what is known of those that
// failed and the errors joined.
func (m *Meta) groupViews(r *operation.Runner, names []string) ([]operation.GroupView, error) {
	var metas []*controller.Metadata
	if len(names) == 0 {
		metas = []*controller.Metadata{nil}
	}
	for _, n := range names {
		metas = append(metas, &controller.Metadata{Name: n})
	}
	var out []operation.GroupView
	var errs []error
	for _, meta := range metas {
		objs, err := r.Groups().Describe(m.Context(), meta)
		errs = append(errs, err)
		for _, o := range objs {
			if v, verr := operation.GroupViewOf(o); verr == nil {
				out = append(out, v)
			}
		}
	}
	return out, errors.Join(errs...)
}

// parseGroupArgs parses args for a group verb that takes NAME and then
// between minRest and maxRest more arguments (maxRest < 0: unlimited). It
// prints what is wrong and returns ok=false (the caller returns
// cli.RunResultHelp).
func (m *Meta) parseGroupArgs(verb string, fs *flag.FlagSet, args []string, minRest, maxRest int) (name string, rest []string, ok bool) {
	positional, err := ParseArgs(fs, args)
	if err != nil {
		m.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return "", nil, false
	}
	if len(positional) == 0 {
		m.Ui.Error(fmt.Sprintf("The group %s command needs the name of a group.\n", verb))
		return "", nil, false
	}
	name, rest = positional[0], positional[1:]
	switch {
	case len(rest) < minRest:
		m.Ui.Error(fmt.Sprintf("The group %s command needs more arguments after the group name.\n", verb))
		return "", nil, false
	case maxRest >= 0 && len(rest) > maxRest:
		m.Ui.Error(fmt.Sprintf("The group %s command got unexpected arguments %q.\n", verb, rest[maxRest:]))
		return "", nil, false
	}
	return name, rest, true
}

// GroupListCommand is `infrakit group ls [NAME]... [-json]`.
type GroupListCommand struct {
	Meta
}

// Run lists the groups of the state (or the named ones) with their members
// as the providers see them now.
func (c *GroupListCommand) Run(args []string) int {
	fs := c.FlagSet("group ls")
	jsonOut := FlagJSON(fs)
	files := flagStackInputs(fs)
	names, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}

	r, err := c.groupRunner(groupRunnerOptions{operation: "group ls", files: *files})
	if err != nil {
		c.showError("Error listing groups", err)
		return 1
	}
	defer c.closeRunner(r)

	// A group that cannot be observed (its provider fails) is still listed
	// with what is known; the error follows and the exit code is 1.
	views, listErr := c.listGroups(r, names)
	if listErr != nil && len(views) == 0 {
		c.showError("Error listing groups", listErr)
		return 1
	}
	if *jsonOut {
		// DESIGN.md: `group ls miners -json` is one group's object; with
		// no name or several, an array of them.
		var out any
		if len(names) == 1 && len(views) == 1 {
			out = newGroupJSON(views[0])
		} else {
			list := make([]groupJSON, 0, len(views))
			for _, v := range views {
				list = append(list, newGroupJSON(v))
			}
			out = list
		}
		if err := c.WriteJSON(out); err != nil {
			c.Ui.Error(err.Error())
			return 1
		}
	} else if len(views) == 0 {
		c.Ui.Output("No groups in the state. Run \"infrakit apply\" to create the stack's groups.")
	} else {
		var b strings.Builder
		if err := writeGroupTable(&b, views); err != nil {
			c.Ui.Error(err.Error())
			return 1
		}
		c.Ui.Output(strings.TrimRight(b.String(), "\n"))
	}
	if listErr != nil {
		c.showError("Error listing groups", listErr)
		return 1
	}
	return 0
}

// listGroups returns every group, or the named ones in the order named,
// with what is known of those that failed and the errors joined.
func (c *GroupListCommand) listGroups(r *operation.Runner, names []string) ([]operation.GroupView, error) {
	return c.groupViews(r, names)
}

// Synopsis is the one-line description in `infrakit group -help`.
func (c *GroupListCommand) Synopsis() string { return "List the groups and their sizes" }

// Help is the text of `infrakit group ls -help`.
func (c *GroupListCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] group ls [NAME]... [-json] [-f FILE]...

  Lists the groups of the state (or only the named ones): the desired size,
  how many instances the providers report, how many of them the flavors
  call healthy, and whether infrakit manages the group or it is freed.

Options:

  -json     Print JSON. With exactly one NAME, that group's object:
            {"group", "size", "freed", "instances": [{"id", "logical_id",
            "tags", "state", "health", "address"}], "rolling": {"outdated",
            "stopped"}}. With no NAME or several, an array of such
            objects. "size" is absent for pets and "logical_id" is null
            for cattle.

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE   Accepted, as by every command that reads the stack; the
            group verbs act on the applied stack and read no stack file.
            Repeatable.
`)
}

// GroupDescribeCommand is `infrakit group describe NAME [-json]`.
type GroupDescribeCommand struct {
	Meta
}

// Run prints one group and each of its members.
func (c *GroupDescribeCommand) Run(args []string) int {
	fs := c.FlagSet("group describe")
	jsonOut := FlagJSON(fs)
	files := flagStackInputs(fs)
	name, _, ok := c.parseGroupArgs("describe", fs, args, 0, 0)
	if !ok {
		return cli.RunResultHelp
	}

	r, err := c.groupRunner(groupRunnerOptions{operation: "group describe", files: *files})
	if err != nil {
		c.showError("Error describing the group", err)
		return 1
	}
	defer c.closeRunner(r)

	views, err := c.groupViews(r, []string{name})
	if err != nil || len(views) != 1 {
		c.showError("Error describing the group", err)
		return 1
	}
	v := &views[0]
	wg, from, watched := c.watchGroup(c.Context(), name)
	if *jsonOut {
		out := newGroupJSON(*v)
		if watched {
			out.Brake, out.Autoscale = &wg.Brake, wg.Autoscale
		}
		if err := c.WriteJSON(out); err != nil {
			c.Ui.Error(err.Error())
			return 1
		}
		return 0
	}
	var b strings.Builder
	if err := writeGroupDescription(&b, *v); err != nil {
		c.Ui.Error(err.Error())
		return 1
	}
	out := strings.TrimRight(b.String(), "\n")
	if watched {
		// After the header and roll lines, before the instance table.
		head, table, _ := strings.Cut(out, "\n\n")
		out = head + "\n" + brakeLine(wg.Brake, from)
		if lines := autoscaleLines(wg.Autoscale, from); lines != "" {
			out += "\n" + lines
		}
		if table != "" {
			out += "\n\n" + table
		}
	}
	c.Ui.Output(out)
	return 0
}

// Synopsis is the one-line description in `infrakit group -help`.
func (c *GroupDescribeCommand) Synopsis() string { return "Show a group's instances" }

// Help is the text of `infrakit group describe -help`.
func (c *GroupDescribeCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] group describe NAME [-json] [-f FILE]...

  Shows one group and each of its instances as the instance provider
  reports it now: ID, logical ID (pets), state (pending, running,
  terminating), health as the group's flavors judge it, and the tags the
  user set. While instances are out of date (a rolling update), it says
  how many, and whether "group stop-update" halted the roll. When a
  "infrakit watch" runs on the local state, it also shows the group's
  mass-failure brake as that watch reports it (engaged, why, and the
  earliest it may release).

Options:

  -json   Print one JSON object: {"group", "size", "freed", "instances":
          [{"id", "logical_id", "tags", "state", "health", "address"}], "rolling":
          {"outdated", "stopped"}, "brake" (with a watch running:
          {"engaged", "reason", "since", "release_at", "rate_limit"})},
          with every tag including infrakit's own (infrakit.group,
          infrakit.config.hash ...).

  -var NAME=VALUE      Set a stack variable, as for plan, for when the
                       stack files are read. Repeatable.

  -var-file FILE       Read variable values from FILE, as for plan.
                       Repeatable.

  -f FILE Accepted, as by every command that reads the stack; the group
          verbs read no stack file. Repeatable.
`)
}
