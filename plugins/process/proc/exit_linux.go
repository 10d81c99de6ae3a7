//go:build linux

package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExitWatch becomes ready when one identified process exits. It waits on a
// pidfd through Go's poller, so a blocked Wait holds no OS thread, and Close
// ends it. It works for any process, not only children.
type ExitWatch struct {
	f      *os.File
	rc     syscall.RawConn
	closed atomic.Bool
}

// ErrNotRunning is returned by WatchExit when the identified process is not
// running (it exited, or its pid names another process).
var ErrNotRunning = errors.New("process is not running")

// WatchExit opens an ExitWatch on the identified process. It fails with
// errors.ErrUnsupported when the kernel has no pidfds (before Linux 5.3) and
// with ErrNotRunning when the process is not the running one identified.
//
// The pidfd is opened first and the identity checked after: a pidfd names
// one process and never another, so if the pid still has the recorded start
// time once the pidfd is open, the pidfd is the identified process's.
func WatchExit(id Identity) (*ExitWatch, error) {
	fd, err := unix.PidfdOpen(id.PID, unix.PIDFD_NONBLOCK)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return nil, fmt.Errorf("%s: %w", id, ErrNotRunning)
	case errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EINVAL):
		return nil, fmt.Errorf("pidfd_open: %w: %w", errors.ErrUnsupported, err)
	case err != nil:
		return nil, fmt.Errorf("pidfd_open %s: %w", id, err)
	}
	st, err := id.Check()
	if err == nil && st != Running {
		err = fmt.Errorf("%s: %s: %w", id, st, ErrNotRunning)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	// A non-blocking fd makes os.NewFile register it with the poller.
	f := os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", id.PID))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pidfd %s: %w", id, err)
	}
	return &ExitWatch{f: f, rc: rc}, nil
}

// Wait blocks until the process exits (nil) or the watch is closed (an
// error wrapping fs.ErrClosed).
func (w *ExitWatch) Wait() error {
	err := w.rc.Read(func(fd uintptr) bool {
		// A pidfd is readable once its process has exited.
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 0)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return err == nil && n > 0
		}
	})
	if err != nil && w.closed.Load() {
		// The poller says "use of closed file", which is no sentinel.
		return fmt.Errorf("exit watch: %w", fs.ErrClosed)
	}
	return err
}

// Close releases the pidfd and ends a Wait in progress.
func (w *ExitWatch) Close() error {
	w.closed.Store(true)
	return w.f.Close()
}
