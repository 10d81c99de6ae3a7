package plan

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/instance"
)

// A memo renders only the members that joined or changed, and again every
// member once the target's expression changes.
func TestRenderMemoRendersWhatChanged(t *testing.T) {
	memo := &RenderMemo{}
	e := &config.Enrollment{Name: "nfs", Target: config.EnrollmentTarget{Properties: `{ host = member.address }`}}
	descs := func(addrs ...string) []instance.Description {
		out := make([]instance.Description, len(addrs))
		for i, a := range addrs {
			out[i] = instance.Description{ID: instance.ID(fmt.Sprintf("m-%d", i)), Address: a, Tags: map[string]string{"a": "1", "b": "2"}}
		}
		return out
	}
	scope := func(v int64) map[string]ctyjson.SimpleJSONValue {
		return map[string]ctyjson.SimpleJSONValue{"var": {Value: cty.ObjectVal(map[string]cty.Value{"v": cty.NumberIntVal(v)})}}
	}
	rendered := 0
	plan := func(ds []instance.Description) []string {
		render, done := memoRender(memo, e, func(d instance.Description) (json.RawMessage, error) {
			rendered++
			return RenderAuthorizationProperties(&e.Target, d)
		})
		defer done()
		var out []string
		for _, d := range ds {
			b, err := render(d)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b.Properties))
		}
		return out
	}
	for _, c := range []struct {
		name     string
		descs    []instance.Description
		edit     func()
		rendered int
		want     string
	}{
		{name: "first plan", descs: descs("a", "b", "c"), rendered: 3, want: `{"host":"a"}`},
		{name: "nothing changed", descs: descs("a", "b", "c"), rendered: 0, want: `{"host":"a"}`},
		{name: "one address changed", descs: descs("x", "b", "c"), rendered: 1, want: `{"host":"x"}`},
		{name: "a member joined", descs: descs("x", "b", "c", "d"), rendered: 1, want: `{"host":"x"}`},
		{name: "members left", descs: descs("x"), rendered: 0, want: `{"host":"x"}`},
		{name: "a member that left came back", descs: descs("x", "b"), rendered: 1, want: `{"host":"x"}`},
		{name: "the target changed", descs: descs("x", "b"), rendered: 2, want: `{"host":"x","v":1}`,
			edit: func() { e.Target.Properties, e.Target.Scope = `{ host = member.address, v = var.v }`, scope(1) }},
		{name: "its scope changed", descs: descs("x", "b"), rendered: 2, want: `{"host":"x","v":2}`,
			edit: func() { e.Target.Scope = scope(2) }},
		{name: "a tag changed", descs: func() []instance.Description {
			ds := descs("x", "b")
			ds[1].Tags = map[string]string{"a": "1", "b": "3"}
			return ds
		}(), rendered: 1, want: `{"host":"x","v":2}`},
	} {
		if c.edit != nil {
			c.edit()
		}
		rendered = 0
		got := plan(c.descs)
		if rendered != c.rendered || got[0] != c.want {
			t.Errorf("%s: rendered %d members (first %s), want %d (%s)", c.name, rendered, got[0], c.rendered, c.want)
		}
	}
}

// Plans made with a memo kept across them are the plans made without one,
// as members move and the target's expression changes.
func TestPropertyRenderMemoChangesNoPlan(t *testing.T) {
	exprs := []string{`{ host = member.id, iops = 10 }`, `{ host = member.address }`, `{ host = "${member.id}@${member.address}" }`}
	rapid.Check(t, func(t *rapid.T) {
		memo := &RenderMemo{}
		d := drawCase(t)
		for round := range rapid.IntRange(1, 4).Draw(t, "rounds") {
			for _, e := range d.desired.Enrollments {
				e.Target.Properties = rapid.SampledFrom(exprs).Draw(t, fmt.Sprintf("round%d.expr", round))
			}
			for name, ms := range d.world.Members {
				for i := range ms {
					ms[i].Address = rapid.SampledFrom([]string{"", "10.0.0.1:80", "10.0.0.2:80"}).Draw(t, fmt.Sprintf("round%d.%s.%d", round, name, i))
				}
			}
			d.world.Rendered = nil
			want := compute(t, d.desired, d.doc, d.world, Scope{})
			d.world.Rendered = memo
			got := compute(t, d.desired, d.doc, d.world, Scope{})
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			if string(wb) != string(gb) {
				t.Fatalf("round %d: the plan with the memo differs:\n%s\nwithout:\n%s", round, dump(got.Steps), dump(want.Steps))
			}
		}
	})
}

// The next table is the old one while nothing was rendered afresh and few
// members left; otherwise a copy, which leaves the old one as it was (a
// concurrent plan may read it), without the departed once they are many.
func TestNextTable(t *testing.T) {
	entries := func(ids ...string) map[instance.ID]renderedProps {
		m := map[instance.ID]renderedProps{}
		for _, id := range ids {
			m[instance.ID(id)] = renderedProps{sum: uint64(len(id))}
		}
		return m
	}
	ids := func(s ...string) []instance.ID {
		out := make([]instance.ID, len(s))
		for i, id := range s {
			out[i] = instance.ID(id)
		}
		return out
	}
	old := &renderTable{target: 7, members: entries("a", "b", "c", "d", "e")}
	for _, c := range []struct {
		name    string
		old     *renderTable
		hits    []instance.ID
		fresh   map[instance.ID]renderedProps
		same    bool
		wantIDs []string
	}{
		{name: "first plan", old: nil, fresh: entries("a"), wantIDs: []string{"a"}},
		{name: "nothing changed", old: old, hits: ids("a", "b", "c", "d", "e"), same: true},
		{name: "one of five left", old: old, hits: ids("a", "b", "c", "d"), same: true},
		{name: "two of five left", old: old, hits: ids("a", "b", "c"), wantIDs: []string{"a", "b", "c"}},
		{name: "one joined", old: old, hits: ids("a", "b", "c", "d", "e"), fresh: entries("f"),
			wantIDs: []string{"a", "b", "c", "d", "e", "f"}},
		{name: "one joined, two left", old: old, hits: ids("a", "b", "c"), fresh: entries("f"),
			wantIDs: []string{"a", "b", "c", "f"}},
	} {
		fresh := c.fresh
		if fresh == nil {
			fresh = map[instance.ID]renderedProps{}
		}
		got := nextTable(c.old, 7, c.hits, fresh)
		if c.same {
			if got != c.old {
				t.Errorf("%s: a new table, want the old one", c.name)
			}
			continue
		}
		if got == old || got.target != 7 || len(got.members) != len(c.wantIDs) {
			t.Errorf("%s: table %+v, want a new one of %v", c.name, got, c.wantIDs)
			continue
		}
		for _, id := range c.wantIDs {
			if _, ok := got.members[instance.ID(id)]; !ok {
				t.Errorf("%s: %s missing from %v", c.name, id, got.members)
			}
		}
		if len(old.members) != 5 {
			t.Fatalf("%s: the old table changed: %v", c.name, old.members)
		}
	}
}
