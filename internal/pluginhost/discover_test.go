package pluginhost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSearchDirsOrder(t *testing.T) {
	got := searchDirs(
		[]string{"/a", "/b"},
		"/env1"+string(os.PathListSeparator)+"/env2"+string(os.PathListSeparator)+"/a",
		"/home/u",
		"/opt/infrakit/bin",
	)
	want := []SearchDir{
		{"/a", "-plugin-dir"},
		{"/b", "-plugin-dir"},
		{"/env1", "$INFRAKIT_PLUGIN_PATH"},
		{"/env2", "$INFRAKIT_PLUGIN_PATH"},
		// "/a" again from the env is not searched twice.
		{"/home/u/.infrakit/plugins", "~/.infrakit/plugins"},
		{"/opt/infrakit/bin", "infrakit binary"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("searchDirs =\n%v\nwant\n%v", got, want)
	}
}

func TestSearchDirsSkipsUnknown(t *testing.T) {
	got := searchDirs(nil, "", "", "")
	if len(got) != 0 {
		t.Errorf("searchDirs with nothing = %v, want none", got)
	}
}

func TestSearchDirsFromEnvironment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv(PluginPathEnv, "/from/env")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ = filepath.EvalSymlinks(exe)
	got := SearchDirs([]string{"/flag"})
	want := []SearchDir{
		{"/flag", "-plugin-dir"},
		{"/from/env", "$INFRAKIT_PLUGIN_PATH"},
		{filepath.Join(home, ".infrakit", "plugins"), "~/.infrakit/plugins"},
		{filepath.Dir(exe), "infrakit binary"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SearchDirs =\n%v\nwant\n%v", got, want)
	}
}

// writeExecutable creates a file with the given mode.
func writeExecutable(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
}

func TestFindFirstInOrder(t *testing.T) {
	root := t.TempDir()
	first, second, third := filepath.Join(root, "1"), filepath.Join(root, "2"), filepath.Join(root, "3")
	for _, d := range []string{first, second, third} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// first has only a non-executable file and a directory of the name: both skipped.
	writeExecutable(t, filepath.Join(first, BinaryName("simulator")), 0o644)
	if err := os.Mkdir(filepath.Join(first, BinaryName("vanilla")), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExecutable(t, filepath.Join(second, BinaryName("simulator")), 0o755)
	writeExecutable(t, filepath.Join(third, BinaryName("simulator")), 0o755)
	writeExecutable(t, filepath.Join(third, BinaryName("vanilla")), 0o755)
	dirs := []SearchDir{{first, "-plugin-dir"}, {second, "-plugin-dir"}, {third, "infrakit binary"}}

	for name, want := range map[string]string{
		"simulator": filepath.Join(second, BinaryName("simulator")),
		"vanilla":   filepath.Join(third, BinaryName("vanilla")),
	} {
		got, err := Find(name, dirs)
		if err != nil || got != want {
			t.Errorf("Find(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestFindNotFoundListsWhereItLooked(t *testing.T) {
	dirs := []SearchDir{{"/nowhere/a", "-plugin-dir"}, {"/nowhere/b", "$INFRAKIT_PLUGIN_PATH"}}
	_, err := Find("docker", dirs)
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("Find = %v, want *NotFoundError", err)
	}
	msg := err.Error()
	for _, want := range []string{`provider "docker"`, "infrakit-provider-docker", "/nowhere/a (-plugin-dir)", "/nowhere/b ($INFRAKIT_PLUGIN_PATH)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
}

func TestNameFromPath(t *testing.T) {
	for path, want := range map[string]string{
		"/x/infrakit-provider-simulator":    "simulator",
		"infrakit-provider-docker.exe":      "docker",
		"/x/infrakit-provider-":             "",
		"/x/terraform-provider-aws":         "",
		"/x/infrakit-provider-nfs-exports/": "nfs-exports",
	} {
		got, ok := NameFromPath(path)
		if got != want || ok != (want != "") {
			t.Errorf("NameFromPath(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
}

func TestDiscoverAsksTheBinary(t *testing.T) {
	f, err := Discover(context.Background(), "vanilla", []SearchDir{{t.TempDir(), "-plugin-dir"}, {testBin, "-plugin-dir"}}, LaunchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := HashFile(providerBin("vanilla"))
	if f.Name != "vanilla" || f.Version == "" || f.Path != providerBin("vanilla") || f.SHA256 != sum {
		t.Errorf("Discover = %+v", f)
	}
	// A binary named for one provider that is another is refused.
	impostor := t.TempDir()
	copyFile(t, filepath.Join(impostor, BinaryName("docker")), providerBin("vanilla"), 0o755)
	_, err = Discover(context.Background(), "docker", []SearchDir{{impostor, "-plugin-dir"}}, LaunchOptions{})
	if err == nil || !strings.Contains(err.Error(), `says it is provider "vanilla"`) {
		t.Errorf("Discover of an impostor = %v", err)
	}
}
