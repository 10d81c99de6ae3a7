package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/api"
	"github.com/infrakit/infrakit/internal/config"
)

// APIRunner runs the commands `infrakit watch` serves (internal/api) in
// the watch process: the command itself, with a Meta whose output is the
// client's, whose files are those the client sent (ClientDir) and whose
// state, providers and lock file are the watch's working directory's. So a
// remote `group scale` plans, locks and executes as a local one does, and
// prints the same.
type APIRunner struct {
	// Meta is the watch command's: its WorkDir, Logger and Version.
	Meta Meta
}

var _ api.Runner = APIRunner{}

// Run runs c and returns its exit code, as main's CLI would.
func (r APIRunner) Run(ctx context.Context, c api.Command, cio api.IO) int {
	m := r.Meta
	m.Stdout, m.Stderr = cio.Stdout, cio.Stderr
	m.Ui = &cli.ConcurrentUi{Ui: &askUi{
		BasicUi: cli.BasicUi{Reader: strings.NewReader(""), Writer: cio.Stdout, ErrorWriter: cio.Stderr},
		ask:     cio.Ask,
	}}
	m.ShutdownCtx = ctx
	m.ClientDir, m.Terminal = c.ClientDir, c.Terminal
	m.Env = clientEnv(os.Environ(), c.Env)
	m.diagnostics = cio.Diagnostics
	m.captureFlags, m.flags = nil, nil
	name := strings.Join(c.Words, " ")
	factory, ok := commandTable(m)[name]
	if !ok {
		fmt.Fprintf(cio.Stderr, "Error: %q is not an infrakit command.\n", name)
		return 1
	}
	cmd, err := factory()
	if err != nil {
		fmt.Fprintf(cio.Stderr, "Error: %s\n", err)
		return 1
	}
	code := cmd.Run(c.Args)
	if code == cli.RunResultHelp {
		// As main's CLI does: the usage after a flag error, on stderr, exit 1.
		fmt.Fprintln(cio.Stderr, cmd.Help())
		code = 1
	}
	return code
}

// clientEnv is the watch's environment with the stack variables the
// client sent in place of the watch's own.
func clientEnv(host []string, client map[string]string) []string {
	var out []string
	for _, kv := range host {
		if !strings.HasPrefix(kv, config.EnvVarPrefix) {
			out = append(out, kv)
		}
	}
	for k, v := range client {
		if strings.HasPrefix(k, config.EnvVarPrefix) {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// askUi is a Ui whose questions go to the API's client.
type askUi struct {
	cli.BasicUi
	ask func(string) (string, error)
}

// Ask passes the question on; the client prints it as the CLI's prompt.
func (u *askUi) Ask(query string) (string, error) {
	if u.ask == nil {
		return "", errors.New("nobody can be asked")
	}
	return u.ask(query)
}
