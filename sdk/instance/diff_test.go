package instance

import (
	"slices"
	"testing"
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
