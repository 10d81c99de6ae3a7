// Package atomicfile replaces a file's content in one step, for providers
// whose files are read by other processes while they are rewritten: HAProxy
// reloading its configuration, exportfs reading an exports file, a second
// provider process (the CLI's beside a running watch's) reading a record.
// It is the one write-temp-and-rename of the tree: infrakit's own state,
// plan, lock and stack files go through it too.
//
// A plain os.WriteFile truncates the file first, so such a reader can see an
// empty or half-written file, and a crash part-way leaves one behind.
// WriteFile writes a temporary file in the same directory, syncs it and
// renames it over the target, then syncs the directory: a reader sees the
// old content or the new, never a part, and after a crash the file holds the
// old content or the new.
//
// Options{NoSync: true} (WriteFileOpts, CreateOpts) keeps the atomicity and
// drops the syncs: a reader, and any process after a crash of the writer
// (even SIGKILL: the page cache outlives the process), still sees the old
// content or the new, but a power loss or kernel crash may lose the write or
// leave an empty file. It is for data that need not outlive the machine,
// such as the simulator provider's simulated cloud; infrakit's own files
// use the durable default.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// WriteFile replaces path with data, atomically as the package describes.
// The file gets exactly perm (the umask does not apply), as a fresh file
// does whether or not path existed before. The temporary file is named
// ".<name>.<random>.tmp", so readers that pick files by name (exportfs takes
// *.exports, a provider lists *.json) pass over it, and it is removed when
// WriteFile fails. Errors name path.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return write(path, perm, bytes.NewReader(data).WriteTo, os.Rename, Options{})
}

// Options changes how a write is made; the zero value is the durable
// default of WriteFile and Create.
type Options struct {
	// NoSync skips syncing the file and its directory: the write is still
	// atomic for readers and across a crash of the writing process, but not
	// across a power loss (see the package comment). It spares two disk
	// flushes per write, which dominate writing many small files.
	NoSync bool
}

// WriteFileOpts is WriteFile with opts.
func WriteFileOpts(path string, data []byte, perm fs.FileMode, opts Options) error {
	return write(path, perm, bytes.NewReader(data).WriteTo, os.Rename, opts)
}

// CreateOpts is Create with opts.
func CreateOpts(path string, data []byte, perm fs.FileMode, opts Options) error {
	return write(path, perm, bytes.NewReader(data).WriteTo, link, opts)
}

// WriteStream is WriteFile for content too large to hold in memory (a
// provider binary being installed): fill writes it to the temporary file.
func WriteStream(path string, perm fs.FileMode, fill func(io.Writer) error) error {
	return write(path, perm, func(w io.Writer) (int64, error) { return 0, fill(w) }, os.Rename, Options{})
}

// Create is WriteFile that never replaces: it fails with an error matching
// fs.ErrExist when path exists, even if another process creates it at the
// same moment (the temporary file is hard-linked into place, which is
// atomic and create-only).
func Create(path string, data []byte, perm fs.FileMode) error {
	return write(path, perm, bytes.NewReader(data).WriteTo, link, Options{})
}

// link places tmp at path without replacing; the temporary name goes.
func link(tmp, path string) error {
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return os.Remove(tmp)
}

// IsTemp reports whether name (a base name) is a temporary file of a write
// to target (a base name), such as a crashed writer leaves behind.
func IsTemp(name, target string) bool {
	return strings.HasPrefix(name, "."+target+".") && strings.HasSuffix(name, ".tmp")
}

// SyncDir makes the renames, links and removals in dir durable. Callers that
// move a file themselves (a rename of a whole file aside) use it after.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // a directory cannot be synced there; NTFS journals its entries
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// write is every write of the package: fill a temporary file beside path,
// give it perm, sync it, place it at path (rename or link), sync the
// directory; opts.NoSync leaves out both syncs.
func write(path string, perm fs.FileMode, fill func(io.Writer) (int64, error), place func(tmp, path string) error, opts Options) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	placed := false
	defer func() {
		if !placed {
			f.Close() // a second Close only returns an error
			os.Remove(tmp)
		}
	}()
	if _, err := fill(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// CreateTemp makes the file 0600; set the mode the caller means.
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !opts.NoSync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := place(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	placed = true
	if opts.NoSync {
		return nil
	}
	// The rename is durable only once the directory entry is on disk.
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
