package e2e

import (
	"slices"
	"strings"
	"testing"
)

// TestShellCompletion runs the binary as bash's `complete -C` does (the
// line in COMP_LINE): commands, a command's flags, and names of the applied
// stack's groups and load balancers from the state.
func TestShellCompletion(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.init()
	w.ok("apply", "-auto-approve")
	complete := func(line string) []string {
		t.Helper()
		saved := w.env
		w.env = append(slices.Clone(saved), "COMP_LINE="+line)
		defer func() { w.env = saved }()
		res := w.ok()
		return strings.Fields(res.stdout)
	}
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"infrakit gr", []string{"graph", "group"}},
		{"infrakit group sc", []string{"scale"}},
		{"infrakit plan -det", []string{"-detailed-exitcode"}},
		{"infrakit group scale ", []string{"cattle", "miners"}},
		{"infrakit lb backends ls ", []string{"lb1", "lb2", "lb3"}},
		{"infrakit ingress describe ", []string{"test.com"}},
		{"infrakit enrollment free ", []string{"nfs"}},
		{"infrakit import ", []string{"group.cattle", "group.miners"}},
		{"infrakit state show ingr", []string{`ingress["test.com"]`}},
		{"infrakit state rm enr", []string{"enrollment.nfs"}},
	} {
		got := complete(tt.line)
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("completing %q: %v, want %v", tt.line, got, tt.want)
		}
	}
}
