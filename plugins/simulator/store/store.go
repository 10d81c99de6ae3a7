// Package store keeps JSON objects as one file each under a root directory,
// so that a person can read, edit or delete any object with ordinary tools
// and several processes can share the directory at once.
//
// Layout: an object lives at <root>/<collection>/<name>.json, where a
// collection is a relative directory path ("instances/compute",
// "loadbalancers"). Files whose name starts with a dot or does not end in
// ".json" are not objects: temporary files (".<name>.tmp-<random>"), the
// lock directory (<root>/.locks) and a collection's listing index
// (<collection>/.index, see index.go) use this to stay invisible.
//
// Concurrency rules:
//   - Every write is atomic, so a reader sees the old or the new object,
//     never a half-written one, and so does anyone after a crash (even
//     SIGKILL) of the writing process: Write is atomicfile's write-and-rename;
//     Create links an unnamed file into place (or, where unsupported, uses
//     atomicfile's create-only link), so it never replaces an object another
//     process created.
//   - No write is synced (atomicfile.Options.NoSync): objects are a
//     simulated cloud, which must survive a provider's crash (renames and
//     links are atomic, and the page cache outlives the process) but need
//     not survive a power loss. Two disk flushes per object would otherwise
//     be most of the cost of provisioning 10,000 instances.
//   - Object files are 0600: an instance's record holds its properties.
//   - Read-modify-write of one object (Update) holds an exclusive flock on a
//     lock file chosen by hashing the object's key onto a fixed set of lock
//     files (lock striping), so lock files never need deleting and their
//     number stays bounded. Within one process a per-stripe semaphore
//     serializes goroutines before the flock is taken.
//   - Objects written by hand may be corrupt; List skips them with a warning.
//
// Listing reads files concurrently; ListCached with a Cache re-reads only
// files whose version (inode, size, mtime, ctime) changed since the last
// listing, and while the Cache follows the directory with inotify it looks
// only at the files the kernel says changed, which is what a long-lived
// provider listing 10k objects on every pass needs.
package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/atomicfile"
	"github.com/infrakit/infrakit/sdk/filelock"
)

// ErrNotFound is returned (wrapped) when an object does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned (wrapped) by Create when the object already exists.
var ErrExists = errors.New("already exists")

// ErrCorrupt is returned (wrapped) when an object's file is not valid JSON of
// the expected shape.
var ErrCorrupt = errors.New("corrupt object file")

const (
	ext        = ".json"
	lockDir    = ".locks"
	lockStripe = 64
)

// Key names one object.
type Key struct {
	Collection string // relative directory, e.g. "instances/compute"
	Name       string // file name without ".json"
}

func (k Key) String() string { return k.Collection + "/" + k.Name }

// ValidName reports whether name can name an object: it becomes a file name,
// so it must not be empty, start with a dot, or contain a path separator or NUL.
func ValidName(name string) error {
	switch {
	case name == "":
		return errors.New("name is empty")
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("name %q starts with a dot", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("name %q contains a path separator or NUL", name)
	case len(name) > 200:
		return fmt.Errorf("name %q is longer than 200 bytes", name)
	}
	return nil
}

// Store is a directory of JSON objects. It is safe for concurrent use by
// goroutines and by other processes opening the same root. Close releases the
// lock files it keeps open.
type Store struct {
	root string
	log  hclog.Logger

	// dirs remembers collection directories known to exist, so a write does
	// not stat its directory every time.
	dirs sync.Map

	// stripes serialize this process's goroutines per lock file; each holds
	// the lock file's descriptor once opened.
	stripes [lockStripe]stripe

	// noUnnamed is set once creating an unnamed file (createUnnamed) turned
	// out unsupported here: Create then writes named temporary files.
	noUnnamed atomic.Bool
}

type stripe struct {
	sem  chan struct{} // capacity 1: holding the token owns the stripe
	file *os.File      // opened lazily while holding the token
}

// Open returns a Store rooted at root. Nothing is created until the first
// write, so merely starting a provider leaves no trace in the directory.
func Open(root string, logger hclog.Logger) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("store %q: %w", root, err)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Store{root: abs, log: logger}
	for i := range s.stripes {
		s.stripes[i].sem = make(chan struct{}, 1)
	}
	return s, nil
}

// Root is the absolute root directory.
func (s *Store) Root() string { return s.root }

// Close closes the lock files. Locks held by other goroutines must have been
// released.
func (s *Store) Close() error {
	var errs []error
	for i := range s.stripes {
		st := &s.stripes[i]
		st.sem <- struct{}{}
		if st.file != nil {
			errs = append(errs, st.file.Close())
			st.file = nil
		}
		<-st.sem
	}
	return errors.Join(errs...)
}

func (s *Store) dir(collection string) string {
	return filepath.Join(s.root, filepath.FromSlash(collection))
}

// Path is the file an object lives in.
func (s *Store) Path(key Key) string {
	return filepath.Join(s.dir(key.Collection), key.Name+ext)
}

func (s *Store) ensureDir(collection string) (string, error) {
	d := s.dir(collection)
	if _, ok := s.dirs.Load(d); ok {
		return d, nil
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("store: create %s: %w", d, err)
	}
	s.dirs.Store(d, struct{}{})
	return d, nil
}

// Read returns an object's bytes; a missing object is ErrNotFound.
func (s *Store) Read(key Key) ([]byte, error) {
	if err := ValidName(key.Name); err != nil {
		return nil, fmt.Errorf("store: read %s: %w", key, err)
	}
	b, err := readFile(s.Path(key))
	if err != nil {
		return nil, s.readError(key, err)
	}
	return b, nil
}

// readError is what reading key's file failed with, as Read reports it:
// ErrNotFound for a missing file, ErrCorrupt for one that is no regular
// file.
func (s *Store) readError(key Key, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %w", key, ErrNotFound)
	case errors.Is(err, errNotRegular):
		return fmt.Errorf("%s (%s): %w: %v", key, s.Path(key), ErrCorrupt, err)
	default:
		return fmt.Errorf("store: read %s: %w", key, err)
	}
}

// objectPerm is the mode of object files: an instance's record holds its
// properties, which may carry secrets.
const objectPerm = 0o600

// inDir runs write once the collection's directory exists, and once more
// after recreating the directory when write found it gone (rm -rf of the
// simulator dir while running).
func (s *Store) inDir(key Key, write func() error) error {
	d, err := s.ensureDir(key.Collection)
	if err != nil {
		return err
	}
	err = write()
	if errors.Is(err, fs.ErrNotExist) {
		s.dirs.Delete(d)
		if _, err := s.ensureDir(key.Collection); err != nil {
			return err
		}
		err = write()
	}
	return err
}

// Write stores data as the object, replacing it atomically.
func (s *Store) Write(key Key, data []byte) error {
	if err := ValidName(key.Name); err != nil {
		return fmt.Errorf("store: write %s: %w", key, err)
	}
	if err := s.inDir(key, func() error {
		return atomicfile.WriteFileOpts(s.Path(key), data, objectPerm, atomicfile.Options{NoSync: true})
	}); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// Remove deletes an object and reports whether it existed.
func (s *Store) Remove(key Key) (bool, error) {
	if err := ValidName(key.Name); err != nil {
		return false, fmt.Errorf("store: remove %s: %w", key, err)
	}
	err := os.Remove(s.Path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: remove %s: %w", key, err)
	}
	return true, nil
}

// Names lists the object names of a collection, sorted. A missing collection
// is empty.
func (s *Store) Names(collection string) ([]string, error) {
	dir, names, err := s.openCollection(collection)
	if dir != nil {
		dir.Close()
	}
	return names, err
}

// openCollection opens a collection's directory and lists its object names,
// sorted; the caller closes the directory. A missing collection is a nil
// directory and no names.
func (s *Store) openCollection(collection string) (*os.File, []string, error) {
	f, err := os.Open(s.dir(collection))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: list %s: %w", collection, err)
	}
	all, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("store: list %s: %w", collection, err)
	}
	names := all[:0]
	for _, n := range all {
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ext) {
			continue
		}
		names = append(names, strings.TrimSuffix(n, ext))
	}
	slices.Sort(names)
	return f, names, nil
}

// Lock takes the exclusive lock guarding key against other goroutines and
// processes, waiting until ctx ends. The returned func releases it. Keys need
// not name an existing object (a collection-wide key like ".capacity" is fine).
func (s *Store) Lock(ctx context.Context, key Key) (func(), error) {
	h := fnv.New32a()
	h.Write([]byte(key.Collection))
	h.Write([]byte{0})
	h.Write([]byte(key.Name))
	st := &s.stripes[h.Sum32()%lockStripe]

	select {
	case st.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("store: lock %s: %w", key, context.Cause(ctx))
	}
	release := func() { <-st.sem }
	if st.file == nil {
		f, err := s.openLockFile(h.Sum32() % lockStripe)
		if err != nil {
			release()
			return nil, fmt.Errorf("store: lock %s: %w", key, err)
		}
		st.file = f
	}
	if err := filelock.Acquire(ctx, st.file); err != nil {
		release()
		return nil, fmt.Errorf("store: lock %s: %w", key, err)
	}
	return func() {
		// Unlocking a descriptor we hold cannot meaningfully fail; closing
		// it at Close releases the lock in any case.
		_ = filelock.Release(st.file)
		release()
	}, nil
}

func (s *Store) openLockFile(n uint32) (*os.File, error) {
	d, err := s.ensureDir(lockDir)
	if err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(d, fmt.Sprintf("%02d.lock", n)), os.O_RDWR|os.O_CREATE, 0o644)
}

// Get reads and decodes one object.
func Get[T any](s *Store, key Key) (T, error) {
	b, err := s.Read(key)
	if err != nil {
		var zero T
		return zero, err
	}
	return decodeObject[T](s, key, b)
}

func decodeObject[T any](s *Store, key Key, b []byte) (T, error) {
	var v T
	if err := decode(b, &v); err != nil {
		return v, fmt.Errorf("%s (%s): %w: %v", key, s.Path(key), ErrCorrupt, err)
	}
	return v, nil
}

// Put encodes v and writes it as the object, replacing it atomically.
func Put[T any](s *Store, key Key, v T) error {
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", key, err)
	}
	return s.Write(key, b)
}

// Create encodes v and creates the object; ErrExists if it is already there.
func Create[T any](s *Store, key Key, v T) error {
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", key, err)
	}
	return s.Create(key, b)
}

// Update changes one object under its lock: fn gets the current value (the
// zero T and found=false when missing) and edits it in place; Update then
// writes it back. If fn returns an error nothing is written. A corrupt file is
// an error rather than silently overwritten, because it was a person's edit.
func Update[T any](ctx context.Context, s *Store, key Key, fn func(v *T, found bool) error) error {
	return UpdateMemo(ctx, s, key, nil, fn)
}

// RemoveLocked deletes an object under its lock, so a concurrent Update can
// never write it back to life. It reports whether the object existed.
func RemoveLocked(ctx context.Context, s *Store, key Key) (bool, error) {
	if err := ValidName(key.Name); err != nil {
		return false, fmt.Errorf("store: remove %s: %w", key, err)
	}
	unlock, err := s.Lock(ctx, key)
	if err != nil {
		return false, err
	}
	defer unlock()
	return s.Remove(key)
}

// encode renders objects indented: people read and edit these files.
func encode(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func decode(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("file is empty")
	}
	return json.Unmarshal(b, v)
}
