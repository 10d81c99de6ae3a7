// Command infrakit is the CLI of infrakit: declarative, self-healing
// infrastructure. main handles what comes before the subcommand (-chdir,
// -version, logging, signals) and hands the rest to the command table of
// package command.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/mitchellh/cli"
	"github.com/posener/complete"

	"github.com/infrakit/infrakit/command"
	"github.com/infrakit/infrakit/internal/remote"
	"github.com/infrakit/infrakit/sdk/profiling"
)

// Version is infrakit's version, set at build time with
// -ldflags "-X main.Version=1.2.3".
var Version = "0.1.0-dev"

// Environment variables read by main.
const (
	envLog     = "INFRAKIT_LOG"
	envLogPath = "INFRAKIT_LOG_PATH"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// realMain runs one infrakit invocation and returns its exit code. It changes
// the process's working directory when -chdir is given (providers are
// subprocesses and inherit it, which is what makes their relative paths, such
// as the simulator's .infrakit/simulator, follow -chdir).
func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	logger, closeLog, err := newLogger(os.Getenv(envLog), os.Getenv(envLogPath), stderr)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
	defer closeLog()

	stopProfile, err := profiling.Start(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
	defer func() {
		if err := stopProfile(); err != nil {
			fmt.Fprintf(stderr, "Warning: %s\n", err)
		}
	}()

	dir, args, err := extractChdir(args)
	if err != nil {
		fmt.Fprintf(stderr, "Error: invalid -chdir option: %s\n", err)
		return 1
	}
	if dir != "" {
		if err := os.Chdir(dir); err != nil {
			fmt.Fprintf(stderr, "Error: -chdir: %s\n", err)
			return 1
		}
	}
	address, args, err := extractAddress(args)
	if err != nil {
		fmt.Fprintf(stderr, "Error: invalid -address option: %s\n", err)
		return 1
	}
	addressFlag := address != ""
	if !addressFlag {
		address = os.Getenv(remote.EnvAddress)
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "Error: finding the working directory: %s\n", err)
		return 1
	}
	logger.Debug("starting", "version", Version, "args", args, "workdir", wd)

	ctx, stop := command.NotifyShutdown(context.Background(), stderr)
	defer stop()

	meta := command.NewMeta(wd, stdin, stdout, stderr)
	meta.Logger = logger
	meta.Version = Version
	meta.ShutdownCtx = ctx
	meta.Address, meta.AddressFlag = address, addressFlag
	commands := command.Commands(meta)

	// -v, -version and --version alone are the version command.
	if len(args) > 0 && slices.Contains([]string{"-v", "-version", "--version"}, args[0]) {
		args = append([]string{"version"}, args[1:]...)
	}
	// `help [COMMAND...]` is -help, as Terraform's and git's users type it.
	if len(args) > 0 && args[0] == "help" {
		if len(args) > 1 && !isCommand(commands, strings.Join(args[1:], " ")) {
			fmt.Fprintf(stderr, "Error: infrakit has no command named %q. Run \"infrakit help\" for the list.\n", strings.Join(args[1:], " "))
			return 1
		}
		args = append(slices.Clone(args[1:]), "-help")
	}

	runner := &cli.CLI{
		Name:        "infrakit",
		Args:        args,
		Commands:    commands,
		HelpFunc:    helpFunc,
		HelpWriter:  stdout,
		ErrorWriter: stderr,
		// Shell completion: -install-autocomplete adds `complete -C` lines
		// to ~/.bashrc and ~/.zshrc; the shell then runs infrakit with
		// COMP_LINE set, and the commands predict their flags and names.
		Autocomplete:          true,
		AutocompleteInstall:   "install-autocomplete",
		AutocompleteUninstall: "uninstall-autocomplete",
		AutocompleteGlobalFlags: complete.Flags{
			"-chdir":   complete.PredictDirs("*"),
			"-address": complete.PredictAnything,
		},
	}
	// cli answers an unknown command with the usage and exit code 127; the
	// contract is 1 for every error, with the reason said first.
	if sub := runner.Subcommand(); sub != "" && !runner.IsHelp() && !isCommand(commands, sub) {
		fmt.Fprintf(stderr, "Error: infrakit has no command named %q. Run \"infrakit -help\" for the list.\n", sub)
		return 1
	}
	code, err := runner.Run()
	if err != nil {
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
	if code == 127 {
		return 1
	}
	return code
}

// isCommand reports whether name is a command or the parent of nested ones
// ("group" of "group ls").
func isCommand(commands map[string]cli.CommandFactory, name string) bool {
	if _, ok := commands[name]; ok {
		return true
	}
	for k := range commands {
		if strings.HasPrefix(k, name+" ") {
			return true
		}
	}
	return false
}

// extractChdir removes a -chdir=DIR option standing before the subcommand
// and returns DIR (empty when absent) and the remaining arguments. Like
// Terraform's, the option must come before the subcommand and must use "=".
func extractChdir(args []string) (string, []string, error) {
	return extractGlobal(args, "chdir", "DIR", "a directory")
}

// extractAddress removes an -address=URL option standing before the
// subcommand, as extractChdir removes -chdir.
func extractAddress(args []string) (string, []string, error) {
	return extractGlobal(args, "address", "URL", "a URL")
}

// extractGlobal removes the global option -name=VALUE (the last when
// repeated) from the options before the subcommand and returns VALUE
// (empty when absent) and the remaining arguments. metavar and what say
// what the value is, for the message of an option without one.
func extractGlobal(args []string, name, metavar, what string) (string, []string, error) {
	value, pos := "", -1
	for i, arg := range args {
		if !strings.HasPrefix(arg, "-") {
			break // the subcommand: the option after it belongs to the subcommand
		}
		n, v, hasValue := strings.Cut(strings.TrimPrefix(arg, "-"), "=")
		if n != name && n != "-"+name {
			continue
		}
		if !hasValue || v == "" {
			return "", args, fmt.Errorf("must be -%s=%s, with an equals sign and %s", name, metavar, what)
		}
		value, pos = v, i
	}
	if pos < 0 {
		return "", args, nil
	}
	rest := slices.Concat(args[:pos], args[pos+1:])
	return value, rest, nil
}

// newLogger builds the root logger from INFRAKIT_LOG (level) and
// INFRAKIT_LOG_PATH (file to append to instead of stderr). With neither set
// logging is off. With only a path the level is warn, so a log file someone
// asked for is not left empty of problems. An unknown level is reported and
// treated as trace, as Terraform does with TF_LOG.
func newLogger(level, path string, stderr io.Writer) (hclog.Logger, func(), error) {
	nop := func() {}
	if level == "" && path == "" {
		return hclog.NewNullLogger(), nop, nil
	}
	lvl := hclog.Warn
	if level != "" {
		lvl = hclog.LevelFromString(level)
		if lvl == hclog.NoLevel {
			fmt.Fprintf(stderr, "Warning: %s=%q is not one of trace, debug, info, warn, error, off; logging at trace.\n", envLog, level)
			lvl = hclog.Trace
		}
	}
	out, closeOut := stderr, nop
	if path != "" {
		// 0600: a trace log carries provider properties and requests.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", envLogPath, err)
		}
		out, closeOut = f, func() { _ = f.Close() }
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "infrakit",
		Level:  lvl,
		Output: out,
		Color:  hclog.ColorOff,
	})
	return logger, closeOut, nil
}

// helpFunc is `infrakit -help`: global options, then the commands.
func helpFunc(commands map[string]cli.CommandFactory) string {
	var b strings.Builder
	b.WriteString(`Usage: infrakit [global options] <command> [args]

infrakit keeps declared infrastructure (groups of instances, load-balancer
ingress, NFS enrollments) converged through provider plugins.

Global options (before the command):
  -chdir=DIR     Switch to DIR before doing anything else.
  -address=URL   Run the object commands (group, lb, ingress, enrollment,
                 show, output, plan, apply) against the infrakit watch
                 serving at URL, as if typed there (INFRAKIT_ADDR too).
  -help          Show this help, or a command's help after the command
                 ("infrakit help COMMAND" is the same).
  -version       Same as the version command.
  -install-autocomplete    Install shell completion (bash, zsh) of the
                           commands, their flags and the state's names.
  -uninstall-autocomplete  Remove it.

Environment:
  INFRAKIT_LOG            Log level: trace, debug, info, warn, error, off
                          (default off; watch logs at info to stderr unless
                          INFRAKIT_LOG or INFRAKIT_LOG_PATH is set).
  INFRAKIT_LOG_PATH       Append logs to this file instead of stderr.
  INFRAKIT_ADDR           -address, when the option is not given (then
                          the other commands still run here).
  INFRAKIT_TOKEN          The API token the remote CLI sends (the watch's
                          .infrakit/api-token).
  INFRAKIT_CACERT         PEM file of the CA to trust for an https
                          -address.
  INFRAKIT_CLIENT_CERT    PEM certificate (and INFRAKIT_CLIENT_KEY its
  INFRAKIT_CLIENT_KEY     key) presented to a watch that requires client
                          certificates (-tls-client-ca).
  INFRAKIT_PLUGIN_PATH    Directories (separated like PATH) where init looks
                          for provider binaries, after -plugin-dir.
  INFRAKIT_SIMULATOR_DIR  Where the simulator provider keeps its objects
                          (default .infrakit/simulator).
  INFRAKIT_CPUPROFILE     Write a Go CPU profile of this invocation here.
  INFRAKIT_MEMPROFILE     Write a Go heap profile here when it ends.
  INFRAKIT_PROVIDER_ENV   Further variables providers inherit (names, or
                          NAME_* prefixes); otherwise only an allow-list.
  NO_COLOR                Set to anything: print without ANSI colors (as
                          -no-color does; TERM=dumb too).

Commands:
`)
	names := make([]string, 0, len(commands))
	width := 0
	for name := range commands {
		names = append(names, name)
		width = max(width, len(name))
	}
	names = append(names, "help")
	sort.Strings(names)
	for _, name := range names {
		if name == "help" {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, name, "Show the help of infrakit or of a command")
			continue
		}
		c, err := commands[name]()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, name, c.Synopsis())
	}
	return b.String()
}
