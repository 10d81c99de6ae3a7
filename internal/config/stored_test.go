package config_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
)

// storedStack is a stack as state holds it, from the e2e walk-through.
func storedStack(t *testing.T) *config.Stack {
	t.Helper()
	st, diags := config.Load("../../testdata/e2e")
	if diags.HasErrors() {
		t.Fatalf("%s", render(st, diags))
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back config.Stack
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

// TestCheckStoredRefuses: a stored stack is held to the rules the files
// are: each edit below is one a file could not make, and is refused with
// the object and the rule named.
func TestCheckStoredRefuses(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name string
		edit func(st *config.Stack)
		want string // "" passes
	}{
		{"as loaded", func(*config.Stack) {}, ""},
		{"negative size", func(st *config.Stack) { st.Groups[0].Size = n(-5) }, `group "miners": the size must be at least 0; got -5`},
		{"size 1e9", func(st *config.Stack) { st.Groups[0].Size = n(1e9) }, `1000000000 instances is more than the stack allows (100000`},
		{"size at the limit", func(st *config.Stack) { st.Groups[0].Size = n(config.DefaultMaxGroupSize) }, ""},
		{"raised limit", func(st *config.Stack) {
			st.Limits = &config.Limits{MaxGroupSize: 2e6}
			st.Groups[0].Size = n(1e6)
		}, ""},
		{"lowered limit", func(st *config.Stack) { st.Limits = &config.Limits{MaxGroupSize: 4} }, `5 instances is more than the stack allows (4, its max_group_size)`},
		{"limit out of range", func(st *config.Stack) { st.Limits = &config.Limits{MaxGroupSize: -1} }, "max_group_size must be between 1 and 10000000"},
		{"too many pets", func(st *config.Stack) {
			st.Limits = &config.Limits{MaxGroupSize: 2}
			st.Groups[0].Size, st.Groups[0].LogicalIDs = nil, []string{"a", "b", "c"}
		}, "3 instances is more than"},
		{"duplicate pet", func(st *config.Stack) { st.Groups[0].Size, st.Groups[0].LogicalIDs = nil, []string{"a", "a"} }, `logical ID "a" is listed twice`},
		{"empty pet", func(st *config.Stack) { st.Groups[0].Size, st.Groups[0].LogicalIDs = nil, []string{""} }, "must not be empty"},
		{"size and pets", func(st *config.Stack) { st.Groups[0].LogicalIDs = []string{"a"} }, "has both size and logical_ids"},
		{"path in stack name", func(st *config.Stack) { st.Name = "../../../tmp/x" }, `"../../../tmp/x" is not a valid stack name`},
		{"NUL in stack name", func(st *config.Stack) { st.Name = "a\x00b" }, "is not a valid stack name"},
		{"empty stack name", func(st *config.Stack) { st.Name = "" }, "must not be empty"},
		{"long group name", func(st *config.Stack) { st.Groups[0].Name = strings.Repeat("g", 256) }, "at most 255 bytes"},
		{"bad group name", func(st *config.Stack) { st.Groups[0].Name = "a/b" }, `"a/b" cannot be referenced`},
		{"duplicate group", func(st *config.Stack) { st.Groups[1].Name = st.Groups[0].Name }, "declared twice"},
		{"control in ingress name", func(st *config.Stack) { st.Ingresses[0].Name = "a\nb" }, "without control characters"},
		{"reserved tag", func(st *config.Stack) { st.Groups[0].Tags["INFRAKIT.stack"] = "other" }, `tag "INFRAKIT.stack" is infrakit's own`},
		{"reserved provider", func(st *config.Stack) { st.Providers[0].Name = "group" }, `"group" is reserved`},
		{"huge property", func(st *config.Stack) {
			st.Groups[0].Instance.Properties = json.RawMessage(`{"note":"` + strings.Repeat("x", config.MaxPropertyValueSize+1) + `"}`)
		}, `group "miners" instance properties: The value at attribute "note" is 262145 bytes`},
		{"properties not an object", func(st *config.Stack) { st.Groups[0].Flavors[0].Properties = json.RawMessage(`[1]`) }, "must be an object"},
		{"negative drain delay", func(st *config.Stack) { st.Groups[0].DrainDelay = -1 }, "drain_delay must be at least 0s"},
		{"negative max_unavailable", func(st *config.Stack) { st.Groups[0].Update.MaxUnavailable = -1 }, "max_unavailable must be at least 0"},
		{"negative brake_min", func(st *config.Stack) { st.Groups[0].Health.BrakeMin = -1 }, "brake_min must be at least 0"},
		{"port out of range", func(st *config.Stack) { st.Ingresses[0].Rules[0].Routes[0].LBPort = 70000 }, "lb_port must be between 1 and 65535"},
		{"deep target properties", func(st *config.Stack) {
			st.Enrollments[0].Target.Properties = strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
		}, "nest more than 64 deep"},
		{"target properties do not parse", func(st *config.Stack) { st.Enrollments[0].Target.Properties = "{ a = " }, "do not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storedStack(t)
			tc.edit(st)
			err := config.CheckStored(st)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, config.ErrInvalidStored) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStored = %v, want it to say %q", err, tc.want)
			}
			if len(err.Error()) > 2000 {
				t.Errorf("the error is %d bytes long", len(err.Error()))
			}
		})
	}
}

// TestCheckStoredAcceptsWhatLoads: every stack the loader accepts passes
// CheckStored once stored, so a valid state is never refused.
func TestCheckStoredAcceptsWhatLoads(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := genStack().Draw(t, "stack")
		src, err := st.MarshalHCL()
		if err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "stored")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.WriteFile(filepath.Join(dir, "stack.hcl"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		loaded, diags := config.Load(dir)
		if diags.HasErrors() {
			t.Fatalf("%s", render(loaded, diags))
		}
		b, err := json.Marshal(loaded)
		if err != nil {
			t.Fatal(err)
		}
		var stored config.Stack
		if err := json.Unmarshal(b, &stored); err != nil {
			t.Fatal(err)
		}
		if err := config.CheckStored(&stored); err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
	})
}
