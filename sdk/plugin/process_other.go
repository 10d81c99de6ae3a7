//go:build !unix

package plugin

import (
	"os"
	"syscall"
)

// processAlive cannot be answered cheaply here; the parent-pid check alone
// decides.
func processAlive(int) bool { return true }

// ownProcessGroup: no process groups here.
func ownProcessGroup() *syscall.SysProcAttr { return nil }

// killGroup kills the process alone.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
