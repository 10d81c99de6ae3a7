package plan

import (
	"cmp"
	"slices"
	"testing"

	"github.com/infrakit/infrakit/internal/controller/group"
)

// BenchmarkComputeHeal10k is the plan of a watch pass healing 3 of 10,000
// cattle: the group is behind an ingress and enrolled, every follower is
// converged, and 3 members vanished. Every heal computes it (at least
// twice: to replace, then to register the replacements), so its cost is
// part of the heal latency issue 19 times.
func BenchmarkComputeHeal10k(b *testing.B) {
	cattle := cattleGroup("cattle", 10000, "v1")
	desired := withEnrollment(withIngress(stackOf(cattle), "test.com", []string{"lb3"}, "cattle"), "nfs", "cattle")
	ms := running("c", 10000, hashOf(b, cattle))
	slices.SortFunc(ms, func(a, b group.Member) int { return cmp.Compare(a.ID, b.ID) }) // as providers list
	members := map[string][]group.Member{"cattle": ms}
	doc, world := storedAs(desired, members), converged(b, desired, members)
	world.Members = map[string][]group.Member{"cattle": slices.Delete(slices.Clone(members["cattle"]), 100, 103)}
	world.Rendered = &RenderMemo{}
	scope := Scope{Groups: []string{"cattle"}}
	p, err := Compute(desired, doc, world, scope)
	if err != nil {
		b.Fatal(err)
	}
	if want := (Counts{Add: 3, Register: 3, Authorize: 3, Revoke: 3}); p.Summary != want {
		b.Fatalf("heal plan summary %+v, want %+v", p.Summary, want)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(desired, doc, world, scope); err != nil {
			b.Fatal(err)
		}
	}
}
