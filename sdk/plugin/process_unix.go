//go:build unix

package plugin

import (
	"errors"
	"syscall"
)

// processAlive reports whether pid exists (a zombie counts: its parent has
// not reaped it yet, and our own parent-pid check covers that case).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
