package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// Local is the default backend: one JSON file (usually infrakit.state.json
// in the working directory), its previous version kept as path+".backup",
// and a lock file path+".lock" locked with flock.
//
// Crash safety: a write is atomicfile.WriteFile (a temporary file in the
// same directory, fsynced, renamed over path, the directory fsynced); the
// file it replaced becomes .backup only after it succeeded, so a failed
// write keeps the previous generation. At every instant path holds either
// the old or the new whole document. Leftover temporary files of a crashed
// writer are ignored by Read and removed by the next Write.
//
// Writes exclude each other through the same flock as Lock, which is what
// makes the compare-and-swap atomic across processes. A Write while this
// Local holds the lock (from any goroutine) runs under that lock; otherwise
// Write takes the lock just for the write, waiting like Lock until ctx is
// done, and fails with a *LockedError naming the holder. Consequences:
//   - a lock holder's Read → Write is safe from other processes and other
//     Locals, but not from lock-free Writes through the same Local; those
//     cannot lose a write either (the holder's Write fails with
//     ErrSerialMoved), yet the usual rule applies: writers take the lock;
//   - use one Local per path within a process: a Write through a second
//     Local while the first holds the lock waits for that lock.
//
// Never delete the .lock file while infrakit runs; it is kept on purpose.
type Local struct {
	path     string
	lockPath string

	// mu serialises writes within the process, guards held and the cache
	// below, and makes an unlock wait for a write in progress under it.
	mu sync.Mutex
	// held counts the Lock calls on this Local currently holding the lock
	// (at most one, since flock excludes them; a counter keeps it honest).
	held int
	// last is the exact bytes last read or written with its header; when
	// the file still holds them, Write skips decoding it again.
	last       []byte
	lastHeader Header
}

var _ Store = (*Local)(nil)

// NewLocal returns the local backend for the state file at path.
func NewLocal(path string) *Local {
	return &Local{path: path, lockPath: path + ".lock"}
}

// Path is the state file's path.
func (l *Local) Path() string { return l.path }

// BackupPath is where the previous state is kept.
func (l *Local) BackupPath() string { return l.path + ".backup" }

// LockPath is the lock file's path.
func (l *Local) LockPath() string { return l.lockPath }

// Read returns the document at Path, or NewDocument() when there is no file.
// It takes no lock: renames make every read see a whole document.
func (l *Local) Read(ctx context.Context) (*Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewDocument(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	doc, err := l.decode(data)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.remember(data, doc)
	l.mu.Unlock()
	return doc, nil
}

// Unchanged reports whether the state file still holds exactly what this
// Local last read or wrote, with header h: then a document decoded from
// (or encoded to) it then is still the state, and need not be decoded
// again (a watch of 10,000 members spent 80 ms on each). It reads the
// file but does not decode it.
func (l *Local) Unchanged(ctx context.Context, h Header) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	data, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read state: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last != nil && l.lastHeader == h && bytes.Equal(data, l.last), nil
}

// decode is Decode plus a pointer to the backup when the file is refused.
func (l *Local) decode(data []byte) (*Document, error) {
	doc, err := Decode(l.path, data)
	var inv *InvalidError
	if errors.As(err, &inv) {
		if _, serr := os.Stat(l.BackupPath()); serr == nil {
			inv.Hint = fmt.Sprintf("the previous state is kept in %s", l.BackupPath())
		}
	}
	return doc, err
}

func (l *Local) remember(data []byte, doc *Document) {
	l.last = data
	l.lastHeader = Header{Exists: true, Lineage: doc.Lineage, Serial: doc.Serial}
}

// Write stores doc with compare-and-swap on its lineage and serial; see Store.
func (l *Local) Write(ctx context.Context, doc *Document) error {
	if doc == nil {
		return errors.New("write state: nil document")
	}
	if doc.Lineage == "" {
		return errors.New("write state: document has no lineage (start from Read or NewDocument)")
	}
	if doc.Version > FormatVersion {
		return fmt.Errorf("write state: document is format %d; this build writes format %d", doc.Version, FormatVersion)
	}
	// Encode before taking any lock: it is the expensive part.
	next := *doc
	next.Version = FormatVersion
	next.Serial = doc.Serial + 1
	data, err := Encode(&next)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}

	l.mu.Lock()
	if l.held > 0 {
		// The lock held through this Local keeps other processes out, and
		// mu keeps it held (unlock waits for mu) until the write is done.
		err = l.swap(doc, data)
		l.mu.Unlock()
	} else {
		l.mu.Unlock()
		var f *os.File
		f, err = l.acquire(ctx, LockInfo{Operation: "write state"})
		if err != nil {
			return fmt.Errorf("write state: %w", err)
		}
		l.mu.Lock()
		err = l.swap(doc, data)
		l.mu.Unlock()
		if rerr := release(f); err == nil && rerr != nil {
			err = fmt.Errorf("write state: %w", rerr)
		}
	}
	if err != nil {
		return err
	}
	doc.Serial = next.Serial
	doc.Version = next.Version
	return nil
}

// swap is the compare-and-swap proper. The caller holds mu and the flock.
func (l *Local) swap(doc *Document, data []byte) error {
	stored, prev, err := l.stored()
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	read := Header{Exists: !doc.IsNew(), Lineage: doc.Lineage, Serial: doc.Serial}
	switch {
	case stored.Exists && doc.IsNew():
		return &ConflictError{State: l.path, Kind: ErrSerialMoved, Stored: stored, Read: read}
	case stored.Exists && stored.Lineage != doc.Lineage:
		return &ConflictError{State: l.path, Kind: ErrLineage, Stored: stored, Read: read}
	case stored.Serial != doc.Serial:
		return &ConflictError{State: l.path, Kind: ErrSerialMoved, Stored: stored, Read: read}
	}

	l.removeLeftovers()
	if err := l.replace(data, stored.Exists, prev); err != nil {
		return fmt.Errorf("write state %s: %w", l.path, err)
	}
	l.last = data
	l.lastHeader = Header{Exists: true, Lineage: doc.Lineage, Serial: doc.Serial + 1}
	return nil
}

// stored reads and validates what is on disk now, returning its header and
// mode. A file Read would refuse is an error here too, so it is never
// overwritten.
func (l *Local) stored() (Header, fs.FileMode, error) {
	data, err := os.ReadFile(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return Header{}, 0, nil
	}
	if err != nil {
		return Header{}, 0, err
	}
	fi, err := os.Stat(l.path)
	if err != nil {
		return Header{}, 0, err
	}
	if l.last != nil && bytes.Equal(data, l.last) {
		return l.lastHeader, fi.Mode().Perm(), nil
	}
	doc, err := l.decode(data)
	if err != nil {
		return Header{}, 0, err
	}
	l.remember(data, doc)
	return l.lastHeader, fi.Mode().Perm(), nil
}

// replace puts data at path through atomicfile.WriteFile and then makes
// the file it replaced the backup. exists says whether there is an old
// file, of prevMode.
//
// The old file gets a second name (a hard link, or a copy where links are
// not supported) before the write, and that name becomes the backup only
// once the write succeeded: a failed write (a full disk, an immutable file)
// leaves both the state and the previous backup as they were.
func (l *Local) replace(data []byte, exists bool, prevMode fs.FileMode) error {
	// New states are private: instance properties may carry secrets. An
	// existing file keeps the mode its owner gave it.
	mode := fs.FileMode(0o600)
	if !exists {
		return atomicfile.WriteFile(l.path, data, mode)
	}
	mode = prevMode
	kept, err := l.keepPrevious()
	if err != nil {
		return fmt.Errorf("keep backup: %w", err)
	}
	if err := atomicfile.WriteFile(l.path, data, mode); err != nil {
		os.Remove(kept)
		return err
	}
	if err := os.Rename(kept, l.BackupPath()); err != nil {
		os.Remove(kept)
		return fmt.Errorf("keep backup: %w", err)
	}
	// rename(2) does nothing when both names are links to one file (a
	// backup linked by hand): the temporary name must then go by hand.
	if err := os.Remove(kept); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keep backup: %w", err)
	}
	return atomicfile.SyncDir(filepath.Dir(l.path))
}

// keepPrevious gives the current file a temporary second name beside the
// backup and returns it.
func (l *Local) keepPrevious() (string, error) {
	dir, base := filepath.Split(l.BackupPath())
	name := filepath.Join(dir, "."+base+"."+NewLineage()[:8]+".tmp")
	if err := os.Link(l.path, name); err == nil {
		return name, nil
	} else if data, rerr := os.ReadFile(l.path); rerr != nil {
		return "", rerr
	} else if werr := atomicfile.Create(name, data, 0o600); werr != nil {
		return "", fmt.Errorf("hard link failed (%v); copy failed: %w", err, werr)
	}
	return name, nil
}

// removeLeftovers deletes temporary files of writers that crashed. Only
// called under the write exclusion, when no other writer can own one.
func (l *Local) removeLeftovers() {
	dir, base := filepath.Split(l.path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // best effort: leftovers are harmless
	}
	for _, e := range entries {
		n := e.Name()
		// The names of atomicfile and of the backup, and those that
		// earlier versions used.
		if atomicfile.IsTemp(n, base) || atomicfile.IsTemp(n, base+".backup") ||
			strings.HasPrefix(n, base+".tmp-") || strings.HasPrefix(n, base+".backup.tmp-") {
			os.Remove(filepath.Join(dir, n))
		}
	}
}
