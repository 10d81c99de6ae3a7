//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package state

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// The local backend locks with flock, which this platform lacks.

func tryFlock(*os.File) (bool, error) {
	return false, fmt.Errorf("local state locking (flock) is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func funlock(*os.File) error { return errors.ErrUnsupported }
