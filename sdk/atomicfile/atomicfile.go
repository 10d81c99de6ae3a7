// Package atomicfile replaces a file's content in one step, for providers
// whose files are read by other processes while they are rewritten: HAProxy
// reloading its configuration, exportfs reading an exports file, a second
// provider process (the CLI's beside a running watch's) reading a record.
//
// A plain os.WriteFile truncates the file first, so such a reader can see an
// empty or half-written file, and a crash part-way leaves one behind.
// WriteFile writes a temporary file in the same directory, syncs it and
// renames it over the target, then syncs the directory: a reader sees the
// old content or the new, never a part, and after a crash the file holds the
// old content or the new.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, atomically as the package describes.
// The file gets exactly perm (the umask does not apply), as a fresh file
// does whether or not path existed before. The temporary file is named
// ".<name>.<random>.tmp", so readers that pick files by name (exportfs takes
// *.exports, a provider lists *.json) pass over it, and it is removed when
// WriteFile fails. Errors name path.
func WriteFile(path string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if err != nil && !renamed {
			f.Close() // a second Close only returns an error
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// CreateTemp makes the file 0600; set the mode the caller means.
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	// The rename is durable only once the directory entry is on disk.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}
