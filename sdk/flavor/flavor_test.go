package flavor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tagFlavor answers each instance's "health" tag; "fail" fails the call,
// "block" waits until the call's context ends. It records how many calls
// ran at once.
type tagFlavor struct {
	delay time.Duration

	mu           sync.Mutex
	inFlight     int
	maxInFlight  int
	calls        int
	blockStarted chan struct{}
}

func (f *tagFlavor) Validate(context.Context, json.RawMessage, flavor.Allocation) error { return nil }

func (f *tagFlavor) Prepare(_ context.Context, _ json.RawMessage, s instance.Spec, _ flavor.Allocation, _ flavor.Index) (instance.Spec, error) {
	return s, nil
}

func (f *tagFlavor) Drain(context.Context, json.RawMessage, instance.Description) error { return nil }

func (f *tagFlavor) Healthy(ctx context.Context, _ json.RawMessage, inst instance.Description) (flavor.Health, error) {
	f.mu.Lock()
	f.calls++
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	time.Sleep(f.delay)
	switch h := inst.Tags["health"]; h {
	case "fail":
		return flavor.HealthHealthy, fmt.Errorf("probe of %s failed", inst.ID)
	case "block":
		f.blockStarted <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	default:
		return flavor.Health(h), nil
	}
}

func descs(healths ...string) []instance.Description {
	out := make([]instance.Description, len(healths))
	for i, h := range healths {
		out[i] = instance.Description{ID: instance.ID(fmt.Sprintf("i-%d", i)), Tags: map[string]string{"health": h}}
	}
	return out
}

func TestHealthyEach(t *testing.T) {
	for _, tc := range []struct {
		name    string
		healths []string
		want    []flavor.Health
		failed  []int // indexes with an error
	}{
		{"none", nil, []flavor.Health{}, nil},
		{"in order", []string{"healthy", "unhealthy", "unknown", "healthy"},
			[]flavor.Health{flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown, flavor.HealthHealthy}, nil},
		{"a failed call is unknown, whatever it returned", []string{"healthy", "fail", "unhealthy"},
			[]flavor.Health{flavor.HealthHealthy, flavor.HealthUnknown, flavor.HealthUnhealthy}, []int{1}},
		{"all failed", []string{"fail", "fail"},
			[]flavor.Health{flavor.HealthUnknown, flavor.HealthUnknown}, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs, errs := flavor.HealthyEach(context.Background(), &tagFlavor{}, nil, descs(tc.healths...), 3)
			if fmt.Sprint(hs) != fmt.Sprint(tc.want) {
				t.Errorf("healths %v, want %v", hs, tc.want)
			}
			if len(tc.failed) == 0 {
				if errs != nil {
					t.Errorf("errs %v, want nil", errs)
				}
				return
			}
			if len(errs) != len(tc.healths) {
				t.Fatalf("%d errors for %d instances", len(errs), len(tc.healths))
			}
			for i, err := range errs {
				want := false
				for _, f := range tc.failed {
					want = want || f == i
				}
				if (err != nil) != want {
					t.Errorf("errs[%d] = %v, want an error: %v", i, err, want)
				}
			}
		})
	}
}

func TestHealthyEachBoundsParallelism(t *testing.T) {
	for _, tc := range []struct{ parallelism, want int }{{4, 4}, {0, flavor.DefaultHealthParallelism}} {
		f := &tagFlavor{delay: 2 * time.Millisecond}
		healths := make([]string, 200)
		for i := range healths {
			healths[i] = "healthy"
		}
		hs, errs := flavor.HealthyEach(context.Background(), f, nil, descs(healths...), tc.parallelism)
		if errs != nil || len(hs) != 200 {
			t.Fatalf("parallelism %d: %d healths, errs %v", tc.parallelism, len(hs), errs)
		}
		if f.calls != 200 || f.maxInFlight > tc.want || f.maxInFlight < 2 {
			t.Errorf("parallelism %d: %d calls, at most %d at once; want 200 calls, 2..%d at once",
				tc.parallelism, f.calls, f.maxInFlight, tc.want)
		}
	}
}

// Once the context ends no call starts: those instances are not judged.
func TestHealthyEachStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &tagFlavor{blockStarted: make(chan struct{}, 1)}
	go func() {
		<-f.blockStarted
		cancel()
	}()
	hs, errs := flavor.HealthyEach(ctx, f, nil, descs("healthy", "block", "healthy", "healthy"), 1)
	if hs[0] != flavor.HealthHealthy || hs[1] != flavor.HealthUnknown || hs[2] != "" || hs[3] != "" {
		t.Errorf("healths %q: want healthy, unknown (cancelled), then not asked", hs)
	}
	for i := 1; i < 4; i++ {
		if !errors.Is(errs[i], context.Canceled) {
			t.Errorf("errs[%d] = %v, want context.Canceled", i, errs[i])
		}
	}
	if f.calls != 2 {
		t.Errorf("%d calls, want 2 (none after the cancel)", f.calls)
	}
}
