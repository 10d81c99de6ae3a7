package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Object files are small and there are many of them: DescribeInstances of
// 10k instances reads 10k files. os.ReadFile/os.OpenFile spend extra syscalls
// per file (fstat, fcntl, poller registration) that cost more than the read
// itself, so the store uses plain syscalls: open, fstat, read, close.

// errNotRegular is returned for an object path that is not a regular file (a
// directory or FIFO someone named x.json); callers treat it as corrupt.
var errNotRegular = errors.New("not a regular file")

// readFile reads a whole small file. Errors are *PathError-free unix errnos,
// so errors.Is(err, fs.ErrNotExist) still works (Errno implements Is).
func readFile(path string) ([]byte, error) {
	b, _, err := readFileVersionAt(unix.AT_FDCWD, path)
	return b, err
}

// readFileVersionAt reads name relative to an open directory (sparing the
// kernel a walk of the full path per file when listing a collection) and
// returns the version of the file it read, taken with
// fstat on the open descriptor so it names exactly these bytes (an atomic
// replace after open does not change what this descriptor reads).
func readFileVersionAt(dirfd int, name string) ([]byte, version, error) {
	// O_NONBLOCK: opening a FIFO must not hang the listing; it changes
	// nothing for regular files.
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	})
	if err != nil {
		return nil, version{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, version{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, version{}, errNotRegular
	}
	// Asking for one byte more than the size means the common case is a
	// single read: a regular file returns less than asked only at EOF. If
	// the file grew since fstat, the loop reads on until EOF.
	buf := make([]byte, 0, st.Size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		want := cap(buf) - len(buf)
		n, err := retryEINTR(func() (int, error) { return unix.Read(fd, buf[len(buf):cap(buf)]) })
		if err != nil {
			return nil, version{}, err
		}
		buf = buf[:len(buf)+n]
		if n == 0 || n < want {
			return buf, versionOf(&st), nil
		}
	}
}

// createUnnamed creates final in dir, failing with EEXIST if it exists,
// as an unnamed file (O_TMPFILE) written first and then linked into place:
// one directory operation where a named temporary file and a rename take
// three (an entry added, then removed and added again under the directory's
// lock, which parallel creates in one collection contend for). The link goes
// through /proc/self/fd, which needs no privilege (linkat with AT_EMPTY_PATH
// does). supported is false when the file system, the kernel or a missing
// /proc cannot do it; the caller then writes a named temporary file. v is
// the version of the file created, taken on its descriptor once linked (the
// link changes its ctime).
func createUnnamed(dir, final string, data []byte, perm uint32) (supported bool, v version, err error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, perm)
	})
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		return false, v, nil
	}
	if err != nil {
		return true, v, err
	}
	defer unix.Close(fd)
	for len(data) > 0 {
		n, err := retryEINTR(func() (int, error) { return unix.Write(fd, data) })
		if err != nil {
			return true, v, err
		}
		data = data[n:]
	}
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.ENOENT) {
		if _, serr := os.Stat("/proc/self/fd"); serr != nil {
			return false, v, nil // no /proc
		}
	}
	if err != nil {
		return true, v, err
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		v = versionOf(&st)
	}
	return true, v, nil
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// readCached returns the object, reusing primed's entry, or else prev's,
// when the file is the same version, and whether it read the file.
// ok=false means it was removed since the directory was read.
func readCached[T any](s *Store, dirfd int, key Key, prev, primed map[string]cached[T]) (r cached[T], ok, read bool, err error) {
	name := key.Name + ext
	p, hit := primed[key.Name]
	if !hit {
		p, hit = prev[key.Name]
	}
	if hit {
		var st unix.Stat_t
		err := unix.Fstatat(dirfd, name, &st, 0) // follows symlinks, as open does
		if errors.Is(err, fs.ErrNotExist) {
			return r, false, false, nil
		}
		if err != nil {
			return r, false, false, fmt.Errorf("store: stat %s: %w", key, err)
		}
		if versionOf(&st) == p.version && !(p.kept && settled(p.version)) {
			return p, true, false, nil
		}
	}
	b, v, err := readFileVersionAt(dirfd, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, false, false, nil
	case errors.Is(err, errNotRegular):
		err = fmt.Errorf("%s (%s): %w: %v", key, s.Path(key), ErrCorrupt, err)
	case err != nil:
		return r, false, false, fmt.Errorf("store: read %s: %w", key, err)
	default:
		r.version = v
		r.value, err = decodeObject[T](s, key, b)
	}
	if err != nil {
		// Being rewritten in place, perhaps (rewriteWindow).
		if p, hit := prev[key.Name]; hit && !p.corrupt && r.version != (version{}) && !settled(r.version) {
			s.log.Debug("object file does not parse (being rewritten?); keeping its last value", "path", s.Path(key), "error", err)
			return cached[T]{version: r.version, value: p.value, kept: true}, true, true, nil
		}
		r.corrupt = true
		s.log.Warn("skipping corrupt object file", "path", s.Path(key), "error", err)
	}
	return r, true, true, nil
}
