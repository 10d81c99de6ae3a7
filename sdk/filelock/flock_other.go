//go:build !unix

package filelock

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// TryAcquire fails: this platform has no flock, and a lock that does not
// exclude is worse than none.
func TryAcquire(*os.File) (bool, error) {
	return false, fmt.Errorf("file locking (flock) is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Release fails like TryAcquire.
func Release(*os.File) error { return errors.ErrUnsupported }
