package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"golang.org/x/sys/unix"
)

// Memo remembers one object as this process last read or wrote it: the
// file's version, its bytes and its decoded value. UpdateMemo through it
// skips reading and decoding the file when the file is still that version,
// which is what a big object changed often needs (the record of a load
// balancer with 10,000 backends is a 1 MB file, changed once per register
// batch). A change by anyone else (another process, a person) makes a new
// version, which is read as without the memo. The zero Memo is ready; it is
// safe for concurrent use.
type Memo[T any] struct {
	mu      sync.Mutex
	known   bool
	version version
	raw     []byte
	value   T
}

func (m *Memo[T]) get(v version) (T, []byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known || m.version != v {
		var zero T
		return zero, nil, false
	}
	return m.value, m.raw, true
}

func (m *Memo[T]) set(v version, raw []byte, value T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known, m.version, m.raw, m.value = true, v, raw, value
}

func (m *Memo[T]) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var zero T
	m.known, m.raw, m.value = false, nil, zero
}

// UpdateMemo is Update through m, which must be used for key only. fn may
// get the memo's value: it must not keep it, and when it returns an error
// the memo is dropped (fn may have changed the value half-way).
func UpdateMemo[T any](ctx context.Context, s *Store, key Key, m *Memo[T], fn func(v *T, found bool) error) (err error) {
	if err := ValidName(key.Name); err != nil {
		return fmt.Errorf("store: update %s: %w", key, err)
	}
	unlock, err := s.Lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	defer func() {
		if err != nil {
			m.forget()
		}
	}()
	path := s.Path(key)
	var st unix.Stat_t
	serr := unix.Stat(path, &st)
	v, b, found := m.get(versionOf(&st))
	switch {
	case errors.Is(serr, fs.ErrNotExist):
		found = false
	case serr != nil || !found:
		var ver version
		b, ver, err = readFileVersionAt(unix.AT_FDCWD, path)
		found = err == nil
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, errNotRegular):
			return fmt.Errorf("%s (%s): %w: %v", key, path, ErrCorrupt, err)
		case err != nil:
			return fmt.Errorf("store: read %s: %w", key, err)
		default:
			if v, err = decodeObject[T](s, key, b); err != nil {
				return err
			}
			m.set(ver, b, v)
		}
	}
	if err := fn(&v, found); err != nil {
		return err
	}
	out, err := encode(v)
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", key, err)
	}
	if found && bytes.Equal(out, b) {
		return nil // unchanged: not rewritten (see Update)
	}
	if err := s.Write(key, out); err != nil {
		return err
	}
	// The version of what was just written, for the next update. Under the
	// lock no simulator process writes the file; a person editing it in
	// the microseconds between the rename and this stat would go unseen
	// until the next change of the file.
	if err := unix.Stat(path, &st); err != nil {
		m.forget()
		return nil
	}
	m.set(versionOf(&st), out, v)
	return nil
}
