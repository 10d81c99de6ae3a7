package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mitchellh/cli"
)

func fmtCmd(m Meta) cli.Command { return &FmtCommand{Meta: m} }

const (
	messyStack = "stack \"s\" {}\nprovider \"simulator\" {\nalias=\"a\"\n}\n"
	tidyStack  = "stack \"s\" {}\nprovider \"simulator\" {\n  alias = \"a\"\n}\n"
)

func writeFile(t *testing.T, path, src string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFmtRewritesInPlace(t *testing.T) {
	wd := t.TempDir()
	writeFile(t, filepath.Join(wd, "main.hcl"), messyStack, 0o600)
	writeFile(t, filepath.Join(wd, "tidy.hcl"), tidyStack, 0o644)
	// The lock file is infrakit's, not the user's: fmt leaves it alone.
	writeFile(t, filepath.Join(wd, ".infrakit.lock.hcl"), "provider \"x\" {\nversion=\"1\"\n}\n", 0o644)

	code, stdout, stderr := runCommand(t, fmtCmd, wd)
	if code != 0 || stdout != "main.hcl\n" || stderr != "" {
		t.Fatalf("fmt: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if got := readFile(t, filepath.Join(wd, "main.hcl")); got != tidyStack {
		t.Errorf("main.hcl =\n%s", got)
	}
	if info, err := os.Stat(filepath.Join(wd, "main.hcl")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode after fmt: %v %v", info.Mode(), err)
	}
	if got := readFile(t, filepath.Join(wd, ".infrakit.lock.hcl")); !strings.Contains(got, "version=\"1\"") {
		t.Errorf("lock file was formatted:\n%s", got)
	}
	entries, _ := os.ReadDir(wd)
	if len(entries) != 3 {
		t.Errorf("fmt left files behind: %v", entries)
	}

	// Formatted files are not listed again.
	code, stdout, _ = runCommand(t, fmtCmd, wd)
	if code != 0 || stdout != "" {
		t.Errorf("second fmt: exit %d, listed %q", code, stdout)
	}
}

func TestFmtCheck(t *testing.T) {
	wd := t.TempDir()
	writeFile(t, filepath.Join(wd, "a.hcl"), tidyStack, 0o644)
	writeFile(t, filepath.Join(wd, "b.hcl"), messyStack, 0o644)

	code, stdout, _ := runCommand(t, fmtCmd, wd, "-check")
	if code != ExitFmtCheck || stdout != "b.hcl\n" {
		t.Errorf("fmt -check: exit %d, listed %q", code, stdout)
	}
	if got := readFile(t, filepath.Join(wd, "b.hcl")); got != messyStack {
		t.Error("fmt -check wrote the file")
	}

	// Only the named file; flags after it.
	code, stdout, _ = runCommand(t, fmtCmd, wd, "a.hcl", "-check")
	if code != 0 || stdout != "" {
		t.Errorf("fmt -check a.hcl: exit %d, listed %q", code, stdout)
	}
}

func TestFmtSyntaxError(t *testing.T) {
	wd := t.TempDir()
	broken := "stack \"s\" {}\ngroup \"g\" {\n  size = \n}\n"
	writeFile(t, filepath.Join(wd, "broken.hcl"), broken, 0o644)
	sub := filepath.Join(wd, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sub, "ok.hcl"), messyStack, 0o644)

	// A directory argument means its stack files; the broken file does not
	// stop the others from being formatted, but makes the exit status 1.
	code, stdout, stderr := runCommand(t, fmtCmd, wd, ".", "sub", "-check")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if stdout != filepath.Join("sub", "ok.hcl")+"\n" {
		t.Errorf("listed %q", stdout)
	}
	for _, want := range []string{"Error: Invalid expression", "on broken.hcl:3:", "   3:   size = "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if readFile(t, filepath.Join(wd, "broken.hcl")) != broken {
		t.Error("a file with syntax errors was rewritten")
	}
}

func TestFmtArguments(t *testing.T) {
	wd := t.TempDir()
	code, _, stderr := runCommand(t, fmtCmd, wd, "missing.hcl")
	if code != 1 || !strings.Contains(stderr, "missing.hcl") {
		t.Errorf("missing file: exit %d: %s", code, stderr)
	}
	code, _, _ = runCommand(t, fmtCmd, wd, "-bogus")
	if code != cli.RunResultHelp {
		t.Errorf("bad flag: exit %d", code)
	}
}

// TestFmtExtraFiles: -f formats one more file beside the working
// directory's (once, if it is one of them). A specification in an old
// format named with -f is left as it is; named as an argument it is an
// error that points at convert.
func TestFmtExtraFiles(t *testing.T) {
	wd := t.TempDir()
	writeFile(t, filepath.Join(wd, "main.hcl"), messyStack, 0o644)
	extra := filepath.Join(t.TempDir(), "extra.hcl")
	writeFile(t, extra, messyStack, 0o644)
	spec := "{\"ID\":\"web\",\n\"Properties\":{}}\n"
	writeFile(t, filepath.Join(wd, "web.json"), spec, 0o644)

	code, stdout, stderr := runCommand(t, fmtCmd, wd, "-f", extra, "-f", "main.hcl", "-f", "web.json", "-check")
	if code != ExitFmtCheck || stdout != "main.hcl\n"+extra+"\n" || stderr != "" {
		t.Errorf("fmt -check -f: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCommand(t, fmtCmd, wd, "-f", extra, "-f", "web.json")
	if code != 0 || readFile(t, extra) != tidyStack || readFile(t, filepath.Join(wd, "main.hcl")) != tidyStack {
		t.Errorf("fmt -f: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if readFile(t, filepath.Join(wd, "web.json")) != spec {
		t.Error("fmt rewrote a specification named with -f")
	}

	code, stdout, stderr = runCommand(t, fmtCmd, wd, "web.json")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "Error: Not a stack language file") ||
		!strings.Contains(stderr, `"infrakit convert web.json"`) {
		t.Errorf("fmt web.json: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
