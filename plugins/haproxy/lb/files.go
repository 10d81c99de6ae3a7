package lb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/infrakit/infrakit/sdk/atomicfile"
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
	b = append(b, '\n')
	// Most calls change nothing (every Routes and Backends converges and
	// saves): the write and its fsyncs are skipped when the file already
	// holds this record. The caller holds the lock, so nothing changes it
	// between the read and here.
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	return atomicfile.WriteFile(path, b, 0o644)
}
