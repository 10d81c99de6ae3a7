package command

import (
	"context"
	"flag"
	"io"
	"strings"
	"time"

	"github.com/mitchellh/cli"
	"github.com/posener/complete"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/stateedit"
)

// completing is a command with shell completion (mitchellh/cli's
// autocomplete, installed by `infrakit -install-autocomplete`): its flags,
// and its arguments' names from the state.
type completing struct {
	cli.Command
	name string
	meta Meta
}

var _ cli.CommandAutocomplete = completing{}

// withCompletion wraps every command of table.
func withCompletion(meta Meta, table map[string]cli.CommandFactory) map[string]cli.CommandFactory {
	out := make(map[string]cli.CommandFactory, len(table))
	for name, factory := range table {
		out[name] = func() (cli.Command, error) {
			c, err := factory()
			if err != nil {
				return nil, err
			}
			return completing{Command: c, name: name, meta: meta}, nil
		}
	}
	return out
}

// AutocompleteFlags are the flags the command defines.
func (c completing) AutocompleteFlags() complete.Flags {
	flags := complete.Flags{}
	for _, fs := range commandFlagSets(c.meta.WorkDir, c.name) {
		fs.VisitAll(func(f *flag.Flag) { flags["-"+f.Name] = flagPredictor(f) })
	}
	return flags
}

// commandFlagSets are the flag sets the command name makes, learnt from the
// command itself: it is run with -h and nothing to talk to, so it defines
// its flags and stops at parsing them. Shell completion and the remote CLI
// (which sends the files that flags name) read them.
func commandFlagSets(workDir, name string) []*flag.FlagSet {
	m := NewMeta(workDir, strings.NewReader(""), io.Discard, io.Discard)
	var sets []*flag.FlagSet
	m.captureFlags = func(fs *flag.FlagSet) { sets = append(sets, fs) }
	factory, ok := commandTable(m)[name]
	if !ok {
		return nil
	}
	cmd, err := factory()
	if err != nil {
		return nil
	}
	cmd.Run([]string{"-h"})
	return sets
}

// flagPredictor is what a flag's value may be.
func flagPredictor(f *flag.Flag) complete.Predictor {
	if isBoolFlag(f) {
		return complete.PredictNothing
	}
	switch f.Name {
	case "f", "out":
		return complete.PredictFiles("*")
	case "plugin-dir":
		return complete.PredictDirs("*")
	}
	return complete.PredictAnything
}

// AutocompleteArgs predicts the command's arguments: names of the state's
// objects for the object verbs, files for those taking files.
func (c completing) AutocompleteArgs() complete.Predictor {
	first, _, _ := strings.Cut(c.name, " ")
	switch {
	case c.name == "fmt" || c.name == "convert" || c.name == "plugins install" || c.name == "apply":
		return complete.PredictFiles("*")
	case c.name == "state show" || c.name == "state rm" || c.name == "state mv" || c.name == "state list":
		return c.stateAddresses(false)
	case c.name == "import":
		return c.stateAddresses(true)
	case first == "group" && c.name != "group":
		return c.stateNames(func(st *config.Stack) []string {
			return names(st.Groups, func(g *config.Group) string { return g.Name })
		})
	case strings.HasPrefix(c.name, "lb ") && strings.HasSuffix(c.name, " ls"):
		return c.stateNames(func(st *config.Stack) []string {
			return names(st.LoadBalancers, func(lb *config.LoadBalancer) string { return lb.Name })
		})
	case first == "ingress" && c.name != "ingress":
		return c.stateNames(func(st *config.Stack) []string {
			return names(st.Ingresses, func(i *config.Ingress) string { return i.Name })
		})
	case first == "enrollment" && c.name != "enrollment":
		return c.stateNames(func(st *config.Stack) []string {
			return names(st.Enrollments, func(e *config.Enrollment) string { return e.Name })
		})
	}
	return complete.PredictNothing
}

// stateNames predicts names of the stack the state holds (as applied),
// read without the lock and within a second, so a slow backend only makes
// completion offer nothing.
func (c completing) stateNames(of func(*config.Stack) []string) complete.Predictor {
	return complete.PredictFunc(func(complete.Args) []string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := operation.New(ctx, operation.Options{WorkDir: c.meta.WorkDir})
		if err != nil {
			return nil
		}
		defer r.Close()
		doc, err := r.State(ctx)
		if err != nil || doc.Stack == nil {
			return nil
		}
		return of(doc.Stack)
	})
}

// stateAddresses predicts the addresses the state holds (`state list`), or
// only its groups' (for import), read as stateNames reads names.
func (c completing) stateAddresses(groupsOnly bool) complete.Predictor {
	return complete.PredictFunc(func(complete.Args) []string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := operation.New(ctx, operation.Options{WorkDir: c.meta.WorkDir})
		if err != nil {
			return nil
		}
		defer r.Close()
		doc, err := r.State(ctx)
		if err != nil {
			return nil
		}
		var out []string
		for _, a := range stateedit.List(doc) {
			if !groupsOnly || (a.Kind == "group" && !a.IsInstance()) {
				out = append(out, a.String())
			}
		}
		return out
	})
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}
