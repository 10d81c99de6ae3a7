package filesd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/infrakit/infrakit/sdk/atomicfile"
	"github.com/infrakit/infrakit/sdk/filelock"
)

// state is what one change reads and rewrites: the registry and the
// entries of every registered file (and of the files the change names).
type state struct {
	reg     registry
	files   map[string][]Entry
	stray   map[string]int
	changed map[string]bool
}

// set replaces a file's entries.
func (st *state) set(file string, entries []Entry) {
	st.files[file] = entries
	st.changed[file] = true
}

// newID is an authorization ID no file of the state holds.
func (st *state) newID() (string, error) {
	for range 10 {
		b := make([]byte, 4)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("authorization ID: %w", err)
		}
		id := "sd-" + hex.EncodeToString(b)
		if !st.holds(id) {
			return id, nil
		}
	}
	return "", errors.New("no unused authorization ID after 10 tries")
}

func (st *state) holds(id string) bool {
	for _, entries := range st.files {
		if slices.ContainsFunc(entries, func(e Entry) bool { return e.ID == id }) {
			return true
		}
	}
	return false
}

// change runs fn on the state under the directory's lock and writes what
// it changed: the registry with the files that gained targets first, then
// the files, then the registry without the files left empty. A file that
// is not registered yet but exists (the registry was lost) keeps the
// authorizations it records, and is registered again.
func (a *Authorizer) change(ctx context.Context, also []string, fn func(*state) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := os.MkdirAll(a.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", EnvDir, err)
	}
	unlock, err := filelock.Lock(ctx, filepath.Join(a.cfg.Dir, "files.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	reg, err := readRegistry(a.registryFile())
	if err != nil {
		return err
	}
	st := &state{reg: reg, files: map[string][]Entry{}, stray: map[string]int{}, changed: map[string]bool{}}
	for _, f := range append(slices.Clone(reg.Files), also...) {
		if _, done := st.files[f]; done {
			continue
		}
		if st.files[f], st.stray[f], err = readFile(f); err != nil {
			return err
		}
	}
	if err := fn(st); err != nil {
		return err
	}
	return a.commit(st)
}

// commit writes the changed files of st, and the registry around them.
func (a *Authorizer) commit(st *state) error {
	joined := st.reg
	for _, f := range slices.Sorted(maps.Keys(st.changed)) {
		if len(st.files[f]) > 0 {
			joined, _ = joined.with(f)
		}
	}
	if !slices.Equal(joined.Files, st.reg.Files) {
		if err := joined.write(a.registryFile()); err != nil {
			return err
		}
	}
	final := joined
	for _, f := range slices.Sorted(maps.Keys(st.changed)) {
		if err := a.writeFile(f, st.files[f], st.stray[f]); err != nil {
			return err
		}
		if len(st.files[f]) == 0 {
			final = final.without(f)
		}
	}
	if !slices.Equal(final.Files, joined.Files) {
		return final.write(a.registryFile())
	}
	return nil
}

// writeFile replaces a target file with entries (none: an empty list, so
// a Prometheus that names the file sees no targets rather than a missing
// file).
func (a *Authorizer) writeFile(file string, entries []Entry, stray int) error {
	data, err := Render(entries)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if stray > 0 {
		a.cfg.Logger.Warn("dropping target groups that no authorization records", "file", file, "groups", stray)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(file, data, 0o644)
}
