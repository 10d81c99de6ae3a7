package command

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/infrakit/infrakit/internal/config"
)

// hclFence is one ```hcl example of a doc page.
var hclFence = regexp.MustCompile("(?ms)^```hcl\n(.*?)^```")

// groupRef finds the groups an example refers to.
var groupRef = regexp.MustCompile(`\bgroup\.([A-Za-z_][A-Za-z0-9_-]*)`)

// TestLanguageDocExamples loads every ```hcl example of website/language.md
// and fails on any error, so the language page cannot show what the
// loader refuses. An example that shows one block alone is completed
// with what it leaves out: a stack block, the shipped providers, and a
// small group for each group it refers to without declaring it.
func TestLanguageDocExamples(t *testing.T) {
	data, err := os.ReadFile("../website/language.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := hclFence.FindAllStringSubmatch(string(data), -1)
	if len(examples) < 8 {
		t.Fatalf("found %d hcl examples; the page has more", len(examples))
	}
	for i, m := range examples {
		src := m[1]
		t.Run(fmt.Sprintf("example %d", i+1), func(t *testing.T) {
			sources := map[string][]byte{"example.hcl": []byte(src)}
			if ctx := exampleContext(t, src); ctx != "" {
				sources["context.hcl"] = []byte(ctx)
			}
			st, diags := config.LoadSources(sources)
			if diags.HasErrors() {
				var b strings.Builder
				_ = config.WriteDiagnostics(&b, st.Files, diags, false)
				t.Fatalf("the example does not load:\n%s\n%s", src, b.String())
			}
		})
	}
}

// exampleContext is what src needs beside it to be a whole stack.
func exampleContext(t *testing.T, src string) string {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "example.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("example does not parse: %s\n%s", diags, src)
	}
	declared := map[string]bool{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		key := b.Type
		if len(b.Labels) > 0 {
			key += "." + b.Labels[0]
		}
		if b.Type == "provider" {
			if a, ok := b.Body.Attributes["alias"]; ok {
				v, _ := a.Expr.Value(nil)
				key += "." + v.AsString()
			}
		}
		declared[key] = true
		declared[b.Type] = true
	}
	var ctx strings.Builder
	if !declared["stack"] {
		ctx.WriteString("stack \"docs\" {}\n")
	}
	for _, p := range []struct{ key, block string }{
		{"provider.simulator", `provider "simulator" {}`},
		{"provider.simulator.nfs-auth", `provider "simulator" { alias = "nfs-auth" }`},
		{"provider.vanilla", `provider "vanilla" {}`},
	} {
		if !declared[p.key] {
			ctx.WriteString(p.block + "\n")
		}
	}
	for _, m := range groupRef.FindAllStringSubmatch(src, -1) {
		if name := m[1]; !declared["group."+name] {
			declared["group."+name] = true
			fmt.Fprintf(&ctx, "group %q {\n  size = 1\n  instance {\n    provider = simulator\n    type = \"compute\"\n  }\n  flavor { provider = vanilla }\n}\n", name)
		}
	}
	return ctx.String()
}

// TestAutoscalingDocExample loads the whole stack website/autoscaling.md
// shows, so the page cannot show a block the loader refuses.
func TestAutoscalingDocExample(t *testing.T) {
	data, err := os.ReadFile("../website/autoscaling.md")
	if err != nil {
		t.Fatal(err)
	}
	var stacks int
	for _, m := range hclFence.FindAllStringSubmatch(string(data), -1) {
		if !strings.HasPrefix(m[1], "stack ") {
			continue
		}
		stacks++
		st, diags := config.LoadSources(map[string][]byte{"example.hcl": []byte(m[1])})
		if diags.HasErrors() {
			var b strings.Builder
			_ = config.WriteDiagnostics(&b, st.Files, diags, false)
			t.Fatalf("the example does not load:\n%s", b.String())
		}
		if g := st.Group("web"); g == nil || g.Autoscale == nil || len(g.Autoscale.Checks) != 1 {
			t.Errorf("the example's group web has no autoscale block with one check")
		}
	}
	if stacks == 0 {
		t.Fatal("website/autoscaling.md shows no whole stack")
	}
}
