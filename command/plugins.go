package command

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/pluginhost"
)

// PluginsCommand is the parent of the `infrakit plugins` verbs; alone it
// prints its help.
type PluginsCommand struct {
	Meta
}

// Run prints the help, which lists the subcommands.
func (c *PluginsCommand) Run([]string) int { return cli.RunResultHelp }

// Synopsis is the one-line description in `infrakit -help`.
func (c *PluginsCommand) Synopsis() string { return "Install, list and remove providers" }

// Help is the text of `infrakit plugins -help`.
func (c *PluginsCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] plugins <subcommand> [args]

  Manages the provider binaries installed in .infrakit/plugins and pinned in
  .infrakit.lock.hcl. "infrakit init" installs what the stack needs; these
  commands install a given binary, list and remove them.
`)
}

// PluginsInstallCommand is `infrakit plugins install PATH...`.
type PluginsInstallCommand struct {
	Meta
}

// Run installs each binary and pins it in the lock file, replacing the
// provider's previous entry.
func (c *PluginsInstallCommand) Run(args []string) int {
	fs := c.FlagSet("plugins install")
	paths, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(paths) == 0 {
		c.Ui.Error("The plugins install command needs the path of at least one provider binary.\n")
		return cli.RunResultHelp
	}
	lock, err := pluginhost.LoadLock(c.WorkDir)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: %s", err))
		return 1
	}
	opts := pluginhost.InstallOptions{LaunchOptions: pluginhost.LaunchOptions{Logger: c.Logger.Named("pluginhost")}}
	for _, path := range paths {
		p, err := pluginhost.Install(c.Context(), c.WorkDir, c.Path(path), opts)
		if err != nil {
			// Providers installed so far stay installed and locked.
			c.saveLock(lock)
			c.Ui.Error(fmt.Sprintf("Error: %s", err))
			return 1
		}
		lock.Set(pluginhost.LockedProvider{Name: p.Name, Version: p.Version, Hashes: []pluginhost.Hash{p.SHA256}})
		c.Ui.Output(fmt.Sprintf("- Installed %s v%s (from %s)", p.Name, p.Version, p.Source))
	}
	if !c.saveLock(lock) {
		return 1
	}
	return 0
}

// saveLock writes the lock file, reporting a failure; it reports success.
func (c *PluginsInstallCommand) saveLock(lock *pluginhost.Lock) bool {
	if err := lock.Save(c.WorkDir); err != nil {
		c.Ui.Error(fmt.Sprintf("Error: %s", err))
		return false
	}
	return true
}

// Synopsis is the one-line description in `infrakit plugins -help`.
func (c *PluginsInstallCommand) Synopsis() string { return "Install provider binaries and lock them" }

// Help is the text of `infrakit plugins install -help`.
func (c *PluginsInstallCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] plugins install PATH...

  Installs each provider binary (named infrakit-provider-<name>) into
  .infrakit/plugins and pins its version and checksum in .infrakit.lock.hcl,
  replacing what the lock file said about that provider. The binary is run
  once to ask its version.
`)
}

// PluginsListCommand is `infrakit plugins ls [-json]`.
type PluginsListCommand struct {
	Meta
}

// pluginsListOutput is the -json output of plugins ls.
type pluginsListOutput struct {
	Providers []pluginhost.InstalledProvider `json:"providers"`
}

// Run lists installed and locked providers with whether each binary still
// has its locked checksum.
func (c *PluginsListCommand) Run(args []string) int {
	fs := c.FlagSet("plugins ls")
	jsonOut := FlagJSON(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The plugins ls command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}
	providers, err := pluginhost.Installed(c.WorkDir)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: %s", err))
		return 1
	}
	if *jsonOut {
		if providers == nil {
			providers = []pluginhost.InstalledProvider{}
		}
		if err := c.WriteJSON(pluginsListOutput{Providers: providers}); err != nil {
			c.Ui.Error(err.Error())
			return 1
		}
		return 0
	}
	if len(providers) == 0 {
		c.Ui.Output("No providers are installed. Run \"infrakit init\" to install the ones the stack needs.")
		return 0
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tSTATUS\tSHA256\tPATH")
	for _, p := range providers {
		sum := string(p.SHA256)
		if sum == "" {
			sum = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Version, p.Status, sum, c.relPath(p.Path))
	}
	tw.Flush()
	c.Ui.Output(strings.TrimRight(b.String(), "\n"))
	for _, p := range providers {
		switch p.Status {
		case pluginhost.StatusMismatch:
			c.Ui.Warn(fmt.Sprintf("Warning: %s v%s has changed since it was installed; infrakit will refuse to run it. "+
				"Reinstall it with \"infrakit init -upgrade\" or \"infrakit plugins install\".", p.Name, p.Version))
		case pluginhost.StatusMissing:
			c.Ui.Warn(fmt.Sprintf("Warning: %s v%s is locked but not installed; run \"infrakit init\".", p.Name, p.Version))
		}
	}
	return 0
}

// relPath shows paths under the working directory relative to it.
func (c *PluginsListCommand) relPath(p string) string {
	if rel, err := filepath.Rel(c.WorkDir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// Synopsis is the one-line description in `infrakit plugins -help`.
func (c *PluginsListCommand) Synopsis() string { return "List installed providers and verify them" }

// Help is the text of `infrakit plugins ls -help`.
func (c *PluginsListCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] plugins ls [-json]

  Lists the providers installed in .infrakit/plugins and those the lock file
  names, with each binary's sha256 and its status:

    ok        the binary has a checksum the lock file lists
    mismatch  the binary changed since it was installed; it will not be run
    missing   locked but not installed; run "infrakit init"
    unlocked  installed but not in the lock file

Options:

  -json    Print {"providers": [{"name", "version", "path", "sha256", "status"}]}.
`)
}

// PluginsRemoveCommand is `infrakit plugins rm NAME`.
type PluginsRemoveCommand struct {
	Meta
}

// Run removes every installed version of the provider and its lock entry.
func (c *PluginsRemoveCommand) Run(args []string) int {
	fs := c.FlagSet("plugins rm")
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) != 1 {
		c.Ui.Error("The plugins rm command takes one provider name.\n")
		return cli.RunResultHelp
	}
	name := rest[0]
	found, err := pluginhost.Uninstall(c.WorkDir, name)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error: %s", err))
		return 1
	}
	if !found {
		c.Ui.Error(fmt.Sprintf("Error: provider %q is neither installed nor locked.", name))
		return 1
	}
	c.Ui.Output(fmt.Sprintf("Removed provider %s and its lock entry.", name))
	return 0
}

// Synopsis is the one-line description in `infrakit plugins -help`.
func (c *PluginsRemoveCommand) Synopsis() string { return "Remove an installed provider" }

// Help is the text of `infrakit plugins rm -help`.
func (c *PluginsRemoveCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] plugins rm NAME

  Removes every installed version of provider NAME from .infrakit/plugins and
  its entry from .infrakit.lock.hcl. Commands that use it then ask you to run
  "infrakit init".
`)
}
