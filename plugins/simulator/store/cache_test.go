package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cacheModes runs a test with caches following the directory through
// inotify, and with full listings only (as when inotify is unavailable).
func cacheModes(t *testing.T, test func(t *testing.T, following bool)) {
	for _, following := range []bool{true, false} {
		name := map[bool]string{true: "inotify", false: "full-listings"}[following]
		t.Run(name, func(t *testing.T) {
			defer func(v bool) { followWithInotify = v }(followWithInotify)
			followWithInotify = following
			test(t, following)
		})
	}
}

// A cached listing always equals a fresh one, whatever happened to the files
// in between (by the store, or by hand), and its generation moves exactly
// when the listing changes.
func TestCacheFollowsChanges(t *testing.T) {
	cacheModes(t, func(t *testing.T, following bool) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		var cache Cache[counter]
		defer cache.Close()
		dir := s.dir("c")
		path := func(name string) string { return filepath.Join(dir, name+".json") }
		write := func(name, content string) {
			t.Helper()
			if err := os.WriteFile(path(name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}

		var lastGen uint64
		check := func(step string, wantChange bool) {
			t.Helper()
			got, gen, err := cache.List(ctx, s, "c")
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			want, err := List[counter](ctx, s, "c")
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: cached listing %v, fresh listing %v", step, got, want)
			}
			if (gen != lastGen) != wantChange {
				t.Fatalf("%s: generation %d after %d; want a change: %v", step, gen, lastGen, wantChange)
			}
			lastGen = gen
			if f := cache.Following(); f != (following && dirExists(dir)) {
				t.Fatalf("%s: Following() = %v", step, f)
			}
		}

		check("missing collection", true)
		for _, n := range []string{"a", "b", "c"} {
			if err := Put(s, Key{Collection: "c", Name: n}, counter{N: 1}); err != nil {
				t.Fatal(err)
			}
		}
		check("three created", true)
		check("nothing changed", false)

		write("a", `{"n": 7}`)
		check("edited in place", true)
		// Same size, very likely within the same clock tick: full listings
		// compare (inode, size, mtime, ctime), so they may miss this edit
		// until a later one; inotify sees it at once.
		write("a", `{"n": 8}`)
		gen, objs := genOf(t, &cache, s)
		if following && (objs[0].Value.N != 8 || gen == lastGen) {
			t.Fatalf("same-size edit in place not seen: %+v (generation %d, was %d)", objs[0], gen, lastGen)
		}
		lastGen = gen

		if err := os.Chtimes(path("b"), time.Now(), time.Unix(1, 0)); err != nil {
			t.Fatal(err)
		}
		check("touched", true)

		tmp := filepath.Join(dir, ".incoming")
		if err := os.WriteFile(tmp, []byte(`{"n": 4}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path("d")); err != nil {
			t.Fatal(err)
		}
		check("renamed in", true)
		if err := os.Link(path("d"), path("e")); err != nil {
			t.Fatal(err)
		}
		check("hard link", true)
		if _, err := s.Remove(Key{Collection: "c", Name: "c"}); err != nil {
			t.Fatal(err)
		}
		check("removed", true)
		write("bad", `{"n": `)
		check("corrupt file added (left out)", true)
		check("nothing changed", false)
		write("bad", `{"n": 5}`)
		check("corrupt file fixed", true)
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		check("not an object", false)

		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		check("collection removed", true)
		if err := Put(s, Key{Collection: "c", Name: "z"}, counter{N: 9}); err != nil {
			t.Fatal(err)
		}
		check("collection created again", true)
		write("y", `{"n": 10}`)
		check("written in the new directory", true)
	})
}

func dirExists(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

func genOf(t *testing.T, c *Cache[counter], s *Store) (uint64, []Object[counter]) {
	t.Helper()
	objs, gen, err := c.List(context.Background(), s, "c")
	if err != nil {
		t.Fatal(err)
	}
	return gen, objs
}

// More events than the kernel queues (max_queued_events) overflow the
// queue: the next listing is a full one, and the cache follows again.
func TestCacheQueueOverflow(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skipf("max_queued_events: %v", err)
	}
	limit, err := parseInt(strings.TrimSpace(string(b)))
	if err != nil || limit > 100_000 {
		t.Skipf("max_queued_events is %q: too many events to overflow in a test", b)
	}
	s := open(t, t.TempDir())
	ctx := context.Background()
	var cache Cache[counter]
	defer cache.Close()
	if err := Put(s, Key{Collection: "c", Name: "first"}, counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	genOf(t, &cache, s)
	if !cache.Following() {
		t.Skip("inotify is unavailable here")
	}
	// Each Put queues at least three events (the temporary file's create,
	// close and rename away, and the rename into place).
	for i := range limit/3 + 100 {
		if err := Put(s, Key{Collection: "c", Name: fmt.Sprintf("o%05d", i)}, counter{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := cache.List(ctx, s, "c")
	if err != nil {
		t.Fatal(err)
	}
	want, err := List[counter](ctx, s, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after an overflow: %d cached objects, %d on disk", len(got), len(want))
	}
	if !cache.Following() {
		t.Fatal("the cache does not follow the directory again after the overflow")
	}
	if err := os.WriteFile(s.Path(Key{Collection: "c", Name: "first"}), []byte(`{"n": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, objs := genOf(t, &cache, s); objs[0].Name != "first" || objs[0].Value.N != 2 {
		t.Fatalf("edit after the overflow not seen: %+v", objs[0])
	}
}

func parseInt(s string) (int, error) {
	var n int
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// An edit inotify cannot see (through a hard link in another directory)
// shows up at the next full listing, RescanEvery after the previous one.
func TestCacheRescan(t *testing.T) {
	defer func(d time.Duration) { rescanEvery = d }(rescanEvery)
	s := open(t, t.TempDir())
	var cache Cache[counter]
	defer cache.Close()
	outside := linkedObject(t, s)
	genOf(t, &cache, s)
	if err := os.WriteFile(outside, []byte(`{"n": 22}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rescanEvery = 0
	if _, objs := genOf(t, &cache, s); objs[0].Value.N != 22 {
		t.Fatalf("the full listing did not see the edit: %+v", objs[0])
	}
}

func TestGetter(t *testing.T) {
	cacheModes(t, func(t *testing.T, following bool) {
		s := open(t, t.TempDir())
		var cache Cache[counter]
		defer cache.Close()
		ctx := context.Background()
		for i, n := range []string{"a", "b"} {
			if err := Put(s, Key{Collection: "c", Name: n}, counter{N: i}); err != nil {
				t.Fatal(err)
			}
		}
		genOf(t, &cache, s)
		// Changes after the listing: the getter sees them.
		if err := os.WriteFile(s.Path(Key{Collection: "c", Name: "a"}), []byte(`{"n": 5}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Put(s, Key{Collection: "c", Name: "new"}, counter{N: 6}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Remove(Key{Collection: "c", Name: "b"}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Path(Key{Collection: "c", Name: "bad"}), []byte(`{`), 0o644); err != nil {
			t.Fatal(err)
		}
		get, err := cache.Getter(ctx, s, "c")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			n    int
			err  error
		}{{"a", 5, nil}, {"new", 6, nil}, {"b", 0, ErrNotFound}, {"bad", 0, ErrCorrupt}, {"never", 0, ErrNotFound}, {"../x", 0, ErrNotFound}} {
			v, err := get(tc.name)
			if tc.err != nil {
				if !errors.Is(err, tc.err) && !(tc.name == "../x" && err != nil) {
					t.Errorf("get(%q) = %v, %v; want %v", tc.name, v, err, tc.err)
				}
				continue
			}
			if err != nil || v.N != tc.n {
				t.Errorf("get(%q) = %v, %v; want n=%d", tc.name, v, err, tc.n)
			}
		}
		if got := cache.Following(); got != following {
			t.Errorf("Following() = %v, want %v", got, following)
		}
	})
}

// waitClosed waits for ch to be closed, failing the test after a long time
// (a missed wake-up, not a slow one).
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Changed was not closed", what)
	}
}

// Changed wakes a waiter at each change the cache can learn of: a write
// by another process (another Store here), a listing whose generation
// moved, the cache ceasing to follow. It is nil when the cache cannot
// follow the directory.
func TestCacheChanged(t *testing.T) {
	cacheModes(t, func(t *testing.T, following bool) {
		dir := t.TempDir()
		s, other := open(t, dir), open(t, dir)
		var cache Cache[counter]
		defer cache.Close()
		if cache.Changed() != nil {
			t.Fatal("Changed before any listing is not nil")
		}
		if err := Put(s, Key{Collection: "c", Name: "a"}, counter{N: 1}); err != nil {
			t.Fatal(err)
		}
		gen, _ := genOf(t, &cache, s)
		ch := cache.Changed()
		if !following {
			if ch != nil {
				t.Fatal("Changed is not nil though the cache does not follow the directory")
			}
			return
		}
		if ch == nil {
			t.Skip("inotify is unavailable here")
		}
		if again := cache.Changed(); again != ch {
			t.Fatal("two waiters without a change in between got different channels")
		}
		select {
		case <-ch:
			t.Fatal("Changed closed with nothing changed")
		default:
		}

		// Another process writes: the queued events wake the waiter.
		if err := Put(other, Key{Collection: "c", Name: "b"}, counter{N: 2}); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, ch, "write by another store")
		g, objs := genOf(t, &cache, s)
		if g == gen || len(objs) != 2 {
			t.Fatalf("after the wake: generation %d (was %d), %d objects", g, gen, len(objs))
		}

		// Nothing new: a waiter's channel stays open.
		ch = cache.Changed()
		genOf(t, &cache, s)
		select {
		case <-ch:
			t.Fatal("Changed closed though nothing changed since the last listing")
		case <-time.After(50 * time.Millisecond):
		}

		// An in-place edit by hand.
		if err := os.WriteFile(s.Path(Key{Collection: "c", Name: "a"}), []byte(`{"n": 5}`), 0o644); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, ch, "edit in place")
		if _, objs := genOf(t, &cache, s); objs[0].Value.N != 5 {
			t.Fatalf("edit not listed: %+v", objs[0])
		}

		// The directory goes away: the cache stops following and says so.
		ch = cache.Changed()
		if err := os.RemoveAll(s.dir("c")); err != nil {
			t.Fatal(err)
		}
		genOf(t, &cache, s)
		waitClosed(t, ch, "directory removed")
		if cache.Changed() != nil {
			t.Fatal("Changed is not nil while the directory is gone")
		}
	})
}

// A file rewritten in place reads empty for a moment (O_TRUNC, then the
// write): the cached listing keeps the object's last value meanwhile, so
// nobody takes it for removed, and shows the new value once it parses.
func TestCacheKeepsLastValueWhileRewritten(t *testing.T) {
	cacheModes(t, func(t *testing.T, following bool) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		var cache Cache[counter]
		defer cache.Close()
		if err := Put(s, Key{Collection: "c", Name: "a"}, counter{N: 1}); err != nil {
			t.Fatal(err)
		}
		list := func(step string) []Object[counter] {
			t.Helper()
			objs, _, err := cache.List(ctx, s, "c")
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			return objs
		}
		list("first listing")
		path := filepath.Join(s.dir("c"), "a.json")
		for _, content := range []string{"", `{"n": `} {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if objs := list("mid-rewrite"); len(objs) != 1 || objs[0].Value.N != 1 {
				t.Fatalf("while the file reads %q the listing is %+v, want the last value {N:1}", content, objs)
			}
		}
		if err := os.WriteFile(path, []byte(`{"n": 2}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if objs := list("rewritten"); len(objs) != 1 || objs[0].Value.N != 2 {
			t.Fatalf("after the rewrite the listing is %+v, want {N:2}", objs)
		}
		// A file that stays broken past the rewrite window is corrupt, and
		// left out like any other, though nothing touched it since (no
		// inotify event).
		if err := os.WriteFile(path, []byte(`{"n": `), 0o644); err != nil {
			t.Fatal(err)
		}
		if objs := list("broken again"); len(objs) != 1 || objs[0].Value.N != 2 {
			t.Fatalf("just after it broke the listing is %+v, want the last value {N:2}", objs)
		}
		time.Sleep(rewriteWindow + 100*time.Millisecond)
		if objs := list("broken past the window"); len(objs) != 0 {
			t.Fatalf("a file broken for longer than the rewrite window is listed: %+v", objs)
		}
	})
}

// The full listing falls due while nobody lists: the cache's keeper makes
// it then, so the edit it finds is in the snapshot before anyone lists
// again.
func TestCacheKeeperRescansWhenDue(t *testing.T) {
	defer func(d time.Duration) { rescanEvery = d }(rescanEvery)
	rescanEvery = 50 * time.Millisecond
	s := open(t, t.TempDir())
	var cache Cache[counter]
	defer cache.Close()
	outside := linkedObject(t, s)
	genOf(t, &cache, s) // follows from here; the keeper starts
	if !cache.Following() {
		t.Skip("inotify unavailable")
	}
	if err := os.WriteFile(outside, []byte(`{"n": 22}`), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if snap := cache.snap.Load(); len(snap.objs) == 1 && snap.objs[0].Value.N == 22 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no full listing by the keeper within 30s: %+v", cache.snap.Load().objs)
		}
		time.Sleep(10 * time.Millisecond) // polling, not synchronisation
	}
	if _, objs := genOf(t, &cache, s); objs[0].Value.N != 22 {
		t.Fatalf("listing after the keeper's: %+v", objs[0])
	}
}

// linkedObject puts object c/x = 1 and returns a hard link to its file in
// another directory: an edit through it is one inotify cannot see.
func linkedObject(t *testing.T, s *Store) string {
	t.Helper()
	key := Key{Collection: "c", Name: "x"}
	if err := Put(s, key, counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "elsewhere.json")
	if err := os.Link(s.Path(key), outside); err != nil {
		t.Skipf("hard link: %v", err)
	}
	return outside
}
