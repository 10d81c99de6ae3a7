package healthcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// batchServer answers 200 while up, 503 otherwise, after delay, and
// records how many requests were in flight at once.
type batchServer struct {
	*httptest.Server
	up       atomic.Bool
	delay    time.Duration
	inFlight atomic.Int32
	most     atomic.Int32
}

func newBatchServer(t *testing.T, delay time.Duration) *batchServer {
	b := &batchServer{delay: delay}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.inFlight.Add(1)
		defer b.inFlight.Add(-1)
		for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
		}
		time.Sleep(b.delay)
		if !b.up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

// batchAll calls HealthyAll and fails the test on an error.
func batchAll(t *testing.T, f *Flavor, props string, insts []instance.Description) []flavor.Health {
	t.Helper()
	hs, err := f.HealthyAll(context.Background(), json.RawMessage(props), insts)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != len(insts) {
		t.Fatalf("%d healths for %d instances", len(hs), len(insts))
	}
	return hs
}

// HealthyAll keeps each instance's counters, exactly as Healthy per
// instance does: the thresholds apply per instance across batches, and a
// batch answers in the order it was asked.
func TestHealthyAllThresholdsPerInstance(t *testing.T) {
	srv, down := newBatchServer(t, 0), newBatchServer(t, 0)
	srv.up.Store(true)
	addr := srv.Listener.Addr().String()
	props := `{"http": {"path": "/"}, "healthy_threshold": 2, "unhealthy_threshold": 2, "timeout": "60s"}`
	insts := []instance.Description{
		inst("a", addr), inst("b", down.Listener.Addr().String()), inst("c", addr),
		{ID: "no-address", State: instance.StateRunning}, inst("pending", addr),
	}
	insts[4].State = instance.StatePending
	f := newFlavor(t)
	U, H, X := flavor.HealthUnknown, flavor.HealthHealthy, flavor.HealthUnhealthy
	for i, want := range [][]flavor.Health{
		{U, U, U, U, U},
		{H, X, H, U, U},
		{H, X, H, U, U},
	} {
		if got := batchAll(t, f, props, insts); !slices.Equal(got, want) {
			t.Fatalf("batch %d: %v, want %v", i+1, got, want)
		}
	}
	// The same counters as Healthy's: one more failure of c is not yet a
	// verdict; a second is.
	srv.up.Store(false)
	expect(t, f, props, insts[2], H)
	if got := batchAll(t, f, props, insts[2:3]); got[0] != X {
		t.Fatalf("c after two failures: %s, want unhealthy", got[0])
	}
	// Invalid properties fail the whole batch.
	if _, err := f.HealthyAll(context.Background(), json.RawMessage(`{"timeout": "soon"}`), insts); err == nil {
		t.Fatal("HealthyAll accepted invalid properties")
	}
}

// Probes of a batch run in parallel, at most ProbeParallelism at once.
func TestHealthyAllProbesInParallel(t *testing.T) {
	srv := newBatchServer(t, 20*time.Millisecond)
	srv.up.Store(true)
	addr := srv.Listener.Addr().String()
	n := 3 * ProbeParallelism
	insts := make([]instance.Description, n)
	for i := range insts {
		insts[i] = inst(fmt.Sprintf("i%03d", i), addr)
	}
	f := newFlavor(t)
	for _, h := range batchAll(t, f, `{"http": {"path": "/"}, "timeout": "60s"}`, insts) {
		if h != flavor.HealthHealthy {
			t.Fatalf("health %s, want healthy", h)
		}
	}
	if most := srv.most.Load(); most < 2 || most > ProbeParallelism {
		t.Fatalf("%d probes at once, want 2..%d", most, ProbeParallelism)
	}
}

// A batch whose caller gives up fails with the context's error, and the
// probes it cut short count for nothing.
func TestHealthyAllCallerCancels(t *testing.T) {
	srv := newBatchServer(t, time.Second)
	addr := srv.Listener.Addr().String()
	insts := []instance.Description{inst("a", addr), inst("b", addr)}
	f := newFlavor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.HealthyAll(ctx, json.RawMessage(`{"http": {}, "unhealthy_threshold": 1, "timeout": "5s"}`), insts); err == nil {
		t.Fatal("HealthyAll with an ended context succeeded")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.counters) != 0 {
		t.Fatalf("cancelled probes were counted: %v", f.counters)
	}
}
