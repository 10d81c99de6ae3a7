package enrollment

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// The properties drive Diff with random memberships and authorization lists
// and apply its changes to a simulated authorizer in the Controller's two
// phases (every authorize, then every revoke).

// simAuthorizer is a simulated authorizer: authorizations by ID.
type simAuthorizer struct {
	auths map[string]nfs.Authorization
	next  int
}

func (s *simAuthorizer) list() []nfs.Authorization {
	keys := slices.Sorted(maps.Keys(s.auths))
	out := make([]nfs.Authorization, len(keys))
	for i, k := range keys {
		out[i] = s.auths[k]
	}
	return out
}

func (s *simAuthorizer) authorize(ch Changes) {
	add := func(a nfs.Authorization) {
		s.next++
		a.ID = fmt.Sprintf("new-%03d", s.next)
		s.auths[a.ID] = a
	}
	for _, a := range ch.Authorize {
		add(a)
	}
	for _, r := range ch.Reauthorize {
		add(r.New)
	}
}

func (s *simAuthorizer) revoke(ch Changes) {
	for _, r := range ch.Reauthorize {
		delete(s.auths, r.Old.ID)
	}
	for _, r := range ch.Revoke {
		delete(s.auths, r.Authorization.ID)
	}
}

var namePool = []string{"nfs", "nfs", "other", ""}

func genID(t *rapid.T, label string) instance.ID {
	return instance.ID(fmt.Sprintf("c%d", rapid.IntRange(0, 10).Draw(t, label)))
}

// genSource draws members with distinct IDs: a provider listing one
// instance twice is a glitch, not a membership to converge to.
func genSource(t *rapid.T) []group.Member {
	nums := rapid.SliceOfNDistinct(rapid.IntRange(0, 10), 0, 8, rapid.ID[int]).Draw(t, "members")
	out := make([]group.Member, len(nums))
	for i, n := range nums {
		out[i] = group.Member{
			ID:    instance.ID(fmt.Sprintf("c%d", n)),
			State: rapid.SampledFrom([]instance.State{running, running, pending, terminating}).Draw(t, fmt.Sprintf("member[%d].state", i)),
		}
	}
	return out
}

// genRender renders {"host": id, "iops": version} where the version may
// differ per member; some members fail to render.
func genRender(t *rapid.T) func(group.Member) (json.RawMessage, error) {
	version := rapid.IntRange(1, 2).Draw(t, "version")
	var broken []instance.ID
	for i := range rapid.IntRange(0, 2).Draw(t, "broken.n") {
		broken = append(broken, genID(t, fmt.Sprintf("broken[%d]", i)))
	}
	return func(m group.Member) (json.RawMessage, error) {
		if slices.Contains(broken, m.ID) {
			return nil, errors.New("cannot render")
		}
		return json.RawMessage(fmt.Sprintf(`{"host":%q,"iops":%d}`, m.ID, version)), nil
	}
}

func genObserved(t *rapid.T) *simAuthorizer {
	s := &simAuthorizer{auths: map[string]nfs.Authorization{}}
	n := rapid.IntRange(0, 10).Draw(t, "observed.n")
	for i := range n {
		label := fmt.Sprintf("observed[%d]", i)
		src := genID(t, label+".source")
		iops := rapid.IntRange(1, 2).Draw(t, label+".iops")
		a := Authorization(rapid.SampledFrom(namePool).Draw(t, label+".name"), group.Member{ID: src},
			json.RawMessage(fmt.Sprintf(`{"iops":%d,"host":%q}`, iops, src)))
		if a.Tags[tags.EnrollmentName] == "" {
			a.Tags = nil // a foreign authorization, no tags at all
		}
		a.ID = fmt.Sprintf("old-%02d", i)
		s.auths[a.ID] = a
	}
	return s
}

// wanted are the members that must end with exactly one authorization
// (running, renderable), with what they should hold.
func wanted(source []group.Member, render func(group.Member) (json.RawMessage, error)) map[instance.ID]nfs.Authorization {
	out := map[instance.ID]nfs.Authorization{}
	for _, m := range source {
		if m.State != running {
			continue
		}
		if props, err := render(m); err == nil {
			out[m.ID] = Authorization("nfs", m, props)
		}
	}
	return out
}

func oursBySource(s *simAuthorizer) map[instance.ID][]nfs.Authorization {
	out := map[instance.ID][]nfs.Authorization{}
	for _, a := range s.list() {
		if Ours("nfs", a) {
			out[SourceOf(a)] = append(out[SourceOf(a)], a)
		}
	}
	return out
}

// running counts the running members of source.
func runningCount(source []group.Member) int {
	n := 0
	for _, m := range source {
		if m.State == running {
			n++
		}
	}
	return n
}

// After both phases every running member has exactly one up-to-date
// authorization; no other member gains one; the only other members that
// keep theirs are the left ones Diff defers, at most as many as the group
// runs fewer members than it wants; foreign authorizations are untouched;
// and a second diff is empty.
func TestPropertyConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		source, render, sim := genSource(t), genRender(t), genObserved(t)
		want := Want{Size: rapid.IntRange(0, 10).Draw(t, "want")}
		foreignBefore := foreign(sim)
		live := map[instance.ID]bool{}
		for _, m := range source {
			if m.State == running || m.State == pending {
				live[m.ID] = true
			}
		}
		ch := Diff("nfs", source, want, sim.list(), render)
		sim.authorize(ch)
		sim.revoke(ch)

		deferred := map[instance.ID]bool{}
		for _, a := range ch.Deferred {
			deferred[SourceOf(a)] = true
		}
		if len(ch.Deferred) > max(want.Size-runningCount(source), 0) {
			t.Fatalf("%d deferred, but the group runs %d of %d", len(ch.Deferred), runningCount(source), want.Size)
		}
		want2 := wanted(source, render)
		ours := oursBySource(sim)
		for id, w := range want2 {
			if len(ours[id]) != 1 || !UpToDate(ours[id][0], w) {
				t.Fatalf("member %s has %+v, want one like %+v", id, ours[id], w)
			}
		}
		for id := range ours {
			if _, ok := want2[id]; !ok && !live[id] && !deferred[id] {
				t.Fatalf("%s is no live member and not deferred but has %+v", id, ours[id])
			}
		}
		if got := foreign(sim); !slices.EqualFunc(got, foreignBefore, func(a, b nfs.Authorization) bool { return a.ID == b.ID }) {
			t.Fatalf("foreign authorizations changed: %v → %v", foreignBefore, got)
		}
		if again := Diff("nfs", source, want, sim.list(), render); !again.Empty() || len(again.Deferred) != len(ch.Deferred) {
			t.Fatalf("diff after applying: %+v", again)
		}
	})
}

// The authorizations of members that left are held for their replacements:
// after a pass, at least as many members are authorized as before, or as
// the group wants, whichever is fewer; so while the group runs fewer
// members than it wants, no member that left loses its authorization
// unless the group's running members and those held already make up what
// it wants. A group that runs what it wants (scaled down, or destroyed:
// wants nothing) holds nothing.
func TestPropertyHoldsForReplacements(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		source, sim := genSource(t), genObserved(t)
		render := func(m group.Member) (json.RawMessage, error) {
			return json.RawMessage(fmt.Sprintf(`{"host":%q,"iops":1}`, m.ID)), nil
		}
		want := Want{Size: rapid.IntRange(0, 10).Draw(t, "want")}
		running := runningCount(source)
		before := oursBySource(sim)
		ch := Diff("nfs", source, want, sim.list(), render)
		if running >= want.Size && len(ch.Deferred) > 0 {
			t.Fatalf("the group runs %d of %d but %d authorizations are held", running, want.Size, len(ch.Deferred))
		}
		sim.authorize(ch)
		sim.revoke(ch)
		after := oursBySource(sim)
		for id := range before {
			if len(after[id]) == 0 && running+len(ch.Deferred) < want.Size {
				t.Fatalf("member %s lost its authorization while the group runs %d of %d and holds only %d",
					id, running, want.Size, len(ch.Deferred))
			}
		}
		if len(after) < min(want.Size, len(before)) {
			t.Fatalf("%d members authorized after the pass, %d before, the group wants %d", len(after), len(before), want.Size)
		}
	})
}

// A cattle group that keeps what it wants through members vanishing and
// replacements starting (pending, then running) never has fewer members
// authorized than it wants, pass after pass: each member that vanished
// keeps its authorization until a replacement is authorized.
func TestPropertyReplacementAuthorizedFirst(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 6).Draw(t, "size")
		want := Want{Size: size}
		render := func(m group.Member) (json.RawMessage, error) {
			return json.RawMessage(fmt.Sprintf(`{"host":%q}`, m.ID)), nil
		}
		sim := &simAuthorizer{auths: map[string]nfs.Authorization{}}
		next := 0
		newMember := func(st instance.State) group.Member {
			next++
			return group.Member{ID: instance.ID(fmt.Sprintf("m%03d", next)), State: st}
		}
		var members []group.Member
		for range size {
			members = append(members, newMember(running))
		}
		pass := func() {
			ch := Diff("nfs", members, want, sim.list(), render)
			sim.authorize(ch)
			sim.revoke(ch)
		}
		pass()
		for step := range rapid.IntRange(1, 20).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("step[%d]", step)) {
			case 0: // a member vanishes
				if len(members) > 0 {
					i := rapid.IntRange(0, len(members)-1).Draw(t, fmt.Sprintf("step[%d].gone", step))
					members = slices.Delete(members, i, i+1)
				}
			case 1: // a member starts terminating
				if len(members) > 0 {
					i := rapid.IntRange(0, len(members)-1).Draw(t, fmt.Sprintf("step[%d].terminating", step))
					members[i].State = terminating
				}
			case 2: // the group creates a replacement
				live := 0
				for _, m := range members {
					if m.State != terminating {
						live++
					}
				}
				if live < size {
					members = append(members, newMember(pending))
				}
			case 3: // a replacement runs
				for i := range members {
					if members[i].State == pending {
						members[i].State = running
						break
					}
				}
			}
			pass()
			if n := len(oursBySource(sim)); n < size {
				t.Fatalf("step %d: %d members authorized, the group wants %d (members %v)", step, n, size, members)
			}
		}
	})
}

func foreign(s *simAuthorizer) []nfs.Authorization {
	var out []nfs.Authorization
	for _, a := range s.list() {
		if !Ours("nfs", a) {
			out = append(out, a)
		}
	}
	return out
}

// Between the phases — every authorize done, no revoke yet — every member
// that should be authorized already is, and nothing of a member that keeps
// being authorized has been lost: a replacement never waits for a revoke.
func TestPropertyAuthorizeBeforeRevoke(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		source, render, sim := genSource(t), genRender(t), genObserved(t)
		before := oursBySource(sim)
		ch := Diff("nfs", source, Want{Size: rapid.IntRange(0, 10).Draw(t, "want")}, sim.list(), render)
		sim.authorize(ch)
		mid := oursBySource(sim)
		for id, w := range wanted(source, render) {
			if !slices.ContainsFunc(mid[id], func(a nfs.Authorization) bool { return UpToDate(a, w) }) {
				t.Fatalf("after the authorize phase member %s has %+v, want one like %+v", id, mid[id], w)
			}
		}
		for id, as := range before {
			if len(mid[id]) < len(as) {
				t.Fatalf("member %s lost authorizations in the authorize phase", id)
			}
		}
		// Every revoke names an authorization that existed before the pass.
		for _, r := range ch.Revoke {
			if !slices.ContainsFunc(before[SourceOf(r.Authorization)], func(a nfs.Authorization) bool { return a.ID == r.Authorization.ID }) {
				t.Fatalf("revoke of %s, which was not there", r.Authorization.ID)
			}
		}
	})
}
