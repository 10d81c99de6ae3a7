package command

import (
	"fmt"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/pluginhost"
)

// InitCommand is `infrakit init [-plugin-dir DIR]... [-upgrade]`: it installs
// the providers the stack needs and writes the lock file.
type InitCommand struct {
	Meta
}

// pluginDirFlag collects repeated -plugin-dir flags in order.
type pluginDirFlag []string

func (f *pluginDirFlag) String() string     { return strings.Join(*f, ",") }
func (f *pluginDirFlag) Set(v string) error { *f = append(*f, v); return nil }

// Run loads the stack, installs each provider it names (once per name, however
// many aliases) and records them in .infrakit.lock.hcl.
func (c *InitCommand) Run(args []string) int {
	fs := c.FlagSet("init")
	files := flagStackInputs(fs)
	var dirs pluginDirFlag
	fs.Var(&dirs, "plugin-dir", "directory to look for provider binaries in first (repeatable)")
	upgrade := fs.Bool("upgrade", false, "accept provider binaries that differ from the lock file")
	migrate := fs.Bool("migrate-state", false, "move the state to the backend the stack configures")
	lockTimeout := FlagLockTimeout(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The init command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}

	stack, diags := c.loadStack(*files)
	c.ShowDiagnostics(stack.Files, diags)
	if diags.HasErrors() {
		return 1
	}
	if code := c.initBackend(stack, *migrate, *lockTimeout); code != 0 {
		return code
	}
	var names []string
	for _, p := range stack.Providers {
		names = append(names, p.Name)
	}

	// -plugin-dir is relative to the working directory, as every path is after -chdir.
	for i, d := range dirs {
		dirs[i] = c.Path(d)
	}
	c.Ui.Output("Initializing provider plugins...")
	report, err := pluginhost.Init(c.Context(), c.WorkDir, names, pluginhost.InitOptions{
		LaunchOptions: pluginhost.LaunchOptions{Logger: c.Logger.Named("pluginhost")},
		SearchDirs:    pluginhost.SearchDirs(dirs),
		Upgrade:       *upgrade,
	})
	for _, p := range report.Providers {
		switch p.Action {
		case pluginhost.ActionReused:
			c.Ui.Output(fmt.Sprintf("- Using previously-installed %s v%s", p.Name, p.Version))
		default:
			c.Ui.Output(fmt.Sprintf("- Installed %s v%s (from %s)", p.Name, p.Version, p.Source))
		}
	}
	if err != nil {
		c.Ui.Error(fmt.Sprintf("\nError: failed to install providers:\n\n%s\n", err))
		return 1
	}
	if len(names) == 0 {
		c.Ui.Output("- The stack uses no providers.")
	}
	switch {
	case report.LockCreated:
		c.Ui.Output("\ninfrakit has created a lock file " + pluginhost.LockFileName + " to record the provider\n" +
			"selections it made above. Include this file in your version control repository\n" +
			"so that infrakit makes the same selections when you run \"infrakit init\" again.")
	case report.LockChanged:
		c.Ui.Output("\ninfrakit has updated the lock file " + pluginhost.LockFileName + ".")
	}
	c.Ui.Output("\ninfrakit has been successfully initialized!")
	return 0
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *InitCommand) Synopsis() string {
	return "Install the providers the stack needs"
}

// Help is the text of `infrakit init -help`.
func (c *InitCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] init [-plugin-dir DIR]... [-upgrade] [-migrate-state] [-lock-timeout D] [-var NAME=VALUE]... [-var-file FILE]... [-f FILE]...

  Installs the providers the stack's provider blocks name into
  .infrakit/plugins and records their versions and checksums in
  .infrakit.lock.hcl. Commit the lock file: every later command runs only
  provider binaries whose checksum it lists.

  A provider is a binary named infrakit-provider-<name>. init looks for it
  in, in order: each -plugin-dir, the directories in $INFRAKIT_PLUGIN_PATH,
  ~/.infrakit/plugins, and the directory holding the infrakit binary. A
  provider already installed with a locked checksum is used as it is.

Options:

  -plugin-dir DIR   Look for provider binaries in DIR first. Repeatable.

  -var NAME=VALUE      Set the stack variable NAME. The text is the value
                       of a string, number or bool variable, and an HCL
                       expression (["a", "b"], { k = "v" }) for other
                       types. Repeatable.

  -var-file FILE       Read variable values from FILE: name = value lines
                       in HCL, or a JSON object when FILE ends in .json.
                       Repeatable. -var and -var-file apply in the order
                       given, over INFRAKIT_VAR_NAME in the environment,
                       infrakit.ivars and *.auto.ivars.

  -f FILE           Also read FILE as part of the stack: HCL, or a JSON or
                    YAML specification in an old format. Repeatable.

  -upgrade          Look for every provider again and accept binaries whose
                    version or checksum differs from the lock file.

  -migrate-state    The stack's backend block changed (say, from the local
                    file to etcd): move the state from the backend recorded
                    in .infrakit/backend.json to the configured one, verify
                    it, and keep the old copy as a backup. Without this flag
                    init stops when the old backend still holds state.
                    With etcd it also moves a state an older infrakit
                    stored as one value (<prefix>/state) to the
                    per-object layout, keeping the one value in
                    <prefix>/state.migrated.

  -lock-timeout D   How long -migrate-state waits for the state locks
                    (default 30s).
`)
}
