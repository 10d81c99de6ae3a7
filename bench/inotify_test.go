package bench

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirEvents follows files appearing or being rewritten in a few
// directories through inotify, so a heal is timed when the file that
// completes it lands, without listing 10,000 files every few milliseconds
// (which would cost the watch it measures a share of the machine).
type dirEvents struct {
	fd  int
	wds map[int32]string // watch descriptor → directory
	buf []byte
}

// fileEvent is a file of a followed directory created, closed after
// writing, or renamed into it.
type fileEvent struct {
	dir, name string
	at        time.Time
}

// followDirs starts following dirs; the test's cleanup stops it.
func followDirs(t *testing.T, dirs ...string) *dirEvents {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	d := &dirEvents{fd: fd, wds: map[int32]string{}, buf: make([]byte, 64<<10)}
	t.Cleanup(func() { unix.Close(fd) })
	for _, dir := range dirs {
		wd, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO)
		if err != nil {
			t.Fatalf("inotify %s: %v", dir, err)
		}
		d.wds[int32(wd)] = dir
	}
	return d
}

// next waits up to timeout for events and returns them (none on timeout).
// Hidden names (the stores' temporary files) are left out.
func (d *dirEvents) next(timeout time.Duration) ([]fileEvent, error) {
	fds := []unix.PollFd{{Fd: int32(d.fd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, int(timeout.Milliseconds())); err != nil && !errors.Is(err, unix.EINTR) {
		return nil, fmt.Errorf("poll inotify: %w", err)
	}
	n, err := unix.Read(d.fd, d.buf)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read inotify: %w", err)
	}
	at := time.Now()
	var out []fileEvent
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&d.buf[off]))
		nameBytes := d.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			return nil, errors.New("inotify queue overflowed: events were lost")
		}
		name := strings.TrimRight(string(nameBytes), "\x00")
		if name == "" || strings.HasPrefix(name, ".") {
			continue
		}
		out = append(out, fileEvent{dir: d.wds[ev.Wd], name: name, at: at})
	}
	return out, nil
}

func (e fileEvent) path() string { return filepath.Join(e.dir, e.name) }
