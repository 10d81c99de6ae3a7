package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/pluginhost"
)

// e2eStack names both shipped providers, the simulator twice (an alias is a
// second process of the same binary, installed once).
const e2eStack = `
stack "e2e" {}

provider "simulator" {}
provider "simulator" { alias = "nfs-auth" }
provider "vanilla" {}
`

// buildProviders builds the shipped provider binaries into a temporary
// directory, as `make build` puts them in bin/.
func buildProviders(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"simulator", "vanilla"} {
		out := filepath.Join(dir, pluginhost.BinaryName(name))
		cmd := exec.Command("go", "build", "-o", out, "github.com/infrakit/infrakit/plugins/"+name)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, b)
		}
	}
	return dir
}

func writeStack(t *testing.T, dir, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runCommand runs c in-process with args and returns its exit code and output.
func runCommand(t *testing.T, newCmd func(Meta) cli.Command, wd string, args ...string) (int, string, string) {
	t.Helper()
	m, stdout, stderr := newTestMeta(t)
	m.WorkDir = wd
	code := newCmd(m).Run(args)
	return code, stdout.String(), stderr.String()
}

func initCmd(m Meta) cli.Command           { return &InitCommand{Meta: m} }
func pluginsInstallCmd(m Meta) cli.Command { return &PluginsInstallCommand{Meta: m} }
func pluginsListCmd(m Meta) cli.Command    { return &PluginsListCommand{Meta: m} }
func pluginsRemoveCmd(m Meta) cli.Command  { return &PluginsRemoveCommand{Meta: m} }

// lsJSON runs `plugins ls -json` and returns status by provider name.
func lsJSON(t *testing.T, wd string) map[string]pluginhost.InstalledProvider {
	t.Helper()
	code, stdout, stderr := runCommand(t, pluginsListCmd, wd, "-json")
	if code != 0 {
		t.Fatalf("plugins ls -json: exit %d: %s", code, stderr)
	}
	var out struct {
		Providers []pluginhost.InstalledProvider `json:"providers"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("plugins ls -json output: %v\n%s", err, stdout)
	}
	got := map[string]pluginhost.InstalledProvider{}
	for _, p := range out.Providers {
		got[p.Name] = p
	}
	return got
}

// TestInitEndToEnd runs `infrakit init` in an empty directory holding a stack
// that uses simulator (twice) and vanilla, then the plugins commands, and
// checks the files they leave and that a tampered binary is refused.
func TestInitEndToEnd(t *testing.T) {
	bin := buildProviders(t)
	wd := t.TempDir()
	writeStack(t, wd, e2eStack)
	t.Setenv(pluginhost.PluginPathEnv, "")
	t.Setenv("HOME", t.TempDir())

	// The flag may come after other flags; a relative -plugin-dir is relative to the working directory.
	rel, err := filepath.Rel(wd, bin)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCommand(t, initCmd, wd, "-plugin-dir", "/nonexistent", "-plugin-dir", rel)
	if code != 0 {
		t.Fatalf("init: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"- Installed simulator v0.1.0 (from " + filepath.Join(bin, "infrakit-provider-simulator") + ")",
		"- Installed vanilla v",
		"created a lock file .infrakit.lock.hcl",
		"successfully initialized",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("init output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Count(stdout, "Installed simulator") != 1 {
		t.Errorf("simulator installed more than once:\n%s", stdout)
	}

	lock, err := pluginhost.LoadLock(wd)
	if err != nil {
		t.Fatal(err)
	}
	var lockedNames []string
	for _, p := range lock.Providers() {
		lockedNames = append(lockedNames, p.Name)
		path := pluginhost.InstallPath(wd, p.Name, p.Version)
		sum, err := pluginhost.HashFile(path)
		if err != nil {
			t.Fatalf("%s not installed: %v", p.Name, err)
		}
		src, _ := pluginhost.HashFile(filepath.Join(bin, pluginhost.BinaryName(p.Name)))
		if len(p.Hashes) != 1 || p.Hashes[0] != sum || sum != src {
			t.Errorf("%s: locked %v, installed %s, built %s", p.Name, p.Hashes, sum, src)
		}
	}
	if fmt.Sprint(lockedNames) != "[simulator vanilla]" {
		t.Errorf("locked providers = %v", lockedNames)
	}

	// The next command runs the installed providers, an alias as its own process.
	runProviders(t, wd, nil)

	// init again needs no search path: the installed binaries are reused.
	code, stdout, stderr = runCommand(t, initCmd, wd)
	if code != 0 || !strings.Contains(stdout, "- Using previously-installed simulator v0.1.0") || strings.Contains(stdout, "lock file") {
		t.Errorf("second init: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// plugins ls shows both verified.
	ls := lsJSON(t, wd)
	if ls["simulator"].Status != pluginhost.StatusOK || ls["vanilla"].Status != pluginhost.StatusOK || len(ls) != 2 {
		t.Errorf("plugins ls = %+v", ls)
	}
	code, stdout, _ = runCommand(t, pluginsListCmd, wd)
	if code != 0 || !strings.HasPrefix(stdout, "NAME") || !strings.Contains(stdout, "simulator  0.1.0    ok") {
		t.Errorf("plugins ls text: exit %d\n%s", code, stdout)
	}

	// Tamper with the installed simulator: the next command refuses it,
	// naming the file and both checksums; ls reports the mismatch.
	simPath := pluginhost.InstallPath(wd, "simulator", "0.1.0")
	b, err := os.ReadFile(simPath)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x01
	if err := os.WriteFile(simPath, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tampered, _ := pluginhost.HashFile(simPath)
	locked, _ := lock.Provider("simulator")
	runProviders(t, wd, func(err error) {
		for _, want := range []string{simPath, string(locked.Hashes[0]), string(tampered)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not name %q", err, want)
			}
		}
	})
	if got := lsJSON(t, wd)["simulator"]; got.Status != pluginhost.StatusMismatch || got.SHA256 != tampered {
		t.Errorf("plugins ls after tampering: %+v", got)
	}
	code, _, stderr = runCommand(t, pluginsListCmd, wd)
	if code != 0 || !strings.Contains(stderr, "simulator v0.1.0 has changed since it was installed") {
		t.Errorf("plugins ls text after tampering: exit %d, stderr %q", code, stderr)
	}
	// init without the original binary at hand cannot repair it...
	code, _, stderr = runCommand(t, initCmd, wd, "-plugin-dir", t.TempDir())
	if code != 1 || !strings.Contains(stderr, `provider "simulator": no infrakit-provider-simulator found; looked in:`) {
		t.Errorf("init with nowhere to find simulator: exit %d, stderr %q", code, stderr)
	}
	// ...with it, it reinstalls the locked binary.
	code, stdout, stderr = runCommand(t, initCmd, wd, "-plugin-dir", bin)
	if code != 0 || !strings.Contains(stdout, "- Installed simulator v0.1.0") {
		t.Errorf("repairing init: exit %d\n%s\n%s", code, stdout, stderr)
	}
	runProviders(t, wd, nil)

	// plugins rm removes the directory and the lock entry; commands then ask for init.
	code, stdout, stderr = runCommand(t, pluginsRemoveCmd, wd, "vanilla")
	if code != 0 || !strings.Contains(stdout, "Removed provider vanilla") {
		t.Errorf("plugins rm: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(pluginhost.PluginsDir(wd), "vanilla")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("vanilla directory survived plugins rm (%v)", err)
	}
	if code, _, stderr = runCommand(t, pluginsRemoveCmd, wd, "vanilla"); code != 1 || !strings.Contains(stderr, "neither installed nor locked") {
		t.Errorf("second plugins rm: exit %d, %q", code, stderr)
	}

	// plugins install puts it back (flags may follow the paths).
	code, stdout, stderr = runCommand(t, pluginsInstallCmd, wd, filepath.Join(bin, "infrakit-provider-vanilla"))
	if code != 0 || !strings.Contains(stdout, "- Installed vanilla v") {
		t.Errorf("plugins install: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if got := lsJSON(t, wd); got["vanilla"].Status != pluginhost.StatusOK {
		t.Errorf("plugins ls after install: %+v", got)
	}
	runProviders(t, wd, nil)
}

// runProviders does what the next command would: start a Host over wd and
// launch every provider key of the stack. With refused nil every launch must
// succeed (and the alias is a separate process); otherwise the simulator's
// launches must fail and refused checks the error.
func runProviders(t *testing.T, wd string, refused func(error)) {
	t.Helper()
	h, err := pluginhost.New(pluginhost.Options{WorkDir: wd})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	pids := map[int]bool{}
	for _, key := range []string{"simulator", "simulator.nfs-auth", "vanilla"} {
		c, err := h.Client(ctx, key)
		if refused != nil && strings.HasPrefix(key, "simulator") {
			if err == nil {
				t.Fatalf("%s: tampered binary was launched", key)
			}
			refused(err)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if _, err := c.Metadata(ctx); err != nil {
			t.Errorf("%s: %v", key, err)
		}
		pids[c.Pid()] = true
	}
	if refused == nil && len(pids) != 3 {
		t.Errorf("3 provider keys ran as %d processes", len(pids))
	}
}

func TestInitErrors(t *testing.T) {
	t.Setenv(pluginhost.PluginPathEnv, "")
	t.Setenv("HOME", t.TempDir())
	wd := t.TempDir()

	// No stack: the config diagnostics are shown.
	code, _, stderr := runCommand(t, initCmd, wd)
	if code != 1 || !strings.Contains(stderr, "No stack files") {
		t.Errorf("init without a stack: exit %d, %q", code, stderr)
	}

	writeStack(t, wd, "stack \"s\" {}\nprovider \"docker\" {}\n")
	empty := t.TempDir()
	code, _, stderr = runCommand(t, initCmd, wd, "-plugin-dir", empty)
	if code != 1 {
		t.Errorf("init with a missing provider: exit %d", code)
	}
	for _, want := range []string{`provider "docker": no infrakit-provider-docker found; looked in:`, empty + " (-plugin-dir)", "(~/.infrakit/plugins)", "(infrakit binary)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("init error lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, pluginhost.LockFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed init wrote a lock file (%v)", err)
	}

	if code, _, _ := runCommand(t, initCmd, wd, "extra"); code != cli.RunResultHelp {
		t.Errorf("init extra = %d, want RunResultHelp", code)
	}
}

func TestPluginsUsage(t *testing.T) {
	wd := t.TempDir()
	for _, tt := range []struct {
		cmd  func(Meta) cli.Command
		args []string
	}{
		{pluginsInstallCmd, nil},
		{pluginsRemoveCmd, nil},
		{pluginsRemoveCmd, []string{"a", "b"}},
		{pluginsListCmd, []string{"x"}},
		{pluginsListCmd, []string{"-bogus"}},
	} {
		if code, _, _ := runCommand(t, tt.cmd, wd, tt.args...); code != cli.RunResultHelp {
			t.Errorf("%T %q = %d, want RunResultHelp", tt.cmd(Meta{}), tt.args, code)
		}
	}
	code, stdout, _ := runCommand(t, pluginsListCmd, wd)
	if code != 0 || !strings.Contains(stdout, "No providers are installed") {
		t.Errorf("plugins ls in an empty dir: %d %q", code, stdout)
	}
	code, stdout, _ = runCommand(t, pluginsListCmd, wd, "-json")
	if code != 0 || strings.TrimSpace(stdout) != "{\n  \"providers\": []\n}" {
		t.Errorf("plugins ls -json in an empty dir: %d %q", code, stdout)
	}
	if code, _, stderr := runCommand(t, pluginsInstallCmd, wd, "/nonexistent/infrakit-provider-x"); code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("plugins install of a missing file: %d %q", code, stderr)
	}
}
