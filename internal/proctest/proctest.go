//go:build unix

// Package proctest is what tests that stop, freeze and kill real provider
// processes read of them from /proc: a process's state, and freezing one
// as a provider that hangs would be.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/testwait"
)

// State is the state letter of /proc/PID/stat (R, S, T, Z...), 0 when pid
// does not exist.
func State(pid int) byte {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// Alive reports whether pid is a live process (not gone, not a zombie).
func Alive(pid int) bool {
	s := State(pid)
	return s != 0 && s != 'Z'
}

// Freeze stops pid with SIGSTOP and waits until it has stopped (the signal
// is delivered asynchronously), as a provider that hangs would be; the
// test's end kills it, should it outlive the test.
func Freeze(t testing.TB, pid int) {
	t.Helper()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, fmt.Sprintf("process %d stopped after SIGSTOP", pid), func() bool { return State(pid) == 'T' })
}
