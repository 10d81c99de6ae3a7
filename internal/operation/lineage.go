package operation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// LineageFile is where a working directory records the lineage of the state
// its commands last used, so that a state of another lineage (a same-named
// stack's state copied from another directory) is refused rather than
// silently adopted: its instances would be taken for this directory's.
// Terraform refuses `state push` of another lineage the same way.
const LineageFile = ".infrakit/state-lineage"

// ErrOtherLineage is matched (errors.Is) by the refusal of a state of
// another lineage than the one this directory last used.
var ErrOtherLineage = errors.New("state of another lineage")

// LineageError is that refusal. It names both lineages and the way out.
type LineageError struct {
	// State is where the state lives; Record is the LineageFile.
	State, Record string
	// Known is the lineage the directory last used; Found the state's.
	Known, Found string
}

func (e *LineageError) Error() string {
	return fmt.Sprintf("state %s has lineage %s, but this directory last used lineage %s (recorded in %s): "+
		"it is another state, perhaps copied from another directory; refusing to use it. "+
		"If it is meant to replace this directory's state, run \"infrakit apply -force-lineage\" once to adopt it",
		e.State, e.Found, e.Known, e.Record)
}

// Is makes errors.Is(err, ErrOtherLineage) work.
func (e *LineageError) Is(target error) bool { return target == ErrOtherLineage }

// lineageGuard is the runner's state store checked against LineageFile: a
// stored document of another lineage than the recorded one is refused on
// Read (so no command plans or acts on it), unless force adopts it. A
// directory without a record adopts the first lineage it reads or writes
// (a state from before records were kept, a state moved into a new
// directory), and every successful write records its lineage (a state
// created anew after the old one was deleted).
type lineageGuard struct {
	state.Store
	// name says where the state is, for messages; record is LineageFile.
	name, record string
	force        bool

	mu sync.Mutex
	// known is the recorded lineage, once read ("" before; none is
	// recorded when read is set and known is empty).
	known string
	read  bool
}

func newLineageGuard(store state.Store, name, workDir string, force bool) *lineageGuard {
	return &lineageGuard{Store: store, name: name, record: filepath.Join(workDir, LineageFile), force: force}
}

// Read is the store's Read, refusing a state of another lineage.
func (g *lineageGuard) Read(ctx context.Context) (*state.Document, error) {
	doc, err := g.Store.Read(ctx)
	if err != nil || doc.IsNew() {
		return doc, err
	}
	if err := g.check(doc.Lineage); err != nil {
		return nil, err
	}
	return doc, nil
}

// Write is the store's Write, recording the lineage written.
func (g *lineageGuard) Write(ctx context.Context, doc *state.Document) error {
	if err := g.Store.Write(ctx, doc); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.remember(doc.Lineage)
}

func (g *lineageGuard) check(lineage string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.read {
		known, err := readLineage(g.record)
		if err != nil {
			return err
		}
		g.known, g.read = known, true
	}
	if g.known != "" && g.known != lineage && !g.force {
		return &LineageError{State: g.name, Record: g.record, Known: g.known, Found: lineage}
	}
	return g.remember(lineage)
}

// remember records lineage unless it is the one recorded. The caller holds mu.
func (g *lineageGuard) remember(lineage string) error {
	if g.read && g.known == lineage {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(g.record), 0o755); err != nil {
		return fmt.Errorf("record the state's lineage: %w", err)
	}
	if err := atomicfile.WriteFile(g.record, []byte(lineage+"\n"), 0o644); err != nil {
		return fmt.Errorf("record the state's lineage: %w", err)
	}
	g.known, g.read = lineage, true
	return nil
}

// readLineage is the recorded lineage, "" when none is.
func readLineage(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the lineage this directory last used: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}
