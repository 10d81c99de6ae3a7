package watch

import (
	"context"
	"errors"
	"testing"

	"github.com/infrakit/infrakit/internal/state"
)

// countingStore is a state.Local that counts its Reads and can be made to
// fail its next Write.
type countingStore struct {
	*state.Local
	reads     int
	failWrite bool
}

func (c *countingStore) Read(ctx context.Context) (*state.Document, error) {
	c.reads++
	return c.Local.Read(ctx)
}

func (c *countingStore) Write(ctx context.Context, doc *state.Document) error {
	if c.failWrite {
		c.failWrite = false
		return errors.New("disk full")
	}
	return c.Local.Write(ctx, doc)
}

// A holding takes the document the last one left when the file still
// holds it (its own writes included), and reads the state again when
// another process wrote it or a write of the last holding failed.
func TestLeaseKeepsTheDocumentWhileTheFileHoldsIt(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Local: newStateFile(t)}
	doc, err := store.Local.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := newLease(store, newSerials(), 0)
	hold := func(serial uint64) {
		t.Helper()
		if err := l.acquire(ctx, doc.Lineage, serial); err != nil {
			t.Fatal(err)
		}
	}
	hold(doc.Serial)
	l.release()
	hold(doc.Serial)
	if _, err := l.record("g", []state.Instance{{ID: "a"}}); err != nil {
		t.Fatal(err)
	}
	l.release()
	hold(doc.Serial)
	got := l.doc.Groups["g"]
	l.release()
	if store.reads != 1 {
		t.Errorf("%d reads, want 1: an unchanged file is not read again", store.reads)
	}
	if got == nil || len(got.Instances) != 1 || got.Instances[0].ID != "a" {
		t.Fatalf("kept document's group = %+v, want the recorded member", got)
	}

	// Another process writes: the next holding reads.
	other, err := store.Local.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other.Group("g").Instances = []state.Instance{{ID: "b"}}
	if err := state.NewLocal(store.Path()).Write(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := l.acquire(ctx, doc.Lineage, other.Serial); err != nil {
		t.Fatal(err)
	}
	if store.reads != 2 || l.doc.Groups["g"].Instances[0].ID != "b" {
		t.Errorf("reads %d, group %+v: want the other process's write read", store.reads, l.doc.Groups["g"])
	}
	// A failed write spoils the holding's document.
	store.failWrite = true
	if _, err := l.record("g", []state.Instance{{ID: "c"}}); err == nil {
		t.Fatal("record succeeded through a failing store")
	}
	l.release()
	hold(other.Serial)
	l.release()
	if store.reads != 3 {
		t.Errorf("%d reads, want 3: a failed write's document is not kept", store.reads)
	}
}
