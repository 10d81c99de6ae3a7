//go:build unix

// Package filelock is the exclusive file lock providers take around their
// own files, so that the several processes of one provider (the CLI's and
// watch's) never interleave a read-modify-write.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// poll is how often a waiting Lock retries.
const poll = 10 * time.Millisecond

// Lock takes the exclusive flock of path (created if missing), waiting until
// ctx ends. flock belongs to the open file, so two calls in one process
// exclude each other too, and the kernel frees it when the holder dies.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: another provider process holds it: %w", path, ctx.Err())
		case <-t.C:
		}
	}
}
