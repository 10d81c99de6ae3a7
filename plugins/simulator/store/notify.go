package store

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirWatch is an inotify watch of one directory, read without blocking and
// without a goroutine: whoever lists the directory collects the events
// queued since its last listing. For callers that wait for changes (see
// Cache.Changed) a waiter goroutine can be started, which sleeps in the
// netpoller until events are queued.
type dirWatch struct {
	fd      int
	wd      int32
	buf     []byte
	cleanup runtime.Cleanup

	// drains counts the reads of the queue, so the waiter can tell events
	// queued since the last one it reported from those it reported.
	drains atomic.Uint64
	// waitFile is a duplicate of fd that the waiter polls (a read of fd
	// itself would contend with drain for the descriptor's read lock);
	// waiterDone is closed when the waiter returns.
	waitFile   *os.File
	waiterDone chan struct{}
	// waiterOK is cleared when the waiter stops on its own (an error):
	// changes then go unreported and callers must poll.
	waiterOK atomic.Bool
}

// watchMask is every change to an entry of the directory (created,
// removed, renamed in or out, written, its metadata or link count changed)
// and to the directory itself (removed or renamed).
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// watchDir starts watching dir. A missing directory is fs.ErrNotExist.
func watchDir(dir string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wd, err := unix.InotifyAddWatch(fd, dir, watchMask)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	w := &dirWatch{fd: fd, wd: int32(wd), buf: make([]byte, 64<<10)}
	// A Cache dropped without Close must not leak the descriptor.
	w.cleanup = runtime.AddCleanup(w, func(fd int) { unix.Close(fd) }, fd)
	return w, nil
}

// close stops the waiter, if any, and releases the watch.
func (w *dirWatch) close() {
	if w.waitFile != nil {
		w.waitFile.Close() // wakes the waiter with an error
		<-w.waiterDone
	}
	w.cleanup.Stop()
	unix.Close(w.fd)
}

// startWaiter starts the goroutine that calls signal whenever events are
// queued that arrived after the queue was last drained (once per drain, not
// once per event), until close. It reports whether a waiter runs.
func (w *dirWatch) startWaiter(signal func()) bool {
	if w.waitFile != nil {
		return w.waiterOK.Load()
	}
	dfd, err := unix.FcntlInt(uintptr(w.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return false
	}
	// The duplicate shares fd's open file, which is non-blocking, so
	// os.NewFile registers it with the netpoller.
	f := os.NewFile(uintptr(dfd), "inotify")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return false
	}
	w.waitFile, w.waiterDone = f, make(chan struct{})
	w.waiterOK.Store(true)
	go w.wait(rc, signal) // ends at close
	return true
}

func (w *dirWatch) wait(rc syscall.RawConn, signal func()) {
	defer close(w.waiterDone)
	reported := ^uint64(0) // the drain count when events were last reported
	for {
		failed := false
		err := rc.Read(func(fd uintptr) bool {
			n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD: bytes queued
			if err != nil {
				failed = true
				return true
			}
			// Events queued after the drain that followed the last
			// report are news; the netpoller wakes this up as each is
			// queued, and the count is checked again first, so one
			// queued between two waits is not missed.
			if d := w.drains.Load(); n > 0 && d != reported {
				reported = d
				return true
			}
			return false
		})
		if err != nil {
			return // closed
		}
		if failed {
			w.waiterOK.Store(false)
			signal() // callers find they must poll
			return
		}
		signal()
	}
}

// drain reads every queued event and returns the object names they are
// about. ok is false when the events cannot be trusted to tell every
// change: the queue overflowed, the directory was removed or renamed (the
// watch is gone), or reading failed; the caller must list in full.
func (w *dirWatch) drain() (changed map[string]struct{}, ok bool) {
	w.drains.Add(1)
	for {
		n, err := unix.Read(w.fd, w.buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return changed, true
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil || n <= 0:
			return nil, false
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			nameStart := off + unix.SizeofInotifyEvent
			off = nameStart + int(ev.Len)
			if ev.Mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
				return nil, false
			}
			if ev.Wd != w.wd || ev.Len == 0 || off > n {
				continue
			}
			name := strings.TrimRight(string(w.buf[nameStart:off]), "\x00")
			if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ext) {
				continue // temporary files and lock files are not objects
			}
			if changed == nil {
				changed = map[string]struct{}{}
			}
			changed[strings.TrimSuffix(name, ext)] = struct{}{}
		}
	}
}
