package sim

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// The multi-process test re-executes this test binary as simulator
// "processes" sharing one directory; these variables select the child role.
const (
	envChildDir    = "SIM_TEST_CHILD_DIR"
	envChildID     = "SIM_TEST_CHILD_ID"
	envChildTarget = "SIM_TEST_CHILD_TARGET"
	childOps       = 60
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChildDir); dir != "" {
		if err := runChild(dir, os.Getenv(envChildID), os.Getenv(envChildTarget)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// runChild does what a second provider process would: provision, label a
// shared instance and register backends on a shared load balancer, each a
// read-modify-write racing the other processes.
func runChild(dir, id, target string) error {
	s, err := New(Config{Dir: dir})
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	lb, err := s.LoadBalancer("shared")
	if err != nil {
		return err
	}
	inst := s.Instances("compute")
	for i := range childOps {
		tag := id + "-" + strconv.Itoa(i)
		if _, err := inst.Provision(ctx, specWithTags(map[string]string{"owner": id})); err != nil {
			return err
		}
		if err := inst.Label(ctx, instanceID(target), map[string]string{tag: "x"}); err != nil {
			return err
		}
		if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{{ID: instanceID(tag), Address: tag}}); err != nil {
			return err
		}
	}
	return nil
}

// newSim is a Simulator on a fresh directory; Close runs at cleanup.
func newSim(t testing.TB, cfg Config) *Simulator {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// fakeClock is a settable clock shared by goroutines.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
