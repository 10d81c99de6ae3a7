package watch

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

func TestSerialsForeign(t *testing.T) {
	s := newSerials()
	if s.foreign("L", 3, 3) {
		t.Error("no change is foreign")
	}
	if !s.foreign("L", 3, 4) {
		t.Error("a write by nobody we know is foreign")
	}
	s.expect("L", 4)
	s.expect("L", 5)
	if s.foreign("L", 3, 5) {
		t.Error("our own writes are not foreign")
	}
	if !s.foreign("L", 3, 6) || !s.foreign("L", 5, 4) || !s.foreign("M", 3, 5) {
		t.Error("a serial we did not write, one that went back, or another lineage is foreign")
	}
	s.forget(5)
	if !s.foreign("L", 4, 5) {
		t.Error("a forgotten (failed) write is foreign")
	}
	// Memory stays bounded; old serials read as foreign, which only costs a
	// re-read.
	for n := uint64(6); n < 6+3*keepSerials; n++ {
		s.expect("L", n)
	}
	if len(s.mine) > 2*keepSerials+1 {
		t.Errorf("%d serials remembered", len(s.mine))
	}
	if s.foreign("L", 5+3*keepSerials-10, 5+3*keepSerials) {
		t.Error("recent own writes must stay known")
	}
}

func newStateFile(t *testing.T) *state.Local {
	t.Helper()
	store := state.NewLocal(filepath.Join(t.TempDir(), "infrakit.state.json"))
	doc := state.NewDocument()
	size := 1
	doc.Stack = &config.Stack{Name: "s", Groups: []*config.Group{{Name: "g", Size: &size}}}
	if err := store.Write(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	return store
}

// Groups acting at once share one state lock; a write by another process
// since a pass read the state makes its acting stale.
func TestLease(t *testing.T) {
	ctx := context.Background()
	store := newStateFile(t)
	doc, err := store.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sr := newSerials()
	l := newLease(store, sr, time.Second)

	if err := l.acquire(ctx, doc.Lineage, doc.Serial); err != nil {
		t.Fatal(err)
	}
	// A second group joins while the first holds it: no second lock.
	if err := l.acquire(ctx, doc.Lineage, doc.Serial); err != nil {
		t.Fatal(err)
	}
	// Meanwhile the CLI cannot take the lock.
	lctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = store.Lock(lctx, state.LockInfo{Operation: "apply"})
	cancel()
	if !errors.Is(err, state.ErrLocked) {
		t.Fatalf("the CLI took the lock during the lease: %v", err)
	}
	// Both record; the second write is ours too, so a third group that read
	// the first serial is not stale.
	serial, err := l.record("g", []state.Instance{{ID: "a"}})
	if err != nil || serial != doc.Serial+1 {
		t.Fatalf("record: serial %d, %v", serial, err)
	}
	if serial, err = l.record("h", []state.Instance{{ID: "b"}}); err != nil || serial != doc.Serial+2 {
		t.Fatalf("record: serial %d, %v", serial, err)
	}
	if s2, _ := l.record("h", []state.Instance{{ID: "b"}}); s2 != serial {
		t.Errorf("recording the same members wrote again (serial %d, want %d)", s2, serial)
	}
	if err := l.acquire(ctx, doc.Lineage, doc.Serial); err != nil {
		t.Fatalf("our own writes made the lease stale: %v", err)
	}
	l.release()
	l.release()
	l.release()

	// The lock is free again; another writer moves the serial.
	unlock, err := store.Lock(ctx, state.LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := store.Read(ctx)
	if err := store.Write(ctx, other); err != nil {
		t.Fatal(err)
	}
	unlock()
	if err := l.acquire(ctx, doc.Lineage, doc.Serial+2); !errors.Is(err, errStale) {
		t.Fatalf("after a foreign write: %v, want errStale", err)
	}
	// A stale acquire leaves the lock free.
	unlock, err = store.Lock(ctx, state.LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatalf("the stale acquire kept the lock: %v", err)
	}
	// While the CLI holds the lock, acquiring waits for the timeout.
	start := time.Now()
	if err := l.acquire(ctx, other.Lineage, other.Serial); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("acquire while the CLI holds the lock: %v", err)
	}
	if time.Since(start) < time.Second {
		t.Error("acquire did not wait for -lock-timeout")
	}
	unlock()

	final, _ := store.Read(ctx)
	if got := final.Groups["g"].Instances; len(got) != 1 || got[0].ID != "a" {
		t.Errorf("state records %+v for g", got)
	}
}

// Many groups acting at once never lose one another's writes.
func TestLeaseConcurrent(t *testing.T) {
	ctx := context.Background()
	store := newStateFile(t)
	doc, _ := store.Read(ctx)
	l := newLease(store, newSerials(), 5*time.Second)
	var wg sync.WaitGroup
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, name := range names {
		wg.Go(func() {
			for i := range 5 {
				if err := l.acquire(ctx, doc.Lineage, doc.Serial); err != nil {
					t.Error(err)
					return
				}
				if _, err := l.record(name, []state.Instance{{ID: name, State: string(rune('0' + i))}}); err != nil {
					t.Error(err)
				}
				l.release()
			}
		})
	}
	wg.Wait()
	final, _ := store.Read(ctx)
	for _, name := range names {
		if got := final.Groups[name].Instances; len(got) != 1 || got[0].State != "4" {
			t.Errorf("group %s: %+v", name, got)
		}
	}
}

func TestExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "infrakit.state.json.watch")
	h := Holder{PID: 4242, Host: "box", Since: time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)}
	x, err := acquireExclusive(path, h)
	if err != nil {
		t.Fatal(err)
	}
	h.Listen = "127.0.0.1:9"
	if err := x.update(h); err != nil {
		t.Fatal(err)
	}
	_, err = acquireExclusive(path, Holder{PID: 1})
	var running *RunningError
	if !errors.As(err, &running) || !errors.Is(err, ErrAlreadyRunning) || running.Holder != h {
		t.Fatalf("second acquire: %v", err)
	}
	want := "another infrakit watch is running on this state: pid 4242 on host box, since 2025-05-01T12:00:00Z, serving http://127.0.0.1:9/v1/status (it holds " + path + "); stop it first"
	if err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}
	if err := x.release(); err != nil {
		t.Fatal(err)
	}
	x, err = acquireExclusive(path, Holder{PID: 7})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	x.release()
}

func TestStackDiff(t *testing.T) {
	size, other := 2, 3
	g := func(name string, size *int) *config.Group { return &config.Group{Name: name, Size: size} }
	applied := &config.Stack{Name: "s", Groups: []*config.Group{g("a", &size), g("b", &size)}}
	same := &config.Stack{Name: "s", Groups: []*config.Group{g("a", &size), g("b", &size)}}
	if d := stackDiff(applied, same); len(d) != 0 {
		t.Errorf("same stacks differ: %v", d)
	}
	files := &config.Stack{Name: "s", Groups: []*config.Group{g("a", &other), g("c", &size)}}
	want := []string{`group "a" changed`, `group "c" is new`, `group "b" was removed`}
	if d := stackDiff(applied, files); !equalStrings(d, want) {
		t.Errorf("diff %q, want %q", d, want)
	}
	if d := stackDiff(nil, files); len(d) != 1 {
		t.Errorf("nothing applied: %q", d)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
