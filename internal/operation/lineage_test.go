package operation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/state"
)

// writeState stores a fresh document (a lineage of its own) at path.
func writeState(t *testing.T, path string) *state.Document {
	t.Helper()
	l := state.NewLocal(path)
	doc, err := l.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// A state copied in from another directory (same file name, another
// lineage) is refused by every read, naming both lineages and the flag; with
// force it is adopted and recorded, so later reads take it without force.
func TestLineageGuardRefusesAnotherLineage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFile)
	g := newLineageGuard(state.NewLocal(path), path, dir, false)
	doc, err := g.Read(t.Context())
	if err != nil || !doc.IsNew() {
		t.Fatalf("Read with no state = %+v, %v", doc, err)
	}
	if err := g.Write(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	mine := doc.Lineage
	if got, _ := readLineage(filepath.Join(dir, LineageFile)); got != mine {
		t.Fatalf("recorded lineage %q after the first write, want %q", got, mine)
	}

	other := writeState(t, filepath.Join(t.TempDir(), StateFile))
	if err := os.WriteFile(path, encoded(t, other), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*lineageGuard{g, newLineageGuard(state.NewLocal(path), path, dir, false)} {
		_, err := g.Read(t.Context())
		var le *LineageError
		if !errors.Is(err, ErrOtherLineage) || !errors.As(err, &le) || le.Known != mine || le.Found != other.Lineage ||
			!strings.Contains(err.Error(), "-force-lineage") {
			t.Fatalf("Read of a copied-in state = %v; want a LineageError naming %s, %s and -force-lineage", err, mine, other.Lineage)
		}
	}

	forced := newLineageGuard(state.NewLocal(path), path, dir, true)
	if got, err := forced.Read(t.Context()); err != nil || got.Lineage != other.Lineage {
		t.Fatalf("forced Read = %+v, %v; want the copied-in state", got, err)
	}
	if got, err := newLineageGuard(state.NewLocal(path), path, dir, false).Read(t.Context()); err != nil || got.Lineage != other.Lineage {
		t.Fatalf("Read after the forced adoption = %+v, %v; want it taken without force", got, err)
	}
}

func encoded(t *testing.T, doc *state.Document) []byte {
	t.Helper()
	data, err := state.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
