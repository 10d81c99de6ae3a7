package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/infrakit/infrakit/sdk/filelock"
)

// Lock takes the state lock: flock on LockPath, with info written into the
// file so a waiter can name the holder. See Store.Lock. A holder that dies
// loses the lock with its file descriptors; its info left in the file is
// never shown, because a waiter only reads it while the lock is held, and
// the next holder writes its own.
func (l *Local) Lock(ctx context.Context, info LockInfo) (func() error, error) {
	f, err := l.acquire(ctx, info)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.held++
	l.mu.Unlock()

	var once sync.Once
	var uerr error
	return func() error {
		once.Do(func() {
			// Taking mu waits for a Write running under this lock.
			l.mu.Lock()
			defer l.mu.Unlock()
			l.held--
			uerr = release(f)
		})
		return uerr
	}, nil
}

// acquire polls a non-blocking flock on a new open file description until
// it succeeds or ctx is done. Polling (rather than a blocking flock in a
// goroutine) keeps the wait cancellable without leaving a goroutine behind.
func (l *Local) acquire(ctx context.Context, info LockInfo) (*os.File, error) {
	info = info.withDefaults()
	start := time.Now()
	delay := time.Millisecond
	for {
		// Try before looking at ctx: a free lock is taken even when ctx is
		// already done, and the try after ctx ends is the last chance.
		f, err := l.tryAcquire()
		if err != nil {
			return nil, err
		}
		if f != nil {
			if err := writeInfo(f, info); err != nil {
				release(f)
				return nil, fmt.Errorf("lock %s: write holder info: %w", l.lockPath, err)
			}
			return f, nil
		}
		if ctx.Err() != nil {
			return nil, l.lockedError(ctx, start)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		// A cheap syscall; waiting CLIs should notice a release promptly.
		delay = min(delay*2, 25*time.Millisecond)
	}
}

// tryAcquire makes one attempt. It returns (nil, nil) when the lock is held
// elsewhere.
func (l *Local) tryAcquire() (*os.File, error) {
	for {
		f, err := os.OpenFile(l.lockPath, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", l.lockPath, err)
		}
		ok, err := filelock.TryAcquire(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", l.lockPath, err)
		}
		if !ok {
			f.Close()
			return nil, nil
		}
		// If the file was removed or replaced between open and flock, our
		// lock is on a file nobody else will open: start again.
		fi, ferr := f.Stat()
		pi, perr := os.Stat(l.lockPath)
		if ferr == nil && perr == nil && os.SameFile(fi, pi) {
			return f, nil
		}
		release(f)
	}
}

func (l *Local) lockedError(ctx context.Context, start time.Time) error {
	e := &LockedError{State: l.path, Waited: time.Since(start), Cause: ctx.Err()}
	// The holder writes its info right after taking the lock; give a
	// holder caught in between a moment to finish.
	for range 5 {
		if h, ok := readInfo(l.lockPath); ok {
			e.Holder, e.Known = h, true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return e
}

// writeInfo replaces the lock file's content with info. Writing first and
// truncating after means a concurrent reader sees a whole JSON value
// (possibly followed by a tail of the old one, which readInfo ignores).
func writeInfo(f *os.File, info LockInfo) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(data)))
}

func readInfo(path string) (LockInfo, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return LockInfo{}, false
	}
	var info LockInfo
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&info); err != nil || info.PID == 0 {
		return LockInfo{}, false
	}
	return info, true
}

// release clears the holder info and drops the lock. Clearing first means
// the next waiter that catches the lock between acquisition and info
// writing sees "unknown", not a stale holder.
func release(f *os.File) error {
	_ = f.Truncate(0) // a courtesy; dropping the lock is what matters
	uerr := filelock.Release(f)
	cerr := f.Close()
	if err := errors.Join(uerr, cerr); err != nil {
		return fmt.Errorf("unlock %s: %w", f.Name(), err)
	}
	return nil
}
