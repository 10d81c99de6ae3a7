package sim

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

func TestWatch(t *testing.T) {
	s := newSim(t, Config{WatchInterval: 10 * time.Millisecond, ProvisionDelay: 150 * time.Millisecond})
	p := s.Instances("compute")
	bg := context.Background()
	existing, err := p.Provision(bg, specWithTags(map[string]string{"g": "w"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	events, err := p.Watch(ctx, map[string]string{"g": "w"})
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) instance.Event {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("%s: channel closed", what)
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no event", what)
		}
		return instance.Event{}
	}

	// Not matching the tags: no event. Matching: changed, pending.
	if _, err := p.Provision(bg, specWithTags(map[string]string{"g": "other"})); err != nil {
		t.Fatal(err)
	}
	id, err := p.Provision(bg, specWithTags(map[string]string{"g": "w"}))
	if err != nil {
		t.Fatal(err)
	}
	ev := next("provision")
	if ev.ID != id || ev.Type != instance.EventChanged || ev.Instance.State != instance.StatePending {
		// The baseline instance may turn running in the same poll.
		if ev.ID == existing && ev.Instance.State == instance.StateRunning {
			ev = next("provision")
		}
		if ev.ID != id || ev.Type != instance.EventChanged || ev.Instance.State != instance.StatePending {
			t.Fatalf("after provision: %+v", ev)
		}
	}
	// The provision delay passes: pending turns running with no write at all.
	for {
		ev = next("running")
		if ev.ID == id {
			break
		}
	}
	if ev.Type != instance.EventChanged || ev.Instance.State != instance.StateRunning {
		t.Fatalf("after the provision delay: %+v", ev)
	}
	if err := p.Label(bg, id, map[string]string{"extra": "1"}); err != nil {
		t.Fatal(err)
	}
	for ev = next("label"); ev.ID != id; ev = next("label") {
	}
	if ev.Type != instance.EventChanged || ev.Instance.Tags["extra"] != "1" {
		t.Fatalf("after label: %+v", ev)
	}
	// Removing the file by hand is a vanished instance.
	if err := os.Remove(filepath.Join(s.Dir(), "instances", "compute", string(id)+".json")); err != nil {
		t.Fatal(err)
	}
	for ev = next("remove"); ev.ID != id; ev = next("remove") {
	}
	if ev.Type != instance.EventGone || ev.Instance != nil {
		t.Fatalf("after remove: %+v", ev)
	}
	// A corrupt file is skipped, and leaving the tag set is gone.
	if err := os.WriteFile(filepath.Join(s.Dir(), "instances", "compute", "compute-bad.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Label(bg, existing, map[string]string{"g": "moved"}); err != nil {
		t.Fatal(err)
	}
	for ev = next("untag"); ev.ID != existing; ev = next("untag") {
	}
	if ev.Type != instance.EventGone {
		t.Fatalf("after leaving the tag set: %+v", ev)
	}

	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return // closed: the goroutine is gone (goleak checks too)
			}
		case <-deadline:
			t.Fatal("channel not closed after cancel")
		}
	}
}

// A poll skips listing only while nothing can have changed.
func TestWatchMarkUnchanged(t *testing.T) {
	wall := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	settled := dirStamp{ok: true, ino: 7, mtime: wall.Add(-time.Minute), ctime: wall.Add(-time.Minute)}
	mark := watchMark{stamp: settled, full: wall.Add(-time.Second)}
	fresh := settled
	fresh.mtime, fresh.ctime = wall.Add(-10*time.Millisecond), wall.Add(-10*time.Millisecond)
	for _, tc := range []struct {
		name  string
		mark  watchMark
		stamp dirStamp
		now   time.Time
		want  bool
	}{
		{"nothing changed", mark, settled, wall, true},
		{"directory changed", mark, dirStamp{ok: true, ino: 7, mtime: wall, ctime: wall}, wall, false},
		{"directory replaced", mark, dirStamp{ok: true, ino: 8, mtime: settled.mtime, ctime: settled.ctime}, wall, false},
		{"directory missing", watchMark{full: wall}, dirStamp{}, wall, false},
		{"mtime too recent to trust", watchMark{stamp: fresh, full: wall}, fresh, wall, false},
		{"a pending instance is due", watchMark{stamp: settled, wake: wall.Add(-time.Millisecond), full: wall}, settled, wall, false},
		{"a pending instance is not due yet", watchMark{stamp: settled, wake: wall.Add(time.Second), full: wall}, settled, wall, true},
		{"full listing due", watchMark{stamp: settled, full: wall.Add(-WatchFullScan)}, settled, wall, false},
	} {
		if got := tc.mark.unchanged(tc.stamp, wall, tc.now); got != tc.want {
			t.Errorf("%s: unchanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
