package plugin

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/internal/proctest"
	"github.com/infrakit/infrakit/internal/syncbuf"
)

// testBinary is the test provider (internal/testprovider), built once.
var testBinary string

// The test binary doubles as a host process for TestParentDeath: with
// envWrapper set it starts the provider named by envWrapperProvider, prints
// its pid and waits to be killed.
const (
	envWrapper         = "PLUGIN_TEST_WRAPPER_HOST"
	envWrapperProvider = "PLUGIN_TEST_WRAPPER_PROVIDER"
)

func TestMain(m *testing.M) {
	if os.Getenv(envWrapper) != "" {
		os.Exit(wrapperHost())
	}
	dir, err := os.MkdirTemp("", "infrakit-plugin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBinary = filepath.Join(dir, "infrakit-provider-test")
	build := exec.Command("go", "build", "-o", testBinary, "./internal/testprovider")
	// Built as `make build` builds the shipped providers, statically
	// (CGO_ENABLED=0), whether or not the tests run under make: a dynamically
	// linked provider spends ~70 more page faults of its start in the
	// dynamic loader and libc, some 3 ms here.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test provider: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

func wrapperHost() int {
	c, err := Start(context.Background(), ClientConfig{Name: "test", Path: os.Getenv(envWrapperProvider)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("pid=%d\n", c.Pid())
	time.Sleep(time.Hour)
	return 0
}

// startTest starts the test provider in mode ("" for normal), killed at
// the end of the test.
func startTest(t testing.TB, mode string, mutate ...func(*ClientConfig)) (*Client, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	cfg := ClientConfig{
		Name:   "test",
		Path:   testBinary,
		Env:    []string{"TESTPROVIDER_MODE=" + mode},
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c, logs
}

// marker returns an argument unique to this test run, to find a process by
// its command line.
func marker(t testing.TB) string {
	return fmt.Sprintf("marker-%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
}

// pidsWithArg lists live processes whose command line holds arg.
func pidsWithArg(t testing.TB, arg string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(arg)) && proctest.Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGone waits up to d for pid to stop running.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !proctest.Alive(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return !proctest.Alive(pid)
}

// readPid reads the wrapper host's "pid=N" line.
func readPid(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the wrapper's output: %v (%q)", err, line)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "pid="))
	if err != nil {
		t.Fatalf("wrapper said %q", line)
	}
	return pid
}
