package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/api"
	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/remote"
	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// The remote CLI: with -address=URL (or INFRAKIT_ADDR) the object commands
// run in the watch serving at URL, which plans, locks and executes as a
// command typed there does (POST /v1/cli, website/api.md), and print here
// what they print there. The client sends the arguments as typed, the
// files they name (-f, -var-file, apply's PLANFILE; for plan and apply the
// directory's stack files too) and its INFRAKIT_VAR_* variables; it writes
// the files the command saves (plan -out) itself, and asks the command's
// questions (apply's approval) on its own terminal.

// remoteCommands are the commands that run against a remote watch: those
// the watch's API runs, the ones that act on the objects of the state. The
// others (init, watch, the state edits, plugins, fmt ...) run where the
// state or the files are.
var remoteCommands = api.Commands

// The flags whose values name files of the client: those the command reads
// and those it writes.
var (
	fileReadFlags  = []string{"f", "var-file"}
	fileWriteFlags = []string{"out"}
)

// withRemote makes the commands of table run against meta.Address when it
// is set: the remote commands there, and the others here, or, when
// -address itself was given, not at all.
func withRemote(meta Meta, table map[string]cli.CommandFactory) map[string]cli.CommandFactory {
	if meta.Address == "" {
		return table
	}
	out := make(map[string]cli.CommandFactory, len(table))
	for name, factory := range table {
		remoteRun := slices.Contains(remoteCommands, name)
		refused := !remoteRun && meta.AddressFlag && !hasSubcommands(table, name)
		out[name] = func() (cli.Command, error) {
			c, err := factory()
			if err != nil || (!remoteRun && !refused) {
				return c, err
			}
			return remoteCommand{Command: c, name: name, meta: meta, refused: refused}, nil
		}
	}
	return out
}

// hasSubcommands reports whether name is the parent of nested commands
// ("group" of "group ls"): it only prints its help, wherever it runs.
func hasSubcommands(table map[string]cli.CommandFactory, name string) bool {
	for other := range table {
		if strings.HasPrefix(other, name+" ") {
			return true
		}
	}
	return false
}

// remoteCommand is a command run against the watch at meta.Address, or
// refused there. Its help and synopsis are the command's.
type remoteCommand struct {
	cli.Command
	name    string
	meta    Meta
	refused bool
}

// Run runs the command in the watch and returns its exit code.
func (c remoteCommand) Run(args []string) int {
	if c.refused {
		c.meta.showError(fmt.Sprintf("infrakit %s runs where the state is; it cannot run against a remote watch (-address)", c.name),
			fmt.Errorf("only these commands run against a watch: %s. Run infrakit %s without -address, in the directory of the watch's stack",
				strings.Join(remoteCommands, ", "), c.name))
		return 1
	}
	return c.meta.runRemote(c.name, args)
}

// runRemote sends command name with args to the watch, prints what it
// prints, asks its questions and writes the files it saves.
func (m *Meta) runRemote(name string, args []string) int {
	client, err := remote.NewTLS(m.Address, os.Getenv(remote.EnvToken), remote.TLSFiles{
		CA: os.Getenv(remote.EnvCACert), Cert: os.Getenv(remote.EnvClientCert), Key: os.Getenv(remote.EnvClientKey)})
	if err != nil {
		m.showError("Invalid remote address", err)
		return 1
	}
	req, writes, err := m.remoteRequest(name, args)
	if err != nil {
		m.showError("Error reading the files to send", err)
		return 1
	}
	ctx := m.Context()
	// The verb the approval names ("apply", "destroy") is the command's
	// last word.
	verb := name[strings.LastIndex(name, " ")+1:]
	files := map[string][]byte{}
	resp, err := client.Run(ctx, req)
	for {
		if err != nil {
			m.showRemoteError(err)
			return 1
		}
		_, _ = io.WriteString(m.Stdout, resp.Stdout)
		_, _ = io.WriteString(m.Stderr, resp.Stderr)
		for k, v := range resp.Files {
			files[k] = v
		}
		if resp.Question == "" {
			break
		}
		answer, askErr := m.askApproval(verb, resp.Question)
		if askErr != nil {
			// Refused here as approve refuses: the watch is told "no", so
			// it lets go of the state lock at once, and its answer (that
			// the approval was not given) is left for this one.
			if _, err := client.Answer(ctx, resp.Session, "no"); err != nil {
				m.Logger.Warn("answering the remote question", "error", err)
			}
			m.showError(strings.ToUpper(verb[:1])+verb[1:]+" cancelled", askErr)
			return 1
		}
		resp, err = client.Answer(ctx, resp.Session, answer)
	}
	for _, name := range writes {
		data, ok := files[answerFileName(name)]
		if !ok {
			continue
		}
		if err := atomicfile.WriteFile(m.Path(name), data, 0o600); err != nil {
			m.showError("Error writing "+name, err)
			return 1
		}
	}
	return resp.ExitCode
}

// showRemoteError shows a request that did not run as the CLI's errors.
func (m *Meta) showRemoteError(err error) {
	var e *remote.Error
	if !errors.As(err, &e) {
		m.showError("Error running the command remotely", err)
		return
	}
	m.ShowDiagnostics(nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: e.Summary, Detail: e.Detail}})
}

// remoteRequest is the request that runs command name with args, and the
// files the command writes, by the names args give them.
func (m *Meta) remoteRequest(name string, args []string) (remote.Request, []string, error) {
	req := remote.Request{
		Command:  name,
		Args:     slices.Clone(args),
		Files:    map[string][]byte{},
		Dir:      filepath.Base(m.WorkDir),
		Env:      map[string]string{},
		Terminal: isTerminal(m.Stdout) && colorAllowed(os.Getenv),
	}
	named := findFileArgs(commandFlagSets(m.WorkDir, name), req.Args, name == "apply", func(p string) string { return m.Path(p) })
	if name == "plan" || (name == "apply" && !named.planFile) {
		stack, err := config.DirFiles(m.WorkDir)
		if err != nil {
			return req, nil, err
		}
		for _, path := range stack {
			rel, err := filepath.Rel(m.WorkDir, path)
			if err != nil {
				return req, nil, err
			}
			if req.Files[rel], err = os.ReadFile(path); err != nil {
				return req, nil, err
			}
		}
	}
	for _, f := range named.reads {
		data, err := os.ReadFile(m.Path(f))
		if err != nil {
			return req, nil, err
		}
		req.Files[f] = data
	}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvVarPrefix) {
			req.Env[k] = v
		}
	}
	return req, named.writes, nil
}

// answerFileName is the name under which the watch answers a file the
// command wrote to name: relative to the client's directory, where an
// absolute name lies below it too.
func answerFileName(name string) string {
	return strings.TrimPrefix(filepath.Join(string(filepath.Separator), name), string(filepath.Separator))
}

// fileArgs are the files a command's arguments name.
type fileArgs struct {
	// reads are the files the command reads (-f, -var-file, PLANFILE) and
	// writes those it writes (-out), by their names in the arguments.
	reads, writes []string
	// planFile says a PLANFILE was given.
	planFile bool
}

// findFileArgs walks args as the command's flag sets parse them
// (ParseArgs: flags before, between and after positional arguments, "--"
// ending them, a flag that is not bool taking a value) and returns the
// files they name; with planFileArg the first positional argument is one
// (apply's PLANFILE). A name that climbs out of the working directory
// ("../prod.ivars") is replaced in args by abs(name), its absolute path:
// the watch keeps the client's files below one directory. Flags the
// command does not define are left for the watch to refuse.
func findFileArgs(sets []*flag.FlagSet, args []string, planFileArg bool, abs func(string) string) fileArgs {
	var out fileArgs
	lookup := func(name string) *flag.Flag {
		for _, fs := range sets {
			if f := fs.Lookup(name); f != nil {
				return f
			}
		}
		return nil
	}
	// name returns the file name args[i] holds, made absolute there when
	// it climbs out; prefix is what stands before the name in args[i].
	name := func(i int, prefix string) string {
		v := strings.TrimPrefix(args[i], prefix)
		if v != "" && !filepath.IsAbs(v) && !filepath.IsLocal(v) {
			v = abs(v)
			args[i] = prefix + v
		}
		return v
	}
	positional := func(i int) {
		if planFileArg && !out.planFile {
			out.planFile = true
			out.reads = append(out.reads, name(i, ""))
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			for j := i + 1; j < len(args); j++ {
				positional(j)
			}
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional(i)
			continue
		}
		flagName, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := lookup(flagName)
		if f == nil || isBoolFlag(f) {
			continue
		}
		at, prefix := i, a[:strings.Index(a, "=")+1]
		if !hasValue {
			if i+1 == len(args) {
				break
			}
			i++
			at, prefix = i, ""
		}
		switch {
		case slices.Contains(fileReadFlags, flagName):
			if v := name(at, prefix); v != "" {
				out.reads = append(out.reads, v)
			}
		case slices.Contains(fileWriteFlags, flagName):
			if v := name(at, prefix); v != "" {
				out.writes = append(out.writes, v)
			}
		}
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
