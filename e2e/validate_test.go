package e2e

import (
	"strings"
	"testing"
)

// TestE2EStackValidates: the DESIGN.md example stack (testdata/e2e) passes
// validate with its providers installed, and its groups apply.
func TestE2EStackValidates(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.init()
	if res := w.ok("validate"); !strings.Contains(res.stdout, "Success!") {
		t.Errorf("validate output:\n%s", res)
	}
	w.expect(2, "plan", "-detailed-exitcode")
	w.ok("apply", "-auto-approve")
	w.expect(0, "plan", "-detailed-exitcode")

	groups := w.groups()
	if n := len(groups["miners"].Instances); n != 5 {
		t.Errorf("miners has %d instances, want 5", n)
	}
	if n := len(groups["cattle"].Instances); n != 10 {
		t.Errorf("cattle has %d instances, want 10", n)
	}
	if files := w.simulatorInstances("compute"); len(files) != 15 {
		t.Errorf("simulator holds %d compute instances, want 15", len(files))
	}
}

// typoStack misspells size as sise on line 8.
const typoStack = `stack "typo" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  tags = { tier = "web" }
  sise = 3
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}
`

// TestValidateBadInput: a misspelled attribute fails validate (and plan)
// with the file, line and column and the line itself shown.
func TestValidateBadInput(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("main.hcl", typoStack)
	for _, verb := range []string{"validate", "plan"} {
		res := w.expect(1, verb)
		for _, want := range []string{"on main.hcl:8:3", "sise = 3", `"sise"`} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("%s: stderr lacks %q\n%s", verb, want, res)
			}
		}
	}
}
