package exports

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
