package exports

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll is how often a waiting writer retries the lock.
const lockPoll = 10 * time.Millisecond

// lock takes the exclusive flock of <file>.lock, which every provider
// process writing the file takes (the CLI's and watch's both run one),
// waiting until ctx ends. flock belongs to the open file, so two calls of
// one process exclude each other too. The lock file does not end in
// .exports, so exportfs never reads it.
func lock(ctx context.Context, file string) (unlock func(), err error) {
	path := file + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	t := time.NewTicker(lockPoll)
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

// read parses the exports file; a missing file has no entries.
func read(file string) ([]Entry, []string, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", file, err)
	}
	entries, stray, err := Parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", file, err)
	}
	return entries, stray, nil
}

// writeAtomic replaces file with data so that a reader (exportfs, Describe
// of another process) sees the old or the new file, never a part: a
// temporary file in the same directory (named so exportfs, which reads
// *.exports, ignores it), fsync, rename, fsync of the directory so the
// rename survives a crash.
func writeAtomic(file string, data []byte) error {
	dir := filepath.Dir(file)
	f, err := os.CreateTemp(dir, "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: sync directory: %w", file, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", file, err)
	}
	return nil
}
