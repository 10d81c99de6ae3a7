package config_test

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
)

// TestConfigHashStable pins the hash of the e2e groups. Instances carry it
// as the infrakit.config.hash tag, so a change here rolls every instance of
// every user on upgrade: change the expected values only on purpose. They
// were computed apart from this code, as the first 16 hex digits of the
// SHA-256 of {"instance":{"provider":..,"type":..,"properties":..},"flavors":[..]}
// written compactly with sorted property keys.
func TestConfigHashStable(t *testing.T) {
	st := e2eModel()
	want := map[string]string{"miners": "b6aaa404b16cebf7", "cattle": "d2b7475bc879a524"}
	for _, g := range st.Groups {
		if got := g.ConfigHash(); got != want[g.Name] {
			t.Errorf("ConfigHash(%s) = %s, want %s", g.Name, got, want[g.Name])
		}
	}
	if st.Groups[0].ConfigHash() == st.Groups[1].ConfigHash() {
		t.Error("different groups hash the same")
	}
}

// TestConfigHashProperties: size, logical IDs, tags, update and health never
// change the hash; the order of keys in properties does not either; changing
// the instance or a flavor does.
func TestConfigHashProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := genStack().Filter(func(s *config.Stack) bool { return len(s.Groups) > 0 }).Draw(t, "stack")
		g := st.Groups[0]
		h := g.ConfigHash()
		if len(h) != 16 {
			t.Fatalf("hash %q is not 16 hex digits", h)
		}

		// Everything outside the instance and flavor sections.
		other := *g
		other.Name = "renamed"
		if rapid.Bool().Draw(t, "pets") {
			other.Size, other.LogicalIDs = nil, []string{"x", "y"}
		} else {
			other.Size, other.LogicalIDs = intPtr(rapid.IntRange(0, 1000).Draw(t, "size")), nil
		}
		other.Tags = map[string]string{"t": rapid.String().Draw(t, "tag")}
		other.Update = config.UpdatePolicy{MaxParallel: 7, MaxUnavailable: 3, HealthTimeout: config.Duration(time.Hour)}
		other.Health = config.HealthPolicy{Grace: 0, ReplaceUnhealthy: !g.Health.ReplaceUnhealthy, MaxReplacementsPerHour: 9, BrakeMin: 2}
		if other.ConfigHash() != h {
			t.Fatal("a change outside instance and flavors changed the hash")
		}

		// Key order and spacing of the properties JSON.
		reordered := *g
		reordered.Instance.Properties = reencode(t, g.Instance.Properties)
		if reordered.ConfigHash() != h {
			t.Fatalf("re-encoding %s as %s changed the hash", g.Instance.Properties, reordered.Instance.Properties)
		}

		// A type ValidateWithProviders filled in does not count.
		implied := *g
		implied.Flavors = append([]config.Plugin(nil), g.Flavors...)
		if implied.Flavors[0].Type == "" {
			implied.Flavors[0].Type, implied.Flavors[0].TypeImplied = "filled", true
			if implied.ConfigHash() != h {
				t.Fatal("an implied flavor type changed the hash")
			}
		}

		// Any change to the member configuration does.
		changed := *g
		changed.Flavors = append([]config.Plugin(nil), g.Flavors...)
		switch rapid.IntRange(0, 4).Draw(t, "change") {
		case 0:
			changed.Instance.Type += "x"
		case 1:
			changed.Instance.Provider += "x"
		case 2:
			changed.Instance.Properties = json.RawMessage(`{"changed":true}`)
		case 3:
			changed.Flavors[0].Properties = json.RawMessage(`{"changed":true}`)
		case 4:
			changed.Flavors = append(changed.Flavors, config.Plugin{Provider: "extra"})
		}
		if string(changed.Instance.Properties) == string(g.Instance.Properties) && len(changed.Flavors) == len(g.Flavors) &&
			string(changed.Flavors[0].Properties) == string(g.Flavors[0].Properties) &&
			changed.Instance.Type == g.Instance.Type && changed.Instance.Provider == g.Instance.Provider {
			return // the drawn change happened to be no change
		}
		if changed.ConfigHash() == h {
			t.Fatal("a change to the member configuration kept the hash")
		}
	})
}

// reencode writes the same JSON with keys in reverse order and extra spaces.
func reencode(t *rapid.T, b json.RawMessage) json.RawMessage {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var write func(v any) string
	write = func(v any) string {
		switch x := v.(type) {
		case map[string]any:
			out := "{ "
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Sort(sort.Reverse(sort.StringSlice(keys)))
			for i, k := range keys {
				if i > 0 {
					out += " , "
				}
				kb, _ := json.Marshal(k)
				out += string(kb) + " : " + write(x[k])
			}
			return out + " }"
		case []any:
			out := "[ "
			for i, e := range x {
				if i > 0 {
					out += ", "
				}
				out += write(e)
			}
			return out + " ]"
		default:
			eb, _ := json.Marshal(x)
			return string(eb)
		}
	}
	return json.RawMessage(write(v))
}
