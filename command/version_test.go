package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/pluginhost"
)

var platform = runtime.GOOS + "_" + runtime.GOARCH

func TestVersionText(t *testing.T) {
	m, stdout, stderr := newTestMeta(t)
	c := &VersionCommand{Meta: m}
	if code := c.Run(nil); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := "infrakit v1.2.3-test\non " + platform + " (" + runtime.Version() + ")\n"
	if stdout.String() != want {
		t.Errorf("stdout = %q, want %q", stdout.String(), want)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q", stderr)
	}
}

func TestVersionJSON(t *testing.T) {
	m, stdout, stderr := newTestMeta(t)
	c := &VersionCommand{Meta: m}
	if code := c.Run([]string{"-json"}); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	want := map[string]any{
		"infrakit_version": "1.2.3-test",
		"go_version":       runtime.Version(),
		"platform":         platform,
		"providers":        []any{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("version -json = %v, want %v", got, want)
	}
}

// installProvider puts a provider binary (any bytes do: version only reads
// files) where init installs it, and returns its checksum.
func installProvider(t *testing.T, workdir, name, version string) pluginhost.Hash {
	t.Helper()
	path := pluginhost.InstallPath(workdir, name, version)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n# "+name+" "+version+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := pluginhost.HashFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestVersionProviders(t *testing.T) {
	m, stdout, stderr := newTestMeta(t)
	lock := pluginhost.NewLock()
	// simulator: installed and locked. vanilla: locked, binary edited since.
	// docker: locked, never installed. stray: installed, not locked.
	lock.Set(pluginhost.LockedProvider{Name: "simulator", Version: "0.1.0",
		Hashes: []pluginhost.Hash{installProvider(t, m.WorkDir, "simulator", "0.1.0")}})
	installProvider(t, m.WorkDir, "vanilla", "0.2.0")
	lock.Set(pluginhost.LockedProvider{Name: "vanilla", Version: "0.2.0",
		Hashes: []pluginhost.Hash{pluginhost.Hash("sha256:" + strings.Repeat("0", 64))}})
	lock.Set(pluginhost.LockedProvider{Name: "docker", Version: "1.0.0"})
	installProvider(t, m.WorkDir, "stray", "v3")
	if err := lock.Save(m.WorkDir); err != nil {
		t.Fatal(err)
	}

	c := &VersionCommand{Meta: m}
	if code := c.Run(nil); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := "infrakit v1.2.3-test\non " + platform + " (" + runtime.Version() + ")\n" +
		"+ provider docker v1.0.0 (locked but not installed; run \"infrakit init\")\n" +
		"+ provider simulator v0.1.0\n" +
		"+ provider stray v3 (installed but not in the lock file)\n" +
		"+ provider vanilla v0.2.0 (binary changed since \"infrakit init\"; it will not run)\n"
	if stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
	}

	stdout.Reset()
	if code := c.Run([]string{"-json"}); code != 0 {
		t.Fatalf("-json: exit %d, stderr %q", code, stderr)
	}
	var got versionOutput
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	wantProviders := []providerVersion{
		{Name: "docker", Version: "1.0.0", Status: "missing"},
		{Name: "simulator", Version: "0.1.0", Status: "ok"},
		{Name: "stray", Version: "v3", Status: "unlocked"},
		{Name: "vanilla", Version: "0.2.0", Status: "mismatch"},
	}
	if !reflect.DeepEqual(got.Providers, wantProviders) {
		t.Errorf("providers = %+v, want %+v", got.Providers, wantProviders)
	}
}

func TestVersionBrokenLockFile(t *testing.T) {
	m, stdout, stderr := newTestMeta(t)
	if err := os.WriteFile(filepath.Join(m.WorkDir, pluginhost.LockFileName), []byte("provider {{{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &VersionCommand{Meta: m}
	if code := c.Run(nil); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stdout.String(), "infrakit v1.2.3-test\n") {
		t.Errorf("stdout = %q, want infrakit's version still printed", stdout)
	}
	if !strings.Contains(stderr.String(), "cannot list the providers") || !strings.Contains(stderr.String(), pluginhost.LockFileName) {
		t.Errorf("stderr = %q, want a warning naming the lock file", stderr)
	}
}

func TestVersionBadUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"extra"}, "takes no arguments"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		m, stdout, stderr := newTestMeta(t)
		c := &VersionCommand{Meta: m}
		if code := c.Run(tt.args); code != cli.RunResultHelp {
			t.Errorf("Run(%q) = %d, want RunResultHelp", tt.args, code)
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("Run(%q): stdout %q, stderr %q, want %q", tt.args, stdout, stderr, tt.want)
		}
	}
}

func TestCommandsTable(t *testing.T) {
	m, _, _ := newTestMeta(t)
	for name, factory := range Commands(m) {
		c, err := factory()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if c.Synopsis() == "" || !strings.Contains(c.Help(), "Usage: infrakit") {
			t.Errorf("%s: synopsis %q, help %q: every command needs both", name, c.Synopsis(), c.Help())
		}
	}
}
