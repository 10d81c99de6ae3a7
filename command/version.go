package command

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/pluginhost"
)

// VersionCommand is `infrakit version [-json]`.
type VersionCommand struct {
	Meta
}

// versionOutput is what version reports; its JSON form is the -json output.
type versionOutput struct {
	Version   string            `json:"infrakit_version"`
	GoVersion string            `json:"go_version"`
	Platform  string            `json:"platform"`
	Providers []providerVersion `json:"providers"`
}

// providerVersion is one provider installed in (or locked by) the working directory.
type providerVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Status is pluginhost's: ok, mismatch, missing or unlocked.
	Status string `json:"status"`
}

// Run prints infrakit's version, the Go version it was built with, the
// platform, and the providers of the working directory.
func (c *VersionCommand) Run(args []string) int {
	fs := c.FlagSet("version")
	jsonOut := FlagJSON(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The version command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}

	out := versionOutput{
		Version:   c.Version,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "_" + runtime.GOARCH,
		Providers: []providerVersion{},
	}
	installed, err := pluginhost.Installed(c.WorkDir)
	if err != nil {
		// infrakit's own version is still worth printing; init and plan
		// report a broken lock file with the detail it deserves.
		c.Ui.Warn(fmt.Sprintf("Warning: cannot list the providers of %s: %s", c.WorkDir, err))
	}
	for _, p := range installed {
		out.Providers = append(out.Providers, providerVersion{Name: p.Name, Version: p.Version, Status: string(p.Status)})
	}

	if *jsonOut {
		if err := c.WriteJSON(out); err != nil {
			c.Ui.Error(err.Error())
			return 1
		}
		return 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "infrakit %s\non %s (%s)", vPrefix(out.Version), out.Platform, out.GoVersion)
	for _, p := range out.Providers {
		fmt.Fprintf(&b, "\n+ provider %s %s%s", p.Name, vPrefix(p.Version), statusNote(pluginhost.Status(p.Status)))
	}
	c.Ui.Output(b.String())
	return 0
}

// vPrefix writes versions the way users read them: "v0.1.0".
func vPrefix(version string) string {
	if strings.HasPrefix(version, "v") {
		return version
	}
	return "v" + version
}

// statusNote explains a provider that is not simply installed and locked.
func statusNote(s pluginhost.Status) string {
	switch s {
	case pluginhost.StatusOK:
		return ""
	case pluginhost.StatusMismatch:
		return ` (binary changed since "infrakit init"; it will not run)`
	case pluginhost.StatusMissing:
		return ` (locked but not installed; run "infrakit init")`
	case pluginhost.StatusUnlocked:
		return " (installed but not in the lock file)"
	}
	return " (" + string(s) + ")"
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *VersionCommand) Synopsis() string {
	return "Show the versions of infrakit and its providers"
}

// Help is the text of `infrakit version -help`.
func (c *VersionCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] version [-json]

  Shows the version of infrakit, the Go version it was built with, the
  platform it runs on, and the version of each provider installed in the
  working directory (or named by its lock file), with a note on any whose
  binary is missing, changed or not locked.

Options:

  -json    Print the version information as a JSON object:
           {"infrakit_version", "go_version", "platform",
            "providers": [{"name", "version", "status"}]}
           where status is ok, mismatch, missing or unlocked.
`)
}
