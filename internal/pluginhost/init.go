package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// InitOptions control Init.
type InitOptions struct {
	LaunchOptions
	// SearchDirs is where to look for binaries, in order (see SearchDirs).
	SearchDirs []SearchDir
	// Upgrade accepts a found binary whose version or checksum differs from
	// the lock file, and looks for binaries even when a locked one is installed.
	Upgrade bool
}

// Action says what Init did for one provider.
type Action string

// Init actions.
const (
	// ActionInstalled: found in a search directory and copied in.
	ActionInstalled Action = "installed"
	// ActionReused: already installed with a locked checksum; nothing searched.
	ActionReused Action = "reused"
)

// InitResult is what Init did for one provider.
type InitResult struct {
	InstalledProvider
	Action Action
}

// InitReport is the outcome of Init.
type InitReport struct {
	// Providers are sorted by name.
	Providers []InitResult
	// LockCreated: there was no lock file before. LockChanged: its content changed.
	LockCreated, LockChanged bool
}

// Init makes the providers named installed and locked in workdir, as
// `infrakit init` does: a provider already installed with a checksum the lock
// file accepts is reused; any other is looked for in opts.SearchDirs, asked
// for its version and copied in. A binary that contradicts the lock file
// (other version or checksum) is refused unless opts.Upgrade. The lock file
// is rewritten to name exactly these providers, and only when every provider
// succeeded; errors for several providers are joined.
func Init(ctx context.Context, workdir string, names []string, opts InitOptions) (InitReport, error) {
	var report InitReport
	lockPath := filepath.Join(workdir, LockFileName)
	before, err := os.ReadFile(lockPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return report, fmt.Errorf("read lock file: %w", err)
	}
	report.LockCreated = err != nil
	old, err := LoadLock(workdir)
	if err != nil {
		return report, err
	}
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)

	lock := NewLock()
	var errs []error
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return report, err
		}
		res, entry, err := initOne(ctx, workdir, name, old, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lock.Set(entry)
		report.Providers = append(report.Providers, res)
	}
	if len(errs) > 0 {
		return report, errors.Join(errs...)
	}
	after := lock.Bytes()
	if bytes.Equal(before, after) {
		return report, nil
	}
	report.LockChanged = true
	if err := lock.Save(workdir); err != nil {
		return report, err
	}
	return report, nil
}

// initOne reuses or installs one provider and returns its lock entry.
func initOne(ctx context.Context, workdir, name string, old *Lock, opts InitOptions) (InitResult, LockedProvider, error) {
	locked, isLocked := old.Provider(name)
	if isLocked && !opts.Upgrade {
		path := InstallPath(workdir, name, locked.Version)
		if sum, err := HashFile(path); err == nil && locked.Accepts(sum) {
			p := InstalledProvider{Name: name, Version: locked.Version, Path: path, SHA256: sum, Status: StatusOK}
			return InitResult{InstalledProvider: p, Action: ActionReused}, locked, nil
		}
	}
	found, err := Discover(ctx, name, opts.SearchDirs, opts.LaunchOptions)
	if err != nil {
		return InitResult{}, LockedProvider{}, err
	}
	entry, err := lockEntry(found, locked, isLocked, opts.Upgrade)
	if err != nil {
		return InitResult{}, LockedProvider{}, err
	}
	p, err := Install(ctx, workdir, found.Path, InstallOptions{LaunchOptions: opts.LaunchOptions, Name: name, Version: found.Version})
	if err != nil {
		return InitResult{}, LockedProvider{}, err
	}
	// The checks above were made on the source; what counts is what was copied.
	if p.SHA256 != found.SHA256 {
		return InitResult{}, LockedProvider{}, fmt.Errorf("provider %q: %s changed while it was being installed (%s, then %s)",
			name, found.Path, found.SHA256, p.SHA256)
	}
	p.Status = StatusOK
	return InitResult{InstalledProvider: p, Action: ActionInstalled}, entry, nil
}

// lockEntry decides the lock entry for a binary init found, given what the
// lock file says (locked, if isLocked). Without upgrade a locked provider
// keeps its entry and the binary must match it; otherwise the found binary
// becomes the entry.
func lockEntry(found Found, locked LockedProvider, isLocked, upgrade bool) (LockedProvider, error) {
	entry := LockedProvider{Name: found.Name, Version: found.Version, Hashes: []Hash{found.SHA256}}
	if !isLocked || upgrade {
		return entry, nil
	}
	if found.Version != locked.Version {
		return LockedProvider{}, fmt.Errorf(
			"provider %q: %s is version %s but the lock file pins %s; run `infrakit init -upgrade` to accept it",
			found.Name, found.Path, found.Version, locked.Version)
	}
	if !locked.Accepts(found.SHA256) {
		return LockedProvider{}, fmt.Errorf(
			"provider %q: %s has checksum %s, which the lock file does not list for version %s (it lists %v); "+
				"run `infrakit init -upgrade` to accept it",
			found.Name, found.Path, found.SHA256, found.Version, locked.Hashes)
	}
	return locked, nil
}
