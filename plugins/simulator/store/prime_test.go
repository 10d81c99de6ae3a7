package store

import (
	"context"
	"os"
	"testing"
)

// Objects created through CreateCached are listed from memory while their
// files are the versions written, with inotify and without; an object
// changed by hand since is read from its file.
func TestCreateCachedPrimesTheListing(t *testing.T) {
	for _, following := range []bool{true, false} {
		t.Run(map[bool]string{true: "inotify", false: "full listings"}[following], func(t *testing.T) {
			if !following {
				old := followWithInotify
				followWithInotify = false
				t.Cleanup(func() { followWithInotify = old })
			}
			s := open(t, t.TempDir())
			ctx := context.Background()
			c := new(Cache[counter])
			t.Cleanup(c.Close)
			if _, err := ListCached(ctx, s, "items", c); err != nil {
				t.Fatal(err)
			}
			for i, name := range []string{"a", "b", "c"} {
				if err := CreateCached(s, Key{Collection: "items", Name: name}, counter{N: i}, c); err != nil {
					t.Fatal(err)
				}
			}
			// Mark a's memory so the listing shows where its value came from.
			primed := c.primed.take("items")
			r := primed["a"]
			r.value.Writers = []string{"from memory"}
			primed["a"] = r
			for n, r := range primed {
				c.primed.add("items", n, r)
			}
			// b is rewritten by hand: a new size and mtime.
			if err := os.WriteFile(s.Path(Key{Collection: "items", Name: "b"}), []byte(`{"n": 100}`), 0o600); err != nil {
				t.Fatal(err)
			}
			objs, err := ListCached(ctx, s, "items", c)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 3 {
				t.Fatalf("listed %d objects, want 3", len(objs))
			}
			if a := objs[0].Value; a.N != 0 || len(a.Writers) != 1 {
				t.Fatalf("a = %+v; want the value remembered at its creation", a)
			}
			if b := objs[1].Value; b.N != 100 {
				t.Fatalf("b = %+v; want the hand edit (n 100)", b)
			}
			if c := objs[2].Value; c.N != 2 {
				t.Fatalf("c = %+v; want n 2", c)
			}
			if left := c.primed.take("items"); len(left) != 0 {
				t.Fatalf("the listing left %d primed objects behind", len(left))
			}
		})
	}
}

// A cache that never listed the collection remembers nothing, so a process
// that only creates holds no memory for it.
func TestCreateCachedRemembersOnlyForListers(t *testing.T) {
	s := open(t, t.TempDir())
	c := new(Cache[counter])
	if err := CreateCached(s, Key{Collection: "items", Name: "a"}, counter{N: 1}, c); err != nil {
		t.Fatal(err)
	}
	if got := c.primed.take("items"); len(got) != 0 {
		t.Fatalf("an unlisted cache remembered %d objects", len(got))
	}
	if err := CreateCached(s, Key{Collection: "items", Name: "a"}, counter{N: 2}, c); err == nil {
		t.Fatal("CreateCached over an existing object succeeded")
	}
}
