package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// GetCached is Get through c (nil: no cache): when the object's file is the
// version c's last listing decoded, it costs one stat instead of an open,
// read and JSON decode. A file that changed since is read and decoded, but c
// is left as it is (the next ListCached refreshes it), so GetCached may run
// concurrently with anything. Errors are Get's: ErrNotFound, ErrCorrupt.
func GetCached[T any](s *Store, key Key, c *Cache[T]) (T, error) {
	if c != nil && ValidName(key.Name) == nil {
		var p cached[T]
		hit := false
		if snap := c.snap.Load(); snap != nil && snap.collection == key.Collection {
			p, hit = snap.files[key.Name]
		}
		if hit {
			var st unix.Stat_t
			err := unix.Stat(s.Path(key), &st) // follows symlinks, as open does
			switch {
			case errors.Is(err, fs.ErrNotExist):
				var zero T
				return zero, fmt.Errorf("%s: %w", key, ErrNotFound)
			case err == nil && versionOf(&st) == p.version && !p.corrupt && !(p.kept && settled(p.version)):
				return p.value, nil
			}
		}
	}
	return Get[T](s, key)
}

// Getter returns a function that reads objects of the collection through
// c, for a caller about to read many: when c follows the collection (see
// Following), it brings c up to date once and then answers from memory;
// otherwise each read is GetCached (a stat when the file is unchanged).
// Its errors are Get's: ErrNotFound, ErrCorrupt.
func (c *Cache[T]) Getter(ctx context.Context, s *Store, collection string) (func(name string) (T, error), error) {
	c.mu.Lock()
	following := c.watch != nil && c.collection == collection
	var snap *snapshot[T]
	if following {
		var err error
		if snap, err = c.refresh(ctx, s, collection); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		following = c.watch != nil // a full listing may have failed to follow
	}
	c.mu.Unlock()
	if !following {
		return func(name string) (T, error) {
			return GetCached(s, Key{Collection: collection, Name: name}, c)
		}, nil
	}
	return func(name string) (T, error) {
		key := Key{Collection: collection, Name: name}
		r, ok := snap.files[name]
		switch {
		case !ok || ValidName(name) != nil:
			var zero T
			return zero, fmt.Errorf("%s: %w", key, ErrNotFound)
		case r.corrupt:
			// Read it again for the error: it was warned about already.
			return Get[T](s, key)
		}
		return r.value, nil
	}, nil
}
