package enrollment

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// simulatorBin is the real simulator provider, built once by TestMain.
var simulatorBin string

// TestMain builds the simulator the tests decide against and checks
// that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "enrollment-test-bin-")
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
	return startSimulatorOn(t, dir), dir
}

// startSimulatorOn launches another simulator process on the store dir
// (as a second alias of one provider would be); it is killed when the test
// ends.
func startSimulatorOn(t testing.TB, dir string) *plugin.Client {
	t.Helper()
	c, err := plugin.Start(context.Background(), plugin.ClientConfig{
		Name: "simulator",
		Path: simulatorBin,
		Env:  []string{"INFRAKIT_SIMULATOR_DIR=" + dir},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// provision creates n compute instances as members of a group and returns
// their descriptions as the simulator lists them.
func provision(t testing.TB, c *plugin.Client, groupName string, n int) []instance.Description {
	t.Helper()
	ctx := context.Background()
	ip := c.Instance("compute")
	for range n {
		spec := instance.Spec{Tags: tags.Member("test", groupName, "h", ""), Properties: json.RawMessage(`{"zone":"z1"}`)}
		if _, err := ip.Provision(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	return describe(t, c, groupName)
}

// describe lists a group's instances (with properties) through the instance SPI.
func describe(t testing.TB, c *plugin.Client, groupName string) []instance.Description {
	t.Helper()
	descs, err := c.Instance("compute").DescribeInstances(context.Background(), tags.GroupSelector("test", groupName), true)
	if err != nil {
		t.Fatal(err)
	}
	return descs
}
