package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// limitsStack is one cattle group of size (an HCL expression) on the
// simulator, with its own flavor.
func limitsStack(size string) string {
	return `stack "limits" {}

provider "simulator" {}

group "web" {
  size = ` + size + `
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor {
    provider = simulator
    type     = "simulator"
  }
}
`
}

// TestValidateRefusesHugeGroup: size = 1e9 is refused by validate and plan
// at the attribute, with the limit named, instead of planning a billion
// instances; a limits block raises the limit.
func TestValidateRefusesHugeGroup(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("main.hcl", limitsStack("1e9"))
	for _, verb := range []string{"validate", "plan"} {
		res := w.expect(1, verb)
		for _, want := range []string{"Error: Group too large", "on main.hcl:6:10", "size = 1e9", "(100000, the default max_group_size)", "limits { max_group_size = 1000000000 }"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("%s: stderr lacks %q\n%s", verb, want, res)
			}
		}
	}

	w.writeFile("main.hcl", strings.Replace(limitsStack("150000"), `stack "limits" {}`, "stack \"limits\" {\n  limits { max_group_size = 200000 }\n}", 1))
	w.init()
	if res := w.ok("validate"); !strings.Contains(res.stdout, "Success!") {
		t.Errorf("a raised limit is not accepted:\n%s", res)
	}
}

// TestLimitsRefuseDeepAndHugeFiles: a file nested 100,000 deep (which
// overflowed the parser's stack) and one over 4 MiB are refused by init
// and validate before they are parsed, with a short diagnostic at the
// place, and a 3 MB property value is refused with only its prefix shown.
func TestLimitsRefuseDeepAndHugeFiles(t *testing.T) {
	deep := "x = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n"
	big := strings.Repeat("# padding padding padding padding\n", (5<<20)/34)
	value := strings.Replace(limitsStack("1"), `type     = "compute"`,
		`type     = "compute"`+"\n    properties = { note = \""+strings.Repeat("x", 3<<20)+"\" }", 1)
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"deep", deep, []string{"Error: Nesting too deep", "on extra.hcl:1:69", "nest more than 64 deep"}},
		{"huge", big, []string{"Error: File too large", "on extra.hcl:1:1", "larger than 4194304 bytes (4 MiB)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkdir(t)
			w.writeFile("main.hcl", limitsStack("1"))
			w.writeFile("extra.hcl", tc.src)
			for _, verb := range [][]string{{"init", "-plugin-dir", binDir}, {"validate"}} {
				start := time.Now()
				res := w.expect(1, verb...)
				t.Logf("%s refused in %s", verb[0], time.Since(start))
				for _, want := range tc.want {
					if !strings.Contains(res.stderr, want) {
						t.Errorf("%s: stderr lacks %q\n%.3000s", verb[0], want, res.stderr)
					}
				}
				if n := len(res.stderr) + len(res.stdout); n > 4000 {
					t.Errorf("%s printed %d bytes", verb[0], n)
				}
			}
		})
	}
	t.Run("value", func(t *testing.T) {
		w := newWorkdir(t)
		w.writeFile("main.hcl", value)
		res := w.expect(1, "validate")
		for _, want := range []string{"Error: Property value too large", "on main.hcl:10:27", "This value is 3145728 bytes", `It starts "xxxxxxxx`} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("stderr lacks %q\n%.3000s", want, res.stderr)
			}
		}
		if n := len(res.stderr); n > 4000 {
			t.Errorf("validate printed %d bytes", n)
		}
	})
}

// TestStackNameRules: a stack name obeys the rule of other names, so one
// that would escape a key prefix or hide a NUL is refused at the label.
func TestStackNameRules(t *testing.T) {
	w := newWorkdir(t)
	for _, name := range []string{"../../../tmp/x", `a\u0000b`, "my.stack"} {
		w.writeFile("main.hcl", strings.Replace(limitsStack("1"), `stack "limits"`, `stack "`+name+`"`, 1))
		res := w.expect(1, "validate")
		if !strings.Contains(res.stderr, "Error: Invalid stack name") || !strings.Contains(res.stderr, "on main.hcl:1:7") {
			t.Errorf("%q:\n%s", name, res)
		}
	}
	w.writeFile("main.hcl", strings.Replace(limitsStack("1"), "size = 1", "size = 1\n  tags = { \"INFRAKIT.stack\" = \"other\" }", 1))
	if res := w.expect(1, "validate"); !strings.Contains(res.stderr, "Error: Reserved tag") {
		t.Errorf("a reserved tag in capitals is accepted:\n%s", res)
	}
}

// TestInvalidStoredStackIsRefused: a state whose stored stack says size -5
// (which drove watch to destroy the whole group) or 1e9 (which drove it to
// gigabytes) is refused by plan, apply, group scale and watch, and nothing
// is destroyed or created; group scale past the limit is refused too.
func TestInvalidStoredStackIsRefused(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("main.hcl", limitsStack("2"))
	w.init()
	w.ok("apply", "-auto-approve")
	before := w.fileStamps("compute")
	if len(before) != 2 {
		t.Fatalf("apply made %d instances, want 2", len(before))
	}

	res := w.expect(1, "group", "scale", "web", "1000000000")
	if !strings.Contains(res.stderr, `group "web": 1000000000 instances is more than the stack allows (100000, the default max_group_size)`) {
		t.Errorf("group scale past the limit:\n%s", res)
	}

	statePath := filepath.Join(w.dir, "infrakit.state.json")
	valid, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ size, want string }{
		{"-5", `group "web": the size must be at least 0; got -5`},
		{"1000000000", `group "web": 1000000000 instances is more than the stack allows`},
	} {
		t.Run("size "+tc.size, func(t *testing.T) {
			writeStoredSize(t, statePath, valid, tc.size)
			for _, args := range [][]string{
				{"plan"}, {"apply", "-auto-approve"}, {"group", "scale", "web", "1"}, {"group", "ls", "web"},
				{"watch", "-listen", "127.0.0.1:0", "-interval", "100ms"},
			} {
				res := w.expect(1, args...)
				for _, want := range []string{"the desired stack it holds is not valid", tc.want, "refusing to use or overwrite it"} {
					if !strings.Contains(res.stderr, want) {
						t.Errorf("%s: stderr lacks %q\n%s", args[0], want, res)
					}
				}
			}
			if after := w.fileStamps("compute"); !maps.Equal(after, before) {
				t.Errorf("the instances changed: %v, were %v", after, before)
			}
		})
	}

	// A watch running on the valid state when the state is damaged under
	// it refuses the damaged one and acts on nothing it says.
	if err := os.WriteFile(statePath, valid, 0o644); err != nil {
		t.Fatal(err)
	}
	p := w.startWatch(nil, "-interval", "100ms")
	within(t, time.Minute, "a watch pass", func() bool { return p.status().Passes >= 1 })
	writeStoredSize(t, statePath, valid, "-5")
	within(t, time.Minute, "watch refusing the state", func() bool {
		return strings.Contains(p.stderr.String(), "the desired stack it holds is not valid")
	})
	passes := p.status().Passes
	within(t, time.Minute, "three more passes", func() bool { return p.status().Passes >= passes+3 })
	if after := w.fileStamps("compute"); !maps.Equal(after, before) {
		t.Errorf("watch changed the instances: %v, were %v", after, before)
	}
}

// writeStoredSize writes the state valid with its stored group's size
// replaced by size (a JSON number) and its serial moved on, as an edit by
// hand would.
func writeStoredSize(t *testing.T, path string, valid []byte, size string) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(valid, &doc); err != nil {
		t.Fatal(err)
	}
	stack := doc["stack"].(map[string]any)
	stack["groups"].([]any)[0].(map[string]any)["size"] = json.Number(size)
	doc["serial"] = doc["serial"].(float64) + 1
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".edit"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
