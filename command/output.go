package command

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
)

// OutputCommand is `infrakit output`: the stack's outputs as the last apply
// recorded them in the state.
type OutputCommand struct {
	Meta
}

// outputJSON is one output in `output -json`, in Terraform's shape. A
// sensitive value is never printed: its "value" is left out.
type outputJSON struct {
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type"`
	Value     json.RawMessage `json:"value,omitempty"`
}

func newOutputJSON(o config.OutputValue) (outputJSON, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return outputJSON{}, err
	}
	var out outputJSON
	if err := json.Unmarshal(b, &out); err != nil {
		return outputJSON{}, err
	}
	if o.Sensitive {
		out.Value = nil
	}
	return out, nil
}

// Run prints the outputs, or one of them.
func (c *OutputCommand) Run(args []string) int {
	fs := c.FlagSet("output")
	jsonOut := FlagJSON(fs)
	rest, err := ParseArgs(fs, args)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing command-line flags: %s\n", err))
		return cli.RunResultHelp
	}
	if len(rest) > 1 {
		c.Ui.Error(fmt.Sprintf("The output command takes at most one argument, an output's name; got %q.\n", rest))
		return cli.RunResultHelp
	}
	r, err := operation.New(c.Context(), operation.Options{WorkDir: c.WorkDir, Logger: c.Logger.Named("output")})
	if err != nil {
		c.showError("Error reading the state", err)
		return 1
	}
	defer c.closeRunner(r)
	doc, err := r.State(c.Context())
	if err != nil {
		c.showError("Error reading the state", err)
		return 1
	}
	if len(rest) == 1 {
		o, ok := doc.Outputs[rest[0]]
		if !ok {
			c.showError("Output not found", fmt.Errorf("the state has no output %q: declare it with an output block and run \"infrakit apply\"", rest[0]))
			return 1
		}
		if !*jsonOut {
			c.Ui.Output(shownValue(o))
			return 0
		}
		j, err := newOutputJSON(o)
		if err != nil {
			c.showError("Error encoding the output", err)
			return 1
		}
		if o.Sensitive {
			return c.writeJSONStatus(map[string]bool{"sensitive": true})
		}
		return c.writeJSONStatus(j.Value)
	}
	if *jsonOut {
		all := map[string]outputJSON{}
		for n, o := range doc.Outputs {
			if all[n], err = newOutputJSON(o); err != nil {
				c.showError("Error encoding the outputs", err)
				return 1
			}
		}
		return c.writeJSONStatus(all)
	}
	if len(doc.Outputs) == 0 {
		c.Ui.Warn("No outputs found: the stack has no output blocks, or it was not applied since they were added.")
		return 0
	}
	for _, n := range sortedKeys(doc.Outputs) {
		c.Ui.Output(fmt.Sprintf("%s = %s", n, shownValue(doc.Outputs[n])))
	}
	return 0
}

func (c *OutputCommand) writeJSONStatus(v any) int {
	if err := c.WriteJSON(v); err != nil {
		c.Ui.Error(err.Error())
		return 1
	}
	return 0
}

// Synopsis is the one-line description in `infrakit -help`.
func (c *OutputCommand) Synopsis() string { return "Show the stack's outputs" }

// Help is the text of `infrakit output -help`.
func (c *OutputCommand) Help() string {
	return strings.TrimSpace(`
Usage: infrakit [global options] output [-json] [NAME]

  Prints the stack's outputs (its output blocks) as the last apply, or the
  last verb that acted (group scale...), evaluated them with the members
  the state records, and stored them in the state. With NAME, prints that
  output's value only. It reads only the state and asks no provider.

  A sensitive output (sensitive = true) is shown as (sensitive value), and
  is never printed, with -json either.

Options:

  -json   Print the outputs as one JSON object, as "terraform output
          -json" does: {"NAME": {"sensitive", "type", "value"}}, the type
          in go-cty's JSON form ("string", ["list", "string"]); with NAME,
          only the value. A sensitive output has no "value".
`)
}
