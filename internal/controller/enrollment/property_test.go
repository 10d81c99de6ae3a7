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

// After both phases every running member has exactly one up-to-date
// authorization, no other member gains one, foreign authorizations are
// untouched, and a second diff is empty.
func TestPropertyConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		source, render, sim := genSource(t), genRender(t), genObserved(t)
		foreignBefore := foreign(sim)
		live := map[instance.ID]bool{}
		for _, m := range source {
			if m.State == running || m.State == pending {
				live[m.ID] = true
			}
		}
		ch := Diff("nfs", source, sim.list(), render)
		sim.authorize(ch)
		sim.revoke(ch)

		want := wanted(source, render)
		ours := oursBySource(sim)
		for id, w := range want {
			if len(ours[id]) != 1 || !UpToDate(ours[id][0], w) {
				t.Fatalf("member %s has %+v, want one like %+v", id, ours[id], w)
			}
		}
		for id := range ours {
			if _, ok := want[id]; !ok && !live[id] {
				t.Fatalf("%s is no live member but has %+v", id, ours[id])
			}
		}
		if got := foreign(sim); !slices.EqualFunc(got, foreignBefore, func(a, b nfs.Authorization) bool { return a.ID == b.ID }) {
			t.Fatalf("foreign authorizations changed: %v → %v", foreignBefore, got)
		}
		if again := Diff("nfs", source, sim.list(), render); !again.Empty() {
			t.Fatalf("diff after applying: %+v", again)
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
		ch := Diff("nfs", source, sim.list(), render)
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
