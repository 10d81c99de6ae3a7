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

// ownProcessGroup makes a provider the leader of a process group of its
// own (its pgid is its pid), so that a forced stop reaches the children it
// started too, and a terminal's signals for the host's group do not reach
// it (go-plugin ignores SIGINT anyway; the host stops its providers).
func ownProcessGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGKILL to the process group pid leads and to pid itself
// (in case it left the group). SIGKILL ends a stopped (SIGSTOP) process
// too. The caller makes sure pid has not been reaped: until it is, neither
// the pid nor the group id can be reused.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
