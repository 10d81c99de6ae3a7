package sim

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/plugins/simulator/store"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// A load balancer is read through the simulator's cache, yet every read
// sees the latest write, a file removed by hand reads as an empty load
// balancer, and a corrupt one is an error, as without the cache.
func TestLoadBalancerReadsFollowTheFile(t *testing.T) {
	s := newSim(t, Config{})
	ctx := context.Background()
	lb, err := s.LoadBalancer("web")
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a", "b", "c"} {
		if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{{ID: instanceID(id)}}); err != nil {
			t.Fatal(err)
		}
		if got, err := lb.Backends(ctx); err != nil || len(got) != i+1 {
			t.Fatalf("after registering %s: Backends = %v, %v", id, got, err)
		}
	}
	path := filepath.Join(s.Dir(), lbCollection, "web.json")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got, err := lb.Backends(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after removing the file: Backends = %v, %v; want none", got, err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.Backends(ctx); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("corrupt file: err = %v, want ErrCorrupt", err)
	}
}

// register is the map it replaced: every backend by ID, the later of two
// with one ID winning (the added over the registered), sorted by ID, for
// any registered list, hand-edited ones (unsorted, duplicated) included.
func TestRegisterMergesLikeAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		backend := rapid.Custom(func(t *rapid.T) backendRecord {
			return backendRecord{
				ID:      rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f"}).Draw(t, "id"),
				Address: rapid.SampledFrom([]string{"", "10.0.0.1", "10.0.0.2"}).Draw(t, "address"),
			}
		})
		have := rapid.SliceOf(backend).Draw(t, "registered")
		add := rapid.SliceOf(backend).Draw(t, "added")
		model := map[string]backendRecord{}
		for _, b := range append(slices.Clone(have), add...) {
			model[b.ID] = b
		}
		want := slices.Collect(maps.Values(model))
		slices.SortFunc(want, func(a, b backendRecord) int { return cmp.Compare(a.ID, b.ID) })
		if got := register(have, add); !slices.Equal(got, want) {
			t.Fatalf("register(%v, %v) = %v, want %v", have, add, got, want)
		}
	})
}
