package pluginhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// testBin holds the provider binaries TestMain builds:
// infrakit-provider-simulator and infrakit-provider-vanilla, and
// infrakit-provider-configured (testdata/configured).
var testBin string

// TestMain builds the real provider binaries once, runs the tests, removes
// the binaries and checks that no test left a goroutine behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pluginhost-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBin = dir
	for name, pkg := range map[string]string{
		"simulator":  shipped + "simulator",
		"vanilla":    shipped + "vanilla",
		"configured": "./testdata/configured",
	} {
		if err := buildPackage(filepath.Join(dir, BinaryName(name)), pkg, ""); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code) // goleak reports leaks through the code
	}))
}

// shipped is the import path prefix of the shipped providers.
const shipped = "github.com/infrakit/infrakit/plugins/"

// buildProvider builds ./plugins/<name> to out, with main.version set when
// version is not empty.
func buildProvider(out, name, version string) error {
	return buildPackage(out, shipped+name, version)
}

// buildPackage builds the main package pkg to out, with main.version set
// when version is not empty.
func buildPackage(out, pkg, version string) error {
	args := []string{"build", "-o", out}
	if version != "" {
		args = append(args, "-ldflags", "-X main.version="+version)
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// providerBin is the path of a binary TestMain built.
func providerBin(name string) string { return filepath.Join(testBin, BinaryName(name)) }
