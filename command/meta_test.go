package command

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

// TestMain checks that no test of package command leaves a goroutine behind
// (NotifyShutdown's watcher, provider clients of the commands). It is the only
// TestMain of the package.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestMeta returns a Meta working in a fresh temporary directory with
// captured output, for the tests of every command.
func newTestMeta(t *testing.T) (m Meta, stdout, stderr *bytes.Buffer) {
	t.Helper()
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	m = NewMeta(t.TempDir(), strings.NewReader(""), stdout, stderr)
	m.Version = "1.2.3-test"
	return m, stdout, stderr
}

// testFlags is the flag set the ParseArgs tests use: a bool, a string and a
// duration, like a real command's.
func testFlags(t *testing.T) (*flag.FlagSet, *bool, *string, *time.Duration) {
	t.Helper()
	m, _, _ := newTestMeta(t)
	fs := m.FlagSet("test")
	jsonOut := FlagJSON(fs)
	out := fs.String("out", "", "")
	lock := FlagLockTimeout(fs)
	return fs, jsonOut, out, lock
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		positional []string
		json       bool
		out        string
		lock       time.Duration
		wantErr    string
	}{
		{name: "empty", args: nil, positional: nil, lock: DefaultLockTimeout},
		{name: "flags before", args: []string{"-json", "ls", "miners"}, positional: []string{"ls", "miners"}, json: true, lock: DefaultLockTimeout},
		{name: "flags after", args: []string{"ls", "miners", "-json"}, positional: []string{"ls", "miners"}, json: true, lock: DefaultLockTimeout},
		{name: "flags between", args: []string{"miners", "-out", "p.bin", "3", "-lock-timeout=5s"}, positional: []string{"miners", "3"}, out: "p.bin", lock: 5 * time.Second},
		{name: "double dash flag", args: []string{"miners", "--json"}, positional: []string{"miners"}, json: true, lock: DefaultLockTimeout},
		{name: "terminator keeps dashes positional", args: []string{"miners", "--", "-json", "x"}, positional: []string{"miners", "-json", "x"}, lock: DefaultLockTimeout},
		{name: "terminator first", args: []string{"--", "-1"}, positional: []string{"-1"}, lock: DefaultLockTimeout},
		{name: "single dash is positional", args: []string{"-", "-json"}, positional: []string{"-"}, json: true, lock: DefaultLockTimeout},
		{name: "bool with value", args: []string{"a", "-json=false", "b"}, positional: []string{"a", "b"}, lock: DefaultLockTimeout},
		{name: "last value wins", args: []string{"-out=a", "x", "-out=b"}, positional: []string{"x"}, out: "b", lock: DefaultLockTimeout},
		{name: "unknown flag after positional", args: []string{"miners", "-bogus"}, wantErr: "flag provided but not defined: -bogus"},
		{name: "missing value", args: []string{"miners", "-out"}, wantErr: "flag needs an argument: -out"},
		{name: "bad duration", args: []string{"-lock-timeout=soon"}, wantErr: `invalid value "soon" for flag -lock-timeout`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, jsonOut, out, lock := testFlags(t)
			got, err := ParseArgs(fs, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseArgs(%q) error = %v, want one containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseArgs(%q): %v", tt.args, err)
			}
			if !slices.Equal(got, tt.positional) {
				t.Errorf("positional = %q, want %q", got, tt.positional)
			}
			if *jsonOut != tt.json || *out != tt.out || *lock != tt.lock {
				t.Errorf("flags json=%v out=%q lock-timeout=%v, want %v %q %v", *jsonOut, *out, *lock, tt.json, tt.out, tt.lock)
			}
		})
	}
}

// TestParseArgsAnyPlacement: wherever the flags stand among the positional
// arguments, the positionals come back in order and every flag is set.
func TestParseArgsAnyPlacement(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		positional := rapid.SliceOf(rapid.StringMatching(`[a-z0-9][a-z0-9.=-]{0,8}`)).Draw(rt, "positional")
		wantJSON := rapid.Bool().Draw(rt, "json")
		// A value of exactly "--" is the one ParseArgs documents as unsupported.
		wantOut := rapid.StringMatching(`[a-z/.-]{0,10}`).Filter(func(s string) bool { return s != "--" }).Draw(rt, "out")
		wantLock := time.Duration(rapid.IntRange(0, 3600).Draw(rt, "lockSeconds")) * time.Second

		var flags [][]string
		if wantJSON {
			flags = append(flags, []string{"-json"})
		}
		flags = append(flags, []string{"-out", wantOut}, []string{fmt.Sprintf("-lock-timeout=%s", wantLock)})
		// Insert each flag at a random point among the positionals.
		args := slices.Clone(positional)
		for i, f := range flags {
			at := rapid.IntRange(0, len(args)).Draw(rt, fmt.Sprintf("at%d", i))
			// Never split a previous flag from its value.
			for at > 0 && at < len(args) && args[at-1] == "-out" {
				at++
			}
			args = slices.Insert(args, at, f...)
		}

		m := NewMeta("/", strings.NewReader(""), new(bytes.Buffer), new(bytes.Buffer))
		fs := m.FlagSet("prop")
		jsonOut, out, lock := FlagJSON(fs), fs.String("out", "", ""), FlagLockTimeout(fs)
		got, err := ParseArgs(fs, args)
		if err != nil {
			rt.Fatalf("ParseArgs(%q): %v", args, err)
		}
		if !slices.Equal(got, positional) {
			rt.Fatalf("ParseArgs(%q) positional = %q, want %q", args, got, positional)
		}
		if *jsonOut != wantJSON || *out != wantOut || *lock != wantLock {
			rt.Fatalf("ParseArgs(%q) json=%v out=%q lock=%v, want %v %q %v", args, *jsonOut, *out, *lock, wantJSON, wantOut, wantLock)
		}
	})
}

func TestMetaPath(t *testing.T) {
	m := Meta{WorkDir: filepath.FromSlash("/work/stack")}
	tests := []struct {
		elem []string
		want string
	}{
		{nil, "/work/stack"},
		{[]string{".infrakit", "plugins"}, "/work/stack/.infrakit/plugins"},
		{[]string{"../other/plan.bin"}, "/work/other/plan.bin"},
		{[]string{"/abs/state.json"}, "/abs/state.json"},
	}
	for _, tt := range tests {
		if got := m.Path(tt.elem...); got != filepath.FromSlash(tt.want) {
			t.Errorf("Path(%q) = %q, want %q", tt.elem, got, tt.want)
		}
	}
}

func TestMetaContextDefault(t *testing.T) {
	var m Meta
	if m.Context() == nil || m.Context().Err() != nil {
		t.Fatalf("zero Meta's Context() = %v, want a live background context", m.Context())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.ShutdownCtx = ctx
	if !errors.Is(m.Context().Err(), context.Canceled) {
		t.Fatalf("Context() does not return ShutdownCtx")
	}
}

func TestWriteJSON(t *testing.T) {
	m, stdout, _ := newTestMeta(t)
	if err := m.WriteJSON(map[string]any{"group": "miners", "instances": []string{}}); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"group\": \"miners\",\n  \"instances\": []\n}\n"
	if stdout.String() != want {
		t.Errorf("WriteJSON wrote %q, want %q", stdout.String(), want)
	}
}

func TestShowDiagnostics(t *testing.T) {
	src := []byte("group \"miners\" {\n  size = \"five\"\n}\n")
	f, diags := hclsyntax.ParseConfig(src, "main.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	attr := f.Body.(*hclsyntax.Body).Blocks[0].Body.Attributes["size"]
	rng := attr.Expr.Range()

	m, stdout, stderr := newTestMeta(t)
	m.ShowDiagnostics(map[string]*hcl.File{"main.hcl": f}, hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Incorrect attribute value type",
		Detail:   "A number is required.",
		Subject:  &rng,
	}, {
		Severity: hcl.DiagWarning,
		Summary:  "No source",
		Detail:   "Diagnostics without a subject still print.",
	}})
	out := stderr.String()
	for _, want := range []string{
		"Error: Incorrect attribute value type",
		`on main.hcl:2:10, in group "miners":`,
		`2:   size = "five"`,
		"^^^^^^",
		"A number is required.",
		"Warning: No source",
		"Diagnostics without a subject still print.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diagnostics output lacks %q:\n%s", want, out)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("diagnostics went to stdout: %q", stdout.String())
	}
}

func TestNotifyShutdownFirstSignalCancels(t *testing.T) {
	var stderr bytes.Buffer
	ctx, stop := NotifyShutdown(context.Background(), &stderr)
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not cancelled by SIGINT")
	}
	if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "Interrupt received") {
		t.Errorf("cause = %v, want the interrupt", cause)
	}
	stop() // waits for the watcher, which wrote the message before cancelling
	if !strings.Contains(stderr.String(), "Interrupt received: stopping") {
		t.Errorf("stderr = %q, want the stopping message", stderr.String())
	}
}

func TestNotifyShutdownStopWithoutSignal(t *testing.T) {
	var stderr bytes.Buffer
	ctx, stop := NotifyShutdown(context.Background(), &stderr)
	stop()
	stop() // idempotent
	if ctx.Err() == nil {
		t.Error("context still live after stop")
	}
	if stderr.Len() != 0 {
		t.Errorf("stop printed %q", stderr.String())
	}
}
