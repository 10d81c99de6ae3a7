// Package filelock is the one file lock of the tree: the exclusive flock
// that providers take around their own files, so that the several processes
// of one provider (the CLI's and watch's) never interleave a
// read-modify-write, and that infrakit takes on its state and watch lock
// files.
//
// flock belongs to the open file description, so two opens in one process
// exclude each other too, and the kernel frees the lock when the holder
// dies, however it ends. Waits poll a non-blocking flock with a short
// backoff rather than block in the kernel, so a waiter holds no OS thread
// and its context can end the wait.
package filelock

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Backoff bounds of a waiting Acquire: the first retry comes soon (locks
// are usually held briefly), the later ones no further apart than
// maxPoll, so a waiter notices a release promptly.
const (
	minPoll = 100 * time.Microsecond
	maxPoll = 10 * time.Millisecond
)

// Lock takes the exclusive lock of path (created 0644 if missing), waiting
// until ctx ends. unlock releases it and closes the file.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := Acquire(ctx, f); err != nil {
		f.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lock %s: another process holds it: %w", path, err)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = Release(f)
		f.Close()
	}, nil
}

// Acquire takes the exclusive lock of the open file f, waiting until ctx
// ends; then it returns context.Cause(ctx). A free lock is taken even when
// ctx is already done: the try comes before the look at ctx.
func Acquire(ctx context.Context, f *os.File) error {
	wait := minPoll
	for {
		ok, err := TryAcquire(f)
		if err != nil || ok {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		wait = min(wait*2, maxPoll)
	}
}
