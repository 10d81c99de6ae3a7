package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/infrakit/infrakit/sdk/atomicfile"
	"github.com/infrakit/infrakit/sdk/instance"
)

// sidecar keeps the tags Label adds to containers, because Docker cannot
// change a container's labels: one JSON file per container, <dir>/<id>.json
// holding {"id": ..., "tags": {...}}, merged over the labels by Describe.
// Files are replaced atomically (write, fsync, rename); read-modify-write is
// serialised within this process, and across processes the last write wins.
type sidecar struct {
	dir string
	mu  sync.Mutex
}

type sidecarRecord struct {
	ID   instance.ID       `json:"id"`
	Tags map[string]string `json:"tags"`
}

// validRecordID is what a record may be named after: a short container ID.
var validRecordID = regexp.MustCompile(`^[0-9a-f]{12}$`)

func (s *sidecar) path(id instance.ID) (string, error) {
	if !validRecordID.MatchString(string(id)) {
		return "", fmt.Errorf("record for %q: not a container ID", id)
	}
	return filepath.Join(s.dir, string(id)+".json"), nil
}

// all returns the added tags of every recorded container. A missing
// directory holds none; unreadable records are skipped (a half-written one
// cannot exist: records are renamed into place).
func (s *sidecar) all() (map[instance.ID]map[string]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read label records: %w", err)
	}
	out := map[instance.ID]map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		id := instance.ID(strings.TrimSuffix(name, ".json"))
		if !validRecordID.MatchString(string(id)) {
			continue
		}
		r, err := s.read(filepath.Join(s.dir, name))
		if err != nil || len(r.Tags) == 0 {
			continue
		}
		out[id] = r.Tags
	}
	return out, nil
}

// get returns id's added tags; nil when it has no record.
func (s *sidecar) get(id instance.ID) (map[string]string, error) {
	path, err := s.path(id)
	if err != nil {
		return nil, err
	}
	r, err := s.read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return r.Tags, err
}

func (s *sidecar) read(path string) (sidecarRecord, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return sidecarRecord{}, err
	}
	var r sidecarRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return sidecarRecord{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// merge adds tags to id's record.
func (s *sidecar) merge(id instance.ID, tags map[string]string) error {
	path, err := s.path(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.read(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("label %s: %w", id, err)
	}
	r.ID = id
	if r.Tags == nil {
		r.Tags = map[string]string{}
	}
	maps.Copy(r.Tags, tags)
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("label %s: %w", id, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("label %s: %w", id, err)
	}
	// 0600: a record may carry the instance's tags and properties.
	if err := atomicfile.WriteFile(path, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("label %s: %w", id, err)
	}
	return nil
}

// remove forgets id's record; a missing one is not an error.
func (s *sidecar) remove(id instance.ID) error {
	path, err := s.path(id)
	if err != nil {
		return nil // no record can exist under such a name
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove label record of %s: %w", id, err)
	}
	return nil
}
