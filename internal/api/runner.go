package api

import (
	"context"
	"io"

	"github.com/infrakit/infrakit/internal/config"
)

// Runner runs one CLI command in the watch process, as the CLI would run
// it in the watch's working directory. command/ implements it.
type Runner interface {
	// Run runs c, printing to cio, and returns its exit code. ctx ends the
	// command as an interrupt would: what was done is recorded.
	Run(ctx context.Context, c Command, cio IO) int
}

// Command is a CLI command to run.
type Command struct {
	// Words name the command: {"group", "scale"}.
	Words []string
	// Args are its arguments, flags included, as the user typed them.
	Args []string
	// ClientDir holds the client's files (the stack files, -f, -var-file,
	// plan files): every file a command names is read and written there.
	ClientDir string
	// Env is the client's environment for the stack's variables
	// (INFRAKIT_VAR_* only).
	Env map[string]string
	// Terminal: the client prints to a terminal.
	Terminal bool
}

// IO is where a command prints, and how it asks.
type IO struct {
	Stdout, Stderr io.Writer
	// Ask asks the client question and returns the answer, or an error
	// when there is no answer (nobody can be asked, or nobody answered).
	Ask func(question string) (string, error)
	// Diagnostics receives the diagnostics the command prints, as JSON
	// (validate -json's shape), for the API's error answers.
	Diagnostics func([]config.JSONDiagnostic)
}
