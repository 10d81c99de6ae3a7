package healthcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/providertest"
)

var builder *providertest.Builder

func TestMain(m *testing.M) {
	builder = providertest.NewBuilder()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		builder.Close()
		os.Exit(code)
	}))
}

func newFlavor(t *testing.T) *Flavor {
	f := New(Config{})
	t.Cleanup(func() { f.Close() })
	return f
}

func inst(id, addr string) instance.Description {
	return instance.Description{ID: instance.ID(id), Address: addr, State: instance.StateRunning}
}

// healthy calls Healthy and fails the test on an error.
func healthy(t *testing.T, f *Flavor, props string, d instance.Description) flavor.Health {
	t.Helper()
	h, err := f.Healthy(context.Background(), json.RawMessage(props), d)
	if err != nil {
		t.Fatalf("Healthy(%s, %s): %v", props, d.Address, err)
	}
	return h
}

// expect runs Healthy once per wanted verdict, in order.
func expect(t *testing.T, f *Flavor, props string, d instance.Description, want ...flavor.Health) {
	t.Helper()
	for i, w := range want {
		if got := healthy(t, f, props, d); got != w {
			t.Fatalf("probe %d of %s: %s, want %s", i+1, d.Address, got, w)
		}
	}
}

// closedPort is a local address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestTCP(t *testing.T) {
	f := newFlavor(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // the kernel completes connects on its backlog; nobody needs to accept
	expect(t, f, `{"tcp": true}`, inst("up", ln.Addr().String()), flavor.HealthHealthy, flavor.HealthHealthy)
	// Defaults: a TCP check, unhealthy after 2 failures.
	expect(t, f, `{}`, inst("down", closedPort(t)), flavor.HealthUnknown, flavor.HealthUnhealthy)

	// port overrides the address's port.
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	expect(t, f, `{"port": `+port+`}`, inst("health-port", closedPort(t)), flavor.HealthHealthy)
	expect(t, f, `{"port": `+port+`}`, inst("host-only", "127.0.0.1"), flavor.HealthHealthy)
}

func TestHTTP(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	var paths sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.Store(r.URL.Path, r.Header.Get("User-Agent"))
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/health", http.StatusMovedPermanently)
		case "/health":
			w.WriteHeader(int(status.Load()))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	f := newFlavor(t)
	props := `{"http": {"path": "/health"}, "unhealthy_threshold": 2}`
	d := inst("web-1", addr)

	expect(t, f, props, d, flavor.HealthHealthy)
	if ua, _ := paths.Load("/health"); ua != "infrakit-healthcheck" {
		t.Errorf("probe User-Agent %q", ua)
	}
	status.Store(500) // answers, but fails its check
	expect(t, f, props, d, flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnhealthy)
	status.Store(200)
	expect(t, f, props, d, flavor.HealthHealthy)

	// The default path is "/", which 404s here.
	expect(t, f, `{"http": {}, "unhealthy_threshold": 1}`, inst("root", addr), flavor.HealthUnhealthy)
	// expect_status is matched exactly; redirects are judged, not followed.
	expect(t, f, `{"http": {"path": "/moved", "expect_status": 301}}`, inst("moved", addr), flavor.HealthHealthy)
	expect(t, f, `{"http": {"path": "/moved"}, "unhealthy_threshold": 1}`, inst("moved-200", addr), flavor.HealthUnhealthy)
	// Nothing listening.
	expect(t, f, `{"http": {}, "unhealthy_threshold": 1}`, inst("gone", closedPort(t)), flavor.HealthUnhealthy)
}

// TestThresholds: healthy needs healthy_threshold successes in a row,
// unhealthy needs unhealthy_threshold failures in a row, and in between the
// previous verdict stands.
func TestThresholds(t *testing.T) {
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	f := newFlavor(t)
	props := `{"http": {}, "healthy_threshold": 3, "unhealthy_threshold": 2}`
	d := inst("i", srv.Listener.Addr().String())

	up.Store(true)
	expect(t, f, props, d, flavor.HealthUnknown, flavor.HealthUnknown, flavor.HealthHealthy)
	up.Store(false)
	expect(t, f, props, d, flavor.HealthHealthy, flavor.HealthUnhealthy)
	up.Store(true)
	expect(t, f, props, d, flavor.HealthUnhealthy, flavor.HealthUnhealthy, flavor.HealthHealthy)

	// Counters are per instance.
	expect(t, f, props, inst("other", d.Address), flavor.HealthUnknown)
	// Drain forgets.
	if err := f.Drain(context.Background(), json.RawMessage(props), d); err != nil {
		t.Fatal(err)
	}
	expect(t, f, props, d, flavor.HealthUnknown)
}

// TestTimeout: a server that accepts but never answers fails each probe
// after the timeout, not later.
func TestTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	f := newFlavor(t)
	props := `{"http": {"path": "/health"}, "timeout": "150ms", "unhealthy_threshold": 2}`
	d := inst("hung", ln.Addr().String())
	for i, want := range []flavor.Health{flavor.HealthUnknown, flavor.HealthUnhealthy} {
		start := time.Now()
		got := healthy(t, f, props, d)
		took := time.Since(start)
		if got != want {
			t.Fatalf("probe %d: %s, want %s", i+1, got, want)
		}
		if took < 140*time.Millisecond || took > time.Second {
			t.Errorf("probe %d took %v, want about the 150ms timeout", i+1, took)
		}
	}
}

func TestNotProbed(t *testing.T) {
	f := newFlavor(t)
	for _, d := range []instance.Description{
		{ID: "no-address", State: instance.StateRunning},
		{ID: "pending", Address: closedPort(t), State: instance.StatePending},
		{ID: "terminating", Address: closedPort(t), State: instance.StateTerminating},
		{ID: "no-port", Address: "127.0.0.1", State: instance.StateRunning}, // a TCP check needs one
	} {
		for range 3 {
			if h := healthy(t, f, `{"unhealthy_threshold": 1}`, d); h != flavor.HealthUnknown {
				t.Fatalf("%s: %s, want unknown", d.ID, h)
			}
		}
	}
	if len(f.counters) != 0 {
		t.Fatalf("counters kept for instances never probed: %v", f.counters)
	}
	if _, err := f.Healthy(context.Background(), json.RawMessage(`{"timeout": "x"}`), inst("x", closedPort(t))); err == nil {
		t.Fatal("Healthy with invalid properties succeeded")
	}
}

// TestCallerCancels: a probe cut short by the caller's context is no
// verdict about the instance.
func TestCallerCancels(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // accepted by the kernel, never answered
	f := newFlavor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	h, err := f.Healthy(ctx, json.RawMessage(`{"http": {}, "unhealthy_threshold": 1, "timeout": "5s"}`), inst("i", ln.Addr().String()))
	if err == nil || h != flavor.HealthUnknown {
		t.Fatalf("Healthy with an ended context = %s, %v; want unknown and the context's error", h, err)
	}
	if len(f.counters) != 0 {
		t.Fatal("a cancelled probe was counted")
	}
}

// TestForgetsIdleInstances: counters of instances not probed for ten
// minutes are dropped, so instances that vanished without a Drain do not
// accumulate.
func TestForgetsIdleInstances(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	f := New(Config{Now: func() time.Time { return now }})
	th := Thresholds{Healthy: 1, Unhealthy: 1}
	f.observe("old", true, th)
	now = now.Add(5 * time.Minute)
	f.observe("recent", true, th)
	now = now.Add(6 * time.Minute) // old: 11 min, recent: 6 min
	f.observe("new", false, th)
	if _, ok := f.counters["old"]; ok {
		t.Error("an instance idle for 11 minutes is remembered")
	}
	if f.health("recent") != flavor.HealthHealthy || f.health("new") != flavor.HealthUnhealthy {
		t.Errorf("recent: %s, new: %s", f.health("recent"), f.health("new"))
	}
}

func TestPrepareAndValidate(t *testing.T) {
	f := newFlavor(t)
	lid := instance.LogicalID("10.0.0.1")
	in := instance.Spec{
		Properties: json.RawMessage(`{"command": "web"}`), Tags: map[string]string{"a": "b"}, Init: "x", LogicalID: &lid,
		Attachments: []instance.Attachment{{ID: "v", Type: "volume"}},
	}
	out, err := f.Prepare(context.Background(), json.RawMessage(`{"http": {}}`), in, flavor.Allocation{Size: 1}, flavor.Index{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Fatalf("Prepare changed the spec: %+v -> %+v", in, out)
	}
	if _, err := f.Prepare(context.Background(), json.RawMessage(`{"http": 1}`), in, flavor.Allocation{}, flavor.Index{}); err == nil {
		t.Fatal("Prepare accepted invalid properties")
	}
	if err := f.Validate(context.Background(), json.RawMessage(`{"tcp": true}`), flavor.Allocation{}); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentInstances: probes of many instances at once keep their
// counters apart (run with -race).
func TestConcurrentInstances(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fail") != "" {
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	f := newFlavor(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			d := inst("i"+strconv.Itoa(i), srv.Listener.Addr().String())
			props, want := `{"http": {"path": "/"}, "unhealthy_threshold": 1}`, flavor.HealthHealthy
			if i%2 == 1 {
				props, want = `{"http": {"path": "/?fail=1"}, "unhealthy_threshold": 1}`, flavor.HealthUnhealthy
			}
			for range 5 {
				if h, err := f.Healthy(context.Background(), json.RawMessage(props), d); err != nil || h != want {
					t.Errorf("%s: %s, %v; want %s", d.ID, h, err, want)
				}
			}
		})
	}
	wg.Wait()
}

// TestWebserver judges the webserver the real-provider stack runs: it
// passes its HTTP check, and fails it while its fail file exists, though it
// still answers.
func TestWebserver(t *testing.T) {
	bin := builder.Build(t, "../../../testdata/webserver")
	addr := closedPort(t)
	_, port, _ := net.SplitHostPort(addr)
	failFile := filepath.Join(t.TempDir(), "fail")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT="+port, "INFRAKIT_INSTANCE_ID=web-1", "WEBSERVER_FAIL_FILE="+failFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	f := newFlavor(t)
	props := `{"http": {"path": "/health"}, "timeout": "500ms"}`
	d := inst("web-1", addr)
	deadline := time.Now().Add(10 * time.Second)
	for healthy(t, f, `{"tcp": true}`, d) != flavor.HealthHealthy {
		if time.Now().After(deadline) {
			t.Fatal("the webserver never listened")
		}
		time.Sleep(20 * time.Millisecond)
	}
	expect(t, f, props, d, flavor.HealthHealthy)
	if err := os.WriteFile(failFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, f, props, d, flavor.HealthHealthy, flavor.HealthUnhealthy)
	expect(t, f, `{"tcp": true}`, inst("web-1-tcp", addr), flavor.HealthHealthy) // it still answers
	if err := os.Remove(failFile); err != nil {
		t.Fatal(err)
	}
	expect(t, f, props, d, flavor.HealthHealthy)
}
