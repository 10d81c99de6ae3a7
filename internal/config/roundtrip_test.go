package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
)

// jsonRoundTrip marshals and unmarshals a stack.
func jsonRoundTrip(t tb, st *config.Stack) *config.Stack {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out config.Stack
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return &out
}

func TestJSONRoundTripTestdata(t *testing.T) {
	for _, dir := range []string{"e2e", "pets"} {
		st, diags := config.Load(filepath.Join("../../testdata", dir))
		if len(diags) > 0 {
			t.Fatalf("%s:\n%s", dir, render(st, diags))
		}
		back := jsonRoundTrip(t, st)
		assertSameModel(t, back, clearSource(st))
	}
}

// TestJSONRoundTrip: any stack survives being stored in state.
func TestJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := genStack().Draw(t, "stack")
		assertSameModel(t, jsonRoundTrip(t, st), st)
	})
}

// TestEnrollmentPropertiesFromState: target properties kept as source text
// render the same after a JSON round trip as from the parsed file.
func TestEnrollmentPropertiesFromState(t *testing.T) {
	st, diags := config.Load("../../testdata/e2e")
	if len(diags) > 0 {
		t.Fatal(render(st, diags))
	}
	member := memberOf(t, "i-1", "", map[string]string{"infrakit.group": "cattle"}, `{"cpu":2}`, "10.0.0.9")
	fromFile, err := st.Enrollments[0].Target.RenderProperties(member)
	if err != nil {
		t.Fatal(err)
	}
	fromState, err := jsonRoundTrip(t, st).Enrollments[0].Target.RenderProperties(member)
	if err != nil {
		t.Fatal(err)
	}
	if string(fromFile) != `{"host":"i-1","iops":10}` || string(fromState) != string(fromFile) {
		t.Errorf("from file %s, from state %s", fromFile, fromState)
	}
}

// mangle re-indents every line at random: what fmt must undo.
func mangle(t *rapid.T, src []byte) []byte {
	lines := strings.Split(strings.TrimSuffix(string(src), "\n"), "\n")
	for i, line := range lines {
		indent := rapid.SampledFrom([]string{"", " ", "   ", "\t", " \t  "}).Draw(t, "indent")
		trail := rapid.SampledFrom([]string{"", " ", "\t"}).Draw(t, "trail")
		lines[i] = indent + strings.TrimLeft(line, " ") + trail
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// TestHCLProperties: for any stack, MarshalHCL writes a file that loads back
// into the same model; fmt turns any re-indentation of it back into exactly
// what MarshalHCL wrote; and Format is idempotent.
func TestHCLProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := genStack().Draw(t, "stack")
		src, err := st.MarshalHCL()
		if err != nil {
			t.Fatal(err)
		}
		messy := mangle(t, src)

		formatted, diags := config.Format(messy, "stack.hcl")
		if diags.HasErrors() {
			t.Fatalf("format: %s\n%s", diags, messy)
		}
		if string(formatted) != string(src) {
			t.Fatalf("fmt of re-indented MarshalHCL output differs:\n%s\nwant:\n%s", formatted, src)
		}
		again, _ := config.Format(formatted, "stack.hcl")
		if string(again) != string(formatted) {
			t.Fatalf("Format is not idempotent:\n%s\nthen:\n%s", formatted, again)
		}

		for _, variant := range [][]byte{src, messy} {
			dir, err := os.MkdirTemp("", "hclprop")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.WriteFile(filepath.Join(dir, "stack.hcl"), variant, 0o644); err != nil {
				t.Fatal(err)
			}
			loaded, diags := config.Load(dir)
			if len(diags) > 0 {
				t.Fatalf("load:\n%s\n%s", render(loaded, diags), variant)
			}
			assertSameModel(t, clearSource(loaded), st)
		}
	})
}

// TestFormatTestdata: the pets example is formatted, and formatting any
// stack we ship is idempotent.
func TestFormatTestdata(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/*/*.hcl")
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, diags := config.Format(src, f)
		if strings.HasSuffix(f, "syntax_error.hcl") {
			if !diags.HasErrors() || out != nil {
				t.Errorf("%s: syntax errors not reported: %v", f, diags)
			}
			continue
		}
		if diags.HasErrors() {
			t.Errorf("%s: %s", f, diags)
			continue
		}
		// e2e is the DESIGN.md example byte for byte, comment layout and all.
		if strings.Contains(f, "/pets/") {
			if string(out) != string(src) {
				t.Errorf("%s is not formatted:\n%s", f, out)
			}
		}
		if again, _ := config.Format(out, f); string(again) != string(out) {
			t.Errorf("%s: Format is not idempotent", f)
		}
	}
}

func TestFormat(t *testing.T) {
	out, diags := config.Format([]byte("stack \"s\" {}\ngroup \"g\" {\nsize=1\n  tags = {a=\"b\", long_key = \"c\"}\n}\n"), "x.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := "stack \"s\" {}\ngroup \"g\" {\n  size = 1\n  tags = { a = \"b\", long_key = \"c\" }\n}\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	_, diags = config.Format([]byte("group \"g\" {\n"), "broken.hcl")
	if !diags.HasErrors() || diags[0].Subject == nil || diags[0].Subject.Filename != "broken.hcl" {
		t.Errorf("diags = %v", diags)
	}
}
