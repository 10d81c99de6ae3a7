//go:build unix

package pluginhost

import (
	"errors"
	"syscall"
)

// processGone reports whether pid no longer exists at all, not even as a
// zombie waiting to be reaped.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// killHard kills pid with SIGKILL, as a crash would end it.
func killHard(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
