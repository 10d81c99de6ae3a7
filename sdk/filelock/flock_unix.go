//go:build unix

package filelock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// TryAcquire makes one attempt at the exclusive lock of the open file f,
// without waiting: false when another open file description holds it.
func TryAcquire(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		default:
			return false, err
		}
	}
}

// Release drops the lock of f (closing f drops it too).
func Release(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
