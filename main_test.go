package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/pluginhost"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestExtractChdir(t *testing.T) {
	tests := []struct {
		args    []string
		dir     string
		rest    []string
		wantErr bool
	}{
		{args: nil, rest: nil},
		{args: []string{"version"}, rest: []string{"version"}},
		{args: []string{"-chdir=stack", "plan", "-json"}, dir: "stack", rest: []string{"plan", "-json"}},
		{args: []string{"--chdir=/abs/dir", "plan"}, dir: "/abs/dir", rest: []string{"plan"}},
		{args: []string{"-help", "-chdir=x", "plan"}, dir: "x", rest: []string{"-help", "plan"}},
		{args: []string{"-chdir=a", "-chdir=b", "plan"}, dir: "b", rest: []string{"-chdir=a", "plan"}},
		// After the subcommand it is the subcommand's (which will reject it).
		{args: []string{"plan", "-chdir=x"}, rest: []string{"plan", "-chdir=x"}},
		{args: []string{"-chdir", "x", "plan"}, wantErr: true},
		{args: []string{"-chdir=", "plan"}, wantErr: true},
	}
	for _, tt := range tests {
		dir, rest, err := extractChdir(tt.args)
		if tt.wantErr {
			if err == nil {
				t.Errorf("extractChdir(%q): no error", tt.args)
			}
			continue
		}
		if err != nil || dir != tt.dir || !slices.Equal(rest, tt.rest) {
			t.Errorf("extractChdir(%q) = %q, %q, %v; want %q, %q", tt.args, dir, rest, err, tt.dir, tt.rest)
		}
	}
}

// run calls realMain from a fresh temporary working directory (restored
// afterwards) and returns the exit code and output.
func run(t *testing.T, args ...string) (code int, stdout, stderr string, cwd string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = realMain(args, strings.NewReader(""), &out, &errOut)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String(), cwd
}

func TestChdir(t *testing.T) {
	top := t.TempDir()
	t.Chdir(top)
	if err := os.Mkdir(filepath.Join(top, "stack"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A provider locked in stack/ but not installed: version lists it only
	// when it looks at stack/, so the commands' WorkDir followed -chdir too.
	lock := pluginhost.NewLock()
	lock.Set(pluginhost.LockedProvider{Name: "simulator", Version: "0.1.0"})
	if err := lock.Save(filepath.Join(top, "stack")); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr, cwd := run(t, "-chdir=stack", "version")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(top, "stack"))
	if got, _ := filepath.EvalSymlinks(cwd); got != want {
		t.Errorf("working directory after -chdir = %q, want %q", got, want)
	}
	if !strings.HasPrefix(stdout, "infrakit v"+Version+"\n") || !strings.Contains(stdout, "+ provider simulator v0.1.0") {
		t.Errorf("stdout = %q, want the version and the provider locked in stack/", stdout)
	}
}

func TestChdirMissingDir(t *testing.T) {
	t.Chdir(t.TempDir())
	code, stdout, stderr, _ := run(t, "-chdir=nope", "version")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "-chdir") || !strings.Contains(stderr, "nope") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and an error naming the directory", code, stdout, stderr)
	}
}

func TestChdirWithoutEquals(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, stderr, _ := run(t, "-chdir", "x", "version")
	if code != 1 || !strings.Contains(stderr, "-chdir=DIR") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestVersionForms(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"version"}, {"-v"}, {"-version"}, {"--version"}} {
		code, stdout, stderr, _ := run(t, args...)
		if code != 0 || !strings.HasPrefix(stdout, "infrakit v"+Version+"\non ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	code, stdout, _, _ := run(t, "version", "-json")
	var v struct {
		Version string `json:"infrakit_version"`
	}
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v.Version != Version {
		t.Errorf("version -json: exit %d, %v, %q", code, err, stdout)
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, stderr, _ := run(t, "frobnicate")
	if code != 1 || !strings.Contains(stderr, `no command named "frobnicate"`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestHelp(t *testing.T) {
	t.Chdir(t.TempDir())
	code, stdout, _, _ := run(t, "-help")
	if code != 0 || !strings.Contains(stdout, "-chdir=DIR") || !strings.Contains(stdout, "version") {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
	// No command at all: the usage, on stderr, and an error exit.
	code, _, stderr, _ := run(t)
	if code != 1 || !strings.Contains(stderr, "Usage: infrakit") {
		t.Errorf("no args: exit %d, stderr %q", code, stderr)
	}
}

func TestNewLogger(t *testing.T) {
	tests := []struct {
		level   string
		path    bool
		want    hclog.Level
		warning bool
	}{
		{level: "", path: false, want: hclog.Off},
		{level: "", path: true, want: hclog.Warn},
		{level: "debug", want: hclog.Debug},
		{level: "TRACE", want: hclog.Trace},
		{level: "error", path: true, want: hclog.Error},
		{level: "off", want: hclog.Off},
		{level: "loud", want: hclog.Trace, warning: true},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		path := ""
		if tt.path {
			path = filepath.Join(t.TempDir(), "infrakit.log")
		}
		logger, closeLog, err := newLogger(tt.level, path, &stderr)
		if err != nil {
			t.Fatalf("newLogger(%q): %v", tt.level, err)
		}
		if got := logger.GetLevel(); got != tt.want && !(tt.want == hclog.Off && got == hclog.NoLevel) {
			t.Errorf("INFRAKIT_LOG=%q path=%v: level %v, want %v", tt.level, tt.path, got, tt.want)
		}
		if tt.warning != strings.Contains(stderr.String(), "INFRAKIT_LOG") {
			t.Errorf("INFRAKIT_LOG=%q: warning printed = %q", tt.level, stderr.String())
		}
		logger.Error("boom", "k", "v")
		closeLog()
		if tt.path {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("log file mode %v (%v), want 0600: a log carries properties", fi.Mode().Perm(), err)
			}
			if got := string(b); tt.want <= hclog.Error && !strings.Contains(got, "[ERROR] infrakit: boom: k=v") {
				t.Errorf("log file = %q", got)
			}
			if strings.Contains(stderr.String(), "boom") {
				t.Errorf("logged to stderr as well as the file")
			}
		} else if tt.want != hclog.Off && !strings.Contains(stderr.String(), "boom") {
			t.Errorf("INFRAKIT_LOG=%q: nothing logged to stderr", tt.level)
		}
	}
}

func TestLogPathUnwritable(t *testing.T) {
	_, _, err := newLogger("info", filepath.Join(t.TempDir(), "missing", "x.log"), new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "INFRAKIT_LOG_PATH") {
		t.Errorf("err = %v, want one naming INFRAKIT_LOG_PATH", err)
	}
}

func TestHelpCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	code, stdout, _, _ := run(t, "help")
	if code != 0 || !strings.Contains(stdout, "-chdir=DIR") || !strings.Contains(stdout, "  help ") {
		t.Errorf("help: exit %d, stdout %q", code, stdout)
	}
	code, stdout, stderr, _ := run(t, "help", "group", "scale")
	if code != 0 || !strings.Contains(stdout+stderr, "Usage: infrakit [global options] group scale NAME") {
		t.Errorf("help group scale: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr, _ = run(t, "help", "frobnicate")
	if code != 1 || !strings.Contains(stderr, `no command named "frobnicate"`) {
		t.Errorf("help frobnicate: exit %d, stderr %q", code, stderr)
	}
}

func TestExtractAddress(t *testing.T) {
	addr, rest, err := extractAddress([]string{"-chdir=x", "-address=https://w:8443", "group", "ls", "-address=y"})
	if err != nil || addr != "https://w:8443" || !slices.Equal(rest, []string{"-chdir=x", "group", "ls", "-address=y"}) {
		t.Errorf("extractAddress = %q, %q, %v", addr, rest, err)
	}
	if _, _, err := extractAddress([]string{"-address", "http://w:1", "show"}); err == nil || !strings.Contains(err.Error(), "-address=URL") {
		t.Errorf("without =: %v", err)
	}
}

// TestAddressRefusesLocalCommands: with -address the commands that run
// where the state is refuse and say why; with INFRAKIT_ADDR alone they run
// here as ever. (The remote commands themselves are tested in package
// command and end to end.)
func TestAddressRefusesLocalCommands(t *testing.T) {
	t.Chdir(t.TempDir())
	code, stdout, stderr, _ := run(t, "-address=http://127.0.0.1:1", "init")
	if code != 1 || stdout != "" ||
		!strings.Contains(stderr, "infrakit init runs where the state is; it cannot run against a remote watch (-address)") {
		t.Errorf("init with -address: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A parent only prints its help, wherever.
	if code, _, stderr, _ := run(t, "-address=http://127.0.0.1:1", "group"); code != 1 || !strings.Contains(stderr, "Subcommands:") ||
		strings.Contains(stderr, "remote watch") {
		t.Errorf("group with -address: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("INFRAKIT_ADDR", "http://127.0.0.1:1")
	if code, stdout, stderr, _ := run(t, "version"); code != 0 || !strings.HasPrefix(stdout, "infrakit v") {
		t.Errorf("version with INFRAKIT_ADDR: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A remote command goes to the address, where nobody listens.
	if code, _, stderr, _ := run(t, "group", "ls"); code != 1 || !strings.Contains(stderr, "Cannot reach the watch") {
		t.Errorf("group ls with INFRAKIT_ADDR: exit %d, stderr %q", code, stderr)
	}
}
