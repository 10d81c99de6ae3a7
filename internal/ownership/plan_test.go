package ownership

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/election"
)

// The balancing protocol without etcd: a model of the members and owner
// keys (create-if-absent acquires, fenced deletes, a revision), members
// that decide from views that may be stale, and random interleavings of
// their reads and balances.

type simStore struct {
	rev     int64
	members map[string]bool
	owners  map[Object]Owner
}

func (s *simStore) view() View {
	v := View{Revision: s.rev, Owners: maps.Clone(s.owners)}
	for id := range s.members {
		v.Members = append(v.Members, Member{ID: id})
	}
	slices.SortFunc(v.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return v
}

// deleteIf deletes o's key if it has fence f.
func (s *simStore) deleteIf(o Object, f election.Fence) {
	if ow, ok := s.owners[o]; ok && ow.Fence == f {
		s.rev++
		delete(s.owners, o)
	}
}

type simMember struct {
	id       string
	held     map[Object]election.Fence
	view     View
	acquired int
}

// balance carries out m's plan from its (maybe stale) view, as
// Balancer.balance does.
func (s *simStore) balance(m *simMember, objects []Object) {
	p := decide(m.view, m.held, objects, m.id)
	for _, o := range p.lost {
		delete(m.held, o)
	}
	for _, st := range p.stray {
		s.deleteIf(st.object, st.Fence)
	}
	for _, o := range p.release {
		s.deleteIf(o, m.held[o])
		delete(m.held, o)
	}
	for _, o := range p.acquire {
		if _, taken := s.owners[o]; taken {
			continue // ErrOwned
		}
		s.rev++
		f := election.Fence{Key: o.String(), Revision: s.rev}
		s.owners[o] = Owner{Member: m.id, Fence: f}
		m.held[o] = f
		m.acquired++
	}
}

// check fails unless every object a member holds is its own in the store
// (so no object is held by two).
func (s *simStore) check(t *rapid.T, members map[string]*simMember) {
	for _, m := range members {
		for o, f := range m.held {
			if ow := s.owners[o]; ow.Member != m.id || ow.Fence != f {
				t.Fatalf("%s holds %s (%s) but the store says %+v", m.id, o, f, ow)
			}
		}
	}
}

// settle lets every member read a fresh view and balance, round after
// round, until a round changes nothing.
func (s *simStore) settle(t *rapid.T, members map[string]*simMember, objects []Object) {
	ids := slices.Sorted(maps.Keys(members))
	for round := 0; round < 100; round++ {
		before := s.rev
		for _, id := range ids {
			members[id].view = s.view()
			s.balance(members[id], objects)
			s.check(t, members)
		}
		if s.rev == before {
			return
		}
	}
	t.Fatalf("no fixed point after 100 rounds: %+v", s.owners)
}

// balanced fails unless every object is held by one member, loads within
// one.
func balancedSim(t *rapid.T, members map[string]*simMember, objects []Object) {
	lo, hi, total := len(objects), 0, 0
	for _, m := range members {
		lo, hi, total = min(lo, len(m.held)), max(hi, len(m.held)), total+len(m.held)
	}
	if total != len(objects) || (len(members) > 0 && hi-lo > 1) {
		t.Fatalf("settled on loads %d..%d holding %d of %d objects", lo, hi, total, len(objects))
	}
}

// interleave runs random steps: a member reads a fresh view, or balances
// on the view it has.
func (s *simStore) interleave(t *rapid.T, members map[string]*simMember, objects []Object) {
	ids := slices.Sorted(maps.Keys(members))
	steps := rapid.IntRange(0, 60).Draw(t, "steps")
	for range steps {
		m := members[rapid.SampledFrom(ids).Draw(t, "member")]
		if rapid.Bool().Draw(t, "read") {
			m.view = s.view()
		} else {
			s.balance(m, objects)
			s.check(t, members)
		}
	}
}

func simStart(t *rapid.T) (*simStore, map[string]*simMember, []Object) {
	objects := objectsN(rapid.IntRange(0, 30).Draw(t, "objects"))
	k := rapid.IntRange(1, 5).Draw(t, "members")
	s := &simStore{members: map[string]bool{}, owners: map[Object]Owner{}}
	members := map[string]*simMember{}
	for i := range k {
		id := fmt.Sprintf("m%d", i)
		s.members[id] = true
		s.rev++
		members[id] = &simMember{id: id, held: map[Object]election.Fence{}}
	}
	s.interleave(t, members, objects)
	s.settle(t, members, objects)
	balancedSim(t, members, objects)
	return s, members, objects
}

// TestProtocolLeave: from a settled share, a member leaving (its lease
// revoked: member and owner keys gone at once) moves exactly its objects,
// whatever the order in which the others read and act; nobody else's
// object moves.
func TestProtocolLeave(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, members, objects := simStart(t)
		if len(members) < 2 {
			return
		}
		leaver := rapid.SampledFrom(slices.Sorted(maps.Keys(members))).Draw(t, "leaver")
		share := len(members[leaver].held)
		delete(s.members, leaver)
		for o, ow := range s.owners {
			if ow.Member == leaver {
				delete(s.owners, o)
			}
		}
		s.rev++
		delete(members, leaver)
		before := map[string]map[Object]election.Fence{}
		acquired := 0
		for id, m := range members {
			before[id] = maps.Clone(m.held)
			acquired += m.acquired
		}
		s.interleave(t, members, objects)
		s.settle(t, members, objects)
		balancedSim(t, members, objects)
		for id, m := range members {
			acquired -= m.acquired
			for o, f := range before[id] {
				if m.held[o] != f {
					t.Fatalf("%s's %s moved though only %s left", id, o, leaver)
				}
			}
		}
		if -acquired != share {
			t.Fatalf("%d acquisitions after %s left holding %d", -acquired, leaver, share)
		}
	})
}

// TestProtocolJoin: from a settled share, a member joining takes at most
// ceil(n/(m+1)) objects, only to itself, whatever the interleaving.
func TestProtocolJoin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, members, objects := simStart(t)
		n, m := len(objects), len(members)
		before := map[string]map[Object]election.Fence{}
		for id, mem := range members {
			before[id] = maps.Clone(mem.held)
		}
		joiner := &simMember{id: "new", held: map[Object]election.Fence{}}
		s.members[joiner.id] = true
		s.rev++
		members[joiner.id] = joiner
		s.interleave(t, members, objects)
		s.settle(t, members, objects)
		balancedSim(t, members, objects)
		if bound := (n + m) / (m + 1); joiner.acquired > bound {
			t.Fatalf("the joiner acquired %d of %d objects with %d members; bound %d", joiner.acquired, n, m, bound)
		}
		moved := 0
		for id, held := range before {
			for o, f := range held {
				if members[id].held[o] != f {
					moved++
				}
			}
			for o, f := range members[id].held {
				if held[o] != f {
					t.Fatalf("%s took %s though only the joiner should take objects", id, o)
				}
			}
		}
		if moved != joiner.acquired {
			t.Fatalf("%d objects left their owners, the joiner acquired %d", moved, joiner.acquired)
		}
	})
}

// TestProtocolObjectsChange: objects added and removed settle balanced,
// each removed object given back.
func TestProtocolObjectsChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, members, objects := simStart(t)
		keep := rapid.IntRange(0, len(objects)).Draw(t, "keep")
		next := append(slices.Clone(objects[:keep]), Object{KindIngress, "added"}, Object{KindEnrollment, "added"})
		s.interleave(t, members, next)
		s.settle(t, members, next)
		balancedSim(t, members, next)
		if len(s.owners) != len(next) {
			t.Fatalf("%d owner keys for %d objects", len(s.owners), len(next))
		}
	})
}

// TestDecideInDoubt: an object whose owner key names a member that is gone
// is not acquired by anyone; a held object whose key a later view lacks is
// lost; keys of me it does not hold are stray.
func TestDecideInDoubt(t *testing.T) {
	g0, g1, g2 := Object{KindGroup, "g0"}, Object{KindGroup, "g1"}, Object{KindGroup, "g2"}
	view := View{
		Revision: 10,
		Members:  []Member{{ID: "a"}},
		Owners: map[Object]Owner{
			g0: {Member: "gone", Fence: election.Fence{Key: "g0", Revision: 3}},
			g2: {Member: "a", Fence: election.Fence{Key: "g2", Revision: 4}},
		},
	}
	held := map[Object]election.Fence{
		g1: {Key: "g1", Revision: 5},  // read after: lost
		g2: {Key: "g2", Revision: 12}, // acquired after the view: kept
	}
	p := decide(view, held, []Object{g0, g1, g2}, "a")
	if len(p.acquire) != 1 || p.acquire[0] != g1 {
		t.Errorf("acquire %v, want only g1 (g0's owner is in doubt)", p.acquire)
	}
	if len(p.lost) != 1 || p.lost[0] != g1 {
		t.Errorf("lost %v, want g1", p.lost)
	}
	if len(p.stray) != 0 || len(p.release) != 0 {
		t.Errorf("stray %v release %v, want none", p.stray, p.release)
	}
	// Held under a newer fence than the view shows: not stray, not lost.
	delete(held, g1)
	held[g2] = election.Fence{Key: "g2", Revision: 4}
	view.Revision = 12
	view.Owners[Object{KindGroup, "g3"}] = Owner{Member: "a", Fence: election.Fence{Key: "g3", Revision: 11}}
	p = decide(view, held, []Object{g0, g1, g2}, "a")
	if len(p.stray) != 1 || p.stray[0].object.Name != "g3" {
		t.Errorf("stray %v, want g3 (a key of a that it does not hold)", p.stray)
	}
}
