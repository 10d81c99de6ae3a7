package plugin

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/proctest"
	"github.com/infrakit/infrakit/sdk/instance"
)

// These tests launch real processes that are not, or stop being, good
// providers, and check the error and that no process is left behind.

// startFails starts cfg, expects an error containing every want, returned
// within limit, and no process left whose command line holds mark (an
// argument of cfg; when empty, one is made up and added).
func startFails(t *testing.T, ctx context.Context, cfg ClientConfig, mark string, limit time.Duration, want ...string) error {
	t.Helper()
	if mark == "" {
		mark = marker(t)
		cfg.Args = append(cfg.Args, mark)
	}
	begin := time.Now()
	c, err := Start(ctx, cfg)
	took := time.Since(begin)
	if err == nil {
		c.Kill()
		t.Fatal("Start succeeded")
	}
	if took > limit {
		t.Errorf("Start took %s to fail, want at most %s", took, limit)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if pids := pidsWithArg(t, mark); len(pids) > 0 {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("processes left behind: %v", pids)
	}
	return err
}

func TestStartNotAProvider(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	// sleep adds up its arguments: the marker is a unique fraction of a second.
	mark := fmt.Sprintf("0.%d", time.Now().UnixNano())
	cfg := ClientConfig{Path: sleep, Args: []string{"60", mark}, StartTimeout: time.Second}
	startFails(t, context.Background(), cfg, mark, 3*time.Second,
		`provider "sleep": start: `+sleep+`: no plugin handshake within 1s; is it an infrakit provider?`)
}

func TestStartGarbage(t *testing.T) {
	cfg := ClientConfig{Name: "test", Path: testBinary, Env: []string{"TESTPROVIDER_MODE=garbage"}}
	startFails(t, context.Background(), cfg, "", 3*time.Second,
		`provider "test": start: `+testBinary+` is not an infrakit provider: it printed "hello, I am not a plugin" instead of a plugin handshake`)
}

func TestStartCrash(t *testing.T) {
	cfg := ClientConfig{Name: "test", Path: testBinary, Env: []string{"TESTPROVIDER_MODE=crash-at-start"}}
	startFails(t, context.Background(), cfg, "", 3*time.Second,
		`provider "test": start: `+testBinary+` exited before the plugin handshake; its stderr ends with:`+"\n"+`testprovider: crashing at start as asked`)
}

func TestStartHang(t *testing.T) {
	cfg := ClientConfig{Name: "test", Path: testBinary, Env: []string{"TESTPROVIDER_MODE=hang-at-start"}, StartTimeout: 500 * time.Millisecond}
	startFails(t, context.Background(), cfg, "", 2*time.Second, "no plugin handshake within 500ms")
}

func TestStartContextDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cfg := ClientConfig{Name: "test", Path: testBinary, Env: []string{"TESTPROVIDER_MODE=hang-at-start"}}
	err := startFails(t, ctx, cfg, "", 2*time.Second, `provider "test": start: `+testBinary+`: no plugin handshake before the deadline: context deadline exceeded`)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("want context.DeadlineExceeded, got %v", err)
	}
}

func TestStartMissingBinary(t *testing.T) {
	_, err := Start(context.Background(), ClientConfig{Name: "gone", Path: "/nonexistent/infrakit-provider-gone"})
	if err == nil || !strings.Contains(err.Error(), `provider "gone": start: /nonexistent/infrakit-provider-gone: `) {
		t.Fatalf("got %v", err)
	}
}

func TestChecksum(t *testing.T) {
	data, err := os.ReadFile(testBinary)
	if err != nil {
		t.Fatal(err)
	}
	actual := sha256.Sum256(data)

	t.Run("Match", func(t *testing.T) {
		c, _ := startTest(t, "", func(cfg *ClientConfig) { cfg.SHA256 = actual[:] })
		if _, err := c.Metadata(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Mismatch", func(t *testing.T) {
		pinned := sha256.Sum256([]byte("the binary the lock file saw"))
		cfg := ClientConfig{Name: "test", Path: testBinary, SHA256: pinned[:]}
		err := startFails(t, context.Background(), cfg, "", time.Second,
			fmt.Sprintf(`provider "test": start: checksum mismatch: %s: expected sha256 %x (pinned), the file has sha256 %x`, testBinary, pinned, actual))
		if !errors.Is(err, ErrChecksumMismatch) {
			t.Errorf("want ErrChecksumMismatch, got %v", err)
		}
	})
	// A lock file pins one sum per platform: any of them is accepted.
	other := sha256.Sum256([]byte("the binary of another platform"))
	t.Run("MatchAnother", func(t *testing.T) {
		c, _ := startTest(t, "", func(cfg *ClientConfig) {
			cfg.SHA256 = other[:]
			cfg.AcceptSHA256 = [][]byte{actual[:]}
		})
		if _, err := c.Metadata(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("MismatchAll", func(t *testing.T) {
		pinned := sha256.Sum256([]byte("the binary the lock file saw"))
		cfg := ClientConfig{Name: "test", Path: testBinary, SHA256: pinned[:], AcceptSHA256: [][]byte{other[:]}}
		err := startFails(t, context.Background(), cfg, "", time.Second,
			fmt.Sprintf(`provider "test": start: checksum mismatch: %s: expected sha256 %x or %x (pinned), the file has sha256 %x`, testBinary, pinned, other, actual))
		if !errors.Is(err, ErrChecksumMismatch) {
			t.Errorf("want ErrChecksumMismatch, got %v", err)
		}
	})
}

func TestKill(t *testing.T) {
	c, _ := startTest(t, "", func(cfg *ClientConfig) { cfg.DisableMTLS = true })
	ctx := ctxT(t)
	if _, err := c.Metadata(ctx); err != nil {
		t.Fatal(err)
	}
	pid := c.Pid()
	if pid <= 0 || !proctest.Alive(pid) || c.Exited() {
		t.Fatalf("pid %d alive=%v exited=%v", pid, proctest.Alive(pid), c.Exited())
	}
	c.Kill()
	if !c.Exited() || proctest.Alive(pid) {
		t.Fatalf("after Kill: exited=%v alive=%v", c.Exited(), proctest.Alive(pid))
	}
	_, err := c.Metadata(ctx)
	if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), `provider "test": Metadata: provider unavailable`) {
		t.Fatalf("call after Kill: %v", err)
	}
	c.Kill() // again: a no-op
}

// TestCallDeadline: the caller's deadline reaches the provider, and the
// error says it was the deadline.
func TestCallDeadline(t *testing.T) {
	c, _ := startTest(t, "slow-call")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := c.Instance("compute").DescribeInstances(ctx, nil, false)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), `provider "test": DescribeInstances: context deadline exceeded`) {
		t.Fatalf("got %v", err)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Fatalf("took %s", took)
	}
	// The provider is still fine.
	if _, err := c.Metadata(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestEnvAndLogLevel: ClientConfig.Env wins over the host's environment,
// and INFRAKIT_LOG sets the provider's log level.
func TestEnvAndLogLevel(t *testing.T) {
	t.Setenv("TESTPROVIDER_MODE", "crash-at-start")
	for _, tc := range []struct {
		level   string
		visible bool
	}{{"", true}, {"warn", false}} {
		c, logs := startTest(t, "", func(cfg *ClientConfig) { cfg.Env = append(cfg.Env, "INFRAKIT_LOG="+tc.level) })
		if _, err := c.Instance("compute").Provision(ctxT(t), instance.Spec{}); err != nil {
			t.Fatal(err)
		}
		c.Kill() // flushes the provider's stderr to the logger
		if got := strings.Contains(logs.String(), "provisioned"); got != tc.visible {
			t.Errorf("INFRAKIT_LOG=%q: info line visible=%v, want %v:\n%s", tc.level, got, tc.visible, logs)
		}
	}
}

// TestProviderRuntime: a provider process runs on one thread (GOMAXPROCS=1)
// unless the GOMAXPROCS environment variable says otherwise.
func TestProviderRuntime(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want string
	}{{"", "gomaxprocs=1"}, {"GOMAXPROCS=2", "gomaxprocs=2"}} {
		c, logs := startTest(t, "report-runtime", func(cfg *ClientConfig) {
			if tc.env != "" {
				cfg.Env = append(cfg.Env, tc.env)
			}
		})
		if _, err := c.Metadata(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		c.Kill() // flushes the provider's stderr to the logger
		if !strings.Contains(logs.String(), tc.want) {
			t.Errorf("env %q: want %q in the provider's log:\n%s", tc.env, tc.want, logs)
		}
	}
}

// TestProviderDiesMidCall SIGKILLs a provider during a call that would take
// a minute: the call must fail at once, naming provider and method.
func TestProviderDiesMidCall(t *testing.T) {
	c, _ := startTest(t, "slow-call")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	events, err := c.Instance("compute").(instance.Watcher).Watch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Instance("compute").DescribeInstances(ctx, nil, false)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // let the call reach the provider
	select {
	case err := <-done:
		t.Fatalf("slow call returned early: %v", err)
	default:
	}
	killed := time.Now()
	if err := syscall.Kill(c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("call did not fail within 5s of the provider's death")
	}
	t.Logf("call failed %s after SIGKILL: %v", time.Since(killed), err)
	if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), `provider "test": DescribeInstances: provider unavailable`) {
		t.Fatalf("got %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the error came only with the deadline")
	}
	for range events { // a watch ends when its provider dies
	}
	deadline := time.Now().Add(5 * time.Second)
	for !c.Exited() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !c.Exited() {
		t.Fatal("Exited() still false")
	}
	// Later calls fail fast too.
	_, err = c.Instance("compute").DescribeInstances(ctx, nil, false)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("call to a dead provider: %v", err)
	}
}

// TestParentDeath kills a host process with SIGKILL: its provider must
// notice and exit by itself.
func TestParentDeath(t *testing.T) {
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), envWrapper+"=1", envWrapperProvider+"="+testBinary)
	stdout, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	host.Stderr = os.Stderr
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, bufio.NewReader(stdout))
	if !proctest.Alive(pid) {
		t.Fatalf("provider %d not running", pid)
	}
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	killed := time.Now()
	if !waitGone(pid, 5*time.Second) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("provider %d still running 5s after its host died", pid)
	}
	t.Logf("provider exited %s after its host died", time.Since(killed))
}
