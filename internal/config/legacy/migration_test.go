package legacy

import (
	"os"
	"strings"
	"testing"
)

// TestMigrationPageListsEveryField keeps website/migration.md in step with
// the field specs the readers check: every object has a section (### and
// its name), every field a row whose first cell names it, and a field the
// readers ignore with a warning says "ignored" in its row.
func TestMigrationPageListsEveryField(t *testing.T) {
	b, err := os.ReadFile("../../../website/migration.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, spec := range allSpecs {
		heading := "\n### " + spec.name + "\n"
		start := strings.Index(page, heading)
		if start < 0 {
			t.Errorf("migration.md has no section %q", strings.TrimSpace(heading))
			continue
		}
		section := page[start+len(heading):]
		if end := strings.Index(section, "\n#"); end >= 0 {
			section = section[:end]
		}
		for _, f := range spec.fields {
			row := ""
			for _, line := range strings.Split(section, "\n") {
				cells := strings.Split(line, "|")
				if len(cells) > 2 && strings.Contains(cells[1], "`"+f.name+"`") {
					row = line
				}
			}
			switch {
			case row == "":
				t.Errorf("section %q has no row for `%s`", spec.name, f.name)
			case f.ignored != "" && !strings.Contains(row, "ignored"):
				t.Errorf("section %q: `%s` is ignored with a warning, its row does not say so: %s", spec.name, f.name, row)
			case f.ignored == "" && strings.Contains(row, "| ignored"):
				t.Errorf("section %q: `%s` is carried over, its row says ignored: %s", spec.name, f.name, row)
			}
		}
	}
}
