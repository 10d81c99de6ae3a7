package filesd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// registry is the list of target files the provider keeps (files.json in
// its directory): Describe has no properties to find them by, so the
// provider remembers them. A file joins before its first target is
// written, and leaves after its last is removed, so a crash between the
// two never leaves a target that no registry names.
type registry struct {
	Version int      `json:"version"`
	Files   []string `json:"files"` // absolute, sorted
}

const registryVersion = 1

func readRegistry(file string) (registry, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return registry{Version: registryVersion}, nil
	}
	if err != nil {
		return registry{}, err
	}
	var r registry
	if err := json.Unmarshal(b, &r); err != nil {
		return registry{}, fmt.Errorf("read %s: %w", file, err)
	}
	if r.Version != registryVersion {
		return registry{}, fmt.Errorf("read %s: version %d, this provider reads version %d", file, r.Version, registryVersion)
	}
	return r, nil
}

func (r registry) write(file string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(file, append(b, '\n'), 0o644)
}

// with is r listing file too; added says whether it was missing.
func (r registry) with(file string) (out registry, added bool) {
	i, found := slices.BinarySearch(r.Files, file)
	if found {
		return r, false
	}
	r.Files = slices.Insert(slices.Clone(r.Files), i, file)
	return r, true
}

// without is r not listing file.
func (r registry) without(file string) registry {
	r.Files = slices.DeleteFunc(slices.Clone(r.Files), func(f string) bool { return f == file })
	return r
}
