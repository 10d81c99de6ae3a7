package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

func incrementMemo(ctx context.Context, s *Store, m *Memo[counter], who string) error {
	return UpdateMemo(ctx, s, counterKey, m, func(c *counter, _ bool) error {
		c.N++
		c.Writers = append(c.Writers, who)
		return nil
	})
}

// Two Stores, each with its own memo, stand for two processes: each must
// see the other's writes (a new file version), so no increment is lost.
func TestUpdateMemoSeesOtherWriters(t *testing.T) {
	dir := t.TempDir()
	stores := []*Store{open(t, dir), open(t, dir)}
	memos := []*Memo[counter]{new(Memo[counter]), new(Memo[counter])}
	const goroutines, each = 4, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := incrementMemo(context.Background(), stores[g%2], memos[g%2], fmt.Sprintf("g%d-%d", g, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	c, err := Get[counter](stores[0], counterKey)
	if err != nil {
		t.Fatal(err)
	}
	if c.N != goroutines*each || len(c.Writers) != goroutines*each {
		t.Fatalf("counter = %d with %d writers, want %d", c.N, len(c.Writers), goroutines*each)
	}
}

// A person's edit, removal or breaking of the file is seen by the next
// update through a memo, as without it.
func TestUpdateMemoFollowsHandEdits(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	m := new(Memo[counter])
	if err := incrementMemo(ctx, s, m, "a"); err != nil {
		t.Fatal(err)
	}
	path := s.Path(counterKey)
	if err := os.WriteFile(path, []byte(`{"n": 41, "writers": ["hand"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := incrementMemo(ctx, s, m, "b"); err != nil {
		t.Fatal(err)
	}
	if c, err := Get[counter](s, counterKey); err != nil || c.N != 42 || len(c.Writers) != 2 {
		t.Fatalf("after a hand edit and an update: %+v, %v; want n 42 and writers [hand b]", c, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	var found bool
	if err := UpdateMemo(ctx, s, counterKey, m, func(c *counter, f bool) error { found = f; c.N = 1; return nil }); err != nil || found {
		t.Fatalf("after removing the file: found = %v, err = %v; want a fresh object", found, err)
	}
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := incrementMemo(ctx, s, m, "c"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("update of a corrupt file = %v, want ErrCorrupt", err)
	}
	// A failing fn writes nothing and leaves the memo unable to mislead.
	if err := os.WriteFile(path, []byte(`{"n": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := UpdateMemo(ctx, s, counterKey, m, func(c *counter, _ bool) error { c.N = 1000; return boom }); !errors.Is(err, boom) {
		t.Fatalf("update whose fn fails = %v, want boom", err)
	}
	if err := incrementMemo(ctx, s, m, "d"); err != nil {
		t.Fatal(err)
	}
	if c, err := Get[counter](s, counterKey); err != nil || c.N != 8 {
		t.Fatalf("after a failed and a good update: %+v, %v; want n 8", c, err)
	}
}
