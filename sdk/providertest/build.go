package providertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// BinaryPrefix starts the file name of every provider executable
// (infrakit-provider-simulator).
const BinaryPrefix = "infrakit-provider-"

// Builder builds provider main packages with `go build`, each package once
// however many tests ask for it, into one temporary directory it removes on
// Close. Make one in TestMain:
//
//	var builder *providertest.Builder
//
//	func TestMain(m *testing.M) {
//		builder = providertest.NewBuilder()
//		code := m.Run()
//		builder.Close()
//		os.Exit(code)
//	}
type Builder struct {
	mu   sync.Mutex
	dir  string            // created on first Build
	bins map[string]*build // by absolute package dir or import path
}

// build is one package's build; once makes concurrent callers wait for the
// same `go build` instead of starting their own.
type build struct {
	out  string // where to build
	once sync.Once
	path string
	err  error
}

// NewBuilder returns a Builder with nothing built yet.
func NewBuilder() *Builder {
	return &Builder{bins: map[string]*build{}}
}

// Build builds the main package pkg (a directory such as "." or
// "./plugins/simulator", or an import path) unless this Builder already did,
// and returns the executable's absolute path. A failed build fails t with
// the compiler's output.
func (b *Builder) Build(t testing.TB, pkg string) string {
	t.Helper()
	key, err := packageKey(pkg)
	if err != nil {
		t.Fatalf("providertest: build %s: %v", pkg, err)
	}
	b.mu.Lock()
	if b.dir == "" {
		if b.dir, err = os.MkdirTemp("", "providertest-"); err != nil {
			b.mu.Unlock()
			t.Fatalf("providertest: build %s: %v", pkg, err)
		}
	}
	bin, ok := b.bins[key]
	if !ok {
		// Each package gets its own subdirectory so two packages with the
		// same base name do not overwrite each other.
		bin = &build{out: filepath.Join(b.dir, fmt.Sprint(len(b.bins)), binaryName(key))}
		b.bins[key] = bin
	}
	b.mu.Unlock()

	bin.once.Do(func() { bin.path, bin.err = goBuild(key, bin.out) })
	if bin.err != nil {
		t.Fatalf("providertest: %v", bin.err)
	}
	return bin.path
}

// Close removes every binary built.
func (b *Builder) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir == "" {
		return nil
	}
	err := os.RemoveAll(b.dir)
	b.dir, b.bins = "", map[string]*build{}
	if err != nil {
		return fmt.Errorf("providertest: remove built binaries: %w", err)
	}
	return nil
}

// Build builds the main package pkg into t.TempDir() and returns the
// executable's path. Use a Builder when several tests need the same binary.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	key, err := packageKey(pkg)
	if err != nil {
		t.Fatalf("providertest: build %s: %v", pkg, err)
	}
	p, err := goBuild(key, filepath.Join(t.TempDir(), binaryName(key)))
	if err != nil {
		t.Fatalf("providertest: %v", err)
	}
	return p
}

// packageKey makes a local package path absolute, because the working
// directory changes while the suite runs; import paths stay as they are.
func packageKey(pkg string) (string, error) {
	if pkg == "" {
		return "", fmt.Errorf("no package given")
	}
	if isLocal(pkg) {
		return filepath.Abs(pkg)
	}
	return pkg, nil
}

func isLocal(pkg string) bool {
	return filepath.IsAbs(pkg) || pkg == "." || pkg == ".." ||
		strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../")
}

// binaryName names the executable after the package's last element, as a
// provider is installed: infrakit-provider-<name>.
func binaryName(key string) string {
	var base string
	if filepath.IsAbs(key) {
		base = filepath.Base(key)
	} else {
		base = path.Base(key)
	}
	if !strings.HasPrefix(base, BinaryPrefix) {
		base = BinaryPrefix + base
	}
	if runtime.GOOS == "windows" {
		base += ".exe"
	}
	return base
}

// goBuild runs `go build -o out pkg`. A local package is built from its own
// directory so its module is the one that resolves imports.
func goBuild(pkg, out string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build %s: go command not found: %w", pkg, err)
	}
	cmd := exec.Command(goBin, "build", "-o", out, ".")
	if isLocal(pkg) {
		cmd.Dir = pkg
	} else {
		cmd.Args[len(cmd.Args)-1] = pkg
	}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, output.String())
	}
	return out, nil
}
