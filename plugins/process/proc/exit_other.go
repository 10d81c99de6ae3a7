//go:build !linux

package proc

import (
	"errors"
	"fmt"
)

// ExitWatch is not available off Linux; callers poll Identity.Check instead.
type ExitWatch struct{}

// ErrNotRunning is returned by WatchExit when the identified process is not running.
var ErrNotRunning = errors.New("process is not running")

// WatchExit is unsupported off Linux.
func WatchExit(id Identity) (*ExitWatch, error) {
	return nil, fmt.Errorf("pidfd: %w", errors.ErrUnsupported)
}

// Wait is unsupported off Linux.
func (w *ExitWatch) Wait() error { return errors.ErrUnsupported }

// Close does nothing off Linux.
func (w *ExitWatch) Close() error { return nil }
