package election

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest/embedded"
)

// One embedded etcd serves every test; each test campaigns under a prefix
// of its own. With helperEnv set the test binary campaigns as a separate
// process instead (for SIGKILL tests).
const (
	helperEnv          = "INFRAKIT_ELECTION_TEST_HELPER" // "lead"
	helperEndpointsEnv = "INFRAKIT_ELECTION_TEST_ENDPOINTS"
	helperPrefixEnv    = "INFRAKIT_ELECTION_TEST_PREFIX"
)

var endpoints []string

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(embedded.RunTests(m, func(eps []string) { endpoints = eps }))
}

// runHelper campaigns, says "leading", and leads until stdin closes.
func runHelper(mode string) error {
	if mode != "lead" {
		return fmt.Errorf("unknown helper mode %q", mode)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv(helperEndpointsEnv), ","), Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := New(c, Options{Prefix: os.Getenv(helperPrefixEnv), TTL: 2 * time.Second}).Campaign(context.Background(), fmt.Sprintf("pid %d", os.Getpid()))
	if err != nil {
		return err
	}
	fmt.Println("leading")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return l.Resign(context.Background())
}

// newClient connects to the shared server (or eps); it is closed at cleanup.
func newClient(t *testing.T, eps ...string) *clientv3.Client {
	if len(eps) == 0 {
		eps = endpoints
	}
	return etcdtest.Client(t, eps)
}

// prefix is a key prefix of the test's own.
func prefix(t *testing.T) string { return etcdtest.Prefix(t) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newElection is an election under the test's prefix with a 2s TTL.
func newElection(t *testing.T, c *clientv3.Client) *Election {
	if c == nil {
		c = newClient(t)
	}
	return New(c, Options{Prefix: prefix(t), TTL: 2 * time.Second})
}

// startHelper starts a campaigning helper process, killed at cleanup.
func startHelper(t *testing.T) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=lead",
		helperEndpointsEnv+"="+strings.Join(endpoints, ","),
		helperPrefixEnv+"="+prefix(t))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, bufio.NewScanner(stdout)
}
