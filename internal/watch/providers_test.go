package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/watch/status"
	"github.com/infrakit/infrakit/sdk/plugin"
)

// The decisions of the provider supervision, without processes: which
// failed call makes a provider suspect, when a suspect is hung, how long it
// has to answer, and that one hung process is checked once.

func TestProviderSuspectAndHung(t *testing.T) {
	deadline := fmt.Errorf("provider %q: DescribeInstances: %w", "simulator", context.DeadlineExceeded)
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{deadline, true},
		{fmt.Errorf("provider %q: Provision: capacity exhausted", "simulator"), false},
		{fmt.Errorf("provider %q: Metadata: %w", "simulator", plugin.ErrUnavailable), false},
		{context.Canceled, false},
	} {
		if got := suspect(tc.err); got != tc.want {
			t.Errorf("suspect(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	for _, tc := range []struct {
		stopping bool
		ping     error
		want     bool
	}{
		{false, nil, false},                   // it answered: only slow
		{false, deadline, true},               // no answer within the ping
		{false, plugin.ErrUnavailable, true},  // gone: killing reaps it
		{true, context.Canceled, false},       // the service is stopping
		{true, errors.New("anything"), false}, // not the provider's fault
	} {
		if got := hung(tc.stopping, tc.ping); got != tc.want {
			t.Errorf("hung(stopping=%v, %v) = %v, want %v", tc.stopping, tc.ping, got, tc.want)
		}
	}
}

func TestProviderPingTimeout(t *testing.T) {
	for _, tc := range []struct{ call, want time.Duration }{
		{0, maxPing},
		{2 * time.Minute, maxPing},
		{10 * time.Second, 2500 * time.Millisecond},
		{3 * time.Second, minPing},
		{500 * time.Millisecond, 500 * time.Millisecond}, // never past the deadline
		{time.Hour, maxPing},
	} {
		if got := pingTimeout(tc.call); got != tc.want {
			t.Errorf("pingTimeout(%s) = %s, want %s", tc.call, got, tc.want)
		}
	}
}

// TestProviderOneCheckPerProcess: of the calls that time out together
// against one process, one checks it; once that check ends (or the process
// was replaced) another may begin; a kill's reason reaches the relaunch.
func TestProviderOneCheckPerProcess(t *testing.T) {
	rec := status.NewRecorder(status.Options{Identity: "test"})
	p := newProviders(nil, rec, hclog.NewNullLogger(), time.Second)
	p.note("simulator", 100)

	var wg sync.WaitGroup
	var mu sync.Mutex
	began := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.beginCheck("simulator", 100) {
				mu.Lock()
				began++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if began != 1 {
		t.Fatalf("%d checks of one process began at once, want 1", began)
	}
	if !p.beginCheck("vanilla", 100) {
		t.Error("a check of another provider key was refused")
	}
	p.endCheck("simulator", 100, "DescribeInstances ran out of time")
	if !p.beginCheck("simulator", 100) {
		t.Error("no check may begin after the first ended")
	}
	if !p.beginCheck("simulator", 200) {
		t.Error("a check of the relaunched process was refused")
	}
	p.note("simulator", 200)
	p.mu.Lock()
	killed := p.procs["simulator"].killed
	p.mu.Unlock()
	if killed != "" {
		t.Errorf("the kill reason outlived the relaunch: %q", killed)
	}
	var got *status.Provider
	for _, pr := range rec.Status().Providers {
		if pr.Key == "simulator" {
			got = &pr
		}
	}
	want := "process 100 was killed: DescribeInstances ran out of time"
	if got == nil || got.PID != 200 || got.Restarts != 1 || got.LastError != want {
		t.Errorf("the status after the relaunch: %+v, want pid 200, 1 restart, last error %q", got, want)
	}
}
