package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Object is one decoded object of a collection.
type Object[T any] struct {
	Name  string
	Value T
}

// listWorkers bounds how many files List reads at once. Reading is mostly
// syscalls, so a few more workers than CPUs keep the CPUs busy.
func listWorkers(n int) int {
	return max(1, min(n, 2*runtime.GOMAXPROCS(0), 16))
}

// version identifies one version of a file: an atomic replace gives a new
// inode, and an in-place edit changes size, mtime or ctime.
type version struct {
	ino, size, mtime, ctime int64
}

func versionOf(st *unix.Stat_t) version {
	return version{
		ino:   int64(st.Ino),
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
	}
}

type cached[T any] struct {
	version version
	value   T
	corrupt bool // warned about once per version, not once per listing
	// kept: the file stopped parsing less than rewriteWindow after it was
	// written, so it is taken for a rewrite in progress and value is the
	// last good one (see readCached).
	kept bool
}

// rewriteWindow is how long after its last write a file that does not
// parse, but did before, is taken for one being rewritten in place (opened
// with O_TRUNC, then written, as editors and os.WriteFile do): it reads
// empty or half-written for a moment, and inotify reports the truncation at
// once. Meanwhile its last good value stands, so that a listing does not
// lose an object, which its watchers would take for a vanished instance, to
// a write in progress. A file still broken after the window is corrupt.
const rewriteWindow = time.Second

// settled reports whether the file version was written rewriteWindow ago
// or longer.
func settled(v version) bool {
	return time.Since(time.Unix(0, v.mtime)) >= rewriteWindow
}

// snapshot is one complete listing of a collection. It is never modified
// once installed in a Cache, so readers share it without copying.
type snapshot[T any] struct {
	// objs are the objects sorted by name, corrupt files left out.
	objs []Object[T]
	// names are every file's name, sorted; files has each one's entry
	// (corrupt ones too, so they are warned about once per version).
	names []string
	files map[string]cached[T]
	// gen changes whenever the listing does.
	gen        uint64
	collection string
	// kept names the files whose entry is kept (cached.kept): each
	// listing looks at them again until they parse or settle as corrupt.
	kept []string
}

// RescanEvery is how often a Cache that follows its directory with inotify
// lists it in full anyway: what inotify cannot see (a file edited through
// a hard link in another directory, or through a symbolic link's target)
// shows up within this long.
const RescanEvery = 2 * time.Minute

// Test hooks: whether caches follow with inotify, and RescanEvery.
var (
	followWithInotify = true
	rescanEvery       = RescanEvery
)

// Cache remembers the decoded object of each file version of one
// collection, so that listing it again re-reads only files that changed.
//
// It follows the collection's directory with inotify, set up before the
// first full listing: a later listing reads the events queued since the
// previous one (the kernel queues them before the changing system call
// returns, so nothing done before the listing starts is missed) and looks
// only at the files they name. An unchanged collection then costs one
// read of the event queue, not a stat per file: that is what a provider
// listing 10,000 objects on every pass of `infrakit watch` needs. When
// inotify is unavailable, or its queue overflowed, or the directory was
// replaced, or RescanEvery has passed, the listing is a full one: a stat
// per file, and a read and decode of the files whose version (inode, size,
// mtime, ctime) changed. While it follows, the full listing RescanEvery
// asks for is made when it falls due, by a goroutine of the cache (see
// keeper.go), not by the next caller.
//
// It is safe for concurrent use (listings through one Cache run one at a
// time); the zero value is ready. Close releases the inotify descriptor
// (dropping the Cache releases it too, eventually).
type Cache[T any] struct {
	snap atomic.Pointer[snapshot[T]]

	mu sync.Mutex // held while listing
	// collection is the one the snapshot lists; a Cache follows one.
	collection string
	// changed is closed at the next change (see Changed); nil while
	// nobody waits. It has its own lock: the waiter closes it while a
	// listing may hold mu.
	sigMu   sync.Mutex
	changed chan struct{}
	watch   *dirWatch // nil while not following changes
	// keeper makes the full listings while following (keeper.go);
	// keepers are every keeper started, which Close waits for.
	keeper  *keeper
	keepers sync.WaitGroup
	fullAt  time.Time // when the last full listing started
	retryAt time.Time // when to try inotify again after it failed
	gen     uint64
	// primed are objects this process just created (see CreateCached).
	primed primedSet[T]
}

// List reads and decodes every object of a collection, sorted by name.
// Objects removed while listing are left out; corrupt ones (a person's
// half-written edit) are skipped with a warning, never an error, so one bad
// file cannot take the provider down. A missing collection is empty.
func List[T any](ctx context.Context, s *Store, collection string) ([]Object[T], error) {
	snap, _, err := listFull[T](ctx, s, collection, nil, nil)
	if err != nil {
		return nil, err
	}
	return snap.objs, nil
}

// ListCached is List through c (nil: no cache). The objects returned are
// shared with c and with other callers: read them, never modify them.
func ListCached[T any](ctx context.Context, s *Store, collection string, c *Cache[T]) ([]Object[T], error) {
	if c == nil {
		return List[T](ctx, s, collection)
	}
	objs, _, err := c.List(ctx, s, collection)
	return objs, err
}

// List is ListCached that also returns the listing's generation, which
// changes whenever the listing does (a file added, removed or changed):
// equal generations mean equal listings.
func (c *Cache[T]) List(ctx context.Context, s *Store, collection string) ([]Object[T], uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap, err := c.refresh(ctx, s, collection)
	if err != nil {
		return nil, 0, err
	}
	return snap.objs, snap.gen, nil
}

// Following reports whether the cache follows its collection with inotify,
// so that List costs little while nothing changes. A caller polling for
// changes can list on every poll then, and must otherwise look for cheaper
// signs of change (the directory's mtime) between full listings.
func (c *Cache[T]) Following() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watch != nil
}

// Changed returns a channel that is closed at the next change of the
// collection: events queued by inotify, a listing (by anyone) whose
// generation moved, or the cache no longer following the directory. It is
// nil while the cache does not follow the directory: the caller must poll.
// A caller waiting for changes lists with List after each wake (and once
// after taking the channel, for what changed before it did).
//
// The first call starts a goroutine that waits for inotify events; Close
// stops it, so a Cache whose Changed was called must be closed.
func (c *Cache[T]) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watch == nil || !c.watch.startWaiter(c.signal) {
		return nil
	}
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// signal wakes whoever waits on Changed.
func (c *Cache[T]) signal() {
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Close stops following the collection (and the goroutines Changed and
// the keeper started). The cache stays usable.
func (c *Cache[T]) Close() {
	c.mu.Lock()
	c.stopWatch()
	c.mu.Unlock()
	c.keepers.Wait()
}

func (c *Cache[T]) stopWatch() {
	c.stopKeeper()
	if c.watch != nil {
		c.watch.close()
		c.watch = nil
		c.signal()
	}
}

// refresh brings the snapshot up to date and returns it. c.mu is held.
func (c *Cache[T]) refresh(ctx context.Context, s *Store, collection string) (*snapshot[T], error) {
	now := time.Now()
	old := c.snap.Load()
	primed := c.primed.take(collection)
	if c.collection != collection {
		c.stopWatch()
		old = nil
	}
	if c.watch != nil {
		changed, ok := c.watch.drain()
		if ok && old != nil && now.Sub(c.fullAt) < rescanEvery {
			for _, name := range old.kept {
				if changed == nil {
					changed = map[string]struct{}{}
				}
				changed[name] = struct{}{}
			}
			if len(changed) == 0 {
				return old, nil
			}
			snap, err := c.apply(ctx, s, collection, old, changed, primed)
			if err != nil {
				// The events are consumed: only a full listing can
				// tell what they were about.
				c.stopWatch()
				return nil, err
			}
			if snap != old {
				c.snap.Store(snap)
				c.signal()
			}
			return snap, nil
		}
		c.stopWatch()
	}
	if followWithInotify && !now.Before(c.retryAt) {
		w, err := watchDir(s.dir(collection))
		switch {
		case err == nil:
			c.watch = w
		case errors.Is(err, fs.ErrNotExist):
			// No directory yet: try again at the next listing.
		default:
			s.log.Debug("not following the collection with inotify; listing it in full", "collection", collection, "error", err)
			c.retryAt = now.Add(RescanEvery)
		}
	}
	var prev map[string]cached[T]
	if old != nil {
		prev = old.files
	} else {
		prev = loadIndex[T](s, collection)
	}
	snap, reads, err := listFull(ctx, s, collection, prev, primed)
	if err != nil {
		c.stopWatch()
		return nil, err
	}
	if reads >= indexMinReads {
		if err := writeIndex(s, collection, snap); err != nil {
			s.log.Debug("no listing index", "error", err)
		}
	}
	c.collection, c.fullAt = collection, now
	snap.collection = collection
	if c.watch != nil && c.keeper == nil {
		c.startKeeper(s, collection)
	}
	if old != nil && sameListing(old, snap) {
		snap.gen = old.gen
	} else {
		c.gen++
		snap.gen = c.gen
		defer c.signal()
	}
	c.snap.Store(snap)
	return snap, nil
}

// apply is old with the files changed re-examined: each is stat'ed, and
// read again when its version changed.
func (c *Cache[T]) apply(ctx context.Context, s *Store, collection string, old *snapshot[T], changed map[string]struct{}, primed map[string]cached[T]) (*snapshot[T], error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: list %s: %w", collection, context.Cause(ctx))
	}
	dir, err := os.Open(s.dir(collection))
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", collection, err)
	}
	defer dir.Close()
	dirfd := int(dir.Fd())
	files := maps.Clone(old.files)
	if files == nil {
		files = map[string]cached[T]{}
	}
	added, removed, modified := false, false, false
	for name := range changed {
		r, ok, _, err := readCached(s, dirfd, Key{Collection: collection, Name: name}, old.files, primed)
		if err != nil {
			return nil, err
		}
		p, had := old.files[name]
		switch {
		case !ok && had:
			delete(files, name)
			removed = true
		case !ok:
		case !had:
			files[name] = r
			added = true
		case r.version != p.version || r.corrupt != p.corrupt || r.kept != p.kept:
			files[name] = r
			modified = true
		}
	}
	if !added && !removed && !modified {
		return old, nil
	}
	names := old.names
	if added || removed {
		names = slices.Sorted(maps.Keys(files))
	}
	c.gen++
	snap := newSnapshot(names, files, c.gen)
	snap.collection = collection
	return snap, nil
}

func newSnapshot[T any](names []string, files map[string]cached[T], gen uint64) *snapshot[T] {
	snap := &snapshot[T]{objs: make([]Object[T], 0, len(names)), names: names, files: files, gen: gen}
	for _, n := range names {
		r := files[n]
		if !r.corrupt {
			snap.objs = append(snap.objs, Object[T]{Name: n, Value: r.value})
		}
		if r.kept {
			snap.kept = append(snap.kept, n)
		}
	}
	return snap
}

// sameListing reports whether two snapshots list the same file versions.
func sameListing[T any](a, b *snapshot[T]) bool {
	if !slices.Equal(a.names, b.names) {
		return false
	}
	for n, r := range a.files {
		if q := b.files[n]; q.version != r.version || q.corrupt != r.corrupt || q.kept != r.kept {
			return false
		}
	}
	return true
}

// listFull lists a collection, stat'ing every file and reading those whose
// version differs from prev's or primed's (all of them when both are nil),
// with a few workers; it also counts the files it read.
func listFull[T any](ctx context.Context, s *Store, collection string, prev, primed map[string]cached[T]) (*snapshot[T], int, error) {
	dir, names, err := s.openCollection(collection)
	if err != nil {
		return nil, 0, err
	}
	if dir == nil {
		return &snapshot[T]{files: map[string]cached[T]{}}, 0, nil
	}
	defer dir.Close() // after every worker is done with dirfd
	dirfd := int(dir.Fd())

	results := make([]cached[T], len(names))
	found := make([]bool, len(names))

	// Workers claim indices from a shared counter; all are joined before
	// returning, so no goroutine outlives the call.
	var next, reads atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range listWorkers(len(names)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) || ctx.Err() != nil {
					return
				}
				key := Key{Collection: collection, Name: names[i]}
				r, ok, read, err := readCached(s, dirfd, key, prev, primed)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if read {
					reads.Add(1)
				}
				results[i], found[i] = r, ok
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("store: list %s: %w", collection, context.Cause(ctx))
	}
	if firstErr != nil {
		return nil, 0, firstErr
	}
	files := make(map[string]cached[T], len(names))
	kept := names[:0]
	for i, r := range results {
		if found[i] {
			files[names[i]] = r
			kept = append(kept, names[i])
		}
	}
	return newSnapshot(kept, files, 0), int(reads.Load()), nil
}
