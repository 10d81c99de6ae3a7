package command

import (
	"slices"
	"sort"
	"testing"

	"github.com/mitchellh/cli"
)

// TestCompletionFlagsAreTheCommandsFlags: completion offers exactly the
// flags a command's help lists (-h aside), learnt from the command itself.
func TestCompletionFlagsAreTheCommandsFlags(t *testing.T) {
	m, _, _ := newTestMeta(t)
	for name, factory := range Commands(m) {
		c, _ := factory()
		ac, ok := c.(cli.CommandAutocomplete)
		if !ok {
			t.Fatalf("%q has no completion", name)
		}
		var got []string
		for f := range ac.AutocompleteFlags() {
			got = append(got, f)
		}
		sort.Strings(got)
		if want := helpFlags(c.Help()); !slices.Equal(got, want) && !(len(got) == 0 && isParent(Commands(m), name)) {
			t.Errorf("%q completes flags %v; its help lists %v", name, got, want)
		}
	}
}
