package instance

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestDiff(t *testing.T) {
	lid := LogicalID("db-1")
	other := LogicalID("db-2")
	base := map[ID]Description{
		"a": {ID: "a", State: StateRunning, Address: "10.0.0.1", Tags: map[string]string{"k": "v"}},
		"b": {ID: "b", State: StatePending},
		"c": {ID: "c", State: StateRunning, LogicalID: &lid},
	}
	tests := []struct {
		name string
		next map[ID]Description
		want []string // "type id", sorted by id
	}{
		{"nothing changed", base, nil},
		{"all gone", map[ID]Description{}, []string{"gone a", "gone b", "gone c"}},
		{"one new", with(base, Description{ID: "d"}), []string{"changed d"}},
		{"state", with(base, Description{ID: "b", State: StateRunning}), []string{"changed b"}},
		{"address", with(base, Description{ID: "a", State: StateRunning, Address: "10.0.0.2", Tags: map[string]string{"k": "v"}}), []string{"changed a"}},
		{"tags", with(base, Description{ID: "a", State: StateRunning, Address: "10.0.0.1", Tags: map[string]string{"k": "w"}}), []string{"changed a"}},
		{"logical id", with(base, Description{ID: "c", State: StateRunning, LogicalID: &other}), []string{"changed c"}},
		{"properties ignored", with(base, Description{ID: "b", State: StatePending, Properties: []byte(`{"x":1}`)}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range Diff(base, tt.next) {
				got = append(got, string(e.Type)+" "+string(e.ID))
				if (e.Type == EventGone) != (e.Instance == nil) {
					t.Errorf("%s %s: Instance %v", e.Type, e.ID, e.Instance)
				}
				if e.Instance != nil && e.Instance.ID != e.ID {
					t.Errorf("event %s carries %s", e.ID, e.Instance.ID)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Diff = %q, want %q", got, tt.want)
			}
		})
	}
}

func with(m map[ID]Description, d Description) map[ID]Description {
	out := make(map[ID]Description, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[d.ID] = d
	return out
}

// TestDiffProperty: applying the events of Diff(prev, next), which
// Watch sends, to prev yields next.
func TestDiffProperty(t *testing.T) {
	gen := rapid.MapOf(rapid.SampledFrom([]ID{"a", "b", "c", "d", "e"}),
		rapid.Custom(func(t *rapid.T) Description {
			return Description{
				State: rapid.SampledFrom([]State{StateRunning, StateTerminating}).Draw(t, "state"),
				Tags:  rapid.MapOf(rapid.SampledFrom([]string{"x", "y"}), rapid.SampledFrom([]string{"1", "2"})).Draw(t, "tags"),
			}
		}))
	rapid.Check(t, func(t *rapid.T) {
		prev, next := gen.Draw(t, "prev"), gen.Draw(t, "next")
		for _, m := range []map[ID]Description{prev, next} {
			for id, d := range m {
				d.ID = id
				m[id] = d
			}
		}
		got := maps.Clone(prev)
		for _, e := range Diff(prev, next) {
			if e.Type == EventGone {
				delete(got, e.ID)
			} else {
				got[e.ID] = *e.Instance
			}
		}
		if len(got) != len(next) {
			t.Fatalf("applied diff has %d instances, want %d", len(got), len(next))
		}
		for id, d := range next {
			if !SameObservation(got[id], d) {
				t.Fatalf("instance %s: applied diff gives %+v, want %+v", id, got[id], d)
			}
		}
	})
}
