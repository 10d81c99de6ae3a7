package command

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
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
	files := flagStackInputs(fs)
	jsonOut := FlagJSON(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 0 {
		c.Ui.Error(fmt.Sprintf("The validate command takes no arguments; got %q.\n", rest))
		return cli.RunResultHelp
	}

	stack, diags := c.validate(*files)
	if *jsonOut {
		return c.writeValidateJSON(stack.Files, diags)
	}
	c.ShowDiagnostics(stack.Files, diags)
	if diags.HasErrors() {
		return 1
	}
	c.Ui.Output("Success! The stack is valid.")
	return 0
}

// validate loads the stack and, when it loads, asks the providers.
func (c *ValidateCommand) validate(files []string) (*config.Stack, hcl.Diagnostics) {
	stack, diags := c.loadStack(files)
	if diags.HasErrors() {
		return stack, diags
	}
	host, err := pluginhost.New(pluginhost.Options{WorkDir: c.WorkDir, Logger: c.Logger.Named("pluginhost")})
	if err != nil {
		return stack, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Providers not installed",
			Detail: fmt.Sprintf("%s\n\nRun \"infrakit init\" to install the providers the stack needs.", err)})
	}
	defer host.Close()
	stop := host.CloseWhenDone(c.Context())
	defer stop()
	// Each provider is configured with its block as it is launched, so a
	// block the provider refuses fails validate as it would fail plan.
	for _, p := range stack.Providers {
		host.SetConfig(p.Key(), p.Config)
	}
	return stack, append(diags, config.ValidateWithProviders(c.Context(), stack, hostValidator{host: host})...)
}

// validateJSON is `validate -json`, in Terraform's shape.
type validateJSON struct {
	FormatVersion string                  `json:"format_version"`
	Valid         bool                    `json:"valid"`
	ErrorCount    int                     `json:"error_count"`
	WarningCount  int                     `json:"warning_count"`
	Diagnostics   []config.JSONDiagnostic `json:"diagnostics"`
}

// writeValidateJSON prints the result and returns the exit status.
func (c *ValidateCommand) writeValidateJSON(files map[string]*hcl.File, diags hcl.Diagnostics) int {
	files, diags = c.relativeDiagnostics(files, diags)
	out := validateJSON{FormatVersion: "1.0", Valid: !diags.HasErrors(), Diagnostics: config.JSONDiagnostics(files, diags)}
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			out.WarningCount++
		} else {
			out.ErrorCount++
		}
	}
	if err := c.WriteJSON(out); err != nil {
		c.Ui.Error(err.Error())
		return 1
	}
	if !out.Valid {
		return 1
	}
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
Usage: infrakit [global options] validate [-json] [-f FILE]...

  Checks the stack files of the working directory: their syntax, that every
  block and attribute is known and every reference names something
  declared; then asks each provider (installed by "infrakit init") whether
  it serves the instance, flavor, load balancer and authorizer types the
  stack uses and whether it accepts their properties. Problems are shown
  with the file, line and column, the source line underlined.

  validate reads no state and changes nothing, so it is safe to run
  anywhere, for example in CI before "infrakit plan".

Options:

  -json     Print the result as one JSON document, in the shape of
            "terraform validate -json": format_version, valid,
            error_count, warning_count and diagnostics (severity,
            summary, detail, range, snippet).

  -var NAME=VALUE      Set the stack variable NAME. The text is the value
                       of a string, number or bool variable, and an HCL
                       expression (["a", "b"], { k = "v" }) for other
                       types. Repeatable.

  -var-file FILE       Read variable values from FILE: name = value lines
                       in HCL, or a JSON object when FILE ends in .json.
                       Repeatable. -var and -var-file apply in the order
                       given, over INFRAKIT_VAR_NAME in the environment,
                       infrakit.ivars and *.auto.ivars.

  -f FILE   Also read FILE as part of the stack: HCL, or a JSON or YAML
            specification in an old format. Repeatable.

  Exit status: 0 when the stack is valid, 1 otherwise.
`)
}
