package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"

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
}

// Cache remembers the decoded object of each file version of one
// collection, so that listing it again re-reads only files that changed:
// an unchanged file costs one fstatat instead of open, read, close and a
// JSON decode. It is safe for concurrent use; the zero value is ready.
type Cache[T any] struct {
	mu    sync.Mutex
	files map[string]cached[T]
}

// List reads and decodes every object of a collection, sorted by name.
// Objects removed while listing are left out; corrupt ones (a person's
// half-written edit) are skipped with a warning, never an error, so one bad
// file cannot take the provider down. A missing collection is empty.
func List[T any](ctx context.Context, s *Store, collection string) ([]Object[T], error) {
	return ListCached[T](ctx, s, collection, nil)
}

// ListCached is List reusing and refreshing c (nil: no cache).
func ListCached[T any](ctx context.Context, s *Store, collection string, c *Cache[T]) ([]Object[T], error) {
	dir, names, err := s.openCollection(collection)
	if err != nil {
		return nil, err
	}
	if dir == nil {
		if c != nil {
			c.replace(nil)
		}
		return nil, nil
	}
	defer dir.Close() // after every worker is done with dirfd
	dirfd := int(dir.Fd())

	var prev map[string]cached[T]
	if c != nil {
		prev = c.snapshot()
	}
	results := make([]cached[T], len(names))
	found := make([]bool, len(names))

	// Workers claim indices from a shared counter; all are joined before
	// returning, so no goroutine outlives the call.
	var next atomic.Int64
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
				r, ok, err := readCached(s, dirfd, key, prev)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				results[i], found[i] = r, ok
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("store: list %s: %w", collection, context.Cause(ctx))
	}
	if firstErr != nil {
		return nil, firstErr
	}
	out := make([]Object[T], 0, len(names))
	var now map[string]cached[T]
	if c != nil {
		now = make(map[string]cached[T], len(names))
	}
	for i, r := range results {
		if !found[i] {
			continue
		}
		if now != nil {
			now[names[i]] = r
		}
		if !r.corrupt {
			out = append(out, Object[T]{Name: names[i], Value: r.value})
		}
	}
	if c != nil {
		c.replace(now)
	}
	return out, nil
}

// readCached returns the object, reusing prev's entry when the file is the
// same version. ok=false means it was removed since the directory was read.
func readCached[T any](s *Store, dirfd int, key Key, prev map[string]cached[T]) (r cached[T], ok bool, err error) {
	name := key.Name + ext
	if p, hit := prev[key.Name]; hit {
		var st unix.Stat_t
		err := unix.Fstatat(dirfd, name, &st, 0) // follows symlinks, as open does
		if errors.Is(err, fs.ErrNotExist) {
			return r, false, nil
		}
		if err != nil {
			return r, false, fmt.Errorf("store: stat %s: %w", key, err)
		}
		if versionOf(&st) == p.version {
			return p, true, nil
		}
	}
	b, v, err := readFileVersionAt(dirfd, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, false, nil
	case errors.Is(err, errNotRegular):
		err = fmt.Errorf("%s (%s): %w: %v", key, s.Path(key), ErrCorrupt, err)
	case err != nil:
		return r, false, fmt.Errorf("store: read %s: %w", key, err)
	default:
		r.version = v
		r.value, err = decodeObject[T](s, key, b)
	}
	if err != nil {
		r.corrupt = true
		s.log.Warn("skipping corrupt object file", "path", s.Path(key), "error", err)
	}
	return r, true, nil
}

func (c *Cache[T]) snapshot() map[string]cached[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.files
}

// replace installs the latest listing; maps are never mutated once
// installed, so snapshots stay valid without copying.
func (c *Cache[T]) replace(files map[string]cached[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files = files
}
