package command

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/config"
)

// DefaultLockTimeout is how long a command waits for the state lock before it
// gives up and names the holder. Terraform waits 0s; infrakit waits 30s
// because a running `watch` takes the lock for every pass, and a CLI command
// arriving mid-pass should wait for that pass rather than fail.
const DefaultLockTimeout = 30 * time.Second

// Meta is what every command shares: where it runs, how it talks to the user
// and the context its work runs under. main builds one; each command embeds a
// copy.
type Meta struct {
	// Ui prints human messages: Output to Stdout, Error and Warn to Stderr.
	// It is safe for concurrent use.
	Ui cli.Ui
	// Stdout and Stderr are the writers Ui uses; machine output (-json) and
	// diagnostics are written to them directly.
	Stdout io.Writer
	Stderr io.Writer
	// WorkDir is the absolute working directory (after -chdir): stack files,
	// .infrakit/, the lock file and the local state live here.
	WorkDir string
	// Address, when set, is the URL of a running watch that the object
	// commands run against instead of here (-address, else INFRAKIT_ADDR;
	// see remote.go). AddressFlag says it came from -address: the commands
	// that cannot run remotely then refuse, where with INFRAKIT_ADDR alone
	// they run here.
	Address     string
	AddressFlag bool
	// Logger is the root logger (INFRAKIT_LOG); commands take a Named child.
	Logger hclog.Logger
	// Version is infrakit's version.
	Version string
	// ShutdownCtx is cancelled when the user asks infrakit to stop (the first
	// SIGINT or SIGTERM, see NotifyShutdown). Use Context().
	ShutdownCtx context.Context

	// ClientDir, when set, is where the stack files and the files the user
	// names (-f, -var-file, -out, a plan file) are, instead of WorkDir: a
	// command a remote CLI runs in the watch process (internal/api) finds
	// the files it sent there, and the state, the providers and the lock
	// file in WorkDir.
	ClientDir string
	// Env, when set, is the environment the stack's variables are read
	// from (INFRAKIT_VAR_*) instead of the process's: a remote CLI's.
	Env []string
	// Terminal says Stdout is a terminal even when it is not a file: the
	// remote CLI's is, so colors and progress are rendered as there.
	Terminal bool

	// captureFlags, when set, receives every flag set the command makes:
	// shell completion learns a command's flags from the command itself.
	captureFlags func(*flag.FlagSet)
	// flags is the flag set the command made last, where inputs() finds
	// -var and -var-file.
	flags *flag.FlagSet
	// diagnostics, when set, also receives every diagnostic shown, as
	// JSON: the API answers errors with them (APIRunner).
	diagnostics func([]config.JSONDiagnostic)
}

// NewMeta returns a Meta for work in workDir with a Ui over the given
// streams, a logger that discards everything and a context that is never
// cancelled. main replaces Logger, Version and ShutdownCtx; tests use it as is.
func NewMeta(workDir string, stdin io.Reader, stdout, stderr io.Writer) Meta {
	return Meta{
		Ui: &cli.ConcurrentUi{Ui: &cli.BasicUi{
			Reader:      stdin,
			Writer:      stdout,
			ErrorWriter: stderr,
		}},
		Stdout:      stdout,
		Stderr:      stderr,
		WorkDir:     workDir,
		Logger:      hclog.NewNullLogger(),
		ShutdownCtx: context.Background(),
	}
}

// Context is the context every provider call and state operation of a
// command runs under: cancelled on the first interrupt.
func (m *Meta) Context() context.Context {
	if m.ShutdownCtx == nil {
		return context.Background()
	}
	return m.ShutdownCtx
}

// Path resolves a path against WorkDir: Path(".infrakit", "plugins") is the
// plugins directory; an absolute path is returned unchanged.
func (m *Meta) Path(elem ...string) string {
	p := filepath.Join(elem...)
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(m.WorkDir, p)
}

// ClientPath resolves a path the user named (a -f or -var-file file, a plan
// file to write or read) against ClientDir when it is set (an absolute
// path too: every name the remote CLI sent lives under it), else as Path.
func (m *Meta) ClientPath(elem ...string) string {
	if m.ClientDir == "" {
		return m.Path(elem...)
	}
	return filepath.Join(m.ClientDir, filepath.Join(elem...))
}

// stackDir is where the stack files are: ClientDir, else WorkDir.
func (m *Meta) stackDir() string {
	if m.ClientDir != "" {
		return m.ClientDir
	}
	return m.WorkDir
}

// environ is the environment the stack's variables are read from.
func (m *Meta) environ() []string {
	if m.Env != nil {
		return m.Env
	}
	return os.Environ()
}

// WriteJSON writes v to Stdout as indented JSON followed by a newline: the
// -json output of commands that print one document.
func (m *Meta) WriteJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON output: %w", err)
	}
	return nil
}

// ShowDiagnostics writes diags, warnings and errors alike, to Stderr with
// config.WriteDiagnostics (Terraform's layout: severity and summary, the
// file, line and enclosing block with the source underlined when files holds
// that file, then the detail). files is config.Stack.Files, or nil when the
// diagnostics have no source.
func (m *Meta) ShowDiagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) {
	if len(diags) == 0 {
		return
	}
	files, diags = m.relativeDiagnostics(files, diags)
	if m.diagnostics != nil {
		m.diagnostics(config.JSONDiagnostics(files, diags))
	}
	if err := config.WriteDiagnostics(m.Stderr, files, diags, false); err != nil {
		// Stderr itself failed; there is nowhere left to report it.
		m.Logger.Error("writing diagnostics", "error", err)
	}
}

// relativeDiagnostics names files relative to the working directory, as
// users wrote them, instead of by the absolute paths they were loaded from:
// in the location of each diagnostic, and where its detail names a place
// in one of files ("size is set at stack.hcl:18:3").
func (m *Meta) relativeDiagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) (map[string]*hcl.File, hcl.Diagnostics) {
	base := m.stackDir()
	rel := func(name string) string {
		if base == "" || !filepath.IsAbs(name) {
			return name
		}
		r, err := filepath.Rel(base, name)
		if err != nil || strings.HasPrefix(r, "..") {
			return name
		}
		return r
	}
	relRange := func(r *hcl.Range) *hcl.Range {
		if r == nil {
			return nil
		}
		c := *r
		c.Filename = rel(c.Filename)
		return &c
	}
	outFiles := make(map[string]*hcl.File, len(files))
	// Details name places as "file:line:col": a file's name is replaced
	// where a colon follows it.
	var places []string
	for name, f := range files {
		r := rel(name)
		outFiles[r] = f
		if r != name {
			places = append(places, name+":", r+":")
		}
	}
	detail := strings.NewReplacer(places...)
	out := make(hcl.Diagnostics, len(diags))
	for i, d := range diags {
		c := *d
		c.Subject, c.Context = relRange(d.Subject), relRange(d.Context)
		if len(places) > 0 {
			c.Detail = detail.Replace(d.Detail)
		}
		out[i] = &c
	}
	return outFiles, out
}

// FlagSet returns an empty flag set for the named command. Parse errors are
// returned, not printed: the command reports them through Ui and returns
// cli.RunResultHelp so the usage follows.
func (m *Meta) FlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if m.captureFlags != nil {
		m.captureFlags(fs)
	}
	m.flags = fs
	return fs
}

// FlagJSON defines -json ("print machine-readable JSON instead of text").
func FlagJSON(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, "print machine-readable JSON")
}

// FlagNoColor defines -no-color, for commands that color what they print.
func FlagNoColor(fs *flag.FlagSet) *bool {
	return fs.Bool("no-color", false, "print without ANSI colors (also NO_COLOR set, or TERM=dumb)")
}

// FlagLockTimeout defines -lock-timeout (default DefaultLockTimeout).
func FlagLockTimeout(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("lock-timeout", DefaultLockTimeout, "how long to wait for the state lock")
}

// ParseArgs parses args with flags allowed before, between and after
// positional arguments (`group ls miners -json`), and returns the positional
// arguments in order. The standard flag package stops at the first
// positional; ParseArgs keeps it and parses the rest again until nothing is
// left. A "--" ends flag parsing: everything after it is positional (so a
// flag whose value is literally "--" is not supported).
func ParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// NotifyShutdown returns a context that is cancelled by the first SIGINT or
// SIGTERM. On that signal it tells the user on stderr that infrakit is
// stopping and stops catching signals, so a second Ctrl-C kills the process
// at once (the default behaviour). Commands treat the cancellation as "finish
// or abandon the provider calls in flight, record state, exit 1". stop
// releases the signal handler and ends the watching goroutine; call it when
// the command returns.
func NotifyShutdown(parent context.Context, stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer signal.Stop(sigs)
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "\n%s received: stopping after the work in flight; interrupt again to exit at once.\n",
				signalName(sig))
			cancel(fmt.Errorf("%s received", signalName(sig)))
		case <-done:
		case <-ctx.Done():
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			cancel(context.Canceled)
		})
	}
}

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "Interrupt"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}
