package config_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
)

// loadSource writes files (name -> content) into a fresh directory and loads it.
func loadSource(t testing.TB, files map[string]string) (*config.Stack, hcl.Diagnostics, string) {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, diags := config.Load(dir)
	return st, diags, dir
}

// mustLoad loads one stack file's source and fails the test on any diagnostic.
func mustLoad(t testing.TB, src string) *config.Stack {
	t.Helper()
	st, diags, _ := loadSource(t, map[string]string{"stack.hcl": src})
	if len(diags) > 0 {
		t.Fatalf("unexpected diagnostics:\n%s", render(st, diags))
	}
	return st
}

// render is the CLI rendering of diagnostics, for failure messages.
func render(st *config.Stack, diags hcl.Diagnostics) string {
	var b strings.Builder
	var files map[string]*hcl.File
	if st != nil {
		files = st.Files
	}
	if err := config.WriteDiagnostics(&b, files, diags, false); err != nil {
		return err.Error()
	}
	return b.String()
}

// clearSource zeroes, in place, every field of st that JSON does not carry
// (source ranges, parsed expressions, files), for comparing models.
func clearSource(st *config.Stack) *config.Stack {
	st.Files = nil
	st.DeclRange = hcl.Range{}
	if st.Limits != nil {
		st.Limits.DeclRange, st.Limits.MaxGroupSizeRange = hcl.Range{}, hcl.Range{}
	}
	for _, p := range st.Providers {
		p.DeclRange = hcl.Range{}
	}
	clearPlugin := func(p *config.Plugin) {
		p.DeclRange, p.ProviderRange, p.TypeRange, p.PropertiesRange = hcl.Range{}, hcl.Range{}, hcl.Range{}, hcl.Range{}
		p.PropertiesExpr = nil
	}
	for _, g := range st.Groups {
		g.DeclRange, g.LogicalIDsExpr = hcl.Range{}, nil
		clearPlugin(&g.Instance)
		for i := range g.Flavors {
			clearPlugin(&g.Flavors[i])
		}
		if a := g.Autoscale; a != nil {
			a.DeclRange, a.MinRange, a.MaxRange = hcl.Range{}, hcl.Range{}, hcl.Range{}
			for i := range a.Checks {
				c := &a.Checks[i]
				c.DeclRange, c.SourceRange, c.QueryRange, c.TargetRange = hcl.Range{}, hcl.Range{}, hcl.Range{}, hcl.Range{}
			}
		}
	}
	for _, lb := range st.LoadBalancers {
		lb.DeclRange, lb.ProviderRange = hcl.Range{}, hcl.Range{}
	}
	for _, in := range st.Ingresses {
		in.DeclRange = hcl.Range{}
		for i := range in.Rules {
			r := &in.Rules[i]
			r.DeclRange = hcl.Range{}
			for j := range r.Routes {
				r.Routes[j].DeclRange = hcl.Range{}
			}
		}
	}
	for _, e := range st.Enrollments {
		e.DeclRange, e.SourceRange = hcl.Range{}, hcl.Range{}
		t := &e.Target
		t.DeclRange, t.ProviderRange, t.TypeRange, t.PropertiesRange = hcl.Range{}, hcl.Range{}, hcl.Range{}, hcl.Range{}
		t.PropertiesExpr = nil
	}
	return st
}

// tb is what helpers need of *testing.T and *rapid.T alike.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// assertSameModel compares two stacks, printing both as JSON when they differ.
func assertSameModel(t tb, got, want *config.Stack) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("models differ\ngot:\n%s\nwant:\n%s", g, w)
	}
}

func intPtr(n int) *int { return &n }

// pos is "file:line:col" of where r starts, relative to dir.
func pos(dir string, r *hcl.Range) string {
	if r == nil {
		return ""
	}
	name := r.Filename
	if dir != "" {
		if rel, err := filepath.Rel(dir, name); err == nil {
			name = rel
		}
	}
	return fmt.Sprintf("%s:%d:%d", name, r.Start.Line, r.Start.Column)
}
