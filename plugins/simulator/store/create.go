package store

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// Create stores data as a new object, atomically, failing with ErrExists if
// the object is already there (in this or any other process).
func (s *Store) Create(key Key, data []byte) error {
	_, err := s.create(key, data)
	return err
}

// create is Create that also returns the version of the file it created
// (zero when it could not tell).
func (s *Store) create(key Key, data []byte) (version, error) {
	if err := ValidName(key.Name); err != nil {
		return version{}, fmt.Errorf("store: create %s: %w", key, err)
	}
	if !s.noUnnamed.Load() {
		supported, v, err := s.createUnnamed(key, data)
		if supported {
			return v, err
		}
		s.noUnnamed.Store(true)
	}
	// Where unnamed files are unsupported, atomicfile's create-only write
	// gives the same guarantee with a named temporary file.
	err := s.inDir(key, func() error {
		return atomicfile.CreateOpts(s.Path(key), data, objectPerm, atomicfile.Options{NoSync: true})
	})
	if errors.Is(err, fs.ErrExist) {
		return version{}, fmt.Errorf("%s: %w", key, ErrExists)
	}
	if err != nil {
		return version{}, fmt.Errorf("store: create %s: %w", key, err)
	}
	// The file is no longer only ours once linked: a stat is the best
	// version there is (see CreateCached).
	var st unix.Stat_t
	if unix.Stat(s.Path(key), &st) != nil {
		return version{}, nil
	}
	return versionOf(&st), nil
}

// createUnnamed is Create through createUnnamed (see there); supported is
// false when this file system cannot create unnamed files.
func (s *Store) createUnnamed(key Key, data []byte) (supported bool, v version, err error) {
	d, err := s.ensureDir(key.Collection)
	if err != nil {
		return true, v, err
	}
	final := s.Path(key)
	supported, v, err = createUnnamed(d, final, data, objectPerm)
	if errors.Is(err, fs.ErrNotExist) {
		// Someone removed the directory since we cached it (rm -rf of the
		// simulator dir while running): recreate it once.
		s.dirs.Delete(d)
		if d, err = s.ensureDir(key.Collection); err != nil {
			return true, v, err
		}
		supported, v, err = createUnnamed(d, final, data, objectPerm)
	}
	switch {
	case !supported || err == nil:
		return supported, v, nil
	case errors.Is(err, fs.ErrExist):
		return true, v, fmt.Errorf("%s: %w", key, ErrExists)
	default:
		return true, v, fmt.Errorf("store: create %s: %w", key, err)
	}
}
