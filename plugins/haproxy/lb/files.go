package lb

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// loadRecord reads state.json; a missing file is an empty record.
func loadRecord(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newRecord(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	rec := newRecord()
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if rec.Version != recordVersion {
		return nil, fmt.Errorf("read %s: format version %d, this provider reads %d", path, rec.Version, recordVersion)
	}
	if rec.LoadBalancers == nil {
		rec.LoadBalancers = map[string]*LB{}
	}
	return rec, nil
}

func saveRecord(path string, rec *Record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeAtomic(path, append(b, '\n'), 0o644)
}

// writeAtomic replaces path with data so that a reader (HAProxy reloading,
// another provider process) sees the old or the new file, never a part:
// a temporary file in the same directory, fsync, rename, fsync of the
// directory so the rename survives a crash.
func writeAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
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
