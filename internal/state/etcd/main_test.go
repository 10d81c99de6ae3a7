package etcd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest/embedded"
)

// One embedded etcd serves every test of the package; each test works
// under a prefix of its own. The test binary doubles as a second process
// for the cross-process tests: with helperEnv set it runs one helper
// against the endpoints in helperEndpointsEnv instead of the tests.
const (
	helperEnv          = "INFRAKIT_ETCD_TEST_HELPER" // "hold" | "write-loop"
	helperEndpointsEnv = "INFRAKIT_ETCD_TEST_ENDPOINTS"
	helperPrefixEnv    = "INFRAKIT_ETCD_TEST_PREFIX"
	helperOpEnv        = "INFRAKIT_ETCD_TEST_OP"
	helperNEnv         = "INFRAKIT_ETCD_TEST_N"
	helperTTLEnv       = "INFRAKIT_ETCD_TEST_TTL"
)

// endpoints of the shared embedded server.
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

func runHelper(mode string) error {
	ttl, _ := time.ParseDuration(os.Getenv(helperTTLEnv))
	b, err := Open(Config{
		Endpoints: strings.Split(os.Getenv(helperEndpointsEnv), ","),
		Prefix:    os.Getenv(helperPrefixEnv),
		LeaseTTL:  ttl,
	})
	if err != nil {
		return err
	}
	defer b.Close()
	switch mode {
	case "hold":
		// Take the lock, say so, hold it until stdin closes (or SIGKILL).
		unlock, err := b.Lock(context.Background(), state.LockInfo{Operation: os.Getenv(helperOpEnv)})
		if err != nil {
			return err
		}
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return unlock()
	case "write-loop":
		// N locked read-modify-writes, printing each serial written.
		n, _ := strconv.Atoi(os.Getenv(helperNEnv))
		for i := range n {
			serial, err := lockedIncrement(b, fmt.Sprintf("p%d-%d", os.Getpid(), i))
			if err != nil {
				return err
			}
			fmt.Println(serial)
		}
		return nil
	default:
		return fmt.Errorf("unknown helper mode %q", mode)
	}
}

// lockedIncrement is the CLI's pattern: lock, read, change, write, unlock.
func lockedIncrement(s state.Store, marker string) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unlock, err := s.Lock(ctx, state.LockInfo{Operation: "test"})
	if err != nil {
		return 0, err
	}
	doc, err := s.Read(ctx)
	if err != nil {
		return 0, errors.Join(err, unlock())
	}
	addMarker(doc, marker)
	if err := s.Write(ctx, doc); err != nil {
		return 0, errors.Join(err, unlock())
	}
	return doc.Serial, unlock()
}

// addMarker records one write in the document, so lost updates show.
func addMarker(doc *state.Document, marker string) {
	g := doc.Group("markers")
	g.Instances = append(g.Instances, state.Instance{ID: marker})
}

func markers(doc *state.Document) map[string]int {
	out := map[string]int{}
	if g := doc.Groups["markers"]; g != nil {
		for _, in := range g.Instances {
			out[in.ID]++
		}
	}
	return out
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

// newBackend is a backend under the test's prefix with a 2s lease TTL.
func newBackend(t *testing.T) *Backend {
	t.Helper()
	return New(newClient(t), Options{Prefix: prefix(t), LeaseTTL: 2 * time.Second})
}

// helper is a helper process; it is killed and reaped at cleanup.
type helper struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	out   *bufio.Scanner
}

func startHelper(t *testing.T, mode string, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode,
		helperEndpointsEnv+"="+strings.Join(endpoints, ","),
		helperPrefixEnv+"="+prefix(t),
		helperTTLEnv+"=2s")
	cmd.Env = append(cmd.Env, env...)
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
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return h
}

// line waits for the helper's next output line.
func (h *helper) line(t *testing.T) string {
	t.Helper()
	if !h.out.Scan() {
		t.Fatalf("helper pid %d ended without output (err %v)", h.cmd.Process.Pid, h.out.Err())
	}
	return h.out.Text()
}
