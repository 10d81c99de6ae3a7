package providertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestBuilderBuildsOncePerPackage(t *testing.T) {
	b := NewBuilder()
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})

	// Concurrent callers of one package share one build.
	paths := make([]string, 4)
	var wg sync.WaitGroup
	for i := range paths {
		wg.Go(func() { paths[i] = b.Build(t, "./testdata/hello") })
	}
	wg.Wait()
	for _, p := range paths[1:] {
		if p != paths[0] {
			t.Fatalf("builds of one package went to %q and %q, want one binary", paths[0], p)
		}
	}
	if got := filepath.Base(paths[0]); !strings.HasPrefix(got, BinaryPrefix+"hello") {
		t.Errorf("binary is named %q, want %shello", got, BinaryPrefix)
	}
	info, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(paths[0]).Output()
	if err != nil {
		t.Fatalf("run %s: %v", paths[0], err)
	}
	if strings.TrimSpace(string(out)) != "hello from providertest" {
		t.Errorf("built binary printed %q", out)
	}

	// The same package named by its absolute path is the same build: the
	// file is not rewritten.
	abs, err := filepath.Abs("testdata/hello")
	if err != nil {
		t.Fatal(err)
	}
	again := b.Build(t, abs)
	info2, err := os.Stat(again)
	if err != nil {
		t.Fatal(err)
	}
	if again != paths[0] || !info2.ModTime().Equal(info.ModTime()) {
		t.Errorf("second Build of the same package rebuilt it: %q (%v) vs %q (%v)", again, info2.ModTime(), paths[0], info.ModTime())
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(paths[0]); !os.IsNotExist(err) {
		t.Errorf("binary %s survives Close: %v", paths[0], err)
	}
}

func TestBuildIntoTempDir(t *testing.T) {
	// An import path resolves in the module of the working directory.
	p := Build(t, "github.com/infrakit/infrakit/sdk/providertest/testdata/hello")
	if got := filepath.Base(p); !strings.HasPrefix(got, BinaryPrefix+"hello") {
		t.Errorf("binary is named %q, want %shello", got, BinaryPrefix)
	}
	if out, err := exec.Command(p).Output(); err != nil || strings.TrimSpace(string(out)) != "hello from providertest" {
		t.Errorf("run %s: %q, %v", p, out, err)
	}
}

func TestBinaryName(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"/src/plugins/simulator", "infrakit-provider-simulator"},
		{"/src/cmd/infrakit-provider-docker", "infrakit-provider-docker"},
		{"github.com/acme/infrakit-provider-cloud", "infrakit-provider-cloud"},
		{"github.com/acme/cloud/cmd/cloud", "infrakit-provider-cloud"},
	} {
		got := strings.TrimSuffix(binaryName(tc.key), ".exe")
		if got != tc.want {
			t.Errorf("binaryName(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
