package store

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
)

// indexed is an object type with what gob does not always give back equal:
// a slice that may be empty (it comes back nil).
type indexed struct {
	N    int               `json:"n"`
	Tags map[string]string `json:"tags"`
	List []int             `json:"list"`
}

// listFresh lists collection "c" as a provider started afresh does (a new
// Cache) and returns the objects and how many files it read.
func listFresh(t *testing.T, s *Store) ([]Object[indexed], int) {
	t.Helper()
	snap, reads, err := listFull(context.Background(), s, "c", loadIndex[indexed](s, "c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return snap.objs, reads
}

// After a Cache's listing read many files, a fresh listing reads only what
// changed since, and lists exactly what a listing without the index does,
// whatever happened to the index.
func TestListingIndex(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	n := indexMinReads + 10
	for i := range n {
		v := indexed{N: i, Tags: map[string]string{"k": fmt.Sprint(i)}}
		if i == 3 {
			v.List = []int{} // comes back nil from gob: left out
		}
		if err := Put(s, Key{Collection: "c", Name: fmt.Sprintf("o%04d", i)}, v); err != nil {
			t.Fatal(err)
		}
	}
	want := func() []Object[indexed] {
		objs, err := List[indexed](ctx, s, "c")
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	check := func(name string, wantReads int) {
		t.Helper()
		got, reads := listFresh(t, s)
		if !reflect.DeepEqual(got, want()) {
			t.Errorf("%s: a fresh listing differs from one without the index", name)
		}
		if reads != wantReads {
			t.Errorf("%s: a fresh listing read %d files, want %d", name, reads, wantReads)
		}
	}

	check("no index", n)
	var c Cache[indexed]
	defer c.Close()
	if _, _, err := c.List(ctx, s, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.indexPath("c")); err != nil {
		t.Fatalf("a listing that read %d files left no index: %v", n, err)
	}
	check("index", 1) // o0003, whose empty slice gob gives back nil

	if err := Put(s, Key{Collection: "c", Name: "o0007"}, indexed{N: -7, Tags: map[string]string{"k": "changed"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove(Key{Collection: "c", Name: "o0008"}); err != nil {
		t.Fatal(err)
	}
	check("a file changed, one removed", 2) // o0003 and o0007

	if err := os.WriteFile(s.indexPath("c"), []byte("not gob"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("an index that does not decode", n-1)

	b, err := encodeIndex("other", &snapshot[indexed]{}, func(int, cached[indexed]) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.indexPath("c"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	check("another collection's index", n-1)
	if got := loadIndex[counter](s, "other"); got != nil {
		t.Errorf("an index of indexed objects loaded as counters: %v", got)
	}
}
