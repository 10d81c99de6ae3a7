package sim

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// HealthyAll answers what Healthy answers for each instance, in order, and
// sees every edit made since the last listing; a corrupt file makes its
// instance unknown without failing the batch.
func TestFlavorHealthyAll(t *testing.T) {
	dir := t.TempDir()
	s := newSim(t, Config{Dir: dir})
	ctx := context.Background()
	compute, net := s.Instances("compute"), s.Instances("net")
	var ids []instance.ID
	for range 4 {
		id, err := compute.Provision(ctx, specWithTags(nil))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	netID, err := net.Provision(ctx, specWithTags(nil))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	edit := func(id instance.ID, typ, content string) {
		t.Helper()
		path := filepath.Join(dir, "instances", typ, string(id)+".json")
		if content != "" {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	setHealth := func(id instance.ID, typ, h string) {
		t.Helper()
		setHealthIn(t, filepath.Join(dir, "instances", typ, string(id)+".json"), h)
	}
	batch := []instance.Description{
		{ID: ids[0]}, {ID: ids[1]}, {ID: ids[2]}, {ID: ids[3]}, {ID: netID}, {ID: "compute-gone"}, {ID: "../x"},
	}
	want := []flavor.Health{
		flavor.HealthUnhealthy, flavor.HealthUnknown, flavor.HealthUnknown, flavor.HealthUnknown,
		flavor.HealthUnhealthy, flavor.HealthUnknown, flavor.HealthUnknown,
	}

	for _, listedFirst := range []bool{true, false} {
		f := s.Flavor()
		if !listedFirst {
			// A fresh process that never listed: no cache to follow.
			f = newSim(t, Config{Dir: dir}).Flavor()
		} else if _, err := compute.DescribeInstances(ctx, nil, false); err != nil {
			t.Fatal(err)
		}
		// Edits after the listing, in place.
		setHealth(ids[0], "compute", "unhealthy")
		setHealth(ids[1], "compute", "unknown")
		edit(ids[2], "compute", `{"health": `)
		// Broken for good, not being rewritten: its last write is older
		// than the store's rewrite window.
		old := time.Now().Add(-time.Minute)
		if err := os.Chtimes(filepath.Join(dir, "instances", "compute", string(ids[2])+".json"), old, old); err != nil {
			t.Fatal(err)
		}
		edit(ids[3], "compute", "")
		setHealth(netID, "net", "unhealthy")
		hs, err := f.HealthyAll(ctx, nil, batch)
		if err != nil {
			t.Fatalf("listed first %v: %v", listedFirst, err)
		}
		if !slices.Equal(hs, want) {
			t.Fatalf("listed first %v: %v, want %v", listedFirst, hs, want)
		}
		for i, d := range batch[:2] {
			if h, err := f.Healthy(ctx, nil, d); err != nil || h != want[i] {
				t.Errorf("Healthy(%s) = %s, %v; want %s as HealthyAll said", d.ID, h, err, want[i])
			}
		}
		// Put things back for the next round.
		setHealth(ids[0], "compute", "")
		setHealth(ids[1], "compute", "")
		setHealth(netID, "net", "")
		edit(ids[2], "compute", `{"id": "x"}`)
		edit(ids[3], "compute", `{"id": "y"}`)
	}
}
