package command

import (
	"context"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mitchellh/cli"
)

// flagInHelp matches an option line of a command's help ("  -json   ...").
var flagInHelp = regexp.MustCompile(`(?m)^\s{2,}(-[a-z][a-z0-9-]*)\b`)

// helpFlags returns the flags a command's help lists, in its usage line or
// its options.
func helpFlags(help string) []string {
	var flags []string
	add := func(f string) {
		if !slices.Contains(flags, f) {
			flags = append(flags, f)
		}
	}
	for _, m := range flagInHelp.FindAllStringSubmatch(help, -1) {
		add(m[1])
	}
	for _, line := range strings.Split(help, "\n") {
		if usage, ok := strings.CutPrefix(strings.TrimSpace(line), "Usage: infrakit [global options] "); ok {
			for _, m := range docFlag.FindAllStringSubmatch(usage, -1) {
				add(m[1])
			}
		}
	}
	sort.Strings(flags)
	return flags
}

// TestHelpFlagsAccepted runs every command with each flag its help lists and
// checks that the command defines it: a help that names a flag the command
// refuses (or a flag renamed in one place only) fails here. The commands run
// in an empty directory with a cancelled context, so nothing acts.
func TestHelpFlagsAccepted(t *testing.T) {
	m, _, _ := newTestMeta(t)
	for name, factory := range Commands(m) {
		c, _ := factory()
		for _, f := range helpFlags(c.Help()) {
			t.Run(name+" "+f, func(t *testing.T) {
				m, _, stderr := newTestMeta(t)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				m.ShutdownCtx = ctx
				c, _ := Commands(m)[name]()
				c.Run([]string{f})
				if strings.Contains(stderr.String(), "flag provided but not defined") {
					t.Errorf("%q -help lists %s, which it does not accept: %s", name, f, stderr)
				}
			})
		}
	}
}

// docSection is what website/cli.md says about some commands: the commands
// its heading names and the flags in its heading and body.
type docSection struct {
	heading  string
	level    int // of the heading: a level-4 section shares its parent's text
	commands []string
	flags    []string
}

var (
	docHeading = regexp.MustCompile("^#{2,4} `infrakit ([^`]*)`(?: and `infrakit ([^`]*)`)?")
	docFlag    = regexp.MustCompile("(?:^|[\\s`\\[(|])(-[a-z][a-z0-9-]*)")
	codeSpan   = regexp.MustCompile("`[^`]+`")
)

// cliDocSections parses the command sections of website/cli.md.
func cliDocSections(t *testing.T, known map[string]bool) []docSection {
	t.Helper()
	data, err := os.ReadFile("../website/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	var sections []docSection
	var cur *docSection
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") {
			cur = nil
			if m := docHeading.FindStringSubmatch(line); m != nil {
				level := len(line) - len(strings.TrimLeft(line, "#"))
				sections = append(sections, docSection{heading: line, level: level})
				cur = &sections[len(sections)-1]
				for _, usage := range m[1:] {
					if usage != "" {
						cur.commands = append(cur.commands, docCommands(usage, known)...)
					}
				}
			}
		}
		if cur == nil || strings.HasPrefix(line, "```") {
			continue
		}
		// Flags are named in the heading, in option tables' first column and
		// in code spans of the text ("Options: `-parallelism N`").
		spans := codeSpan.FindAllString(line, -1)
		if strings.HasPrefix(line, "#") {
			spans = []string{line}
		} else if strings.HasPrefix(line, "| `-") {
			spans = []string{strings.SplitN(line[1:], "|", 2)[0]}
		}
		for _, span := range spans {
			if otherCommand(span, cur.commands, known) {
				continue // "`plan -out`" in apply's section is plan's flag
			}
			for _, f := range docFlag.FindAllStringSubmatch(span, -1) {
				if !slices.Contains(cur.flags, f[1]) {
					cur.flags = append(cur.flags, f[1])
				}
			}
		}
	}
	// "infrakit group ..." says what holds for every group verb.
	var parent *docSection
	for i := range sections {
		switch s := &sections[i]; {
		case s.level < 4:
			parent = s
		case parent != nil:
			for _, f := range parent.flags {
				if !slices.Contains(s.flags, f) {
					s.flags = append(s.flags, f)
				}
			}
		}
	}
	return sections
}

// docCommands turns a heading's usage ("ingress describe|free|destroy NAME")
// into the commands it names: the longest run of words that is a command,
// with alternatives expanded.
func docCommands(usage string, known map[string]bool) []string {
	prefixes := []string{""}
	for _, word := range strings.Fields(usage) {
		var next []string
		for _, p := range prefixes {
			for _, alt := range strings.Split(word, "|") {
				if c := strings.TrimSpace(p + " " + alt); known[c] {
					next = append(next, c)
				}
			}
		}
		if len(next) == 0 {
			break
		}
		prefixes = next
	}
	if prefixes[0] == "" {
		return nil
	}
	return prefixes
}

// TestCLIDocsMatchCommands checks website/cli.md against the binary: every
// command it has a section for exists, every flag a section names is in the
// help of its commands, and every flag a command's help lists is named in
// the command's section.
func TestCLIDocsMatchCommands(t *testing.T) {
	m, _, _ := newTestMeta(t)
	table := Commands(m)
	known := map[string]bool{}
	for name := range table {
		known[name] = true
	}
	global := []string{"-chdir", "-address", "-help", "-h", "-version", "-v"}
	documented := map[string]bool{}
	for _, s := range cliDocSections(t, known) {
		if len(s.commands) == 0 {
			t.Errorf("website/cli.md: %s names no command infrakit has", s.heading)
			continue
		}
		for _, name := range s.commands {
			documented[name] = true
			if isParent(table, name) {
				continue // its nested commands' sections are checked
			}
			c, _ := table[name]()
			have := helpFlags(c.Help())
			for _, f := range s.flags {
				if !slices.Contains(have, f) && !slices.Contains(global, f) && !anyHas(table, s.commands, f) {
					t.Errorf("website/cli.md: %s names %s, which `infrakit %s -help` does not list", s.heading, f, name)
				}
			}
			for _, f := range have {
				if !slices.Contains(s.flags, f) {
					t.Errorf("website/cli.md: the section of `infrakit %s` does not name %s, which its help lists", name, f)
				}
			}
		}
	}
	for name := range table {
		if !documented[name] && !isParent(table, name) {
			t.Errorf("website/cli.md has no section for `infrakit %s`", name)
		}
	}
}

// anyHas reports whether one of the commands' help lists flag f (a section
// about several commands names the flags of each).
func anyHas(table map[string]cli.CommandFactory, names []string, f string) bool {
	for _, n := range names {
		c, _ := table[n]()
		if slices.Contains(helpFlags(c.Help()), f) {
			return true
		}
	}
	return false
}

// isParent reports whether name only groups nested commands ("lb" of
// "lb routes ls"), which have the sections.
func isParent(table map[string]cli.CommandFactory, name string) bool {
	for other := range table {
		if strings.HasPrefix(other, name+" ") {
			return true
		}
	}
	return false
}

// otherCommand reports whether a code span is a command line of a command
// other than those of its section ("plan -out" in apply's).
func otherCommand(span string, section []string, known map[string]bool) bool {
	words := strings.Fields(strings.Trim(span, "`"))
	if len(words) > 0 && words[0] == "infrakit" {
		words = words[1:]
	}
	if len(words) == 0 || !known[words[0]] {
		return false
	}
	for _, c := range section {
		if slices.Contains(strings.Fields(c), words[0]) {
			return false // "destroy [-auto-approve]" in ingress destroy's
		}
	}
	return true
}
