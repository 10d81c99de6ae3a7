package plan

import (
	"fmt"
	"io"
	"testing"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// benchWorld is 10,000 members in 3 groups: cattle growing while half its
// members are out of date, cattle shrinking, and pets with duplicates and
// strays. With followers, web and workers are behind an ingress on two
// load balancers and workers are enrolled, every follower as the members
// are (so the plan's follower steps are those of its member changes).
func benchWorld(b *testing.B, followers bool) (*Plan, World, func() (*Plan, error)) {
	webG := cattleGroup("web", 5000, "v2")
	workers := cattleGroup("workers", 3000, "v1")
	ids := make([]string, 1500)
	for i := range ids {
		ids[i] = fmt.Sprintf("10.0.%d.%d", i/250, i%250)
	}
	db := petGroup("db", ids...)
	hWeb, hOld, hDB := hashOf(b, webG), hashOf(b, workers), hashOf(b, db)

	mk := func(prefix string, n int, hash func(i int) string, lid func(i int) string) []group.Member {
		out := make([]group.Member, n)
		for i := range out {
			out[i] = group.Member{ID: instance.ID(fmt.Sprintf("%s-%06d", prefix, i)), ConfigHash: hash(i), LogicalID: lid(i),
				State: instance.StateRunning, Health: flavor.HealthHealthy, Address: fmt.Sprintf("10.%d.%d.%d", len(prefix), i/256, i%256)}
			if i%50 == 0 {
				out[i].State = instance.StatePending
			}
		}
		return out
	}
	none := func(int) string { return "" }
	members := map[string][]group.Member{
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
	}
	total := 0
	for _, ms := range members {
		total += len(ms)
	}
	if total != 10000 {
		b.Fatalf("bench world has %d members", total)
	}
	desired := stackOf(webG, workers, db)
	if followers {
		desired = withEnrollment(withIngress(desired, "test.com", []string{"lb1", "lb2"}, "web", "workers"), "nfs", "workers")
	}
	var doc *state.Document
	world := World{Members: members}
	if followers {
		doc, world = storedAs(desired, members), converged(b, desired, members)
	} else {
		doc = stored(9, "web", "workers", "db")
	}
	compute := func() (*Plan, error) { return Compute(desired, doc, world, Scope{}) }
	p, err := compute()
	if err != nil {
		b.Fatal(err)
	}
	return p, world, compute
}

// followersOfLeaving counts the backends and authorizations world has of
// the members p destroys or rolls.
func followersOfLeaving(p *Plan, world World) (backends, authorizations int) {
	leaving := map[instance.ID]bool{}
	for _, g := range p.Groups {
		for _, d := range g.Destroy {
			leaving[d.ID] = true
		}
		for _, batch := range g.Roll {
			for _, r := range batch {
				leaving[r.Old] = true
			}
		}
	}
	for _, v := range world.LoadBalancers {
		for _, be := range v.Backends {
			if leaving[be.ID] {
				backends++
			}
		}
	}
	for _, v := range world.Authorizers {
		for _, a := range v.Authorizations {
			if leaving[a.SourceID] {
				authorizations++
			}
		}
	}
	return backends, authorizations
}

func benchCases() []struct {
	name      string
	followers bool
} {
	return []struct {
		name      string
		followers bool
	}{{"members", false}, {"followers", true}}
}

func BenchmarkCompute10k(b *testing.B) {
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			p, world, compute := benchWorld(b, bc.followers)
			want := Counts{Add: 100, Destroy: 600, Roll: 2450}
			if bc.followers {
				// web's 100 added and 2450 rolled are registered on both
				// load balancers; what leaves is deregistered and revoked
				// where the world has it.
				want.Register = 2 * (100 + 2450)
				want.Deregister, want.Revoke = followersOfLeaving(p, world)
			}
			if p.Summary != want {
				b.Fatalf("bench plan summary %+v, want %+v", p.Summary, want)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := compute(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRender10k(b *testing.B) {
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			p, _, _ := benchWorld(b, bc.followers)
			b.ReportAllocs()
			for b.Loop() {
				if err := RenderHuman(io.Discard, p, HumanOptions{}); err != nil {
					b.Fatal(err)
				}
				if err := RenderJSON(io.Discard, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
