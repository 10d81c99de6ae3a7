package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
)

// limitsStack is a stack with one group; stackBody goes inside the stack
// block and group inside the group block, before its instance block.
func limitsStack(stackBody, group, props string) string {
	return fmt.Sprintf(`stack "s" {
%s
}
provider "simulator" {}
provider "vanilla" {}

group "web" {
  %s
  instance {
    provider   = simulator
    type       = "compute"
    properties = %s
  }
  flavor { provider = vanilla }
}
`, stackBody, group, props)
}

// TestGroupSizeLimit: a group's size and number of logical IDs are bounded
// by max_group_size (default 100,000; the stack's limits block sets it),
// reported at the attribute with the limit and where it is set.
func TestGroupSizeLimit(t *testing.T) {
	ids := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%q,", fmt.Sprint("10.0.", i/256, ".", i%256))
		}
		return "logical_ids = [" + b.String() + "]"
	}
	for _, tc := range []struct {
		name, stack, group string
		want, at           string // a summary and where; "" loads
		detail             string
	}{
		{"default allows 100000", "", "size = 100000", "", "", ""},
		{"1e9 refused", "", "size = 1e9", "Group too large", "stack.hcl:8:10", "1000000000 instances is more than the stack allows (100000, the default max_group_size)"},
		{"just over", "", "size = 100001", "Group too large", "stack.hcl:8:10", "max_group_size = 100001"},
		{"negative", "", "size = -5", "Invalid value", "stack.hcl:8:10", "at least 0"},
		{"limit raised", "limits { max_group_size = 200000 }", "size = 150000", "", "", ""},
		{"limit lowered", "limits {\n  max_group_size = 3\n}", "size = 4", "Group too large", "stack.hcl:10:10", "The limit is set at "},
		{"pets counted", "limits { max_group_size = 3 }", ids(4), "Group too large", "stack.hcl:8:17", "4 instances"},
		{"pets within", "limits { max_group_size = 3 }", ids(3), "", "", ""},
		{"limit zero", "limits { max_group_size = 0 }", "size = 1", "Invalid value", "stack.hcl:2:27", "between 1 and 10000000"},
		{"limit beyond ceiling", "limits { max_group_size = 20000000 }", "size = 1", "Invalid value", "stack.hcl:2:27", "between 1 and 10000000"},
		{"unknown limit", "limits { max_groups = 3 }", "size = 1", "Unsupported argument", "stack.hcl:2:10", ""},
		{"two limits blocks", "limits {}\nlimits {}", "size = 1", "Duplicate limits block", "stack.hcl:3:1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, diags, dir := loadSource(t, map[string]string{"stack.hcl": limitsStack(tc.stack, tc.group, "{}")})
			if tc.want == "" {
				if diags.HasErrors() {
					t.Fatalf("refused:\n%s", render(st, diags))
				}
				return
			}
			d := diagnostic(t, st, diags, tc.want)
			if got := pos(dir, d.Subject); got != tc.at || !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("at %s (want %s): %s", got, tc.at, d.Detail)
			}
		})
	}
}

// TestMaxGroupSizeStored: the limits block is part of the model (stored in
// state, so group scale obeys it) and survives MarshalHCL.
func TestMaxGroupSizeStored(t *testing.T) {
	st := mustLoad(t, limitsStack("limits { max_group_size = 7 }", "size = 2", "{}"))
	if st.MaxGroupSize() != 7 {
		t.Fatalf("MaxGroupSize = %d, want 7", st.MaxGroupSize())
	}
	if err := config.CheckGroupSize(st, "web", 8); err == nil || !strings.Contains(err.Error(), "its max_group_size") {
		t.Errorf("CheckGroupSize(8) = %v", err)
	}
	if err := config.CheckGroupSize(st, "web", 7); err != nil {
		t.Errorf("CheckGroupSize(7) = %v", err)
	}
	out, err := st.MarshalHCL()
	if err != nil || !strings.Contains(string(out), "max_group_size = 7") {
		t.Fatalf("MarshalHCL: %v\n%s", err, out)
	}
	if (&config.Stack{}).MaxGroupSize() != config.DefaultMaxGroupSize {
		t.Error("a stack without limits does not get the default")
	}
}

// TestPropertyValueLimit: a property string over MaxPropertyValueSize is
// refused at the value, and the diagnostic shows only a prefix of it —
// neither the detail nor the rendered snippet grows with the value.
func TestPropertyValueLimit(t *testing.T) {
	huge := strings.Repeat("x", 3<<20)
	for _, tc := range []struct{ name, props, at string }{
		{"top level", fmt.Sprintf(`{ note = %q }`, huge), "stack.hcl:12:27"},
		{"nested", fmt.Sprintf(`{ a = { b = ["ok", %q] } }`, huge), "stack.hcl:12:37"},
		{"key", fmt.Sprintf(`{ %q = 1 }`, huge), "stack.hcl:12:20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := limitsStack("", "size = 1", tc.props)
			st, diags, dir := loadSource(t, map[string]string{"stack.hcl": src})
			d := diagnostic(t, st, diags, "Property value too large")
			if got := pos(dir, d.Subject); got != tc.at {
				t.Errorf("at %s, want %s", got, tc.at)
			}
			if !strings.Contains(d.Detail, fmt.Sprint(3<<20, " bytes")) || !strings.Contains(d.Detail, `"xxxx`) {
				t.Errorf("detail: %s", d.Detail)
			}
			if out := render(st, diags); len(out) > 2000 {
				t.Errorf("the rendered diagnostics are %d bytes:\n%.3000s", len(out), out)
			}
		})
	}

	// At the limit it loads.
	mustLoad(t, limitsStack("", "size = 1", fmt.Sprintf(`{ note = %q }`, strings.Repeat("x", config.MaxPropertyValueSize))))

	// A tag value has the same limit.
	st, diags, _ := loadSource(t, map[string]string{"stack.hcl": limitsStack("",
		fmt.Sprintf("size = 1\n  tags = { big = %q }", strings.Repeat("t", config.MaxPropertyValueSize+1)), "{}")})
	if d := diagnostic(t, st, diags, "Invalid tag"); !strings.Contains(d.Detail, `tag "big"`) {
		t.Errorf("detail: %s", d.Detail)
	}
}

// TestPropertiesSizeLimit: one block's properties are at most
// MaxPropertiesSize as sent to the provider, even when each value is small.
func TestPropertiesSizeLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("{\n")
	chunk := strings.Repeat("p", 200<<10)
	for i := range 6 {
		fmt.Fprintf(&b, "      k%d = %q\n", i, chunk)
	}
	b.WriteString("    }")
	st, diags, dir := loadSource(t, map[string]string{"stack.hcl": limitsStack("", "size = 1", b.String())})
	d := diagnostic(t, st, diags, "Properties too large")
	if got := pos(dir, d.Subject); got != "stack.hcl:12:18" {
		t.Errorf("at %s", got)
	}
}

// TestSourceLimits: a file over MaxFileSize, or nested deeper than
// MaxNestingDepth, is refused before the parser sees it — fast, whatever
// the depth — with the place; brackets in strings and comments do not count.
func TestSourceLimits(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name, file, src string
		want, at        string // "" passes
	}{
		{"at the limit", "a.hcl", "x = " + deep(config.MaxNestingDepth), "", ""},
		{"one deeper", "a.hcl", "x = " + deep(config.MaxNestingDepth+1), "Nesting too deep", "a.hcl:1:69"},
		{"100000 deep", "a.hcl", "x = " + deep(100_000), "Nesting too deep", "a.hcl:1:69"},
		{"objects", "a.hcl", "x = " + strings.Repeat("{a=", 70) + strings.Repeat("}", 70), "Nesting too deep", "a.hcl:1:197"},
		{"in a string", "a.hcl", `x = "` + strings.Repeat("[", 1000) + `"`, "", ""},
		{"escaped quote", "a.hcl", `x = "\"` + strings.Repeat("{", 1000) + `"`, "", ""},
		{"in comments", "a.hcl", "# " + strings.Repeat("(", 1000) + "\n// " + strings.Repeat("(", 1000) + "\n/* " + strings.Repeat("{", 1000) + " */", "", ""},
		{"in a heredoc", "a.hcl", "x = <<EOT\n" + strings.Repeat("[", 1000) + "\nEOT\n", "", ""},
		{"interpolations", "a.hcl", "x = " + strings.Repeat(`"${`, 70) + strings.Repeat(`}"`, 70), "Nesting too deep", "a.hcl:1:198"},
		{"escaped interpolation", "a.hcl", `x = "` + strings.Repeat("$${", 1000) + `"`, "", ""},
		{"json", "a.json", strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70), "Nesting too deep", "a.json:1:321"},
		{"json string", "a.json", `{"a": "` + strings.Repeat("[", 1000) + `"}`, "", ""},
		{"yaml flow", "a.yaml", "a: " + deep(100), "Nesting too deep", "a.yaml:1:68"},
		{"yaml quoted", "a.yaml", "a: '" + strings.Repeat("[", 1000) + "'\nb: \"" + strings.Repeat("{", 1000) + "\"", "", ""},
		{"yaml apostrophe", "a.yaml", "a: don't\nb: " + deep(100), "Nesting too deep", "a.yaml:2:68"},
		{"too large", "a.hcl", strings.Repeat("#\n", config.MaxFileSize/2+1), "File too large", "a.hcl:1:1"},
		{"at the size limit", "a.hcl", strings.Repeat("#\n", config.MaxFileSize/2), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			diags := config.CheckSource(tc.file, []byte(tc.src))
			if tc.want == "" {
				if diags.HasErrors() {
					t.Fatalf("refused: %s", diags.Error())
				}
				return
			}
			if len(diags) != 1 || diags[0].Summary != tc.want {
				t.Fatalf("diagnostics %v, want %q", diags, tc.want)
			}
			if got := pos("", diags[0].Subject); got != tc.at {
				t.Errorf("at %s, want %s", got, tc.at)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

// TestLoadRefusesDeepAndLargeFiles: Load applies CheckSource to every stack
// file, HCL and specifications alike, before parsing; the diagnostic shows
// a clipped line, not the whole of it.
func TestLoadRefusesDeepAndLargeFiles(t *testing.T) {
	deep := "x = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n"
	for _, tc := range []struct{ file, src, want string }{
		{"deep.hcl", deep, "Nesting too deep"},
		{"big.hcl", strings.Repeat("# padding\n", config.MaxFileSize/10+1), "File too large"},
		{"deep.json", strings.Repeat(`{"ID":`, 100_000), "Nesting too deep"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			st, diags, _ := loadSource(t, map[string]string{"stack.hcl": `stack "s" {}`, tc.file: tc.src})
			d := diagnostic(t, st, diags, tc.want)
			if d.Subject == nil || !strings.HasSuffix(d.Subject.Filename, tc.file) {
				t.Errorf("subject %v", d.Subject)
			}
			if out := render(st, diags); len(out) > 2000 {
				t.Errorf("the rendered diagnostics are %d bytes", len(out))
			}
		})
	}
}

// TestFormatRefusesDeepFiles: fmt does not hand a too-deep file to the parser.
func TestFormatRefusesDeepFiles(t *testing.T) {
	_, diags := config.Format([]byte("x = "+strings.Repeat("(", 100_000)), "a.hcl")
	if len(diags) != 1 || diags[0].Summary != "Nesting too deep" {
		t.Fatalf("diagnostics %v", diags)
	}
}

// TestImpliedNameObeysTheRule: a stack named after its directory gets a
// name CheckStackName accepts, whatever the directory is called.
func TestImpliedNameObeysTheRule(t *testing.T) {
	for dir, want := range map[string]string{"my.app": "my-app", "2024": "_2024", "web": "web", "a b/": "a-b", "-x": "_-x", "café": "café"} {
		parent := t.TempDir()
		path := filepath.Join(parent, dir)
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "web.json"), []byte(webGroupJSON), 0o644); err != nil {
			t.Fatal(err)
		}
		st, diags := config.Load(path)
		if st.Name != want || diags.HasErrors() || config.CheckStackName(st.Name) != nil {
			t.Errorf("directory %q: stack %q, want %q\n%s", dir, st.Name, want, render(st, diags))
		}
	}
}
