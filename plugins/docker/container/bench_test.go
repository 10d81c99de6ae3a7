package container

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

// TestBenchContainer reports, over 10 runs on the real Engine, how long one
// container takes from Provision to answering HTTP, and from `docker kill`
// to the Watch event. It runs only with INFRAKIT_BENCH=1 (make bench):
//
//	INFRAKIT_BENCH=1 go test -count=1 -run '^TestBenchContainer$' -v ./plugins/docker/container
func TestBenchContainer(t *testing.T) {
	if os.Getenv("INFRAKIT_BENCH") != "1" {
		t.Skip("set INFRAKIT_BENCH=1 to measure")
	}
	needDocker(t)
	const runs = 10
	p := newProvider(t, "")
	tags := testTags(t)
	removeOnCleanup(t, tags)
	events, err := p.Watch(t.Context(), tags)
	if err != nil {
		t.Fatal(err)
	}
	var serve, notice []time.Duration
	for range runs {
		start := time.Now()
		id, err := p.Provision(t.Context(), instance.Spec{Properties: webProps(), Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		e := await(t, events, 10*time.Second, "the start of "+string(id), func(e instance.Event) bool {
			return e.ID == id && e.Type == instance.EventChanged && e.Instance.State == instance.StateRunning && e.Instance.Address != ""
		})
		serving(t, e.Instance.Address, 10*time.Second)
		serve = append(serve, time.Since(start))

		start = time.Now()
		if err := client.ContainerKill(t.Context(), string(id), "KILL"); err != nil {
			t.Fatal(err)
		}
		await(t, events, 10*time.Second, "docker kill "+string(id), func(e instance.Event) bool {
			return e.ID == id && (e.Type == instance.EventGone || e.Instance.State == instance.StateTerminating)
		})
		notice = append(notice, time.Since(start))
	}
	report := func(what string, ds []time.Duration) {
		slices.Sort(ds)
		t.Logf("%-38s median %v  p99 %v  (n=%d)", what, ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), len(ds))
	}
	report("provision → serving HTTP:", serve)
	report("docker kill → watch event:", notice)
}
