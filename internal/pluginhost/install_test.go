package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFile copies src to dst with mode, creating dst's directory.
func copyFile(t *testing.T, dst, src string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// appendByte makes a binary with another checksum that still runs the same
// (an ELF or Mach-O file ignores trailing bytes).
func appendByte(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipByte inverts one byte in the middle of a file, in place.
func flipByte(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, fi.Mode()); err != nil {
		t.Fatal(err)
	}
}

func mustHash(t *testing.T, path string) Hash {
	t.Helper()
	h, err := HashFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestInstallAsksVersionAndCopiesAtomically(t *testing.T) {
	wd := t.TempDir()
	src := providerBin("simulator")
	p, err := Install(context.Background(), wd, src, InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(wd, ".infrakit", "plugins", "simulator", "0.1.0", Platform(), "infrakit-provider-simulator")
	if p.Name != "simulator" || p.Version != "0.1.0" || p.Path != want || p.Source != src {
		t.Errorf("Install = %+v; want simulator 0.1.0 at %s from %s", p, want, src)
	}
	if p.SHA256 != mustHash(t, src) || p.SHA256 != mustHash(t, want) {
		t.Errorf("Install SHA256 = %s, want the source's and the installed file's", p.SHA256)
	}
	fi, err := os.Stat(want)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed file mode = %v, %v; want 0755", fi, err)
	}
	entries, err := os.ReadDir(filepath.Dir(want))
	if err != nil || len(entries) != 1 {
		t.Errorf("install directory holds %v, %v; want only the binary (no temp files)", entries, err)
	}
}

func TestInstallGivenVersionAndName(t *testing.T) {
	wd := t.TempDir()
	// With a version given the file is not run, so any file will do.
	src := filepath.Join(t.TempDir(), "some-binary")
	writeExecutable(t, src, 0o700)
	p, err := Install(context.Background(), wd, src, InstallOptions{Name: "docker", Version: "2.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Path != InstallPath(wd, "docker", "2.0.0") {
		t.Errorf("installed at %s", p.Path)
	}
}

func TestInstallRefuses(t *testing.T) {
	ctx := context.Background()
	other := filepath.Join(t.TempDir(), BinaryName("other"))
	copyFile(t, other, providerBin("simulator"), 0o755)
	tests := []struct {
		name string
		src  string
		opts InstallOptions
		want string
	}{
		{"binary says another name", other, InstallOptions{}, `provider "other": ` + other + ` says it is provider "simulator"`},
		{"not a provider file name", filepath.Join(testBin, "simulator"), InstallOptions{}, "provider binaries are named infrakit-provider-<name>"},
		{"version escapes", providerBin("simulator"), InstallOptions{Version: "../../x"}, `version "../../x" cannot be a directory name`},
		{"missing", filepath.Join(t.TempDir(), BinaryName("gone")), InstallOptions{}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd := t.TempDir()
			_, err := Install(ctx, wd, tt.src, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Install = %v, want error containing %q", err, tt.want)
			}
			if _, err := os.Stat(PluginsDir(wd)); err == nil {
				entries, _ := filepath.Glob(filepath.Join(PluginsDir(wd), "*", "*", "*", "*"))
				if len(entries) > 0 {
					t.Errorf("a refused install left %v", entries)
				}
			}
		})
	}
}

// initBoth runs Init for simulator and vanilla from the test binaries into a
// fresh working directory.
func initBoth(t *testing.T) string {
	t.Helper()
	wd := t.TempDir()
	if _, err := Init(context.Background(), wd, []string{"simulator", "vanilla"}, InitOptions{
		SearchDirs: []SearchDir{{testBin, "-plugin-dir"}},
	}); err != nil {
		t.Fatal(err)
	}
	return wd
}

func TestInitInstallsAndLocks(t *testing.T) {
	ctx := context.Background()
	wd := t.TempDir()
	empty := t.TempDir()
	dirs := []SearchDir{{empty, "-plugin-dir"}, {testBin, "$INFRAKIT_PLUGIN_PATH"}}
	// Names as a stack gives them: unsorted, simulator twice (it has an alias).
	report, err := Init(ctx, wd, []string{"vanilla", "simulator", "simulator"}, InitOptions{SearchDirs: dirs})
	if err != nil {
		t.Fatal(err)
	}
	if !report.LockCreated || !report.LockChanged || len(report.Providers) != 2 {
		t.Fatalf("report = %+v", report)
	}
	for i, name := range []string{"simulator", "vanilla"} {
		p := report.Providers[i]
		if p.Name != name || p.Action != ActionInstalled || p.Source != providerBin(name) || p.Path != InstallPath(wd, name, p.Version) {
			t.Errorf("provider %d = %+v", i, p)
		}
	}
	simHash, vanHash := mustHash(t, providerBin("simulator")), mustHash(t, providerBin("vanilla"))
	vanVersion := report.Providers[1].Version
	want := fmt.Sprintf(`# This file is maintained automatically by "infrakit init" and "infrakit plugins".
# Manual edits may be lost in future updates. Commit it with your stack.

provider "simulator" {
  version = "0.1.0"
  hashes  = [%q]
}

provider "vanilla" {
  version = %q
  hashes  = [%q]
}
`, simHash, vanVersion, vanHash)
	got, err := os.ReadFile(filepath.Join(wd, LockFileName))
	if err != nil || string(got) != want {
		t.Fatalf("lock file = %v\n%s\nwant\n%s", err, got, want)
	}

	// Again, with nothing to search: both are reused and the lock is untouched.
	report, err = Init(ctx, wd, []string{"simulator", "vanilla"}, InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if report.LockCreated || report.LockChanged || report.Providers[0].Action != ActionReused || report.Providers[1].Action != ActionReused {
		t.Errorf("second init = %+v; want both reused, lock unchanged", report)
	}

	// A stack that no longer uses vanilla drops it from the lock.
	report, err = Init(ctx, wd, []string{"simulator"}, InitOptions{})
	if err != nil || !report.LockChanged {
		t.Fatalf("init without vanilla = %+v, %v", report, err)
	}
	lock, err := LoadLock(wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lock.Provider("vanilla"); ok || len(lock.Providers()) != 1 {
		t.Errorf("lock after dropping vanilla = %v", lock.Providers())
	}
}

func TestInitRefusesBinaryContradictingLock(t *testing.T) {
	ctx := context.Background()
	wd := initBoth(t)
	lockBefore, err := os.ReadFile(filepath.Join(wd, LockFileName))
	if err != nil {
		t.Fatal(err)
	}
	// Same version, rebuilt: another checksum.
	rebuilt := t.TempDir()
	copyFile(t, filepath.Join(rebuilt, BinaryName("simulator")), providerBin("simulator"), 0o755)
	appendByte(t, filepath.Join(rebuilt, BinaryName("simulator")))
	// Another version.
	newer := t.TempDir()
	if err := buildProvider(filepath.Join(newer, BinaryName("simulator")), "simulator", "0.2.0"); err != nil {
		t.Fatal(err)
	}
	// The installed copy is gone, so init has to look for one.
	if err := os.RemoveAll(filepath.Join(PluginsDir(wd), "simulator")); err != nil {
		t.Fatal(err)
	}

	for dir, want := range map[string]string{
		rebuilt: "which the lock file does not list for version 0.1.0",
		newer:   "is version 0.2.0 but the lock file pins 0.1.0",
	} {
		_, err := Init(ctx, wd, []string{"simulator", "vanilla"}, InitOptions{SearchDirs: []SearchDir{{dir, "-plugin-dir"}}})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "-upgrade") {
			t.Errorf("Init from %s = %v, want error containing %q and advising -upgrade", dir, err, want)
		}
		if after, _ := os.ReadFile(filepath.Join(wd, LockFileName)); string(after) != string(lockBefore) {
			t.Errorf("a refused init changed the lock file to\n%s", after)
		}
	}

	report, err := Init(ctx, wd, []string{"simulator", "vanilla"}, InitOptions{
		SearchDirs: []SearchDir{{newer, "-plugin-dir"}, {testBin, "-plugin-dir"}},
		Upgrade:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !report.LockChanged || report.Providers[0].Version != "0.2.0" || report.Providers[1].Action != ActionInstalled {
		t.Errorf("upgrade report = %+v", report)
	}
	lock, _ := LoadLock(wd)
	sim, _ := lock.Provider("simulator")
	if sim.Version != "0.2.0" || len(sim.Hashes) != 1 || sim.Hashes[0] != mustHash(t, filepath.Join(newer, BinaryName("simulator"))) {
		t.Errorf("locked simulator after upgrade = %+v", sim)
	}
}

func TestInitNotFound(t *testing.T) {
	wd := t.TempDir()
	dirs := []SearchDir{{testBin, "-plugin-dir"}, {"/nonexistent", "~/.infrakit/plugins"}}
	_, err := Init(context.Background(), wd, []string{"simulator", "docker", "haproxy"}, InitOptions{SearchDirs: dirs})
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("Init = %v, want *NotFoundError", err)
	}
	for _, want := range []string{`provider "docker"`, `provider "haproxy"`, testBin + " (-plugin-dir)", "/nonexistent (~/.infrakit/plugins)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, LockFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed init wrote the lock file (%v)", err)
	}
}

func TestInstalledStatuses(t *testing.T) {
	wd := initBoth(t)
	list, err := Installed(wd)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Status != StatusOK || list[1].Status != StatusOK || list[0].SHA256 != mustHash(t, providerBin("simulator")) {
		t.Fatalf("Installed = %+v; want simulator and vanilla ok", list)
	}
	vanilla := list[1]

	flipByte(t, vanilla.Path)
	if err := os.RemoveAll(filepath.Join(PluginsDir(wd), "simulator")); err != nil {
		t.Fatal(err)
	}
	stray := InstallPath(wd, "docker", "1.0.0")
	copyFile(t, stray, providerBin("vanilla"), 0o755)

	list, err = Installed(wd)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Status{}
	for _, p := range list {
		got[p.Name+"@"+p.Version] = p.Status
	}
	want := map[string]Status{
		"docker@1.0.0":               StatusUnlocked,
		"simulator@0.1.0":            StatusMissing,
		"vanilla@" + vanilla.Version: StatusMismatch,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || list[0].Name != "docker" {
		t.Errorf("Installed statuses = %v (order %v), want %v", got, list, want)
	}
}

func TestUninstall(t *testing.T) {
	wd := initBoth(t)
	found, err := Uninstall(wd, "simulator")
	if err != nil || !found {
		t.Fatalf("Uninstall = %v, %v", found, err)
	}
	if _, err := os.Stat(filepath.Join(PluginsDir(wd), "simulator")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("simulator directory still there (%v)", err)
	}
	lock, _ := LoadLock(wd)
	if _, ok := lock.Provider("simulator"); ok {
		t.Error("simulator still locked")
	}
	if _, ok := lock.Provider("vanilla"); !ok {
		t.Error("vanilla lost from the lock")
	}
	if found, err := Uninstall(wd, "simulator"); found || err != nil {
		t.Errorf("second Uninstall = %v, %v; want false, nil", found, err)
	}
	if _, err := Uninstall(wd, ".."); err == nil {
		t.Error(`Uninstall("..") should be refused`)
	}
}

func TestLockEntry(t *testing.T) {
	locked := LockedProvider{Name: "simulator", Version: "0.1.0", Hashes: []Hash{hashA, hashB}}
	found := func(version string, sum Hash) Found {
		return Found{Name: "simulator", Version: version, Path: "/bin/infrakit-provider-simulator", SHA256: sum}
	}
	tests := []struct {
		name     string
		found    Found
		isLocked bool
		upgrade  bool
		want     LockedProvider
		err      string
	}{
		{"not locked", found("0.1.0", hashC), false, false, LockedProvider{Name: "simulator", Version: "0.1.0", Hashes: []Hash{hashC}}, ""},
		{"matches one locked hash", found("0.1.0", hashB), true, false, locked, ""},
		{"other checksum", found("0.1.0", hashC), true, false, LockedProvider{}, "which the lock file does not list"},
		{"other version", found("0.2.0", hashA), true, false, LockedProvider{}, "is version 0.2.0 but the lock file pins 0.1.0"},
		{"upgrade takes the binary", found("0.2.0", hashC), true, true, LockedProvider{Name: "simulator", Version: "0.2.0", Hashes: []Hash{hashC}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lockEntry(tt.found, locked, tt.isLocked, tt.upgrade)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("lockEntry = %v, %v; want error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("lockEntry = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
