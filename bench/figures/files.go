package figures

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// Append adds r as one JSON line to the results file at path. Each test
// appends its own lines (O_APPEND, one write per line), so a run that
// stops half-way still leaves every figure it measured.
func Append(path string, r Result) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("bench results: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("bench results %s: %w", path, err)
	}
	return f.Close()
}

// ReadResults reads the results file at path: the last result of each key
// wins. A missing file is no results (every scenario was filtered out or
// failed before measuring).
func ReadResults(path string) (map[string]Result, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Result{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bench results: %w", err)
	}
	return ParseResults(path, data)
}

// ParseResults parses the JSON lines of a results file; name is for
// messages.
func ParseResults(name string, data []byte) (map[string]Result, error) {
	out := map[string]Result{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if _, ok := Lookup(r.Key); !ok {
			return nil, fmt.Errorf("%s:%d: unknown figure %q", name, n, r.Key)
		}
		out[r.Key] = r
	}
	return out, sc.Err()
}

// Baseline is bench/baseline.json: the figures a run measured, that later
// runs are compared with.
type Baseline struct {
	// Recorded says when, on which revision and machine, in words.
	Recorded string                `json:"recorded"`
	Figures  map[string]BaseFigure `json:"figures"`
}

// BaseFigure is one figure of the baseline.
type BaseFigure struct {
	Median float64   `json:"median"`
	Max    float64   `json:"max"`
	Load   float64   `json:"load"`
	At     time.Time `json:"at,omitzero"`
}

// ReadBaseline reads the baseline at path; a missing file is an empty one.
func ReadBaseline(path string) (Baseline, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Baseline{Figures: map[string]BaseFigure{}}, nil
	}
	if err != nil {
		return Baseline{}, fmt.Errorf("bench baseline: %w", err)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return Baseline{}, fmt.Errorf("bench baseline %s: %w", path, err)
	}
	if b.Figures == nil {
		b.Figures = map[string]BaseFigure{}
	}
	return b, nil
}

// Updated is base with every figure results measured replaced; figures
// this run skipped keep their previous values.
func Updated(base Baseline, results map[string]Result, recorded string) Baseline {
	out := Baseline{Recorded: recorded, Figures: maps.Clone(base.Figures)}
	if out.Figures == nil {
		out.Figures = map[string]BaseFigure{}
	}
	for _, key := range slices.Sorted(maps.Keys(results)) {
		if r := results[key]; r.Skipped == "" {
			out.Figures[key] = BaseFigure{Median: r.Median, Max: r.Max, Load: r.Load, At: r.At}
		}
	}
	return out
}

// WriteBaseline stores b at path atomically (indented, keys sorted).
func WriteBaseline(path string, b Baseline) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o644)
}

// Recorded is the Recorded line of a baseline written now.
func Recorded(now time.Time, revision, host string) string {
	return fmt.Sprintf("%s, revision %s, on %s", now.UTC().Format(time.RFC3339), revision, host)
}
