package plan

import (
	"fmt"
	"io"
	"testing"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// benchWorld is 10,000 members in 3 groups: cattle growing while half its
// members are out of date, cattle shrinking, and pets with duplicates and
// strays.
func benchWorld(b *testing.B) (*Plan, func() (*Plan, error)) {
	web := cattleGroup("web", 5000, "v2")
	workers := cattleGroup("workers", 3000, "v1")
	ids := make([]string, 1500)
	for i := range ids {
		ids[i] = fmt.Sprintf("10.0.%d.%d", i/250, i%250)
	}
	db := petGroup("db", ids...)
	hWeb, hOld, hDB := hashOf(b, web), hashOf(b, workers), hashOf(b, db)

	mk := func(prefix string, n int, hash func(i int) string, lid func(i int) string) []group.Member {
		out := make([]group.Member, n)
		for i := range out {
			out[i] = group.Member{ID: instance.ID(fmt.Sprintf("%s-%06d", prefix, i)), ConfigHash: hash(i), LogicalID: lid(i),
				State: instance.StateRunning, Health: flavor.HealthHealthy}
			if i%50 == 0 {
				out[i].State = instance.StatePending
			}
		}
		return out
	}
	none := func(int) string { return "" }
	world := World{Members: map[string][]group.Member{
		"web": mk("w", 4900, func(i int) string {
			if i%2 == 0 {
				return hOld
			}
			return hWeb
		}, none),
		"workers": mk("k", 3500, func(int) string { return hOld }, none),
		"db": mk("d", 1600, func(int) string { return hDB }, func(i int) string {
			if i >= 1500 {
				return ids[i-1500] // a duplicate of a pet
			}
			return ids[i]
		}),
	}}
	total := 0
	for _, ms := range world.Members {
		total += len(ms)
	}
	if total != 10000 {
		b.Fatalf("bench world has %d members", total)
	}
	desired, doc := stackOf(web, workers, db), stored(9, "web", "workers", "db")
	compute := func() (*Plan, error) { return Compute(desired, doc, world) }
	p, err := compute()
	if err != nil {
		b.Fatal(err)
	}
	return p, compute
}

func BenchmarkCompute10k(b *testing.B) {
	p, compute := benchWorld(b)
	if p.Summary.Add != 100 || p.Summary.Destroy != 600 || p.Summary.Roll != 2450 {
		b.Fatalf("unexpected bench plan summary %+v", p.Summary)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compute(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRender10k(b *testing.B) {
	p, _ := benchWorld(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := RenderHuman(io.Discard, p, HumanOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := RenderJSON(io.Discard, p); err != nil {
			b.Fatal(err)
		}
	}
}
