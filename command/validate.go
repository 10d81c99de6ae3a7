package command

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/pluginhost"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/provider"
)

// ValidateCommand is `infrakit validate`: it checks the stack files and asks
// each provider whether it serves what the stack uses, with these properties.
type ValidateCommand struct {
	Meta
}

// Run loads the stack, then validates it against the installed providers.
// It changes nothing: no state is read or written.
func (c *ValidateCommand) Run(args []string) int {
	fs := c.FlagSet("validate")
	files := flagStackFiles(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The validate command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}

	stack, diags := c.loadStack(*files)
	if diags.HasErrors() {
		c.ShowDiagnostics(stack.Files, diags)
		return 1
	}

	host, err := pluginhost.New(pluginhost.Options{WorkDir: c.WorkDir, Logger: c.Logger.Named("pluginhost")})
	if err != nil {
		c.ShowDiagnostics(stack.Files, diags)
		c.Ui.Error(fmt.Sprintf("Error: %s\n\nRun \"infrakit init\" to install the providers the stack needs.", err))
		return 1
	}
	defer host.Close()
	stop := host.CloseWhenDone(c.Context())
	defer stop()

	diags = append(diags, config.ValidateWithProviders(c.Context(), stack, hostValidator{host: host})...)
	c.ShowDiagnostics(stack.Files, diags)
	if diags.HasErrors() {
		return 1
	}
	c.Ui.Output("Success! The stack is valid.")
	return 0
}

// hostValidator answers config.ValidateWithProviders with the providers a
// pluginhost.Host runs. plan and apply validate through it too.
type hostValidator struct {
	host *pluginhost.Host
}

func (v hostValidator) Metadata(ctx context.Context, key string) (provider.Metadata, error) {
	client, err := v.host.Client(ctx, key)
	if err != nil {
		return provider.Metadata{}, err
	}
	return client.Metadata(ctx)
}

func (v hostValidator) ValidateInstance(ctx context.Context, key, typ string, props json.RawMessage) error {
	client, err := v.host.Client(ctx, key)
	if err != nil {
		return err
	}
	return client.Instance(typ).Validate(ctx, props)
}

func (v hostValidator) ValidateFlavor(ctx context.Context, key, typ string, props json.RawMessage, alloc flavor.Allocation) error {
	client, err := v.host.Client(ctx, key)
	if err != nil {
		return err
	}
	return client.Flavor(typ).Validate(ctx, props, alloc)
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *ValidateCommand) Synopsis() string {
	return "Check the stack files and what the providers say about them"
}

// Help is the text of `infrakit validate -help`.
func (c *ValidateCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] validate [-f FILE]...

  Checks the stack files of the working directory: their syntax, that every
  block and attribute is known and every reference names something
  declared; then asks each provider (installed by "infrakit init") whether
  it serves the instance, flavor, load balancer and authorizer types the
  stack uses and whether it accepts their properties. Problems are shown
  with the file, line and column, the source line underlined.

  validate reads no state and changes nothing, so it is safe to run
  anywhere, for example in CI before "infrakit plan".

Options:

  -f FILE   Also read FILE as part of the stack: HCL, or a JSON or YAML
            specification in an old format. Repeatable.

  Exit status: 0 when the stack is valid, 1 otherwise.
`)
}
