package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// fakeClock is a clock the relaunch tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newHost returns a Host for wd that is closed when the test ends.
func newHost(t *testing.T, wd string, opts Options) *Host {
	t.Helper()
	opts.WorkDir = wd
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestHostOneProcessPerKey(t *testing.T) {
	ctx := context.Background()
	wd := initBoth(t)
	h := newHost(t, wd, Options{})

	sim, err := h.Client(ctx, "simulator")
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.Client(ctx, "simulator")
	if err != nil || again != sim {
		t.Fatalf("second Client(simulator) = %p, %v; want the same client %p", again, err, sim)
	}
	alias, err := h.Client(ctx, "simulator.nfs-auth")
	if err != nil {
		t.Fatal(err)
	}
	van, err := h.Client(ctx, "vanilla")
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]string{}
	for key, c := range map[string]*plugin.Client{"simulator": sim, "simulator.nfs-auth": alias, "vanilla": van} {
		if prev, dup := pids[c.Pid()]; dup || c.Pid() <= 0 {
			t.Fatalf("%s has pid %d, same as %s", key, c.Pid(), prev)
		}
		pids[c.Pid()] = key
	}
	// The alias is the simulator binary, answering as the simulator.
	for _, c := range []*plugin.Client{sim, alias} {
		md, err := c.Metadata(ctx)
		if err != nil || md.Name != "simulator" {
			t.Errorf("Metadata = %+v, %v", md, err)
		}
	}

	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for pid, key := range pids {
		if !processGone(pid) {
			t.Errorf("%s (pid %d) outlived Close", key, pid)
		}
	}
	if _, err := h.Client(ctx, "simulator"); !errors.Is(err, ErrClosed) {
		t.Errorf("Client after Close = %v, want ErrClosed", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestHostConcurrentCallersShareOneLaunch(t *testing.T) {
	wd := initBoth(t)
	h := newHost(t, wd, Options{})
	const n = 8
	clients := make([]*plugin.Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clients[i], errs[i] = h.Client(context.Background(), "simulator")
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || clients[i] != clients[0] {
			t.Fatalf("caller %d got %p, %v; caller 0 got %p", i, clients[i], errs[i], clients[0])
		}
	}
}

func TestHostRefusesChangedBinary(t *testing.T) {
	ctx := context.Background()
	wd := initBoth(t)
	lock, err := LoadLock(wd)
	if err != nil {
		t.Fatal(err)
	}
	locked, _ := lock.Provider("simulator")
	path := InstallPath(wd, "simulator", locked.Version)
	flipByte(t, path)
	actual := mustHash(t, path)

	clock := &fakeClock{t: time.Now()}
	h := newHost(t, wd, Options{})
	h.now = clock.Now
	_, err = h.Client(ctx, "simulator")
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("Client = %v, want *ChecksumError", err)
	}
	for _, want := range []string{path, string(locked.Hashes[0]), string(actual), "refusing to run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// Asked again at once: the backoff answers, still with the reason.
	_, err = h.Client(ctx, "simulator")
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "next attempt in 100ms") {
		t.Errorf("Client during backoff = %v", err)
	}
	// Other providers are unaffected.
	if _, err := h.Client(ctx, "vanilla"); err != nil {
		t.Errorf("vanilla: %v", err)
	}
}

func TestHostNotInstalled(t *testing.T) {
	ctx := context.Background()
	wd := initBoth(t)
	h := newHost(t, wd, Options{})
	_, err := h.Client(ctx, "docker.a")
	var ni *NotInstalledError
	if !errors.As(err, &ni) || !strings.Contains(err.Error(), "run `infrakit init`") || ni.Name != "docker" {
		t.Errorf("Client(docker.a) = %v, want NotInstalledError telling to run infrakit init", err)
	}
	lock, _ := LoadLock(wd)
	van, _ := lock.Provider("vanilla")
	path := InstallPath(wd, "vanilla", van.Version)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err = h.Client(ctx, "vanilla")
	if !errors.As(err, &ni) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "infrakit init") {
		t.Errorf("Client(vanilla) with its binary gone = %v", err)
	}
	for _, key := range []string{"", ".x", "simulator.", "a.b.c"} {
		if _, err := h.Client(ctx, key); err == nil || !strings.Contains(err.Error(), "NAME.ALIAS") {
			t.Errorf("Client(%q) = %v, want a key error", key, err)
		}
	}
}

func TestHostRelaunchesCrashedProvider(t *testing.T) {
	ctx := context.Background()
	wd := initBoth(t)
	clock := &fakeClock{t: time.Now()}
	h := newHost(t, wd, Options{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	h.now = clock.Now

	first, err := h.Client(ctx, "simulator")
	if err != nil {
		t.Fatal(err)
	}
	pid1 := first.Pid()
	if err := killHard(pid1); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the killed provider is seen to exit", first.Exited)

	// Noticed 10ms after its launch: a quick crash, so wait out the backoff.
	clock.Advance(10 * time.Millisecond)
	_, err = h.Client(ctx, "simulator")
	if err == nil || !strings.Contains(err.Error(), "next attempt in 90ms") || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("Client right after the crash = %v; want a backoff error saying when it retries", err)
	}
	clock.Advance(90 * time.Millisecond)
	second, err := h.Client(ctx, "simulator")
	if err != nil {
		t.Fatal(err)
	}
	if second.Pid() == pid1 || second.Exited() {
		t.Fatalf("relaunched provider has pid %d (old %d), exited %v", second.Pid(), pid1, second.Exited())
	}
	if _, err := second.Metadata(ctx); err != nil {
		t.Errorf("relaunched provider: %v", err)
	}
	if !processGone(pid1) {
		t.Errorf("crashed provider %d was not reaped", pid1)
	}

	// Crashing again at once doubles the wait.
	if err := killHard(second.Pid()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the second provider is seen to exit", second.Exited)
	clock.Advance(10 * time.Millisecond)
	if _, err := h.Client(ctx, "simulator"); err == nil || !strings.Contains(err.Error(), "next attempt in 190ms") {
		t.Fatalf("Client after the second crash = %v; want next attempt in 190ms", err)
	}
	// A long, healthy run later: a crash is relaunched at once.
	clock.Advance(190 * time.Millisecond)
	third, err := h.Client(ctx, "simulator")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if err := killHard(third.Pid()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the third provider is seen to exit", third.Exited)
	fourth, err := h.Client(ctx, "simulator")
	if err != nil || fourth.Pid() == third.Pid() {
		t.Fatalf("Client after a crash following a healthy run = %v, %v; want an immediate relaunch", fourth, err)
	}
}

func TestHostCloseWhenDone(t *testing.T) {
	wd := initBoth(t)
	h := newHost(t, wd, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := h.CloseWhenDone(ctx)
	defer stop()
	var pids []int
	for _, key := range []string{"simulator", "simulator.nfs-auth", "vanilla"} {
		c, err := h.Client(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, c.Pid())
	}
	cancel() // what the command layer does on Ctrl-C
	for _, pid := range pids {
		testwait.For(t, 10*time.Second, "every provider is gone after the interrupt", func() bool { return processGone(pid) })
	}
	if _, err := h.Client(context.Background(), "vanilla"); !errors.Is(err, ErrClosed) {
		t.Errorf("Client after interrupt = %v, want ErrClosed", err)
	}
}

func TestHostClientHonoursContextWhileWaiting(t *testing.T) {
	wd := initBoth(t)
	h := newHost(t, wd, Options{})
	p := &proc{turn: make(chan struct{}, 1)}
	p.turn <- struct{}{} // someone else is launching
	h.procs["simulator"] = p
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := h.Client(ctx, "simulator"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Client while another launch holds the key = %v, want DeadlineExceeded", err)
	}
}

func TestHostRunsProvidersInWorkDir(t *testing.T) {
	ctx := context.Background()
	wd := initBoth(t)
	t.Setenv("INFRAKIT_SIMULATOR_DIR", "") // the simulator's default: .infrakit/simulator in its cwd
	h := newHost(t, wd, Options{})
	sim, err := h.Client(ctx, "simulator")
	if err != nil {
		t.Fatal(err)
	}
	id, err := sim.Instance("compute").Provision(ctx, instance.Spec{Properties: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	matches, err := filepath.Glob(filepath.Join(wd, ".infrakit", "simulator", "*", "*", string(id)+"*"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("instance %s not stored under the work dir: %v %v", id, matches, err)
	}
}
