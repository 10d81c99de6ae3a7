package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// The multi-process test re-executes this test binary; these variables tell
// the child what to do instead of running tests.
const (
	envChildDir = "STORE_TEST_CHILD_DIR"
	envChildID  = "STORE_TEST_CHILD_ID"
	childIncrs  = 150
	childCreate = 50
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChildDir); dir != "" {
		if err := runChild(dir, os.Getenv(envChildID)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

type counter struct {
	N       int      `json:"n"`
	Writers []string `json:"writers"`
}

var counterKey = Key{Collection: "counters", Name: "shared"}

// increment is the read-modify-write every writer (goroutine or process) runs.
func increment(ctx context.Context, s *Store, who string) error {
	return Update(ctx, s, counterKey, func(c *counter, _ bool) error {
		c.N++
		c.Writers = append(c.Writers, who)
		return nil
	})
}

func runChild(dir, id string) error {
	s, err := Open(dir, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	for i := range childIncrs {
		if err := increment(ctx, s, id+"-"+strconv.Itoa(i)); err != nil {
			return err
		}
		if i < childCreate {
			if err := Create(s, Key{Collection: "items", Name: id + "-" + strconv.Itoa(i)}, counter{N: i}); err != nil {
				return err
			}
		}
	}
	return nil
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, hclog.NewNullLogger())
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

func TestRoundTripAndNotFound(t *testing.T) {
	s := open(t, t.TempDir())
	key := Key{Collection: "a/b", Name: "x"}
	if _, err := Get[counter](s, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: got %v, want ErrNotFound", err)
	}
	if err := Put(s, key, counter{N: 3}); err != nil {
		t.Fatal(err)
	}
	got, err := Get[counter](s, key)
	if err != nil || got.N != 3 {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "a", "b", "x.json")); err != nil {
		t.Fatalf("object file not at its documented path: %v", err)
	}
	existed, err := s.Remove(key)
	if err != nil || !existed {
		t.Fatalf("Remove = %v, %v", existed, err)
	}
	existed, err = s.Remove(key)
	if err != nil || existed {
		t.Fatalf("second Remove = %v, %v; want false, nil", existed, err)
	}
}

func TestOpenCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	s := open(t, dir)
	if names, err := s.Names("instances/compute"); err != nil || len(names) != 0 {
		t.Fatalf("Names of missing collection = %v, %v", names, err)
	}
	if objs, err := List[counter](context.Background(), s, "x"); err != nil || len(objs) != 0 {
		t.Fatalf("List of missing collection = %v, %v", objs, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Open or reads created %s (err %v)", dir, err)
	}
}

// createModes runs a test with Create making unnamed files (O_TMPFILE,
// where the file system can) and named temporary files (where it cannot).
func createModes(t *testing.T, test func(t *testing.T, s *Store)) {
	for _, unnamed := range []bool{true, false} {
		t.Run(map[bool]string{true: "unnamed", false: "named-temporary"}[unnamed], func(t *testing.T) {
			s := open(t, t.TempDir())
			s.noUnnamed.Store(!unnamed)
			test(t, s)
			if s.noUnnamed.Load() == unnamed {
				t.Logf("unnamed files are not supported here; both runs used named temporary files")
			}
		})
	}
}

func TestCreateNeverClobbers(t *testing.T) {
	createModes(t, func(t *testing.T, s *Store) {
		key := Key{Collection: "c", Name: "one"}
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = Create(s, key, counter{N: i}) })
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if won >= 0 {
					t.Fatalf("two Creates of one key succeeded: %d and %d", won, i)
				}
				won = i
			case !errors.Is(err, ErrExists):
				t.Fatalf("Create %d: %v, want ErrExists", i, err)
			}
		}
		got, err := Get[counter](s, key)
		if err != nil || got.N != won {
			t.Fatalf("stored %+v (%v), want the winner %d", got, err, won)
		}
		if st, err := os.Stat(s.Path(key)); err != nil || st.Mode().Perm()&0o600 != 0o600 {
			t.Fatalf("created file: %v, %v; want it readable and writable by its owner", st, err)
		}
		assertNoTempFiles(t, s.dir("c"))
	})
}

func TestCreateRecreatesRemovedDirectory(t *testing.T) {
	createModes(t, func(t *testing.T, s *Store) {
		if err := Create(s, Key{Collection: "deep/c", Name: "x"}, counter{N: 1}); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(s.Root(), "deep")); err != nil {
			t.Fatal(err)
		}
		if err := Create(s, Key{Collection: "deep/c", Name: "y"}, counter{N: 2}); err != nil {
			t.Fatalf("Create after the directory was removed: %v", err)
		}
		if got, err := Get[counter](s, Key{Collection: "deep/c", Name: "y"}); err != nil || got.N != 2 {
			t.Fatalf("read back %+v, %v", got, err)
		}
	})
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"compute-0a1b2c3d", true},
		{"lb1", true},
		{"test.com", true},
		{"", false},
		{".hidden", false},
		{"..", false},
		{"a/b", false},
		{`a\b`, false},
		{"nul\x00", false},
		{strings.Repeat("x", 201), false},
	} {
		if err := ValidName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	s := open(t, t.TempDir())
	if err := s.Write(Key{Collection: "c", Name: "../escape"}, []byte("{}")); err == nil {
		t.Fatal("Write accepted a name with a path separator")
	}
}

func TestListSkipsCorruptAndForeignFiles(t *testing.T) {
	var logs bytes.Buffer
	dir := t.TempDir()
	s, err := Open(dir, hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		if err := Put(s, Key{Collection: "c", Name: "ok" + strconv.Itoa(i)}, counter{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	cdir := s.dir("c")
	files := map[string]string{
		"half.json":            `{"n": 1, "wri`,
		"empty.json":           "",
		"blank.json":           "  \n",
		"wrongshape.json":      `{"n": "three"}`,
		".ok9.json.tmp-abc":    `{"n": 9}`,
		".dotted.json":         `{"n": 9}`,
		"notes.txt":            "not an object",
		"README":               "",
		"ok-but-array.json":    `[1, 2]`,
		"ok-but-null.json":     `null`, // decodes to the zero value: accepted
		"ok-with-extras.json":  `{"n": 7, "extra": true}`,
		"ok-with-unicode.json": `{"n": 8, "writers": ["é"]}`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(cdir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Not files at all: a directory and a FIFO named like objects.
	if err := os.Mkdir(filepath.Join(cdir, "adir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(cdir, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := List[counter](context.Background(), s, "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Get[counter](s, Key{Collection: "c", Name: "fifo"}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Get of a FIFO = %v, want ErrCorrupt", err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	want := []string{"ok-but-null", "ok-with-extras", "ok-with-unicode", "ok0", "ok1", "ok2"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("List names = %v, want %v", names, want)
	}
	for _, bad := range []string{"half.json", "empty.json", "blank.json", "wrongshape.json", "ok-but-array.json", "adir.json", "fifo.json"} {
		if !strings.Contains(logs.String(), bad) {
			t.Errorf("no warning naming %s in logs:\n%s", bad, logs.String())
		}
	}
}

func TestListCachedFollowsEveryChange(t *testing.T) {
	var logs bytes.Buffer
	s, err := Open(t.TempDir(), hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var cache Cache[counter]
	list := func() map[string]int {
		t.Helper()
		objs, err := ListCached(ctx, s, "c", &cache)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, o := range objs {
			got[o.Name] = o.Value.N
		}
		return got
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("empty collection listed %v", got)
	}
	for _, n := range []string{"a", "b", "c"} {
		if err := Put(s, Key{Collection: "c", Name: n}, counter{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if got := list(); fmt.Sprint(got) != "map[a:1 b:1 c:1]" {
		t.Fatalf("listed %v", got)
	}
	// Same size, likely the same mtime tick: the new inode still shows.
	if err := Put(s, Key{Collection: "c", Name: "a"}, counter{N: 2}); err != nil {
		t.Fatal(err)
	}
	// An in-place edit (same inode) shows through size/mtime/ctime.
	if err := os.WriteFile(s.Path(Key{Collection: "c", Name: "b"}), []byte(`{"n": 30}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove(Key{Collection: "c", Name: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(Key{Collection: "c", Name: "bad"}), []byte(`{"n": `), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := list(); fmt.Sprint(got) != "map[a:2 b:30]" {
			t.Fatalf("listed %v, want a:2 b:30", got)
		}
	}
	if n := strings.Count(logs.String(), "skipping corrupt object file"); n != 1 {
		t.Fatalf("corrupt file warned about %d times over 3 cached listings, want once:\n%s", n, logs.String())
	}
	// Fixed by hand: it appears.
	if err := os.WriteFile(s.Path(Key{Collection: "c", Name: "bad"}), []byte(`{"n": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := list(); fmt.Sprint(got) != "map[a:2 b:30 bad:4]" {
		t.Fatalf("listed %v after the fix", got)
	}
	if err := os.RemoveAll(filepath.Join(s.Root(), "c")); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("removed collection listed %v", got)
	}
}

func TestWriteRecreatesRemovedDirectory(t *testing.T) {
	s := open(t, t.TempDir())
	key := Key{Collection: "deep/c", Name: "x"}
	if err := Put(s, key, counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(s.Root(), "deep")); err != nil {
		t.Fatal(err)
	}
	if err := Put(s, key, counter{N: 2}); err != nil {
		t.Fatalf("Put after the directory was removed: %v", err)
	}
}

func TestUpdate(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	key := Key{Collection: "c", Name: "x"}
	boom := errors.New("boom")
	if err := Update(ctx, s, key, func(c *counter, found bool) error {
		if found {
			t.Error("found=true for a missing object")
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want fn's error", err)
	}
	if _, err := s.Read(key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed Update wrote the object: %v", err)
	}
	if err := os.MkdirAll(s.dir("c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(key), []byte("{oops"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Update(ctx, s, key, func(*counter, bool) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Update of a corrupt file = %v, want ErrCorrupt", err)
	}
	if b, _ := os.ReadFile(s.Path(key)); string(b) != "{oops" {
		t.Fatalf("Update overwrote a person's corrupt edit: %q", b)
	}
}

// Two Stores on one root use separate descriptors, so they exclude each
// other through flock exactly as two processes do.
func TestLockExcludesOtherStoresAndHonoursContext(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	key := Key{Collection: "c", Name: "x"}
	unlock, err := a.Lock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.Lock(ctx, key); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Store took a held lock: %v", err)
	}
	unlock()
	unlock2, err := b.Lock(context.Background(), key)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock2()
}

func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	dir := t.TempDir()
	// Two Stores so goroutines contend both on the in-process semaphore and
	// on the flock.
	stores := []*Store{open(t, dir), open(t, dir)}
	const goroutines, each = 8, 100
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := increment(context.Background(), stores[g%2], fmt.Sprintf("g%d-%d", g, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	c, err := Get[counter](stores[0], counterKey)
	if err != nil {
		t.Fatal(err)
	}
	if c.N != goroutines*each || len(c.Writers) != goroutines*each {
		t.Fatalf("counter = %d with %d writers, want %d", c.N, len(c.Writers), goroutines*each)
	}
}

// Several processes and this one's goroutines update one object and create
// objects in one collection while a reader checks every read decodes: no
// update may be lost and no reader may see a torn file.
func TestMultiProcessUpdatesLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	s := open(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const children, parentIncrs = 3, 100
	var readerWG sync.WaitGroup
	reads := 0
	readerWG.Go(func() {
		for ctx.Err() == nil {
			b, err := s.Read(counterKey)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			var c counter
			if err := json.Unmarshal(b, &c); err != nil {
				t.Errorf("reader saw a torn object: %v: %q", err, b)
				return
			}
			reads++
		}
	})

	var cmds []*exec.Cmd
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildID+"=p"+strconv.Itoa(i))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("child %d output:\n%s", i, out.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	for i := range parentIncrs {
		if err := increment(context.Background(), s, "parent-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	cancel()
	readerWG.Wait()

	c, err := Get[counter](s, counterKey)
	if err != nil {
		t.Fatal(err)
	}
	want := children*childIncrs + parentIncrs
	if c.N != want || len(c.Writers) != want {
		t.Fatalf("counter = %d with %d writers, want %d", c.N, len(c.Writers), want)
	}
	seen := map[string]bool{}
	for _, w := range c.Writers {
		if seen[w] {
			t.Fatalf("writer %s recorded twice", w)
		}
		seen[w] = true
	}
	items, err := List[counter](context.Background(), s, "items")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != children*childCreate {
		t.Fatalf("%d items created, want %d", len(items), children*childCreate)
	}
	assertNoTempFiles(t, s.dir("counters"))
	assertNoTempFiles(t, s.dir("items"))
	t.Logf("reader decoded %d concurrent reads", reads)
}

// The store behaves like a map under any sequence of operations.
func TestStoreMatchesMapModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s, err := Open(t.TempDir(), nil)
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		model := map[string]int{}
		names := rapid.SampledFrom([]string{"a", "b", "c"})
		for range rapid.IntRange(1, 30).Draw(rt, "ops") {
			name := names.Draw(rt, "name")
			key := Key{Collection: "m", Name: name}
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				n := rapid.Int().Draw(rt, "n")
				if err := Put(s, key, counter{N: n}); err != nil {
					rt.Fatal(err)
				}
				model[name] = n
			case 1:
				n := rapid.Int().Draw(rt, "n")
				err := Create(s, key, counter{N: n})
				_, exists := model[name]
				if exists != errors.Is(err, ErrExists) || (!exists && err != nil) {
					rt.Fatalf("Create(%s) = %v with model %v", name, err, model)
				}
				if !exists {
					model[name] = n
				}
			case 2:
				existed, err := RemoveLocked(ctx, s, key)
				if _, exists := model[name]; err != nil || existed != exists {
					rt.Fatalf("Remove(%s) = %v, %v with model %v", name, existed, err, model)
				}
				delete(model, name)
			case 3:
				if err := Update(ctx, s, key, func(c *counter, found bool) error {
					if _, exists := model[name]; found != exists {
						rt.Fatalf("Update(%s) found=%v with model %v", name, found, model)
					}
					c.N++
					return nil
				}); err != nil {
					rt.Fatal(err)
				}
				model[name]++
			}
		}
		objs, err := List[counter](ctx, s, "m")
		if err != nil {
			rt.Fatal(err)
		}
		got := map[string]int{}
		for _, o := range objs {
			got[o.Name] = o.Value.N
		}
		if fmt.Sprint(got) != fmt.Sprint(model) {
			rt.Fatalf("store %v != model %v", got, model)
		}
	})
}

// Object files are private, created or replaced: an instance's record holds
// its properties.
func TestObjectFilesArePrivate(t *testing.T) {
	createModes(t, func(t *testing.T, s *Store) {
		key := Key{Collection: "instances/compute", Name: "a"}
		if err := s.Create(key, []byte(`{"n": 1}`)); err != nil {
			t.Fatal(err)
		}
		check := func(when string) {
			fi, err := os.Stat(s.Path(key))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("object file mode %v %s, want 0600", fi.Mode().Perm(), when)
			}
		}
		check("after Create")
		if err := s.Write(key, []byte(`{"n": 2}`)); err != nil {
			t.Fatal(err)
		}
		check("after Write")
	})
}
