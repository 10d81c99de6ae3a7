package ingress

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// simulatorBin is the real simulator provider, built once by TestMain.
var simulatorBin string

// TestMain builds the simulator the tests decide against and checks
// that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ingress-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	simulatorBin = filepath.Join(dir, "infrakit-provider-simulator")
	cmd := exec.Command("go", "build", "-o", simulatorBin, "github.com/infrakit/infrakit/plugins/simulator")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build simulator: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// startSimulator launches the simulator over go-plugin on a fresh store
// directory, which it returns; the process is killed when the test ends.
func startSimulator(t testing.TB) (*plugin.Client, string) {
	t.Helper()
	dir := t.TempDir()
	c, err := plugin.Start(context.Background(), plugin.ClientConfig{
		Name: "simulator",
		Path: simulatorBin,
		Env:  []string{"INFRAKIT_SIMULATOR_DIR=" + dir},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c, dir
}

// provision creates n compute instances as members of a group and returns
// the group's members as the simulator lists them (with their addresses).
func provision(t testing.TB, c *plugin.Client, groupName string, n int) []group.Member {
	t.Helper()
	ctx := context.Background()
	ip := c.Instance("compute")
	for range n {
		if _, err := ip.Provision(ctx, instance.Spec{Tags: tags.Member("test", groupName, "h", "")}); err != nil {
			t.Fatal(err)
		}
	}
	return members(t, c, groupName)
}

// members lists a group's members through the instance SPI.
func members(t testing.TB, c *plugin.Client, groupName string) []group.Member {
	t.Helper()
	descs, err := c.Instance("compute").DescribeInstances(context.Background(), tags.GroupSelector("test", groupName), false)
	if err != nil {
		t.Fatal(err)
	}
	return group.MembersFromDescriptions(descs, nil)
}
