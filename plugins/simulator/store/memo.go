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

// A nil *Memo remembers nothing: get misses, set and forget do nothing.

func (m *Memo[T]) get(v version) (T, []byte, bool) {
	if m == nil {
		var zero T
		return zero, nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known || m.version != v {
		var zero T
		return zero, nil, false
	}
	return m.value, m.raw, true
}

func (m *Memo[T]) set(v version, raw []byte, value T) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known, m.version, m.raw, m.value = true, v, raw, value
}

func (m *Memo[T]) forget() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var zero T
	m.known, m.raw, m.value = false, nil, zero
}

// UpdateMemo is Update through m, which must be used for key only; Update
// is UpdateMemo without a memo (m nil: the file is read on every update,
// and nothing is stat'ed for the memo). fn may get the memo's value: it
// must not keep it, and when it returns an error the memo is dropped (fn
// may have changed the value half-way).
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
	v, b, found, err := current(s, key, m)
	if err != nil {
		return err
	}
	if err := fn(&v, found); err != nil {
		return err
	}
	out, err := encode(v)
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", key, err)
	}
	// An unchanged object is not rewritten: a write costs a new inode that
	// every cache re-reads, and a periodic re-registration changes nothing.
	if found && bytes.Equal(out, b) {
		return nil
	}
	if err := s.Write(key, out); err != nil {
		return err
	}
	if m == nil {
		return nil
	}
	// The version of what was just written, for the next update. Under the
	// lock no simulator process writes the file; a person editing it in
	// the microseconds between the rename and this stat would go unseen
	// until the next change of the file.
	var st unix.Stat_t
	if err := unix.Stat(s.Path(key), &st); err != nil {
		m.forget()
		return nil
	}
	m.set(versionOf(&st), out, v)
	return nil
}

// current is key's object and its file's bytes, under key's lock: the
// memo's when the file is still the version m remembers, else read and
// decoded (and remembered). found is false for a missing file.
func current[T any](s *Store, key Key, m *Memo[T]) (v T, raw []byte, found bool, err error) {
	path := s.Path(key)
	if m != nil {
		var st unix.Stat_t
		switch serr := unix.Stat(path, &st); {
		case errors.Is(serr, fs.ErrNotExist):
			return v, nil, false, nil
		case serr == nil:
			if v, raw, ok := m.get(versionOf(&st)); ok {
				return v, raw, true, nil
			}
		}
	}
	raw, ver, err := readFileVersionAt(unix.AT_FDCWD, path)
	if err != nil {
		if err = s.readError(key, err); errors.Is(err, ErrNotFound) {
			return v, nil, false, nil
		}
		return v, nil, false, err
	}
	if v, err = decodeObject[T](s, key, raw); err != nil {
		return v, nil, false, err
	}
	m.set(ver, raw, v)
	return v, raw, true, nil
}
