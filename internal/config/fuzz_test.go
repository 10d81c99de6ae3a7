package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
)

// FuzzLoad feeds arbitrary bytes to the HCL loader, in memory (no file is
// written per input, so it runs thousands of inputs a second). `make test`
// runs it for a few seconds and `make fuzz` for longer. Whatever the input:
// nothing panics or overflows the stack (the limits are checked before the
// parser), every diagnostic points inside the file and renders to a bounded
// size, and a stack that loads is one CheckStored accepts once stored and
// one MarshalHCL writes back into the same model.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"../../testdata/e2e/*.hcl", "../../testdata/pets/*.hcl", "../../testdata/real/*.hcl", "../../testdata/invalid/*.hcl", "testdata/autoscale/*.hcl"} {
		files, err := filepath.Glob(filepath.FromSlash(pattern))
		if err != nil || len(files) == 0 {
			f.Fatalf("no seeds in %s (%v)", pattern, err)
		}
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		"stack \"s\" {\n  limits { max_group_size = 3 }\n}\nprovider \"p\" {}\ngroup \"g\" {\n  logical_ids = [\"a\", \"b\"]\n  instance {\n    provider = p\n    type = \"t\"\n    properties = { a = [[{ b = \"${1}\" }]] }\n  }\n  flavor { provider = p }\n}\n",
		"x = <<EOT\n[[[\nEOT\ny = \"$${\" # {{\n/* ( */",
		`stack "../x" {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		files := map[string][]byte{"stack.hcl": src}
		st, diags := config.LoadSources(files)
		checkSubjects(t, files, diags)
		var out strings.Builder
		if err := config.WriteDiagnostics(&out, st.Files, diags, false); err != nil {
			t.Fatal(err)
		}
		if limit := 4096 * (len(diags) + 1); out.Len() > limit {
			t.Fatalf("%d diagnostics render to %d bytes", len(diags), out.Len())
		}
		if diags.HasErrors() {
			return
		}

		b, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("a loaded stack does not encode: %v", err)
		}
		var stored config.Stack
		if err := json.Unmarshal(b, &stored); err != nil {
			t.Fatalf("a loaded stack does not decode: %v", err)
		}
		if err := config.CheckStored(&stored); err != nil {
			t.Fatalf("a loaded stack is refused once stored: %v\n%s", err, src)
		}

		hcl, err := st.MarshalHCL()
		if err != nil {
			t.Fatalf("a loaded stack does not convert: %v", err)
		}
		again, diags := config.LoadSources(map[string][]byte{"main.hcl": hcl})
		if diags.HasErrors() {
			t.Fatalf("MarshalHCL's output does not load:\n%s\n%s", hcl, render(again, diags))
		}
		if a, _ := json.Marshal(again); string(a) != string(b) {
			t.Fatalf("the model changed through MarshalHCL:\n%s\n%s", a, b)
		}
	})
}

// checkSubjects checks that every diagnostic about one of files points
// inside it, with lines and columns that start at 1.
func checkSubjects(t *testing.T, files map[string][]byte, diags hcl.Diagnostics) {
	t.Helper()
	for _, d := range diags {
		for _, r := range []*hcl.Range{d.Subject, d.Context} {
			if r == nil {
				continue
			}
			src, ok := files[r.Filename]
			if !ok {
				continue
			}
			if r.Start.Byte < 0 || r.Start.Byte > r.End.Byte || r.End.Byte > len(src) || r.Start.Line < 1 || r.Start.Column < 1 {
				t.Fatalf("%q points outside the file (%d bytes): %+v", d.Summary, len(src), *r)
			}
		}
	}
}
