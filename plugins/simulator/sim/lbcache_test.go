package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

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
