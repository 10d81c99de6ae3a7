package exports

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// read parses the exports file; a missing file has no entries.
func read(file string) ([]Entry, []string, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", file, err)
	}
	entries, stray, err := Parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", file, err)
	}
	return entries, stray, nil
}

// writeAtomic replaces file with data so that a reader (exportfs, Describe
// of another process) sees the old or the new file, never a part: a
// temporary file in the same directory (named so exportfs, which reads
// *.exports, ignores it), fsync, rename, fsync of the directory so the
// rename survives a crash.
func writeAtomic(file string, data []byte) error {
	dir := filepath.Dir(file)
	f, err := os.CreateTemp(dir, "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: sync directory: %w", file, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", file, err)
	}
	return nil
}
